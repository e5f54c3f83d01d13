"""COPY FROM STDIN data to Arrow columns, a whole COPY at a time (text, CSV, binary).

Why: parsing and converting COPY data row by row in Python capped bulk loading at a few
hundred thousand rows per CPU-second. Here the work is done per column by C code:

1. split: text and CSV data are split into string columns by pyarrow's CSV reader
   (PostgreSQL's NULL marker, CSV quoting with doubled quotes, HEADER, DELIMITER); text
   format values with a backslash are unescaped (`\\t`, `\\n`, octal, hex, ...) by the
   per-value function of the exact path, only those values;
2. convert: each string column becomes the target column's Arrow type by a vectorised
   cast guarded by a regular expression for the plain spellings (digits, ISO dates and
   timestamps, `t`/`false`/...), for which the cast and the exact per-value parser agree;
   jsonb is validated and canonicalised like a `'...'::jsonb` cast (`canonicalize_many`).

Whatever the fast path cannot vouch for goes to the exact path, so the rows are always
the ones `pgwire.copy.parse_text` / `parse_csv` + the per-value text parsers produce:
a chunk the reader cannot split exactly (CSV quotes inside unquoted values, an ESCAPE
different from QUOTE, a text-format escaped delimiter or carriage return, a multi-byte
delimiter, a wrong number of columns) is split by the exact splitter; a column the guard
or the cast refuses is converted value by value. Only when that raises is the data walked
row by row, to report the first bad value as PostgreSQL does: SQLSTATE of the type's
input function (22P02, 22003, 22007, ...) or 22P04 for a malformed line, with CONTEXT
`COPY t, line N, column c: "value"` (line numbers count the header line, as PostgreSQL's).

The split and the guarded casts are `engine.stream.copy_decode` (pure pyarrow, so a
parallel job's workers run them too, on the data of a large COPY: `Session.copy_in_decode`,
tried first by `pgwire.connection`); the exact path and the error reporting stay here.

Binary format (`FORMAT binary`): the PGCOPY header is checked; when every row has the
same field lengths (fixed-width types without NULLs) the tuples are read as one numpy
structured array, else field by field with the binary decoders of `pgwire.codecs`.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, tzinfo
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import DataError, EngineError
from engine.expr.jsonb_many import canonicalize_many
from engine.numeric import array_of
from engine.stream.copy_decode import fast_convert, split_csv, split_text_raw
from engine.types import SqlType, TypeKind
from pgwire import codecs
from pgwire.copy import BadCopyFileFormat, _text_field, parse_csv, parse_text


class CharacterNotInRepertoire(DataError):
    sqlstate = "22021"


class CopyColumns:
    """What the parser needs to know about the target: names and types of the COPY's
    columns, the table name for error context, the session time zone."""

    def __init__(self, table: str, names: list[str], types: list[SqlType], tz: tzinfo) -> None:
        self.table = table
        self.names = names
        self.types = types
        self.tz = tz


def parse_copy(data: bytes, opts: dict[str, Any], target: CopyColumns) -> list[pa.Array]:
    """The COPY data as one Arrow array per target column (see the module docstring)."""
    fmt = opts.get("format", "text")
    if fmt == "binary":
        return parse_binary(data, target)
    header = 1 if opts.get("header") else 0
    cols = (
        split_csv(data, opts, len(target.types))
        if fmt == "csv"
        else split_text(data, opts, len(target.types))
    )
    if cols is None:
        cols = _split_exact(data, opts, target, header)
    # no x in the data, so no value is hexadecimal (text escapes could spell an x)
    hexfree = b"x" not in data and b"X" not in data and (fmt == "csv" or b"\\" not in data)
    try:
        return [convert(c, t, target.tz, hexfree) for c, t in zip(cols, target.types, strict=True)]
    except (EngineError, ValueError, ArithmeticError, pa.ArrowException) as e:
        _raise_first_error(cols, target, header)
        raise _as_data_error(e) from e


# -- split: bytes to string columns (engine.stream.copy_decode); text escapes undone here ---
def split_text(data: bytes, opts: dict[str, Any], ncols: int) -> list[pa.Array] | None:
    """Text-format data to string columns (NULL marker compared before unescaping, as
    PostgreSQL does), or None when the exact splitter must do it."""
    cols = split_text_raw(data, opts, ncols)
    if cols is None or b"\\" not in data:
        return cols
    return [_unescape(c) for c in cols]


def _unescape(col: pa.Array) -> pa.Array:
    mask = pc.fill_null(pc.match_substring(col, "\\"), False)
    if not pc.any(mask).as_py():
        return col
    picked = col.filter(mask).to_pylist()
    fixed = pa.array([_text_field(v) for v in picked], pa.string())
    return pc.replace_with_mask(col, mask, fixed)


def _split_exact(
    data: bytes, opts: dict[str, Any], target: CopyColumns, header: int
) -> list[pa.Array]:
    """The exact (per-row) splitter; also the one that reports malformed lines."""
    try:
        text = data.decode()
    except UnicodeDecodeError as e:
        bad = data[e.start : e.start + 1].hex()
        err = CharacterNotInRepertoire(f'invalid byte sequence for encoding "UTF8": 0x{bad}')
        line = data.count(b"\n", 0, e.start) + 1
        err.context = f"COPY {target.table}, line {line}"
        raise err from None
    rows = parse_csv(text, opts) if opts.get("format") == "csv" else parse_text(text, opts)
    ncols = len(target.types)
    for i, fields in enumerate(rows):
        if len(fields) != ncols:
            if i:  # a bad value on an earlier line is the first error
                before = [pa.array(list(c), pa.string()) for c in zip(*rows[:i], strict=True)]
                _raise_first_error(before, target, header)
            line = i + 1 + header
            if len(fields) < ncols:
                short: EngineError = BadCopyFileFormat(
                    f'missing data for column "{target.names[len(fields)]}"'
                )
            else:
                short = BadCopyFileFormat("extra data after last expected column")
            raw = opts.get("delimiter", "," if opts.get("format") == "csv" else "\t").join(
                "" if f is None else f for f in fields
            )
            short.context = f'COPY {target.table}, line {line}: "{_clip(raw)}"'
            raise short
    if not rows:
        return [pa.array([], pa.string()) for _ in range(ncols)]
    return [pa.array(list(c), pa.string()) for c in zip(*rows, strict=True)]


# -- convert: string columns to typed columns ------------------------------------------------
def is_utc(tz: tzinfo) -> bool:
    return tz is UTC or getattr(tz, "key", None) in ("UTC", "Etc/UTC")


def convert(col: pa.Array, t: SqlType, tz: tzinfo, hexfree: bool = False) -> pa.Array:
    """A string column to type `t`: vectorised when vouched for, else value by value.
    `hexfree`: the COPY data has no `x`/`X` at all (so no value is hexadecimal)."""
    if len(col) == col.null_count:
        return pa.nulls(len(col), t.arrow)
    try:
        out = fast_convert(col, t, is_utc(tz), hexfree)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        out = None
    if out is not None:
        return out
    parse = _parser(t, tz)
    return array_of([None if v is None else parse(v) for v in col.to_pylist()], t.arrow)


def _parser(t: SqlType, tz: tzinfo) -> Callable[[str], Any]:
    """The exact per-value parser: pgwire's text parser, with numeric rounded to the
    column's scale (as a cast to numeric rounds)."""
    base = codecs.text_parser(t, tz)
    if t.kind is TypeKind.NUMERIC:
        scale = int(t.arrow.scale)
        quantum = Decimal(1).scaleb(-scale)

        def parse_numeric(s: str) -> Decimal:
            v: Decimal = base(s)
            exp = v.as_tuple().exponent
            if not isinstance(exp, int):
                raise DataError(f'invalid input syntax for type numeric: "{s}"')
            return v.quantize(quantum, ROUND_HALF_UP) if exp < -scale else v

        return parse_numeric
    if t.kind is TypeKind.JSONB:
        return lambda s: canonicalize_many([s])[0].as_py()
    return base


