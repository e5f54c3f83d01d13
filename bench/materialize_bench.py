"""Table-storage benchmark: MaterializeOp vs ColumnarMaterializeOp, rows/s incl. checkpoint.

Each epoch is `op.step([chunk])`, then `write_dirty` of the op's state tables into a
RocksDB WriteBatch and `store.write(batch, sync=False)`, so the figure covers the
operator, the state encoding and the store. Workloads (schema k BIGINT pk, a INT, b INT):

* insert: `--rows` fresh keys in epochs of `--batch` rows (hidden `_row_id` tables);
* upsert: `--rows` random upserts over `--keys` keys in epochs of `--batch` rows;
* pairs: what a GROUP BY view's storage sees: `--keys` groups inserted, then every epoch
  updates each group as an adjacent U-/U+ pair (`--rows` updates in all; rows/s counts
  updates, i.e. half the input rows).

    python bench/materialize_bench.py [--rows 1000000] [--batch 100000] [--keys 100000]
        [--ops row columnar] [--workloads insert upsert]

Prints process-CPU and wall seconds and rows/s per (operator, workload), plus restart
(state load + operator construction) time.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.chunk import Op, StreamChunk  # noqa: E402
from engine.state.store import StateStore  # noqa: E402
from engine.stream.operators import LocalStateAllocator, MaterializeOp  # noqa: E402
from engine.stream.operators.columnar_materialize import ColumnarMaterializeOp  # noqa: E402
from engine.types import BIGINT, INT, Field, arrow_schema  # noqa: E402

FIELDS = [Field("k", BIGINT), Field("a", INT), Field("b", INT)]
OPS: dict[str, Callable[..., object]] = {"row": MaterializeOp, "columnar": ColumnarMaterializeOp}


def chunks(workload: str, rows: int, batch: int, keys: int) -> list[StreamChunk]:
    rng = np.random.default_rng(7)
    schema = arrow_schema(FIELDS)
    out = []
    if workload == "pairs":
        k = np.arange(keys, dtype=np.int64)
        cur = np.zeros(keys, np.int32)
        out.append(
            StreamChunk.inserts(
                pa.RecordBatch.from_arrays(
                    [pa.array(k), pa.array(cur), pa.array(cur)], schema=schema
                )
            )
        )
        pair_ops = pa.array(np.tile(np.array([Op.UPDATE_DELETE, Op.UPDATE_INSERT], np.int8), keys))
        for _ in range(0, rows, keys):
            vals = np.repeat(cur, 2)
            vals[1::2] += 1
            cur = cur + 1
            data = [pa.array(np.repeat(k, 2)), pa.array(vals), pa.array(vals)]
            out.append(StreamChunk(pair_ops, pa.RecordBatch.from_arrays(data, schema=schema)))
        return out
    for start in range(0, rows, batch):
        n = min(batch, rows - start)
        if workload == "insert":
            k = np.arange(start, start + n, dtype=np.int64) + 1_700_000_000_000_000
        else:
            k = rng.integers(0, keys, n, dtype=np.int64)
        arrays = [
            pa.array(k),
            pa.array(rng.integers(0, 1000, n, dtype=np.int32)),
            pa.array(rng.integers(0, 1000, n, dtype=np.int32)),
        ]
        out.append(StreamChunk.inserts(pa.RecordBatch.from_arrays(arrays, schema=schema)))
    return out


def run(kind: str, workload: str, rows: int, batch: int, keys: int) -> dict[str, float]:
    data = chunks(workload, rows, batch, keys)
    pre = data[:1] if workload == "pairs" else []  # the initial groups are not timed
    data = data[len(pre) :]
    with tempfile.TemporaryDirectory() as d:
        store = StateStore.open(Path(d) / "db")
        try:
            op = OPS[kind](FIELDS, [0], LocalStateAllocator())
            for ch in pre:
                op.step([ch])  # type: ignore[attr-defined]
            c0, w0 = time.process_time(), time.perf_counter()
            for ch in data:
                op.step([ch])  # type: ignore[attr-defined]
                wb = store.new_batch()
                for t in op.state_tables():  # type: ignore[attr-defined]
                    t.write_dirty(wb)
                store.write(wb, sync=False)
            c1, w1 = time.process_time(), time.perf_counter()
            stored = len(op)  # type: ignore[arg-type]
            r0 = time.perf_counter()
            alloc = LocalStateAllocator()
            for t in op.state_tables():  # type: ignore[attr-defined]
                alloc.table(t.name).load(store)
            again = OPS[kind](FIELDS, [0], alloc)
            r1 = time.perf_counter()
            assert len(again) == stored  # type: ignore[arg-type]
            s0 = time.perf_counter()
            snap = again.snapshot()  # type: ignore[attr-defined]
            s1 = time.perf_counter()
            assert snap.num_rows == stored
        finally:
            store.close()
    cpu, wall = c1 - c0, w1 - w0
    return {
        "rows_per_cpu_s": rows / cpu,
        "rows_per_wall_s": rows / wall,
        "cpu_s": cpu,
        "wall_s": wall,
        "stored": stored,
        "restart_s": r1 - r0,
        "snapshot_s": s1 - s0,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--ops", nargs="+", default=["columnar", "row"], choices=sorted(OPS))
    ap.add_argument("--workloads", nargs="+", default=["insert", "upsert", "pairs"])
    args = ap.parse_args()
    for workload in args.workloads:
        for kind in args.ops:
            r = run(kind, workload, args.rows, args.batch, args.keys)
            print(
                f"{kind:9s} {workload:7s} {r['rows_per_cpu_s']:>12,.0f} rows/cpu-s "
                f"{r['rows_per_wall_s']:>12,.0f} rows/wall-s  cpu {r['cpu_s']:.2f}s "
                f"wall {r['wall_s']:.2f}s  stored {r['stored']:,}  "
                f"restart {r['restart_s']:.2f}s  snapshot {r['snapshot_s']:.3f}s",
                flush=True,
            )


if __name__ == "__main__":
    main()
