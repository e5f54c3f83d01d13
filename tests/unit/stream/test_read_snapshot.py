"""Pinned rows of a committed epoch: readable unchanged while later epochs change the state.

`ColumnarMaterializeOp.pin` (over `KeyedSegments.pin`) and the runtime's published
`EpochSnapshot` (`Runtime.committed()`), see engine/stream/read_snapshot.py.
"""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from unit.stream.operators.helpers import make_chunk

from engine.chunk import Op
from engine.database import Config, open_database
from engine.stream.operators import LocalStateAllocator
from engine.stream.operators import keyed_segments as ks
from engine.stream.operators.columnar_materialize import ColumnarMaterializeOp
from engine.types import INT, VARCHAR, Field

F = [Field("id", INT), Field("name", VARCHAR), Field("v", INT)]


def rows(t: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(zip(*[c.to_pylist() for c in t.columns], strict=True))


@pytest.fixture
def tiny_segments(monkeypatch: pytest.MonkeyPatch) -> None:
    """Compaction on every step: pins must survive segments being rewritten and dropped."""
    monkeypatch.setattr(ks, "SMALL_SEGMENT_ROWS", 4)
    monkeypatch.setattr(ks, "MAX_SMALL_SEGMENTS", 1)
    monkeypatch.setattr(ks, "MAX_SEGMENT_ROWS", 8)


def test_pin_is_unchanged_by_later_steps(tiny_segments: None) -> None:
    op = ColumnarMaterializeOp(F, [0], LocalStateAllocator())
    op.step([make_chunk(F, [Op.INSERT] * 20, [(i, f"n{i}", i) for i in range(20)])])
    pin = op.pin()
    before = rows(pin.table())
    assert len(pin) == 20 and op.pin() is pin  # unchanged state: the same pin
    # updates, deletes and inserts, with compaction rewriting the segments each step
    op.step([make_chunk(F, [Op.UPDATE_DELETE, Op.UPDATE_INSERT], [(3, "n3", 3), (3, "x", 33)])])
    op.step([make_chunk(F, [Op.DELETE] * 15, [(i, f"n{i}", i) for i in range(4, 19)])])
    op.step([make_chunk(F, [Op.INSERT] * 5, [(i, "new", i) for i in range(100, 105)])])
    assert op.pin() is not pin
    assert rows(pin.table()) == before
    assert rows(pin.table()) == rows(pa.Table.from_batches(pin.batches(), pin.schema))
    after = rows(op.snapshot())
    assert (3, "x", 33) in after and (5, "n5", 5) not in after and len(after) == 10


def test_pin_read_from_another_thread_while_steps_run() -> None:
    op = ColumnarMaterializeOp(F, [0], LocalStateAllocator())
    op.step([make_chunk(F, [Op.INSERT] * 500, [(i, "a", i) for i in range(500)])])
    pin = op.pin()
    want = rows(pin.table())
    errors: list[int] = []
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            got = pa.Table.from_batches(pin.batches(), pin.schema)  # rebuilt each time
            if got.num_rows != 500 or sum(got.column("v").to_pylist()) != sum(range(500)):
                errors.append(got.num_rows)

    th = threading.Thread(target=reader)
    th.start()
    try:
        for e in range(40):
            ids = list(range(e, 500, 3))
            op.step([make_chunk(F, [Op.DELETE] * len(ids), [(i, "a", i) for i in ids])])
            op.step([make_chunk(F, [Op.INSERT] * len(ids), [(i, "a", i) for i in ids])])
    finally:
        stop.set()
        th.join()
    assert errors == []
    assert rows(pin.table()) == want


@contextmanager
def database() -> Iterator[Any]:
    with tempfile.TemporaryDirectory() as d:
        db = open_database(Config(data_dir=Path(d), barrier_interval_ms=60_000))
        try:
            yield db
        finally:
            db.close()


def test_committed_epoch_is_published_at_each_commit() -> None:
    with database() as db:
        s = db.connect("root", "dev")
        s.execute_simple("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
        s.execute_simple("CREATE MATERIALIZED VIEW m AS SELECT count(*) AS n, sum(v) AS s FROM t")
        rt = db.runtime
        t_id = db.catalog.find("t", None).id
        m_id = db.catalog.find("m", None).id
        s.execute_simple("INSERT INTO t VALUES (1, 10), (2, 20)")
        s.execute_simple("FLUSH")
        e1 = rt.committed()
        assert e1.epoch == rt.epoch
        assert rows(e1.table(t_id)) == [(1, 10), (2, 20)]
        assert rows(e1.table(m_id)) == [(2, 30)]
        # written and queued but not yet through a barrier: not in any committed epoch
        s.execute_simple("INSERT INTO t VALUES (3, 30)")
        assert rt.committed() is e1
        s.execute_simple("UPDATE t SET v = 11 WHERE id = 1")
        s.execute_simple("FLUSH")
        e2 = rt.committed()
        assert e2.epoch > e1.epoch
        assert rows(e2.table(t_id)) == [(1, 11), (2, 20), (3, 30)]
        assert rows(e2.table(m_id)) == [(3, 61)]
        assert rows(e1.table(t_id)) == [(1, 10), (2, 20)]  # the old epoch is still readable
        assert rt.row_count(t_id) == 3
        assert s.execute_simple("SELECT reltuples::int FROM pg_class WHERE relname = 't'")[
            0
        ].rows == [(3,)]


def test_committed_epoch_after_restart_is_the_checkpoint() -> None:
    with tempfile.TemporaryDirectory() as d:
        db = open_database(Config(data_dir=Path(d), barrier_interval_ms=60_000))
        try:
            s = db.connect("root", "dev")
            s.execute_simple("CREATE TABLE t (id INT PRIMARY KEY)")
            s.execute_simple("INSERT INTO t VALUES (1), (2)")
            s.execute_simple("FLUSH")
        finally:
            db.close()
        db = open_database(Config(data_dir=Path(d), barrier_interval_ms=60_000))
        try:
            snap = db.runtime.committed()
            assert rows(snap.table(db.catalog.find("t", None).id)) == [(1,), (2,)]
        finally:
            db.close()