def _raise_first_error(cols: list[pa.Array], target: CopyColumns, header: int) -> None:
    """Walk the rows in order and raise the first value's error with its line/column."""
    parsers = [_parser(t, target.tz) for t in target.types]
    pylists = [c.to_pylist() for c in cols]
    arrow_types = [t.arrow for t in target.types]
    for i in range(len(cols[0]) if cols else 0):
        for j, p in enumerate(parsers):
            v = pylists[j][i]
            if v is None:
                continue
            try:
                pa.array([p(v)], arrow_types[j])
            except (EngineError, ValueError, ArithmeticError, pa.ArrowException) as e:
                err = _as_data_error(e)
                err.context = (
                    f"COPY {target.table}, line {i + 1 + header}, column "
                    f'{target.names[j]}: "{_clip(v)}"'
                )
                raise err from None


def _as_data_error(e: BaseException) -> EngineError:
    if isinstance(e, EngineError):
        return e
    return DataError(str(e))


def _clip(s: str) -> str:
    return s if len(s) <= 100 else s[:100] + "..."


# -- binary ----------------------------------------------------------------------------------
_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_FIXED: dict[TypeKind, tuple[int, str]] = {
    TypeKind.BOOLEAN: (1, "u1"),
    TypeKind.SMALLINT: (2, ">i2"),
    TypeKind.INT: (4, ">i4"),
    TypeKind.BIGINT: (8, ">i8"),
    TypeKind.REAL: (4, ">f4"),
    TypeKind.DOUBLE: (8, ">f8"),
    TypeKind.DATE: (4, ">i4"),
    TypeKind.TIMESTAMP: (8, ">i8"),
    TypeKind.TIMESTAMPTZ: (8, ">i8"),
}
_PG_EPOCH_DAYS = 10957  # 2000-01-01 - 1970-01-01
_PG_EPOCH_US = _PG_EPOCH_DAYS * 86_400_000_000
_I64_MAX = 2**63 - 1


