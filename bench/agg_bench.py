"""Quick throughput measurement of HashAggOp (and MaterializeOp) on one core.

Usage: .venv/bin/python bench/agg_bench.py [rows_per_step] [steps] [--only minmax] [--disk]

Each case steps the operator with random epochs (int32 group key, int32 value) and
reports input events per CPU-second of `step` time (the first epoch is a warm-up; the
defaults time 5 x 200,000 = 1,000,000 events), including the in-memory state updates
(StateTable puts/deletes) but not RocksDB writes. `--only minmax` runs just the
min/max case (count+sum+min+max over 100,000 groups). The "mixed" cases retract earlier
rows (one delete per three inserts) so min/max multisets see removals.

`--disk` runs the aggregation cases as a server does: the group table is a RocksDB-first
disk table (a temporary store, a 64 MB operator cache as `--state-cache-mb 256` gives)
and every step ends with a checkpoint (`write_dirty` + one synced batch write), timed
with the step; the append-only case (`count+sum+max`, max without a multiset) is added.
"""

from __future__ import annotations

import gc
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.chunk import Op, StreamChunk  # noqa: E402
from engine.state.budget import StateBudget  # noqa: E402
from engine.state.disk_table import DiskTables, HotCache  # noqa: E402
from engine.state.store import StateStore  # noqa: E402
from engine.state.table import StateTable  # noqa: E402
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
APPEND_MAX = [*SIMPLE, AggCall("max", 1, INT)]


class DiskAllocator:
    """Disk tables on one temporary store, as the runtime hands them out."""

    def __init__(self, store: StateStore, budget: StateBudget) -> None:
        self.store = store
        self.tables = DiskTables(store, HotCache(budget.operator_cache_bytes))
        self._next = 1

    def table(self, name: str, *, disk: bool = False, dist: bool = True) -> Any:
        self._next += 1
        if disk:
            return self.tables.table(self._next, name, 1 if dist else 0)
        return StateTable(self._next, name)


def commit(op: Any, store: StateStore | None) -> None:
    if store is None:
        return
    batch = store.new_batch()
    for t in op.state_tables():
        t.write_dirty(batch)
    store.write(batch, sync=True)


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
        batch = pa.RecordBatch.from_arrays(
            [pa.array(k), pa.array(v), pa.array(ids)], names=["k", "v", "id"]
        )
        out.append(StreamChunk(pa.array(ops), batch))
    return out


def run(
    name: str,
    op: HashAggOp | MaterializeOp,
    chunks: list[StreamChunk],
    store: StateStore | None = None,
) -> None:
    op.step([chunks[0]])  # warm-up (first-step costs such as polars plan setup)
    commit(op, store)
    gc.freeze()
    rows = 0
    cpu = 0.0
    for c in chunks[1:]:
        t0 = time.process_time()
        op.step([c])
        commit(op, store)
        gc.freeze()  # as the runtime does after every barrier
        cpu += time.process_time() - t0
        rows += len(c)
    dirty = sum(t.dirty_count for t in op.state_tables())
    print(
        f"{name:<44} {rows / cpu:>12,.0f} events/CPU-s  ({rows:,} events, {cpu:.2f} CPU-s, "
        f"dirty keys {dirty})",
        flush=True,
    )


def main() -> None:
    args = [a for a in sys.argv[1:] if a.isdigit()]
    n = int(args[0]) if args else 200_000
    steps = int(args[1]) if len(args) > 1 else 6
    if "--disk" in sys.argv:
        disk_cases(n, steps)
        return
    if "--only" in sys.argv and "minmax" in sys.argv:
        for mixed in (False, True):
            chunks = epochs(n, steps, 100_000, mixed)
            op = HashAggOp(F, [0], MINMAX, LocalStateAllocator(), ["k", "a0", "a1", "a2", "a3"])
            run(
                f"agg count+sum+min+max, 100000 groups, {'mixed' if mixed else 'inserts'}",
                op,
                chunks,
            )
        return
    for groups in (10, 100_000):
        for mixed in (False, True):
            chunks = epochs(n, steps, groups, mixed)
            tag = f"{groups} groups, {'mixed' if mixed else 'inserts'}"
            for label, aggs in (
                ("count+sum", SIMPLE),
                ("count+sum+avg+count(v)", RICH),
                ("count+sum+min+max", MINMAX),
            ):
                op = HashAggOp(
                    F, [0], aggs, LocalStateAllocator(), ["k"] + [f"a{i}" for i in range(len(aggs))]
                )
                run(f"agg {label}, {tag}", op, chunks)
    chunks = epochs(n, steps, 1 << 30, False)
    run("materialize, inserts (unique pk)", MaterializeOp(F, [2], LocalStateAllocator()), chunks)


def disk_cases(n: int, steps: int) -> None:
    budget = StateBudget.from_mb(256)
    for groups in (10, 100_000):
        for mixed in (False, True):
            chunks = epochs(n, steps, groups, mixed)
            tag = f"{groups} groups, {'mixed' if mixed else 'inserts'}, disk"
            cases: list[tuple[str, list[AggCall], list[int]]] = [
                ("count+sum", SIMPLE, []),
                ("count+sum+avg+count(v)", RICH, []),
                ("count+sum+min+max", MINMAX, []),
            ]
            if not mixed:
                cases.append(("count+sum+max (append-only)", APPEND_MAX, [2]))
            for label, aggs, plain in cases:
                with tempfile.TemporaryDirectory() as d, StateStore.open(Path(d), budget) as st:
                    names = ["k"] + [f"a{i}" for i in range(len(aggs))]
                    op = HashAggOp(
                        F, [0], aggs, DiskAllocator(st, budget), names, append_only_extremes=plain
                    )
                    run(f"agg {label}, {tag}", op, chunks, st)


if __name__ == "__main__":
    main()
