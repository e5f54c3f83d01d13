"""COPY rendering and parsing: text-format escapes and CSV quoting as PostgreSQL 15 writes
them (expected lines taken from `COPY ... TO STDOUT` on PostgreSQL 15), and the same data
parsed back for COPY FROM STDIN."""

from __future__ import annotations

from datetime import UTC

import pytest

from engine.api import QueryResult
from engine.errors import EngineError
from engine.types import INT, VARCHAR, Field
from pgwire.copy import convert_rows, header_line, line_renderer, parse_csv, parse_text

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


def test_parse_text_format() -> None:
    data = '1\ttab\\tand\\\\back\n2\t\\N\n3\tq"uote,comma\n4\t\n5\tline\\nbreak\n\\.\n'
    assert parse_text(data, {}) == [
        ["1", "tab\tand\\back"],
        ["2", None],
        ["3", 'q"uote,comma'],
        ["4", ""],
        ["5", "line\nbreak"],
    ]
    assert parse_text("a;b\n1;x\\;y\n", {"delimiter": ";", "header": True}) == [["1", "x;y"]]


def test_parse_csv_format() -> None:
    data = 'a,"b,c"\n1,tab\tand\\back\n2,\n3,"q""uote,comma"\n4,""\n5,"line\nbreak"\n'
    assert parse_csv(data, {"header": True}) == [
        ["1", "tab\tand\\back"],
        ["2", None],
        ["3", 'q"uote,comma'],
        ["4", ""],
        ["5", "line\nbreak"],
    ]
    assert parse_csv("1;NULL\r\n2;x", {"delimiter": ";", "null": "NULL"}) == [
        ["1", None],
        ["2", "x"],
    ]


def test_convert_rows_checks_column_count() -> None:
    r = QueryResult("COPY 0", [Field("a", INT), Field("b", VARCHAR)], copy={"direction": "in"})
    assert convert_rows([["1", None]], r, UTC) == [(1, None)]
    with pytest.raises(EngineError, match="missing data"):
        convert_rows([["1"]], r, UTC)
