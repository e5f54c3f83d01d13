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


def test_text_split_fast_path_matches_the_escape_aware_split() -> None:
    from pgwire.copy import _split_text_line

    for line, delim in [
        ("1\tabc\t\\N", "\t"),
        ("a\\\tb\tc", "\t"),  # escaped delimiter stays in the field
        ("a\\\\\tb", "\t"),  # escaped backslash, then a real delimiter
        ("x\\,y,z", ","),
        ("\\x41|b", "|"),
    ]:
        got = _split_text_line(line, delim)
        want: list[str] = []
        cur = ""
        i = 0
        while i < len(line):
            if line[i] == "\\" and i + 1 < len(line):
                cur += line[i : i + 2]
                i += 2
            elif line[i] == delim:
                want.append(cur)
                cur = ""
                i += 1
            else:
                cur += line[i]
                i += 1
        want.append(cur)
        assert got == want, (line, got, want)


def test_timestamp_text_with_and_without_offsets() -> None:
    from datetime import datetime

    from pgwire.temporal import parse_timestamp

    assert parse_timestamp("2024-01-01 00:00:01.5") == datetime(2024, 1, 1, 0, 0, 1, 500000)
    assert parse_timestamp(" 2024-01-01 10:00:00+02 ") == datetime(2024, 1, 1, 10, 0)
    assert parse_timestamp("2024-01-01 10:00:00-05:30") == datetime(2024, 1, 1, 10, 0)