def _binary_body(data: bytes) -> memoryview:
    if not data.startswith(_SIGNATURE) or len(data) < 19:
        raise BadCopyFileFormat("COPY file signature not recognized")
    flags = int.from_bytes(data[11:15], "big")
    if flags & 0x10000:
        raise BadCopyFileFormat("invalid COPY file header (WITH OIDS)")
    ext = int.from_bytes(data[15:19], "big")
    start = 19 + ext
    if len(data) < start:
        raise BadCopyFileFormat("invalid COPY file header (wrong length)")
    return memoryview(data)[start:]


def parse_binary(data: bytes, target: CopyColumns) -> list[pa.Array]:
    """PostgreSQL's binary COPY stream to Arrow columns (see the module docstring)."""
    body = _binary_body(data)
    if len(body) >= 2 and bytes(body[-2:]) == b"\xff\xff":
        tuples = body[:-2]
    else:
        raise BadCopyFileFormat("unexpected EOF in COPY data")
    fast = _binary_fixed(tuples, target)
    if fast is not None:
        return fast
    return _binary_rows(tuples, target)


def _binary_fixed(tuples: memoryview, target: CopyColumns) -> list[pa.Array] | None:
    fields: list[tuple[str, str]] = [("n", ">i2")]
    widths = []
    for j, t in enumerate(target.types):
        spec = _FIXED.get(t.kind)
        if spec is None:
            return None
        fields += [(f"l{j}", ">i4"), (f"v{j}", spec[1])]
        widths.append(spec[0])
    dt = np.dtype(fields)
    if len(tuples) % dt.itemsize:
        return None
    rows = np.frombuffer(tuples, dtype=dt)
    if not (rows["n"] == len(widths)).all():
        return None
    for j, w in enumerate(widths):
        if not (rows[f"l{j}"] == w).all():
            return None  # NULLs or another width: the field-by-field path
    out = []
    for j, t in enumerate(target.types):
        v = rows[f"v{j}"]
        k = t.kind
        if k in (TypeKind.DATE, TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ):
            raw = v.astype(np.int64)
            hi = 2**31 - 1 if k is TypeKind.DATE else _I64_MAX
            if ((raw >= hi) | (raw <= -hi - 1)).any():
                return None  # infinity: the exact decoder maps it
            if k is TypeKind.DATE:
                out.append(pa.array((raw + _PG_EPOCH_DAYS).astype(np.int32), pa.date32()))
            else:
                out.append(pa.array(raw + _PG_EPOCH_US, pa.int64()).cast(t.arrow))
        elif k is TypeKind.BOOLEAN:
            out.append(pa.array(v != 0, pa.bool_()))
        else:
            out.append(pa.array(v.astype(v.dtype.newbyteorder("=")), t.arrow))
    return out


def _binary_rows(tuples: memoryview, target: CopyColumns) -> list[pa.Array]:
    decoders = [codecs.binary_decoder(t) for t in target.types]
    ncols = len(decoders)
    cols: list[list[Any]] = [[] for _ in range(ncols)]
    pos, end, line = 0, len(tuples), 0
    buf = bytes(tuples)
    while pos < end:
        line += 1
        if pos + 2 > end:
            raise BadCopyFileFormat("unexpected EOF in COPY data")
        n = int.from_bytes(buf[pos : pos + 2], "big", signed=True)
        pos += 2
        if n != ncols:
            e = BadCopyFileFormat(f"row field count is {n}, expected {ncols}")
            e.context = f"COPY {target.table}, line {line}"
            raise e
        for j in range(ncols):
            size = int.from_bytes(buf[pos : pos + 4], "big", signed=True)
            pos += 4
            if size == -1:
                cols[j].append(None)
                continue
            if size < 0 or pos + size > end:
                raise BadCopyFileFormat("unexpected EOF in COPY data")
            try:
                cols[j].append(decoders[j](buf[pos : pos + size]))
            except (EngineError, ValueError, ArithmeticError) as exc:
                err = _as_data_error(exc)
                err.context = f"COPY {target.table}, line {line}, column {target.names[j]}"
                raise err from None
            pos += size
    out = []
    for j, t in enumerate(target.types):
        vals = cols[j]
        if t.kind is TypeKind.JSONB:
            out.append(convert(pa.array(vals, pa.string()), t, target.tz))
        else:
            out.append(pa.array(vals, t.arrow))
    return out
