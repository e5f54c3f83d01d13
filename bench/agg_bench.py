"""Quick throughput measurement of HashAggOp (and MaterializeOp) on one core.

Usage: .venv/bin/python bench/agg_bench.py [rows_per_step] [steps]

Each case steps the operator with random epochs (int32 group key, int32 value) and
reports input rows per second of `step` time, including the in-memory state updates
(StateTable puts/deletes) but not RocksDB writes. The "mixed" cases retract earlier
rows (one delete per three inserts) so min/max multisets see removals.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.chunk import Op, StreamChunk  # noqa: E402
from engine.stream.operators import (  # noqa: E402
    AggCall,
    HashAggOp,
    LocalStateAllocator,
    MaterializeOp,
)
from engine.types import BIGINT, INT, NUMERIC, Field  # noqa: E402

F = [Field("k", INT), Field("v", INT), Field("id", BIGINT)]
SIMPLE = [AggCall("count_star", None, BIGINT), AggCall("sum", 1, BIGINT)]
RICH = [*SIMPLE, AggCall("avg", 1, NUMERIC), AggCall("count", 1, BIGINT)]
MINMAX = [*SIMPLE, AggCall("min", 1, INT), AggCall("max", 1, INT)]


def epochs(n: int, steps: int, groups: int, mixed: bool, seed: int = 7) -> list[StreamChunk]:
    rng = np.random.default_rng(seed)
    out = []
    live_k: list[np.ndarray] = []
    live_v: list[np.ndarray] = []
    next_id = 0
    for _ in range(steps):
        n_ins = n * 3 // 4 if mixed else n
        k = rng.integers(0, groups, n_ins, dtype=np.int32)
        v = rng.integers(-1000, 1000, n_ins, dtype=np.int32)
        ids = np.arange(next_id, next_id + n_ins, dtype=np.int64)
        next_id += n_ins
        ops = np.full(n_ins, Op.INSERT, dtype=np.int8)
        if mixed and live_k:
            n_del = n - n_ins
            dk, dv = live_k[-1][:n_del], live_v[-1][:n_del]
            k = np.concatenate([k, dk])
            v = np.concatenate([v, dv])
            ids = np.concatenate([ids, np.zeros(len(dk), np.int64)])
            ops = np.concatenate([ops, np.full(len(dk), Op.DELETE, dtype=np.int8)])
            live_k[-1], live_v[-1] = live_k[-1][n_del:], live_v[-1][n_del:]
        live_k.append(k[:n_ins])
        live_v.append(v[:n_ins])
        batch = pa.RecordBatch.from_arrays([pa.array(k), pa.array(v), pa.array(ids)],
                                           names=["k", "v", "id"])
        out.append(StreamChunk(pa.array(ops), batch))
    return out


def run(name: str, op: HashAggOp | MaterializeOp, chunks: list[StreamChunk]) -> None:
    op.step([chunks[0]])  # warm-up (first-step costs such as polars plan setup)
    rows = 0
    t0 = time.perf_counter()
    for c in chunks[1:]:
        op.step([c])
        rows += len(c)
    dt = time.perf_counter() - t0
    dirty = sum(t.dirty_count for t in op.state_tables())
    print(f"{name:<44} {rows / dt:>12,.0f} rows/s  ({rows} rows, {dt:.2f}s, dirty keys {dirty})")


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    for groups in (10, 100_000):
        for mixed in (False, True):
            chunks = epochs(n, steps, groups, mixed)
            tag = f"{groups} groups, {'mixed' if mixed else 'inserts'}"
            for label, aggs in (("count+sum", SIMPLE), ("count+sum+avg+count(v)", RICH),
                                ("count+sum+min+max", MINMAX)):
                op = HashAggOp(F, [0], aggs, LocalStateAllocator(), ["k"] + [
                    f"a{i}" for i in range(len(aggs))])
                run(f"agg {label}, {tag}", op, chunks)
    chunks = epochs(n, steps, 1 << 30, False)
    run("materialize, inserts (unique pk)", MaterializeOp(F, [2], LocalStateAllocator()), chunks)


if __name__ == "__main__":
    main()
