"""Incremental aggregates over numeric NaN / Infinity / -Infinity equal a recompute.

numeric sum/avg keep NaN and the infinities in counting slots beside the finite sum, so a
view whose NaN or Infinity rows are deleted must come back to exactly the finite answer.
Hypothesis drives random INSERT / UPDATE / DELETE batches with those values (and NULLs)
through the real engine in process; after every FLUSH each view must equal its query run
ad hoc (whose answers tests/slt/sql/numeric_special.slt checks against PostgreSQL), and
again after a restart.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.database import Config, open_database

VIEWS = {
    "v_grouped": "SELECT k, count(v) AS c, sum(v) AS s, avg(v) AS a, min(v) AS mn, "
    "max(v) AS mx, sum(DISTINCT v) AS sd FROM t GROUP BY k",
    "v_global": "SELECT count(v) AS c, sum(v) AS s, avg(v) AS a, min(v) AS mn, max(v) AS mx FROM t",
    "v_over": "SELECT id, sum(v) OVER (PARTITION BY k ORDER BY id) AS rs FROM t",
}

values = st.sampled_from(["'NaN'", "'Infinity'", "'-Infinity'", "NULL", "1.5", "-2", "0", "7.25"])
op = st.one_of(
    st.tuples(st.just("ins"), st.integers(0, 12), st.integers(0, 2), values),
    st.tuples(st.just("del"), st.integers(0, 12)),
    st.tuples(st.just("upd"), st.integers(0, 12), values),
)
batches = st.lists(st.lists(op, min_size=1, max_size=6), min_size=1, max_size=4)


def _sql(o: tuple) -> str:  # type: ignore[type-arg]
    if o[0] == "ins":
        return f"INSERT INTO t VALUES ({o[1]}, {o[2]}, {o[3]})"
    if o[0] == "del":
        return f"DELETE FROM t WHERE id = {o[1]}"
    return f"UPDATE t SET v = {o[2]} WHERE id = {o[1]}"


def _rows(s, sql: str) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(repr(r) for r in s.execute_simple(sql)[0].rows)


def _check(s) -> None:  # type: ignore[no-untyped-def]
    for name, q in VIEWS.items():
        assert _rows(s, f"SELECT * FROM {name}") == _rows(s, q), f"{name} != its recompute"


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=batches)
def test_special_numerics_come_and_go(batches: list[list[tuple]]) -> None:  # type: ignore[type-arg]
    with tempfile.TemporaryDirectory() as d:
        db = open_database(Config(data_dir=Path(d), barrier_interval_ms=60_000))
        try:
            s = db.connect("root", "dev")
            s.execute_simple("CREATE TABLE t (id INT PRIMARY KEY, k INT, v NUMERIC)")
            for name, q in VIEWS.items():
                s.execute_simple(f"CREATE MATERIALIZED VIEW {name} AS {q}")
            for batch in batches:
                for o in batch:
                    s.execute_simple(_sql(o))
                s.execute_simple("FLUSH")
                _check(s)
        finally:
            db.close()
        db = open_database(Config(data_dir=Path(d), barrier_interval_ms=60_000))
        try:
            _check(db.connect("root", "dev"))
        finally:
            db.close()
