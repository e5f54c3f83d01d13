"""A database at parallelism 2: views with actor nodes equal their queries, and a worker
killed with SIGKILL fails one epoch that the next one applies (a restart of the server
with parallel views: tests/e2e/test_parallel.py)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from engine.database import Config, SwellDatabase
from engine.errors import EpochFailed
from engine.stream.parallel import flow

VIEWS = {
    "v_agg": "SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k",
    "v_join": "SELECT t.id, t.k, u.w FROM t JOIN u ON t.k = u.k",
    "v_left": "SELECT u.k, t.id FROM u LEFT JOIN t ON t.k = u.k",
    "v_top": "SELECT k, id, v FROM (SELECT k, id, v, row_number() OVER "
    "(PARTITION BY k ORDER BY v DESC, id) AS r FROM t) x WHERE r <= 2",
    "v_win": "SELECT id, k, sum(v) OVER (PARTITION BY k ORDER BY id) AS run FROM t",
}


def rows(s: Any, q: str) -> list[tuple[Any, ...]]:
    r = s.execute_simple(q)
    r = r[-1] if isinstance(r, list) else r
    return sorted(tuple(x) for x in r.rows)


def check(s: Any) -> None:
    for name, q in VIEWS.items():
        assert rows(s, f"SELECT * FROM {name}") == rows(s, q), name
    # the sink's aggregation runs as actors too
    assert rows(s, "SELECT * FROM totals") == rows(s, "SELECT k, sum(v) FROM t GROUP BY k")


def open_db(path: Path) -> SwellDatabase:
    return SwellDatabase(Config(data_dir=path, barrier_interval_ms=60_000, parallelism=2))


def test_parallel_views_and_lost_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(flow, "SHIP_BATCH", 7)  # recovery ships state in many bodies
    db = open_db(tmp_path)
    try:
        s = db.connect("root", "dev")
        s.execute_simple("CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR, v INT)")
        s.execute_simple("CREATE TABLE u (k VARCHAR PRIMARY KEY, w INT)")
        s.execute_simple("INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 2), (3, 'a', 3)")
        s.execute_simple("INSERT INTO u VALUES ('a', 10), ('b', 20), ('c', 30)")
        s.execute_simple("FLUSH")
        for name, q in VIEWS.items():  # over existing rows: the backfill steps the actors
            s.execute_simple(f"CREATE MATERIALIZED VIEW {name} AS {q}")
        s.execute_simple("CREATE TABLE totals (k VARCHAR PRIMARY KEY, total BIGINT)")
        s.execute_simple(
            "CREATE SINK into_totals INTO totals AS SELECT k, sum(v) AS total FROM t GROUP BY k"
        )
        sink = db.catalog.find("into_totals")
        assert sink is not None and sink.extra["parallel_nodes"]
        s.execute_simple("FLUSH")
        agg = db.catalog.find("v_agg")
        assert agg is not None and agg.extra["parallelism"] == 2 and agg.extra["parallel_nodes"]
        check(s)
        s.execute_simple(
            "INSERT INTO t SELECT g, 'k' || (g % 7)::varchar, g FROM generate_series(4, 300) g"
        )
        s.execute_simple("UPDATE t SET v = v + 1 WHERE id < 20")
        s.execute_simple("DELETE FROM t WHERE id % 5 = 0")
        s.execute_simple("INSERT INTO u VALUES ('k1', 1), ('k2', 2)")
        s.execute_simple("FLUSH")
        check(s)
        s.execute_simple("INSERT INTO t VALUES (1000, 'a', 5), (1001, 'k3', 7)")
        s.execute_simple("FLUSH")
        check(s)
        pool = db.runtime.pool
        assert pool is not None
        os.kill(int(pool.workers[1].info()["pid"]), signal.SIGKILL)  # type: ignore[call-overload]
        s.execute_simple("INSERT INTO t VALUES (1002, 'a', 1), (1003, 'zz', 2)")
        with pytest.raises(EpochFailed, match="worker 1 .* was lost: killed by signal 9"):
            s.execute_simple("FLUSH")
        check(s)  # the last committed epoch, consistent
        s.execute_simple("FLUSH")  # the respawned worker applies the epoch exactly once
        check(s)
        assert rows(s, "SELECT n FROM v_agg WHERE k = 'zz'") == [(1,)]
        kinds = [r[0] for r in rows(s, "SELECT event_type FROM rw_catalog.rw_event_logs")]
        assert "WORKER_LOST" in kinds and "RECOVERY" in kinds
        s.execute_simple("DROP MATERIALIZED VIEW v_join")
        s.execute_simple("SET streaming_parallelism = 1")
        s.execute_simple("CREATE MATERIALIZED VIEW v_one AS SELECT k, count(*) FROM t GROUP BY k")
        one = db.catalog.find("v_one")
        assert one is not None and one.extra["parallelism"] == 1
        assert "parallel_nodes" not in one.extra
    finally:
        db.close()
