"""Barrier CPU accounting (engine/stream/cpu.py): every phase and every stepped view
operator class is charged, and `reset` starts over."""

from __future__ import annotations

from pathlib import Path

from engine.database import Config, open_database
from engine.stream.cpu import PHASES, StreamCpu


def test_lap_charges_phase_and_returns_new_start() -> None:
    cpu = StreamCpu()
    t0 = cpu.now()
    sum(range(100_000))
    t1 = cpu.lap("views", t0)
    assert t1 >= t0
    assert cpu.phases["views"] == t1 - t0
    cpu.add_operator("HashAggOp", 0.5)
    cpu.add_operator("HashAggOp", 0.25)
    assert cpu.snapshot()["operators"] == {"HashAggOp": 0.75}
    cpu.reset()
    assert cpu.snapshot() == {"phases": dict.fromkeys(PHASES, 0.0), "operators": {}}


def test_runtime_charges_barrier_phases_and_view_operators(tmp_path: Path) -> None:
    db = open_database(Config(data_dir=tmp_path / "d", barrier_interval_ms=3_600_000))
    try:
        s = db.connect("root", "dev")
        s.execute_simple("CREATE TABLE t (k INT, v INT)")
        s.execute_simple("CREATE MATERIALIZED VIEW mv AS SELECT k, sum(v) AS s FROM t GROUP BY k")
        rt = db.runtime
        rt.cpu.reset()
        s.execute_simple("INSERT INTO t VALUES (1, 2), (1, 3), (2, 4)")
        s.execute_simple("FLUSH")
        snap = rt.stats()["cpu"]
        assert set(snap["phases"]) == set(PHASES)
        assert {"HashAggOp", "ColumnarMaterializeOp"} <= set(snap["operators"])
        assert all(v >= 0 for v in [*snap["phases"].values(), *snap["operators"].values()])
        assert sum(snap["operators"].values()) <= snap["phases"]["views"] + 1e-6
        # nothing queued: no view operator runs, nothing more is charged to them
        before = dict(snap["operators"])
        s.execute_simple("FLUSH")
        assert rt.stats()["cpu"]["operators"] == before
        assert s.execute_simple("SELECT k, s FROM mv ORDER BY k")[0].rows == [(1, 5), (2, 4)]
    finally:
        db.close()
