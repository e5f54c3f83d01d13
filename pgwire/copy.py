"""COPY on the wire: TO STDOUT (CopyOutResponse, one CopyData per row, CopyDone) and the
exact per-row parser of FROM STDIN (text and CSV data to typed rows), which
`pgwire.copy_columns` (the vectorised parser COPY FROM uses) falls back to for input its
fast path cannot vouch for, and which defines the rows COPY must produce.

The engine runs the COPY's query and hands back the rows with `QueryResult.copy` (the
options); this module renders them in PostgreSQL's `text` format (tab-separated,
backslash escapes, `\\N` for NULL) or `csv` format (quoted where needed, empty for NULL,
optional header line), using the same text formatters as DataRow so values read the same
either way. The connection then sends CommandComplete `COPY n`.

Per-row Python is fine for TO STDOUT (one message per row) and for the fallback.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from datetime import tzinfo
from typing import Any

from engine.api import QueryResult
from engine.errors import EngineError
from pgwire import codecs
from pgwire import messages as msg

_TEXT_ESCAPES = {
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}


def copy_out_response(ncols: int, fmt: int = 0) -> bytes:
    """`H`: overall format 0 (text/csv), then one int16 format code per column."""
    body = struct.pack(">bh", fmt, ncols) + struct.pack(f">{ncols}h", *([fmt] * ncols))
    return msg.frame(b"H", body)


def copy_data(data: bytes) -> bytes:
    return msg.frame(b"d", data)


def copy_done() -> bytes:
    return msg.frame(b"c")


def line_renderer(result: QueryResult, tz: tzinfo) -> Callable[[tuple[Any, ...]], bytes]:
    """A function turning one row into one COPY line (with its newline)."""
    assert result.columns is not None and result.copy is not None
    opts = result.copy
    fmts = [codecs.text_formatter(c.type, tz) for c in result.columns]
    if opts.get("format") == "csv":
        delim = opts.get("delimiter", ",")
        null = opts.get("null", "")
        quote = opts.get("quote", '"')
        escape = opts.get("escape", quote)
        specials = (delim, quote, "\n", "\r")

        def csv_field(s: str) -> str:
            if s == null or any(ch in s for ch in specials) or s.startswith("\\."):
                doubled = s.replace(escape, escape * 2) if escape == quote else s
                if escape != quote:
                    doubled = s.replace(escape, escape * 2).replace(quote, escape + quote)
                return quote + doubled + quote
            return s

        def csv_line(row: tuple[Any, ...]) -> bytes:
            parts = [null if v is None else csv_field(f(v)) for f, v in zip(fmts, row)]
            return (delim.join(parts) + "\n").encode()

        return csv_line
    delim = opts.get("delimiter", "\t")
    null = opts.get("null", "\\N")
    escapes = dict(_TEXT_ESCAPES)
    if delim != "\t":
        escapes[delim] = "\\" + delim
    table = str.maketrans(escapes)

    def text_line(row: tuple[Any, ...]) -> bytes:
        parts = [null if v is None else f(v).translate(table) for f, v in zip(fmts, row)]
        return (delim.join(parts) + "\n").encode()

    return text_line


def header_line(result: QueryResult) -> bytes:
    assert result.columns is not None and result.copy is not None
    opts = result.copy
    csv = opts.get("format") == "csv"
    delim = opts.get("delimiter", "," if csv else "\t")
    quote = opts.get("quote", '"')
    names = []
    for c in result.columns:
        name = c.name
        if csv and (delim in name or quote in name or "\n" in name or "\r" in name):
            name = quote + name.replace(quote, quote * 2) + quote
        names.append(name)
    return (delim.join(names) + "\n").encode()


# -- COPY FROM STDIN ---------------------------------------------------------------------------
def copy_in_response(ncols: int, fmt: int = 0) -> bytes:
    """`G`: the overall format (0 text/csv, 1 binary), then the same for every column."""
    body = struct.pack(">bh", fmt, ncols) + struct.pack(f">{ncols}h", *[fmt] * ncols)
    return msg.frame(b"G", body)


_UNESCAPE = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v"}


def _text_field(raw: str) -> str:
    if "\\" not in raw:
        return raw
    out: list[str] = []
    i, n = 0, len(raw)
    while i < n:
        ch = raw[i]
        if ch != "\\" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt in _UNESCAPE:
            out.append(_UNESCAPE[nxt])
            i += 2
        elif nxt in "01234567":
            j = i + 1
            while j < n and j < i + 4 and raw[j] in "01234567":
                j += 1
            out.append(chr(int(raw[i + 1 : j], 8)))
            i = j
        elif nxt == "x" and i + 2 < n and raw[i + 2] in "0123456789abcdefABCDEF":
            j = i + 2
            while j < n and j < i + 4 and raw[j] in "0123456789abcdefABCDEF":
                j += 1
            out.append(chr(int(raw[i + 2 : j], 16)))
            i = j
        else:
            out.append(nxt)
            i += 2
    return "".join(out)


def _split_text_line(line: str, delim: str) -> list[str]:
    """Split on unescaped delimiters, keeping escapes for `_text_field`."""
    if "\\" + delim not in line:
        # the loop below only differs from a split where a backslash pairs with the
        # delimiter; with no backslash right before a delimiter a plain split is exact
        return line.split(delim)
    fields: list[str] = []
    cur: list[str] = []
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == "\\" and i + 1 < n:
            cur.append(line[i : i + 2])
            i += 2
        elif ch == delim:
            fields.append("".join(cur))
            cur = []
            i += 1
        else:
            cur.append(ch)
            i += 1
    fields.append("".join(cur))
    return fields


def parse_text(data: str, opts: dict[str, Any]) -> list[list[str | None]]:
    delim = opts.get("delimiter", "\t")
    null = opts.get("null", "\\N")
    rows: list[list[str | None]] = []
    lines = data.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if opts.get("header") and lines:
        lines = lines[1:]
    for line in lines:
        if line.endswith("\r"):
            line = line[:-1]
        if line == "\\.":
            break
        rows.append([None if f == null else _text_field(f) for f in _split_text_line(line, delim)])
    return rows


def parse_csv(data: str, opts: dict[str, Any]) -> list[list[str | None]]:
    """PostgreSQL CSV: an unquoted empty field (or the NULL string) is NULL, a quoted one is
    a string; quoted fields may span lines."""
    delim = opts.get("delimiter", ",")
    null = opts.get("null", "")
    quote = opts.get("quote", '"')
    escape = opts.get("escape", quote)
    rows: list[list[str | None]] = []
    row: list[str | None] = []
    cur: list[str] = []
    quoted = in_quotes = False
    i, n = 0, len(data)

    def end_field() -> None:
        text = "".join(cur)
        row.append(None if not quoted and text == null else text)
        cur.clear()

    while i < n:
        ch = data[i]
        if in_quotes:
            if ch == escape and i + 1 < n and data[i + 1] in (quote, escape):
                cur.append(data[i + 1])  # "" (or the ESCAPE char) inside quotes
                i += 2
                continue
            if ch == quote:
                in_quotes = False
            else:
                cur.append(ch)
            i += 1
            continue
        if ch == quote:
            in_quotes = quoted = True
        elif ch == delim:
            end_field()
            quoted = False
        elif ch in "\r\n":
            if ch == "\r" and i + 1 < n and data[i + 1] == "\n":
                i += 1
            end_field()
            quoted = False
            rows.append(row)
            row = []
        else:
            cur.append(ch)
        i += 1
    if cur or row or quoted:
        end_field()
        rows.append(row)
    if rows and rows[-1] == ["\\."]:
        rows.pop()
    if opts.get("header") and rows:
        rows = rows[1:]
    return rows


def convert_rows(
    raw: list[list[str | None]], result: QueryResult, tz: tzinfo
) -> list[tuple[Any, ...]]:
    """Text fields to Python values of the target columns' types (22P04 on a bad row)."""
    assert result.columns is not None
    parsers = [codecs.text_parser(c.type, tz) for c in result.columns]
    ncols = len(parsers)
    if raw and all(len(f) == ncols for f in raw):
        # column at a time: one comprehension per column instead of a generator per row;
        # on any error the row loop below reports the first bad row, as before
        try:
            cols = [
                [None if v is None else p(v) for v in col]
                for p, col in zip(parsers, zip(*raw, strict=True), strict=True)
            ]
            return list(zip(*cols, strict=True))
        except Exception:  # noqa: BLE001 - the row loop raises the exact error
            pass
    rows: list[tuple[Any, ...]] = []
    for lineno, fields in enumerate(raw, start=1):
        if len(fields) != ncols:
            what = "missing data" if len(fields) < ncols else "extra data after last expected"
            raise BadCopyFileFormat(f"{what} column", detail=f"COPY line {lineno}")
        rows.append(tuple(None if v is None else p(v) for p, v in zip(parsers, fields)))
    return rows


class BadCopyFileFormat(EngineError):
    sqlstate = "22P04"
