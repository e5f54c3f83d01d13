"""Aggregations over append-only inputs keep min/max without a multiset.

The planner marks min/max over APPEND ONLY tables and sources (through filters and
projections) as append-only extremes: the operator keeps one value per group in its
group row, and the plan declares no `minmax_<i>` table. Over a table that can retract,
the multiset stays. Both must answer as the query does, through restarts.
"""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

from engine.database import Config, SwellDatabase

VIEW = (
    "SELECT k, count(*) AS n, min(v) AS lo, max(v) AS hi, max(s) AS ms, min(d) AS md, "
    "min(f) AS mf FROM {t} WHERE v > -100 GROUP BY k"
)


def _open(d: Path) -> SwellDatabase:
    return SwellDatabase(Config(data_dir=d, barrier_interval_ms=60_000, state_cache_mb=32))


def _rows(s: Any, q: str) -> list[tuple[Any, ...]]:
    return list(s.execute_simple(q)[-1].rows)


def _internal(s: Any, view: str) -> list[str]:
    rows = _rows(s, f"SELECT name FROM rw_catalog.rw_internal_tables WHERE job_name = '{view}'")
    return sorted(r[0].split(".", 1)[1] for r in rows)


def test_min_max_over_an_append_only_table_keep_no_multiset(tmp_path: Path) -> None:
    d = tmp_path / "data"
    db = _open(d)
    try:
        s = db.connect("root", "dev")
        s.execute_simple(
            "CREATE TABLE a (k INT, v INT, s VARCHAR, d NUMERIC, f DOUBLE) APPEND ONLY"
        )
        s.execute_simple("CREATE TABLE r (k INT, v INT, s VARCHAR, d NUMERIC, f DOUBLE)")
        for t in ("a", "r"):
            s.execute_simple(f"CREATE MATERIALIZED VIEW v_{t} AS {VIEW.format(t=t)}")
        # min(f) over a float keeps its multiset (NaN order); the others need none
        assert _internal(s, "v_a") == ["mat.segments", "n2.groups", "n2.minmax_5"]
        assert sum("minmax" in n for n in _internal(s, "v_r")) >= 4  # a multiset per argument
        batches = [
            "(1, 5, 'b', 1.5, 0.5), (2, 7, 'z', 2.25, 1.0), (1, 3, 'a', 9.75, -1.0)",
            "(1, 9, 'c', 0.5, 2.0), (3, NULL, NULL, NULL, NULL), (2, -200, 'zz', -1, 5.0)",
            "(3, 4, 'q', 3, 3.0), (1, 1, 'aa', 1, -2.0)",
        ]
        for i, b in enumerate(batches):
            for t in ("a", "r"):
                s.execute_simple(f"INSERT INTO {t} VALUES {b}")
            s.execute_simple("FLUSH")
            want = _rows(s, VIEW.format(t="a") + " ORDER BY k")
            assert _rows(s, "SELECT * FROM v_a ORDER BY k") == want
            assert _rows(s, "SELECT * FROM v_r ORDER BY k") == want
            if i == 1:  # a restart in the middle: the extremes come back from RocksDB
                db.close()
                db = _open(d)
                s = db.connect("root", "dev")
        assert _rows(s, "SELECT k, lo, hi, ms, md FROM v_a ORDER BY k") == [
            (1, 1, 9, "c", Decimal("0.5")),
            (2, 7, 7, "z", Decimal("2.25")),
            (3, 4, 4, "q", Decimal("3")),
        ]
        s.execute_simple("DELETE FROM r WHERE v = 9")  # the retractable one recomputes
        s.execute_simple("FLUSH")
        assert _rows(s, "SELECT k, hi FROM v_r ORDER BY k") == [(1, 5), (2, 7), (3, 4)]
    finally:
        db.close()
