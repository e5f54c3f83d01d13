"""COPY ... TO STDOUT on the wire: CopyOutResponse, one CopyData per row, CopyDone.

The engine runs the COPY's query and hands back the rows with `QueryResult.copy` (the
options); this module renders them in PostgreSQL's `text` format (tab-separated,
backslash escapes, `\\N` for NULL) or `csv` format (quoted where needed, empty for NULL,
optional header line), using the same text formatters as DataRow so values read the same
either way. The connection then sends CommandComplete `COPY n`.

Per-row Python is fine here: this is the wire boundary, one message per row.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from datetime import tzinfo
from typing import Any

from engine.api import QueryResult
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
