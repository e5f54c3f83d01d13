"""The vectorised path of COPY FROM STDIN decoding: text and CSV data to typed Arrow columns.

Why here (the engine) and not in pgwire: this is the part of the decoding that is pure
pyarrow and numpy, so the parallel job's worker processes can run it on a COPY's data
(`engine.stream.parallel.decode`), off the server process that receives it. pgwire's
`pgwire.copy_columns.parse_copy` runs the same functions first and owns everything
around them: the exact (per-row) splitter, the per-value parsers, error positions.

Two steps, each refusing what it cannot vouch for (None), never guessing:

1. split: `split_csv` / `split_text_raw` cut the data into string columns with pyarrow's
   CSV reader (PostgreSQL's NULL marker, CSV quoting with doubled quotes, HEADER,
   DELIMITER), refusing data the reader might split differently from PostgreSQL (quotes
   inside unquoted values, an ESCAPE different from QUOTE, an empty line, a wrong number
   of columns, multi-byte delimiters, the `\\.` end marker other than last);
2. convert: `fast_convert` casts a string column to the target type when a regular
   expression guard vouches that Arrow's cast and the exact per-value parser agree
   (digits, ISO dates and timestamps, `t`/`false`/..., JSON through `canonicalize_many`).

`decode_fast` is both steps over a whole piece of data: the columns, or None whenever any
step refused or raised (then the caller decodes the data the exact way, which also reports
the first bad value as PostgreSQL does). Stateless; no I/O.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pcsv

from engine.errors import EngineError
from engine.expr.jsonb_many import canonicalize_many
from engine.types import SqlType, TypeKind

OPTION_KEYS = ("format", "header", "delimiter", "quote", "escape", "null")
"""The COPY options the decoding reads (the others do not change the rows)."""


# -- split: bytes to string columns ----------------------------------------------------------
def _reader(ncols: int, skip: int) -> pcsv.ReadOptions:
    return pcsv.ReadOptions(
        column_names=[f"c{i}" for i in range(ncols)],
        use_threads=False,
        block_size=1 << 24,
        skip_rows_after_names=skip,
    )


def _convert_opts(ncols: int, null: str) -> pcsv.ConvertOptions:
    return pcsv.ConvertOptions(
        column_types={f"c{i}": pa.string() for i in range(ncols)},
        null_values=[null],
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
    )


def strip_end_marker(data: bytes) -> bytes | None:
    r"""`data` without a final `\.` line; None when `\.` appears anywhere else."""
    for end in (b"\n\\.\n", b"\n\\.\r\n", b"\n\\."):
        if data.endswith(end):
            data = data[: len(data) - len(end) + 1]
            break
    else:
        if data in (b"\\.", b"\\.\n", b"\\.\r\n"):
            return b""
    return None if b"\\" in data and b"\\." in data else data


def has_empty_line(body: bytes) -> bool:
    """A line with nothing on it (`\n\n`, `\r\r`, `\n\r` or a line end first); bytes
    searches for two-byte needles are slow, so this compares shifted numpy views."""
    if body.startswith((b"\n", b"\r")):
        return True
    buf = np.frombuffer(body, dtype=np.uint8)
    ends = buf == 10
    if b"\r" in body:  # one-byte needles are a memchr
        cr = buf == 13
        return bool((ends[1:] & (ends[:-1] | cr[:-1])).any() or (cr[1:] & cr[:-1]).any())
    return bool((ends[1:] & ends[:-1]).any())


def _read(data: bytes, ro: Any, po: Any, co: Any, ncols: int) -> list[pa.Array] | None:
    if not data:
        return [pa.array([], pa.string()) for _ in range(ncols)]
    if not data.endswith((b"\n", b"\r")):
        # the same rows; the reader takes a last empty field after a quoted one at the very
        # end of its input for an empty string, not NULL
        data += b"\n"
    try:
        t = pcsv.read_csv(pa.py_buffer(data), read_options=ro, parse_options=po, convert_options=co)
    except (pa.ArrowInvalid, pa.ArrowTypeError, UnicodeError):
        return None  # wrong column count, bad UTF-8, ...: the exact splitter reports it
    return [t.column(i).combine_chunks() for i in range(ncols)]


def quotes_bound_fields(data: bytes, delim: bytes, quote: bytes) -> bool:
    """True when every quoted section of CSV `data` opens right after a delimiter or line
    start and closes right before one (then pyarrow splits exactly as PostgreSQL does).

    Vectorised over runs of quote characters: a run of odd length toggles between
    outside and inside a quoted section (inside, pairs are escaped quotes), an even run
    keeps the state. A run met outside opens a field: the byte before it must end the
    previous field; a run that leaves the state outside closes one: the byte after it
    must be a delimiter or line end."""
    buf = np.frombuffer(data, dtype=np.uint8)
    pos = np.flatnonzero(buf == quote[0])
    if not len(pos):
        return True
    brk = np.flatnonzero(np.diff(pos) != 1)
    starts = pos[np.concatenate(([0], brk + 1))]
    ends = pos[np.concatenate((brk, [len(pos) - 1]))]
    odd = ((ends - starts + 1) & 1).astype(np.int64)
    after = np.cumsum(odd) & 1  # 1: inside a quoted section after the run
    before = after ^ odd
    if after[-1]:
        return False  # unterminated: the exact splitter reports it
    seps = np.zeros(256, dtype=bool)
    seps[[delim[0], 10, 13]] = True
    opening = starts[before == 0]
    prev = opening[opening > 0] - 1
    if not seps[buf[prev]].all():
        return False
    closing = ends[after == 0]
    nxt = closing[closing < len(buf) - 1] + 1
    return bool(seps[buf[nxt]].all())


def split_csv(data: bytes, opts: dict[str, Any], ncols: int) -> list[pa.Array] | None:
    """CSV data to string columns (NULL for unquoted NULL markers), or None when the
    reader's split might differ from PostgreSQL's (the exact splitter is used then).

    pyarrow and PostgreSQL agree when every quote opens a field right after a delimiter
    or line start and closes it right before one (`quotes_bound_fields`)."""
    delim = opts.get("delimiter", ",")
    quote = opts.get("quote", '"')
    if opts.get("escape", quote) != quote:
        return None
    d, q = delim.encode(), quote.encode()
    if len(d) != 1 or len(q) != 1 or d == q:
        return None
    body = strip_end_marker(data)
    if body is None:
        return None
    if not quotes_bound_fields(body, d, q):
        return None
    if ncols > 1 and has_empty_line(body):
        return None  # the reader fills an empty line with NULLs; PostgreSQL refuses it
    po = pcsv.ParseOptions(
        delimiter=delim,
        quote_char=quote,
        double_quote=True,
        escape_char=False,
        newlines_in_values=True,
        ignore_empty_lines=False,
    )
    skip = 1 if opts.get("header") else 0
    return _read(body, _reader(ncols, skip), po, _convert_opts(ncols, opts.get("null", "")), ncols)


def split_text_raw(data: bytes, opts: dict[str, Any], ncols: int) -> list[pa.Array] | None:
    """Text-format data to string columns with backslash escapes left in the values (the
    NULL marker is compared before unescaping, as PostgreSQL does), or None when the
    exact splitter must do it."""
    delim = opts.get("delimiter", "\t")
    null = opts.get("null", "\\N")
    d = delim.encode()
    if len(d) != 1 or b"\r" in data or d in (b"\\", b"\n"):
        return None
    body = strip_end_marker(data)
    if body is None:
        return None
    if b"\\" in body and (b"\\" + d in body or b"\\\n" in body):
        return None
    if has_empty_line(body):
        return None  # one empty value (or too few): the reader would make NULLs
    po = pcsv.ParseOptions(
        delimiter=delim,
        quote_char=False,
        double_quote=False,
        escape_char=False,
        newlines_in_values=False,
        ignore_empty_lines=False,
    )
    skip = 1 if opts.get("header") else 0
    return _read(body, _reader(ncols, skip), po, _convert_opts(ncols, null), ncols)


# -- convert: string columns to typed columns ------------------------------------------------
_INT = r"^-?[0-9]{1,18}$"
_FLOAT = r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]{1,3})?$"
_NUMERIC = r"^[+-]?([0-9]{1,27}(\.[0-9]*)?|\.[0-9]+)$"
_YEAR = r"^([1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"  # year 0 is no date
_DATE = _YEAR + r"-[0-9]{2}-[0-9]{2}$"
_TS = _YEAR + r"-[0-9]{2}-[0-9]{2}[ T][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]{1,6})?"
_ZONE = r"(Z|[+-][0-9]{2}(:[0-9]{2})?)$"
_BOOL_TRUE = pa.array(["t", "true", "1", "yes", "y", "on"])
_BOOL_FALSE = pa.array(["f", "false", "0", "no", "n", "off"])


def _all(mask: pa.Array) -> bool:
    return bool(pc.all(pc.fill_null(mask, True)).as_py())


def fast_convert(col: pa.Array, t: SqlType, utc: bool, hexfree: bool) -> pa.Array | None:
    """The vectorised conversion, or None when the guard does not vouch for it. `utc`:
    the session's time zone is UTC (a timestamptz without a zone is read in it);
    `hexfree`: the data has no `x`/`X` at all, so no integer is spelled in hexadecimal.
    May raise an Arrow error (e.g. an integer out of range): the exact path decides."""
    k = t.kind
    if k in (TypeKind.VARCHAR,):
        return col
    if k in (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT):
        # Arrow's integer parser takes exactly what int() takes (an optional minus sign
        # and digits) plus hexadecimal `0x..`: without an x the regex check is not needed
        if hexfree is not True and not _all(pc.match_substring_regex(col, _INT)):
            return None
        return pc.cast(pc.cast(col, pa.int64()), t.arrow)  # overflow raises: exact path
    if k in (TypeKind.REAL, TypeKind.DOUBLE):
        if not _all(pc.match_substring_regex(col, _FLOAT)):
            return None
        # via float64 like the exact path (float() then Arrow's float32), not directly
        return pc.cast(pc.cast(col, pa.float64()), t.arrow)
    if k is TypeKind.NUMERIC:
        if not _all(pc.match_substring_regex(col, _NUMERIC)):
            return None
        return pc.cast(col, t.arrow)
    if k is TypeKind.BOOLEAN:
        low = pc.utf8_lower(pc.utf8_trim(col, " \t\n\r\v\f"))
        yes = pc.is_in(low, value_set=_BOOL_TRUE)
        if not _all(pc.or_(yes, pc.is_in(low, value_set=_BOOL_FALSE))):
            return None
        return pc.if_else(pc.is_null(col), pa.scalar(None, pa.bool_()), yes)
    if k is TypeKind.DATE:
        if not _all(pc.match_substring_regex(col, _DATE)):
            return None
        return pc.cast(col, pa.date32())
    if k is TypeKind.TIMESTAMP:
        if not _all(pc.match_substring_regex(col, _TS + "$")):
            return None
        return pc.cast(col, t.arrow)
    if k is TypeKind.TIMESTAMPTZ:
        if _all(pc.match_substring_regex(col, _TS + _ZONE)):
            return pc.cast(col, t.arrow)
        if utc and _all(pc.match_substring_regex(col, _TS + "$")):
            return pc.cast(pc.cast(col, pa.timestamp("us")), t.arrow)
        return None
    if k is TypeKind.JSONB:
        valid = col.drop_null() if col.null_count else col
        canon = canonicalize_many(valid.to_pylist())
        if col.null_count:
            return pc.replace_with_mask(col, pc.is_valid(col), canon)
        return canon
    return None


def _escaped(col: pa.Array) -> bool:
    """A value of a text-format column holds a backslash (an escape to undo)."""
    return bool(pc.any(pc.fill_null(pc.match_substring(col, "\\"), False)).as_py())


def decode_fast(
    data: bytes, opts: dict[str, Any], types: list[SqlType], utc: bool
) -> list[pa.Array] | None:
    """Text or CSV `data` as one Arrow array per column of `types`, or None when a step
    refused or raised (module docstring). Text data with a backslash in a value (not the
    NULL marker `\\N`) is refused: pgwire's exact per-value function undoes escapes."""
    fmt = opts.get("format", "text")
    if fmt == "csv":
        cols = split_csv(data, opts, len(types))
    elif fmt == "text":
        cols = split_text_raw(data, opts, len(types))
        if cols is not None and b"\\" in data and any(map(_escaped, cols)):
            return None
    else:
        return None
    if cols is None:
        return None
    hexfree = b"x" not in data and b"X" not in data
    out: list[pa.Array] = []
    for c, t in zip(cols, types, strict=True):
        if len(c) == c.null_count:
            out.append(pa.nulls(len(c), t.arrow))
            continue
        try:
            a = fast_convert(c, t, utc, hexfree)
        except (EngineError, ValueError, ArithmeticError, pa.ArrowException):
            return None
        if a is None:
            return None
        out.append(a)
    return out
