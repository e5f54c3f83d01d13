"""A table's queued chunks are stepped per run of insert-only chunks (`merge_inserts`):
the rows a table holds and the change it emits are those of stepping them one by one."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from engine.chunk import Op, StreamChunk
from engine.database import Config, SwellDatabase
from engine.stream.graph import MERGE_MAX_ROWS, merge_inserts


def _chunk(ids: list[int], op: Op = Op.INSERT) -> StreamChunk:
    data = pa.RecordBatch.from_arrays([pa.array(ids, pa.int64())], names=["id"])
    return StreamChunk(pa.array(np.full(len(ids), op, dtype=np.int8)), data)


def test_runs_of_inserts_merge_in_order_and_other_chunks_stay() -> None:
    chunks = [_chunk([1]), _chunk([2, 3]), _chunk([2], Op.DELETE), _chunk([4]), _chunk([5])]
    out = merge_inserts(chunks)
    assert [c.data.column(0).to_pylist() for c in out] == [[1, 2, 3], [2], [4, 5]]
    assert [c.ops.to_pylist() for c in out] == [[Op.INSERT] * 3, [Op.DELETE], [Op.INSERT] * 2]
    assert merge_inserts([chunks[0]]) == [chunks[0]]
    mixed = StreamChunk(
        pa.array([Op.UPDATE_DELETE, Op.UPDATE_INSERT], pa.int8()), _chunk([7, 7]).data
    )
    out = merge_inserts([_chunk([6]), mixed])
    assert len(out) == 2 and out[1] is mixed
    assert out[0].data.column(0).to_pylist() == [6]


def test_runs_stop_at_the_row_cap_and_a_big_chunk_stands_alone() -> None:
    half = MERGE_MAX_ROWS // 2
    big = _chunk(list(range(MERGE_MAX_ROWS + 1)))
    chunks = [_chunk([0] * half), _chunk([1] * half), _chunk([2]), big, _chunk([3])]
    out = merge_inserts(chunks)
    assert [len(c) for c in out] == [2 * half, 1, MERGE_MAX_ROWS + 1, 1]
    assert out[2] is big
    assert np.concatenate([c.data.column(0).to_numpy() for c in out]).tolist() == [
        v for c in chunks for v in c.data.column(0).to_pylist()
    ]
    with_other_name = StreamChunk(_chunk([9]).ops, pa.RecordBatch.from_arrays(
        [pa.array([9], pa.int64())], names=["other"]))  # fmt: skip
    assert len(merge_inserts([_chunk([8]), with_other_name])) == 2  # schemas differ


def test_a_table_holds_the_same_rows_either_way(tmp_path: Path) -> None:
    db = SwellDatabase(Config(data_dir=tmp_path / "d", barrier_interval_ms=60_000))
    try:
        s = db.connect("root", "dev")
        s.execute_simple("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
        s.execute_simple("CREATE MATERIALIZED VIEW m AS SELECT sum(v) AS s, count(*) AS n FROM t")
        for sql in [
            "INSERT INTO t VALUES (1, 10)",
            "INSERT INTO t VALUES (2, 20)",
            "INSERT INTO t VALUES (1, 11)",  # overwrites k = 1 (later chunk wins)
            "DELETE FROM t WHERE k = 2",
            "INSERT INTO t VALUES (2, 22), (3, 30)",
            "INSERT INTO t VALUES (3, 33)",
        ]:
            s.execute_simple(sql)
        s.execute_simple("FLUSH")
        rows = s.execute_simple("SELECT k, v FROM t ORDER BY k")[0].rows
        assert [tuple(r) for r in rows] == [(1, 11), (2, 22), (3, 33)]
        assert [tuple(r) for r in s.execute_simple("SELECT s, n FROM m")[0].rows] == [(66, 3)]
    finally:
        db.close()
