"""COPY TO STDOUT rendering: text-format escapes and CSV quoting as PostgreSQL 15 writes
them (expected lines taken from `COPY ... TO STDOUT` on PostgreSQL 15)."""

from __future__ import annotations

from datetime import UTC

from engine.api import QueryResult
from engine.types import INT, VARCHAR, Field
from pgwire.copy import header_line, line_renderer

ROWS = [(1, "tab\tand\\back"), (2, None), (3, 'q"uote,comma'), (4, ""), (5, "line\nbreak")]


def render(opts: dict) -> list[bytes]:
    r = QueryResult("COPY 5", [Field("a", INT), Field("b,c", VARCHAR)], ROWS, copy=opts)
    line = line_renderer(r, UTC)
    return [header_line(r), *(line(row) for row in ROWS)]


def test_text_format() -> None:
    assert render({"format": "text"})[1:] == [
        b"1\ttab\\tand\\\\back\n",
        b"2\t\\N\n",
        b'3\tq"uote,comma\n',
        b"4\t\n",
        b"5\tline\\nbreak\n",
    ]


def test_csv_format_with_header() -> None:
    assert render({"format": "csv", "header": True}) == [
        b'a,"b,c"\n',
        b"1,tab\tand\\back\n",
        b"2,\n",
        b'3,"q""uote,comma"\n',
        b'4,""\n',
        b'5,"line\nbreak"\n',
    ]
