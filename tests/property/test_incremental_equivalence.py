"""Incremental views equal their queries recomputed from scratch.

Hypothesis drives random INSERT / UPDATE / DELETE batches into a table through the real
engine (in process, RocksDB state in a temp dir). After every FLUSH each materialized view
must equal (a) the same SELECT run ad hoc and (b) the same SELECT run by DuckDB over the
table's current rows, an independent implementation. A final restart checks the views
recover to the same contents.
"""

from __future__ import annotations

import tempfile
from decimal import Decimal
from pathlib import Path
from unittest.mock import patch

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.database import Config, open_database
from engine.stream import backfill

VIEWS = {
    "v_agg": "SELECT k, count(*) AS c, count(v) AS cv, sum(v) AS s, min(v) AS mn, max(v) AS mx "
    "FROM t GROUP BY k",
    "v_global": "SELECT count(*) AS c, sum(v) AS s, min(v) AS mn, max(v) AS mx FROM t",
    "v_filter": "SELECT id, k, v * 2 AS v2 FROM t WHERE v > 3",
    "v_having": "SELECT k, sum(v) AS s FROM t GROUP BY k HAVING count(*) > 1",
    "v_mv_on_mv": "SELECT c, count(*) AS n FROM v_agg GROUP BY c",
    "v_distinct": "SELECT DISTINCT k FROM t WHERE v IS NOT NULL",
    "v_avg": "SELECT k, avg(v) AS a FROM t GROUP BY k",
    "v_int_keys": "SELECT v, id % 3 AS m, count(*) AS n, sum(id) AS s, avg(v) AS a "
    "FROM t GROUP BY v, id % 3",
    "v_top": "SELECT id, v FROM t WHERE v IS NOT NULL ORDER BY v DESC, id LIMIT 3",
    "v_join": "SELECT a.id, a.v, b.id AS bid, b.v AS bv FROM t a JOIN t b ON a.k = b.k",
    "v_left": "SELECT a.id, b.id AS bid, b.k AS bk FROM t a LEFT JOIN t b ON a.v = b.id",
    "v_join_agg": "SELECT a.k, count(*) AS n, sum(b.v) AS s FROM t a JOIN t b ON a.v = b.id "
    "AND a.id <> b.id GROUP BY a.k",
}

keys = st.sampled_from(["a", "b", "c", None])
vals = st.one_of(st.none(), st.integers(-5, 12))
op = st.one_of(
    st.tuples(st.just("ins"), st.integers(0, 15), keys, vals),
    st.tuples(st.just("del"), st.integers(0, 15)),
    st.tuples(st.just("upd"), st.integers(0, 15), vals),
    st.tuples(st.just("delk"), keys),
)
batches = st.lists(st.lists(op, min_size=1, max_size=8), min_size=1, max_size=6)


def _lit(v: object) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return f"'{v}'"
    return str(v)


def _sql(o: tuple) -> str:  # type: ignore[type-arg]
    if o[0] == "ins":
        return f"INSERT INTO t VALUES ({o[1]}, {_lit(o[2])}, {_lit(o[3])})"
    if o[0] == "del":
        return f"DELETE FROM t WHERE id = {o[1]}"
    if o[0] == "upd":
        return f"UPDATE t SET v = {_lit(o[2])} WHERE id = {o[1]}"
    return (
        f"DELETE FROM t WHERE k = {_lit(o[1])}"
        if o[1] is not None
        else "DELETE FROM t WHERE k IS NULL"
    )


def _norm(rows: list[tuple]) -> list[tuple]:  # type: ignore[type-arg]
    def fix(v: object) -> object:
        if isinstance(v, Decimal | float):
            return round(float(v), 6)
        return v

    return sorted((tuple(fix(v) for v in r) for r in rows), key=repr)


def _select(s, sql: str) -> list[tuple]:  # type: ignore[no-untyped-def,type-arg]
    return s.execute_simple(sql)[0].rows


def _check(s, views: dict[str, str]) -> None:  # type: ignore[no-untyped-def]
    table = _select(s, "SELECT id, k, v FROM t")
    con = duckdb.connect()
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, k VARCHAR, v INTEGER)")
    if table:
        con.executemany("INSERT INTO t VALUES (?, ?, ?)", table)
    for name, q in views.items():
        got = _norm(_select(s, f"SELECT * FROM {name}"))
        adhoc = _norm(_select(s, q))
        assert got == adhoc, f"{name}: view != ad-hoc query"
        if name == "v_mv_on_mv":
            q = q.replace("FROM v_agg", f"FROM ({views['v_agg']}) AS v_agg")
        expected = _norm(con.execute(q).fetchall())
        assert got == expected, f"{name}: view != duckdb\n{got}\n{expected}"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=batches, early=st.booleans())
def test_views_equal_recompute(batches: list[list[tuple]], early: bool) -> None:  # type: ignore[type-arg]
    # backfill slices step the views a few rows at a time, as a big slice does
    with tempfile.TemporaryDirectory() as d, patch.object(backfill, "STEP_ROWS", 2):
        db = open_database(Config(data_dir=Path(d), barrier_interval_ms=60_000))
        try:
            s = db.connect("root", "dev")
            s.execute_simple("CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR, v INT)")
            if early:  # views created before the data: purely incremental
                for name, q in VIEWS.items():
                    s.execute_simple(f"CREATE MATERIALIZED VIEW {name} AS {q}")
            for i, batch in enumerate(batches):
                for o in batch:
                    s.execute_simple(_sql(o))
                if not early and i == 0:  # views created over existing data: backfill
                    for name, q in VIEWS.items():
                        s.execute_simple(f"CREATE MATERIALIZED VIEW {name} AS {q}")
                s.execute_simple("FLUSH")
                _check(s, VIEWS)
        finally:
            db.close()
        db = open_database(Config(data_dir=Path(d), barrier_interval_ms=60_000))
        try:
            _check(db.connect("root", "dev"), VIEWS)
        finally:
            db.close()


if __name__ == "__main__":  # pragma: no cover
    pytest.main([__file__, "-q"])
