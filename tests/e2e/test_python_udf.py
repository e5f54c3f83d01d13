"""Embedded Python functions through the real server, as a user writes them.

Scalar (row at a time and `WITH (batch = true)`), table and aggregate functions in ad-hoc
queries and materialized views; an aggregate's retractions through a view; an exception
inside a function (NULL in the view with an rw_event_logs row, SQLSTATE 38000 ad hoc with
the Python error's text and no traceback); after kill -9 the views are built again from
their stored plans and keep computing; DROP FUNCTION is refused while a view uses it."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from harness.server import SwellServer

GCD = """CREATE FUNCTION py_gcd(a INT, b INT) RETURNS INT LANGUAGE python AS $$
def py_gcd(a, b):
    while b != 0:
        a, b = b, a % b
    return a
$$"""
INV = """CREATE FUNCTION inv(x INT) RETURNS DOUBLE PRECISION LANGUAGE python AS $$
def inv(x):
    return 1 / x
$$"""
VSCALE = """CREATE FUNCTION vscale(x INT, k INT) RETURNS BIGINT LANGUAGE python AS $$
import pyarrow.compute as pc

def vscale(x, k):
    return pc.multiply(x.cast("int64"), k.cast("int64"))
$$ WITH (batch = true)"""
SERIES = """CREATE FUNCTION series(n INT) RETURNS TABLE (i INT, s VARCHAR) LANGUAGE python AS $$
def series(n):
    for i in range(n):
        yield i, "#" * i
$$"""
REP = """CREATE FUNCTION rep(s VARCHAR, n INT) RETURNS TABLE (r VARCHAR) LANGUAGE python AS $$
def rep(s, n):
    for i in range(n):
        yield s * (i + 1)
$$"""
SPREAD = """CREATE FUNCTION spread(n INT) RETURNS TABLE (x INT) LANGUAGE python AS $$
def spread(n):
    yield n
    yield 100 // n
$$"""
WAVG = """CREATE AGGREGATE wavg(value INT, weight INT) RETURNS DOUBLE PRECISION LANGUAGE python AS $$
def create_state():
    return (0, 0)

def accumulate(state, value, weight):
    if value is None or weight is None:
        return state
    s, w = state
    return (s + value * weight, w + weight)

def retract(state, value, weight):
    if value is None or weight is None:
        return state
    s, w = state
    return (s - value * weight, w - weight)

def finish(state):
    s, w = state
    return None if w == 0 else s / w
