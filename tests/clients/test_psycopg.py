"""psycopg 3 against Swell: the simple protocol (no parameters), the extended protocol
(parameters, `prepare=True`, automatic server-side preparation after 5 runs), binary
results, parameters of every common type, multi-statement strings, and server errors
mapped to psycopg's exception classes with their SQLSTATE."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import psycopg
import pytest
from psycopg import errors

from harness.server import SwellServer

pytestmark = pytest.mark.clients

ROWS: list[tuple[Any, ...]] = [
    (
        1,
        9_000_000_000,
        "héllo wörld",
        1.5,
        Decimal("12.345"),
        True,
        dt.date(2024, 2, 29),
        dt.datetime(2024, 1, 2, 3, 4, 5, 600000),
        b"\x00\xffab",
    ),
    (2, -1, "", -0.25, Decimal("-0.001"), False, dt.date(1999, 12, 31),
     dt.datetime(1970, 1, 1), b""),
    (3, None, None, None, None, None, None, None, None),
]  # fmt: skip


@pytest.fixture
def types_table(conn: psycopg.Connection[Any]) -> Iterator[str]:
    conn.execute("DROP TABLE IF EXISTS pg3_types")
    conn.execute(
        "CREATE TABLE pg3_types (id INT PRIMARY KEY, b BIGINT, s VARCHAR, f DOUBLE PRECISION,"
        " n NUMERIC, ok BOOLEAN, d DATE, ts TIMESTAMP, bin BYTEA)"
    )
    with conn.cursor() as cur:
        cur.executemany("INSERT INTO pg3_types VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)", ROWS)
    conn.execute("FLUSH")
    yield "pg3_types"
    conn.execute("DROP TABLE pg3_types")


def test_simple_protocol_select(conn: psycopg.Connection[Any]) -> None:
    # no parameters: psycopg sends one Query message
    assert conn.execute("SELECT 1 + 1 AS two, 'a' || 'b' AS ab").fetchall() == [(2, "ab")]


def test_multiple_statements_in_one_simple_query(conn: psycopg.Connection[Any]) -> None:
    cur = conn.execute("SELECT 1; SELECT 'two', 3")
    assert cur.fetchall() == [(1,)]
    assert cur.nextset()
    assert cur.fetchall() == [("two", 3)]
    assert not cur.nextset()


def test_parameters_round_trip_text_and_binary(
    conn: psycopg.Connection[Any], types_table: str
) -> None:
    sql = f"SELECT * FROM {types_table} ORDER BY id"
    assert conn.execute(sql).fetchall() == ROWS
    assert conn.execute(sql, binary=True).fetchall() == ROWS
    # and with the extended protocol (a parameter forces it)
    got = conn.execute(f"SELECT * FROM {types_table} WHERE id >= %s ORDER BY id", [2]).fetchall()
    assert got == ROWS[1:]


def test_result_column_descriptions(conn: psycopg.Connection[Any], types_table: str) -> None:
    cur = conn.execute(f"SELECT id, b, s, f, n, ok, d, ts, bin FROM {types_table} WHERE false")
    assert cur.description is not None
    names = [(c.name, c.type_code) for c in cur.description]
    assert names == [
        ("id", 23), ("b", 20), ("s", 1043), ("f", 701), ("n", 1700), ("ok", 16),
        ("d", 1082), ("ts", 1114), ("bin", 17),
    ]  # fmt: skip
    assert cur.fetchall() == []


def test_prepare_true_and_automatic_preparation(
    conn: psycopg.Connection[Any], types_table: str
) -> None:
    sql = f"SELECT s, n FROM {types_table} WHERE id = %s"
    for i in range(7):
        row = conn.execute(sql, [1 + i % 2], prepare=True).fetchone()
        assert row == (ROWS[i % 2][2], ROWS[i % 2][4])
    # default prepare_threshold is 5: the 6th run of the same query uses a named statement
    for i in range(7):
        assert conn.execute(sql, [2], binary=i % 2 == 0).fetchone() == ("", Decimal("-0.001"))


@pytest.mark.parametrize(
    "expr, param, expected",
    [
        ("%s::int + 1", 41, 42),
        ("%s::bigint * 2", 2**40, 2**41),
        ("%s || '!'", "hi", "hi!"),
        ("%s::double precision / 4", 1.0, 0.25),
        ("%s::numeric + 1", Decimal("0.5"), Decimal("1.5")),
        ("NOT %s", True, False),
        ("%s::date + 1", dt.date(2024, 2, 28), dt.date(2024, 2, 29)),
        ("%s::int IS NULL", None, True),
    ],
)
def test_typed_parameters(
    conn: psycopg.Connection[Any], expr: str, param: Any, expected: Any
) -> None:
    assert conn.execute(f"SELECT {expr}", [param]).fetchone() == (expected,)


def test_errors_carry_sqlstate_and_connection_survives(conn: psycopg.Connection[Any]) -> None:
    with pytest.raises(errors.UndefinedTable) as ei:
        conn.execute("SELECT * FROM pg3_nope")
    assert ei.value.sqlstate == "42P01"
    assert ei.value.diag.message_primary == 'relation "pg3_nope" does not exist'
    assert ei.value.diag.severity == "ERROR"

    with pytest.raises(errors.SyntaxError):
        conn.execute("SELECT * FORM pg3_nope")
    with pytest.raises(errors.SyntaxError):  # extended protocol: the error comes from Parse
        conn.execute("SELECT * FORM pg3_nope WHERE x = %s", [1])
    with pytest.raises(errors.UndefinedColumn):
        conn.execute("SELECT no_such_column")
    with pytest.raises(errors.DivisionByZero) as ei:
        conn.execute("SELECT 10 / %s", [0])
    assert ei.value.diag.message_primary == "division by zero"

    assert conn.execute("SELECT 'still alive'").fetchone() == ("still alive",)


def test_many_connections(server: SwellServer) -> None:
    conns = [server.connect() for _ in range(5)]
    try:
        for i, c in enumerate(conns):
            assert c.execute("SELECT %s::int", [i]).fetchone() == (i,)
    finally:
        for c in conns:
            c.close()
