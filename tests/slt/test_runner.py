"""Tests of the sqllogictest runner itself: parsing, result comparison, error formatting,
and (against the shared server) that a wrong expectation is reported with file:line."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from harness.server import SwellServer
from slt.runner import (
    Halt,
    Query,
    Sleep,
    SltFailure,
    SltParseError,
    Statement,
    compare,
    format_cell,
    format_error,
    header_problems,
    parse,
    run_file,
)

SAMPLE = """\
# name: sample
# description: one of each record

statement ok
CREATE TABLE s (a INT)

statement error relation "x" does not exist
SELECT * FROM x

statement error
SELECT 1 / 0
----
ERROR: division by zero (SQLSTATE 22012)

statement count 2
INSERT INTO s VALUES (1), (2)

skipif swell
statement ok
THIS IS SKIPPED

onlyif postgres
statement ok
THIS TOO

onlyif swell
query IT rowsort retry 3 backoff 200ms
SELECT a,
       'x'
FROM s
----
1 x
2 x

query error \\(SQLSTATE 42601\\)
SELEC 1

query I
SELECT a FROM s WHERE false
----

sleep 100ms

halt

statement ok
NEVER RUN
"""


def test_parse_each_record_kind_with_line_numbers() -> None:
    recs = parse(SAMPLE, "sample.slt")
    kinds = [type(r).__name__ for r in recs]
    assert kinds == [
        "Statement", "Statement", "Statement", "Statement", "Query", "Query", "Query",
        "Sleep", "Halt", "Statement",
    ]  # fmt: skip
    create, err, exact, count, q, qerr, empty, sleep, halt, _ = recs
    assert isinstance(create, Statement) and create.line == 4 and not create.expect_error
    assert isinstance(err, Statement) and err.error_regex == 'relation "x" does not exist'
    assert isinstance(exact, Statement) and exact.error_regex is None
    assert exact.error_text == "ERROR: division by zero (SQLSTATE 22012)"
    assert isinstance(count, Statement) and count.count == 2
    assert isinstance(q, Query) and q.types == "IT" and q.sort == "rowsort"
    assert (q.retry, q.backoff) == (3, 0.2)
    assert q.sql == "SELECT a,\n       'x'\nFROM s" and q.expected == ["1 x", "2 x"]
    assert isinstance(qerr, Query) and qerr.expect_error
    assert qerr.error_regex == r"\(SQLSTATE 42601\)"
    assert isinstance(empty, Query) and empty.expected == []
    assert isinstance(sleep, Sleep) and sleep.seconds == 0.1
    assert isinstance(halt, Halt)


@pytest.mark.parametrize(
    "text, message",
    [
        ("frobnicate\n", "x.slt:1: unknown record type 'frobnicate'"),
        ("query XY\nSELECT 1\n----\n1\n", "bad type string 'XY'"),
        ("query I\nSELECT 1\n", "query without `----`"),
        ("statement ok\n\n", "statement without SQL"),
        ("statement ok\nSELECT 1\n----\n1\n", "only allowed with a bare `statement error`"),
        ("sleep soon\n", "bad duration 'soon'"),
        ("\n\nstatement count x\nSELECT 1\n", "x.slt:3: statement count needs a row count"),
    ],
)
def test_parse_errors_name_file_and_line(text: str, message: str) -> None:
    with pytest.raises(SltParseError) as ei:
        parse(text, "x.slt")
    assert message in str(ei.value)


def test_cells_print_null_empty_and_text() -> None:
    assert [format_cell(v) for v in (None, "", "t", "12.50")] == ["NULL", "(empty)", "t", "12.50"]


def q(types: str, sort: str, expected: list[str]) -> Query:
    return Query(1, "SELECT", types=types, sort=sort, expected=expected)


def test_compare_sort_modes() -> None:
    rows = [["b", "2"], ["a", "1"]]
    assert compare(rows, q("TI", "rowsort", ["a 1", "b 2"]))
    assert not compare(rows, q("TI", "nosort", ["a 1", "b 2"]))
    assert compare(rows, q("TI", "nosort", ["b 2", "a 1"]))
    assert compare(rows, q("TI", "valuesort", ["1 2 a b"]))
    assert not compare(rows, q("TI", "rowsort", ["a 1"]))
    assert not compare(rows, q("TI", "rowsort", ["a 1", "b 3"]))
    assert compare([], q("I", "nosort", []))


def test_compare_real_columns_numerically_only() -> None:
    assert compare([["b", "7.3333333333"]], q("TR", "nosort", ["b 7.3333333333333333"]))
    assert compare([["a", "5.0000000000"]], q("TR", "nosort", ["a 5"]))
    assert not compare([["a", "5.01"]], q("TR", "nosort", ["a 5"]))
    # integer and text columns stay exact
    assert not compare([["5.0"]], q("I", "nosort", ["5"]))
    assert not compare([["NULL"]], q("R", "nosort", ["0"]))
    # numerically equal values sorted differently as text still match under rowsort
    rows = [["10.0"], ["9"]]
    assert compare(rows, q("R", "rowsort", ["9.00", "10"]))


def test_error_format_pins_sqlstate() -> None:
    err = psycopg.errors.UndefinedTable()
    assert format_error(err).endswith("(SQLSTATE 42P01)")


def test_header_check() -> None:
    assert header_problems("# name: a\n# description: b\n") == []
    assert header_problems("statement ok\nSELECT 1\n") == [
        "missing `# name:` header",
        "missing `# description:` header",
    ]


def test_every_slt_file_parses_and_has_headers() -> None:
    files = sorted(Path(__file__).parent.rglob("*.slt"))
    assert files, "no .slt files found"
    for f in files:
        text = f.read_text()
        assert header_problems(text) == [], f
        assert parse(text, str(f)), f


def test_wrong_expectation_is_reported_with_location(server: SwellServer, tmp_path: Path) -> None:
    slt = tmp_path / "wrong.slt"
    slt.write_text("# name: wrong\n# description: d\n\nquery I\nSELECT 1 + 1\n----\n3\n")
    with pytest.raises(SltFailure) as ei:
        run_file(slt, server.connect, display_path="wrong.slt")
    text = str(ei.value)
    assert text.startswith("wrong.slt:4: query result mismatch")
    assert "SELECT 1 + 1" in text and "expected:\n    3\nactual:\n    2" in text
