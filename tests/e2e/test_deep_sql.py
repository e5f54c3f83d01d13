"""Deeply nested statements run, or fail with 54001, never with an internal error.

PostgreSQL 15 accepts thousands of nested parentheses, 3,000-term `+` chains and
10,000-term ANDs; generated SQL (BI tools, long OR filters, many-branch UNION ALLs) needs
them. Swell must accept at least 1,000 levels in the parser, planner, binder and
evaluator, ad hoc, in materialized views and over the extended protocol, and past its
limit answer PostgreSQL's "stack depth limit exceeded" (54001) on a connection that keeps
working. The SQL is generated here because it is tens of kilobytes long.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

pytestmark = pytest.mark.e2e


def _one(conn: psycopg.Connection[Any], sql: str) -> Any:
    row = conn.execute(sql).fetchone()
    assert row is not None
    return row[0]


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        ("SELECT " + "(" * 1000 + "1" + ")" * 1000, 1),
        ("SELECT " + "+".join(["1"] * 3000), 3000),
        ("SELECT count(*) FROM (VALUES (1)) v(a) WHERE " + " AND ".join(["a = 1"] * 10000), 1),
        ("SELECT count(*) FROM (" + " UNION ALL ".join(["SELECT 1"] * 1000) + ") u", 1000),
        ("SELECT " + "CASE WHEN true THEN " * 1000 + "7" + " END" * 1000, 7),
        ("SELECT " + "(SELECT " * 300 + "5" + ")" * 300, 5),
        ("SELECT 7 IN (" + ",".join(str(i) for i in range(10000)) + ")", True),
    ],
    ids=["parens", "plus_chain", "and_chain", "union_all", "case", "subqueries", "in_list"],
)
def test_deep_statements_run(conn: psycopg.Connection[Any], sql: str, expected: Any) -> None:
    assert _one(conn, sql) == expected


def test_past_the_limit_is_54001_and_the_connection_survives(
    conn: psycopg.Connection[Any],
) -> None:
    with pytest.raises(psycopg.Error) as info:
        conn.execute("SELECT " + "(" * 30000 + "1" + ")" * 30000)
    assert info.value.sqlstate == "54001"
    assert "stack depth limit exceeded" in str(info.value)
    assert _one(conn, "SELECT 1") == 1


def test_deep_materialized_view_and_prepared_statement(conn: psycopg.Connection[Any]) -> None:
    conn.execute("CREATE TABLE deep_t (a INT)")
    try:
        conn.execute("INSERT INTO deep_t VALUES (1)")
        conn.execute("FLUSH")
        total = "+".join(["a"] * 2000)
        where = " OR ".join(f"a = {i}" for i in range(1000))
        conn.execute(
            f"CREATE MATERIALIZED VIEW deep_mv AS SELECT {total} AS s, a FROM deep_t WHERE {where}"
        )
        conn.execute("INSERT INTO deep_t VALUES (2), (5000)")
        conn.execute("FLUSH")
        rows = conn.execute("SELECT s, a FROM deep_mv ORDER BY a").fetchall()
        assert rows == [(2000, 1), (4000, 2)]
        got = conn.execute(
            f"SELECT %s::int + {total} FROM deep_t WHERE a = 1", (5,), prepare=True
        ).fetchall()
        assert got == [(2005,)]
    finally:
        conn.execute("DROP MATERIALIZED VIEW IF EXISTS deep_mv")
        conn.execute("DROP TABLE deep_t")
