"""RANGE frames with offsets and GROUPS frames: views and ad-hoc queries equal DuckDB.

Views over the differential harness's `t (id, k, v INT)` (NULL keys, ties, deletes); ad-hoc
queries over random float, numeric, date and timestamp columns with PostgreSQL-typed
offsets (DuckDB follows PostgreSQL's frame semantics, including NULL peers).
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path
from typing import Any

import duckdb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property.differential import batches, norm, run_differential, select

from engine.database import Config, open_database

VIEWS = {
    "f_range": "SELECT id, sum(v) OVER (PARTITION BY k ORDER BY v NULLS FIRST RANGE BETWEEN 2 "
    "PRECEDING AND 1 FOLLOWING) AS s, count(*) OVER (PARTITION BY k ORDER BY v DESC NULLS LAST "
    "RANGE BETWEEN 1 FOLLOWING AND 3 FOLLOWING) AS c, min(v) OVER (ORDER BY v RANGE BETWEEN "
    "CURRENT ROW AND 2 FOLLOWING) AS mn FROM t",
    "f_groups": "SELECT id, sum(v) OVER (PARTITION BY k ORDER BY v NULLS LAST GROUPS BETWEEN 1 "
    "PRECEDING AND 1 FOLLOWING) AS s, max(id) OVER (ORDER BY v NULLS FIRST GROUPS BETWEEN 2 "
    "PRECEDING AND 1 PRECEDING) AS m, count(v) OVER (PARTITION BY k ORDER BY v GROUPS BETWEEN "
    "CURRENT ROW AND UNBOUNDED FOLLOWING) AS c FROM t",
}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=batches, early=st.booleans())
def test_frame_views_equal_recompute(ops: list[list[tuple[Any, ...]]], early: bool) -> None:
    run_differential(VIEWS, ops, early)


COLS = "id INT, p INT, f DOUBLE PRECISION, n NUMERIC(8,2), d DATE, ts TIMESTAMP"
QUERIES = [
    "SELECT id, sum(f) OVER (PARTITION BY p ORDER BY f RANGE BETWEEN 1.5 PRECEDING AND "
    "0.5 FOLLOWING) FROM r",
    "SELECT id, count(*) OVER (PARTITION BY p ORDER BY n DESC RANGE BETWEEN 1.25 PRECEDING "
    "AND CURRENT ROW) FROM r",
    "SELECT id, count(*) OVER (ORDER BY d RANGE BETWEEN INTERVAL '2 days' PRECEDING AND "
    "INTERVAL '1 day' FOLLOWING) FROM r",
    "SELECT id, max(id) OVER (PARTITION BY p ORDER BY ts NULLS FIRST RANGE BETWEEN "
    "INTERVAL '1 hour' PRECEDING AND CURRENT ROW) FROM r",
    "SELECT id, first_value(id) OVER (PARTITION BY p ORDER BY ts, id GROUPS BETWEEN 2 "
    "PRECEDING AND 1 FOLLOWING) FROM r",
]


def _rows(seed: int) -> list[tuple[Any, ...]]:
    rnd = random.Random(seed)

    def maybe(v: Any) -> Any:
        return None if rnd.random() < 0.15 else v

    out = []
    for i in range(40):
        ts = f"2024-01-0{rnd.randint(1, 3)} {rnd.randint(10, 12)}:{rnd.choice(['00', '30'])}:00"
        out.append(
            (
                i,
                rnd.randint(0, 2),
                maybe(rnd.choice([0.5, 1.0, 1.5, 2.0, 3.75, -1.0])),
                maybe(rnd.choice(["1.00", "2.25", "2.50", "3.75", "-0.50"])),
                maybe(f"2024-01-0{rnd.randint(1, 6)}"),
                maybe(ts),
            )
        )
    return out


def _lit(v: Any, typ: str) -> str:
    if v is None:
        return "NULL"
    return f"CAST('{v}' AS {typ})"


def test_typed_range_offsets_match_duckdb() -> None:
    types = ["INT", "INT", "DOUBLE PRECISION", "NUMERIC(8,2)", "DATE", "TIMESTAMP"]
    with tempfile.TemporaryDirectory() as d:
        db = open_database(Config(data_dir=Path(d), barrier_interval_ms=60_000))
        try:
            s = db.connect("root", "dev")
            for seed in range(3):
                rows = _rows(seed)
                s.execute_simple("DROP TABLE IF EXISTS r")
                s.execute_simple(f"CREATE TABLE r ({COLS})")
                values = ", ".join(
                    "(" + ", ".join(_lit(v, t) for v, t in zip(r, types, strict=True)) + ")"
                    for r in rows
                )
                s.execute_simple(f"INSERT INTO r VALUES {values}")
                s.execute_simple("FLUSH")
                con = duckdb.connect()
                con.execute(f"CREATE TABLE r ({COLS.replace('DOUBLE PRECISION', 'DOUBLE')})")
                con.execute(f"INSERT INTO r VALUES {values}")
                for q in QUERIES:
                    assert norm(select(s, q)) == norm(con.execute(q).fetchall()), (seed, q)
        finally:
            db.close()