$$"""


def _views(c: psycopg.Connection[Any]) -> tuple[list[Any], list[Any]]:
    return (
        c.execute("SELECT id, g, i, v FROM v_scalar ORDER BY id").fetchall(),
        c.execute("SELECT k, w, n FROM v_agg ORDER BY k").fetchall(),
    )


def test_python_functions_in_queries_views_and_restart(fresh_server: SwellServer) -> None:
    with fresh_server.connect() as c:
        for q in (GCD, INV, VSCALE, SERIES, WAVG):
            c.execute(q)
        assert c.execute("SELECT py_gcd(12, 18), vscale(3, 4), inv(4)").fetchone() == (6, 12, 0.25)
        assert c.execute("SELECT * FROM series(3)").fetchall() == [(0, ""), (1, "#"), (2, "##")]
        c.execute(REP)
        cur = c.execute("SELECT n, rep('ab', n) FROM (VALUES (1), (0), (2)) v(n) ORDER BY 1, 2")
        assert [d.name for d in cur.description] == ["n", "rep"]
        assert cur.fetchall() == [(1, "ab"), (2, "ab"), (2, "abab")]
        c.execute("CREATE TABLE t (id INT PRIMARY KEY, k INT, a INT, b INT)")
        c.execute("INSERT INTO t VALUES (1, 0, 12, 18), (2, 0, 10, 2), (3, 1, 7, 0)")
        c.execute("FLUSH")
        assert c.execute("SELECT k, wavg(a, b) FROM t GROUP BY k ORDER BY k").fetchall() == [
            (0, 236 / 20),
            (1, None),
        ]
        with pytest.raises(psycopg.errors.ExternalRoutineException) as ei:
            c.execute("SELECT id, inv(b) FROM t")
        assert ei.value.diag.message_primary == "ZeroDivisionError: division by zero"
        assert "Traceback" not in str(ei.value)
        assert ei.value.diag.sqlstate == "38000"

        c.execute(
            "CREATE MATERIALIZED VIEW v_scalar AS "
            "SELECT id, py_gcd(a, b) AS g, inv(b) AS i, vscale(a, b) AS v FROM t"
        )
        c.execute(
            "CREATE MATERIALIZED VIEW v_agg AS "
            "SELECT k, wavg(a, b) AS w, count(*) AS n FROM t GROUP BY k"
        )
        assert _views(c) == (
            [(1, 6, 1 / 18, 216), (2, 2, 0.5, 20), (3, 7, None, 0)],
            [(0, 236 / 20, 2), (1, None, 1)],
        )
        events = c.execute(
            "SELECT job_name, expression, error, info->>'sqlstate' FROM rw_catalog.rw_event_logs"
        ).fetchall()
        assert events == [("v_scalar", "inv(b)", "ZeroDivisionError: division by zero", "38000")]
        # a table function in a materialized view: a failing row yields no rows (reported)
        c.execute(SPREAD)
        c.execute("CREATE MATERIALIZED VIEW v_udtf AS SELECT id, spread(b) AS x FROM t")
        assert c.execute("SELECT * FROM v_udtf ORDER BY id, x").fetchall() == [
            (1, 5),
            (1, 18),
            (2, 2),
            (2, 50),
        ]
        failed = "SELECT count(*) FROM rw_catalog.rw_event_logs WHERE job_name = 'v_udtf'"
        assert c.execute(failed).fetchone() == (1,)

        # retractions: an update and a delete change the aggregate's groups
        c.execute("UPDATE t SET b = 6 WHERE id = 3")
        c.execute("DELETE FROM t WHERE id = 2")
        c.execute("FLUSH")
        assert _views(c) == (
            [(1, 6, 1 / 18, 216), (3, 1, 1 / 6, 42)],
            [(0, 12.0, 1), (1, 7.0, 1)],
        )
        udtf_rows = [(1, 5), (1, 18), (3, 6), (3, 16)]
        assert c.execute("SELECT * FROM v_udtf ORDER BY id, x").fetchall() == udtf_rows
        with pytest.raises(psycopg.errors.DependentObjectsStillExist):
            c.execute("DROP FUNCTION inv")
        with pytest.raises(psycopg.errors.DependentObjectsStillExist):
            c.execute("DROP AGGREGATE wavg")

    fresh_server.restart(crash=True)
    with fresh_server.connect() as c:
        c.execute("INSERT INTO t VALUES (4, 1, 9, 3)")
        c.execute("FLUSH")
        assert _views(c) == (
            [(1, 6, 1 / 18, 216), (3, 1, 1 / 6, 42), (4, 3, 1 / 3, 27)],
            [(0, 12.0, 1), (1, (42 + 27) / 9, 2)],
        )
        assert c.execute("SELECT * FROM v_udtf ORDER BY id, x").fetchall() == [
            *udtf_rows,
            (4, 3),
            (4, 33),
        ]
        assert c.execute("SELECT py_gcd(100, 75)").fetchone() == (25,)
        rows = c.execute(
            "SELECT p.proname, p.prokind, l.lanname FROM pg_proc p "
            "JOIN pg_language l ON l.oid = p.prolang "
            "JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = 'public' "
            "ORDER BY 1"
        ).fetchall()
        assert rows == [
            ("inv", "f", "python"),
            ("py_gcd", "f", "python"),
            ("rep", "f", "python"),
            ("series", "f", "python"),
            ("spread", "f", "python"),
            ("vscale", "f", "python"),
            ("wavg", "a", "python"),
        ]
        c.execute("DROP MATERIALIZED VIEW v_scalar")
        c.execute("DROP FUNCTION inv")
        with pytest.raises(psycopg.errors.UndefinedFunction):
            c.execute("SELECT inv(1)")


def test_only_superusers_create_python_functions(fresh_server: SwellServer) -> None:
    with fresh_server.connect() as c:
        c.execute("CREATE USER alice")
    with fresh_server.connect(user="alice") as a:
        with pytest.raises(psycopg.errors.InsufficientPrivilege) as ei:
            a.execute(GCD)
        assert ei.value.diag.message_primary == "permission denied for language python"
        a.execute("CREATE FUNCTION plus1(x INT) RETURNS INT LANGUAGE sql AS 'select x + 1'")
        assert a.execute("SELECT plus1(1)").fetchone() == (2,)
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            a.execute("GRANT USAGE ON LANGUAGE python TO alice")
    with fresh_server.connect() as c:
        c.execute("GRANT USAGE ON LANGUAGE python TO alice")
    with fresh_server.connect(user="alice") as a:
        a.execute(GCD)
        assert a.execute("SELECT py_gcd(9, 6)").fetchone() == (3,)
    with fresh_server.connect() as c:
        c.execute("REVOKE USAGE ON LANGUAGE python FROM alice")
    with fresh_server.connect(user="alice") as a:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            a.execute(INV)


PICKY = """CREATE AGGREGATE picky(v INT) RETURNS BIGINT LANGUAGE python AS $$
def create_state():
    return 0

def accumulate(s, v):
    if v == 13:
        raise ValueError("unlucky")
    return s + v

def retract(s, v):
    if v == 13:
        raise ValueError("unlucky")
    return s - v
$$"""
LAST = """CREATE AGGREGATE biggest(v INT) RETURNS INT LANGUAGE python AS $$
def create_state():
    return None

def accumulate(s, v):
    return v if s is None or v > s else s
$$"""


def test_python_aggregates_in_views_keep_state_or_recompute(fresh_server: SwellServer) -> None:
    """An aggregate with retract keeps its state per group (StreamHashAgg); a failing
    accumulate makes the group NULL while the row is in it; one without retract is
    recomputed from the group's rows (StreamCollectAgg)."""
    with fresh_server.connect() as c:
        c.execute(PICKY)
        c.execute(LAST)
        c.execute("CREATE TABLE t (id INT PRIMARY KEY, k INT, v INT)")
        c.execute("INSERT INTO t VALUES (1, 0, 5), (2, 0, 7), (3, 1, 2)")
        plans = {}
        for name, q in (
            ("v_picky", "SELECT k, picky(v) AS p FROM t GROUP BY k"),
            ("v_big", "SELECT k, biggest(v) AS b FROM t GROUP BY k"),
        ):
            plan = c.execute(f"EXPLAIN CREATE MATERIALIZED VIEW {name} AS {q}").fetchall()
            plans[name] = "\n".join(r[0] for r in plan)
            c.execute(f"CREATE MATERIALIZED VIEW {name} AS {q}")
        assert "StreamHashAgg" in plans["v_picky"] and "picky(" in plans["v_picky"]
        assert "StreamCollectAgg" in plans["v_big"]

        def both() -> tuple[list[Any], list[Any]]:
            return (
                c.execute("SELECT * FROM v_picky ORDER BY k").fetchall(),
                c.execute("SELECT * FROM v_big ORDER BY k").fetchall(),
            )

        assert both() == ([(0, 12), (1, 2)], [(0, 7), (1, 2)])
        c.execute("INSERT INTO t VALUES (4, 1, 13)")
        c.execute("FLUSH")
        assert both() == ([(0, 12), (1, None)], [(0, 7), (1, 13)])
        events = c.execute(
            "SELECT job_name, error, info->>'sqlstate' FROM rw_catalog.rw_event_logs"
        ).fetchall()
        assert events == [("v_picky", "ValueError: unlucky", "38000")]
        with pytest.raises(psycopg.errors.ExternalRoutineException):
            c.execute("SELECT k, picky(v) FROM t GROUP BY k").fetchall()
        c.execute("DELETE FROM t WHERE id = 4")
        c.execute("DELETE FROM t WHERE id = 2")
        c.execute("FLUSH")
        assert both() == ([(0, 5), (1, 2)], [(0, 5), (1, 2)])
