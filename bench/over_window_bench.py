"""Rough throughput of OverWindowOp and CollectAggOp (rows per CPU-second), operator only.

Workloads (`--events` events split into epochs of `--epoch` events, partition key uniform
over `--parts` values; a fraction `--updates` of the events update the amount of an
earlier row, i.e. a delete and an insert of the same id):

1. `over-window`: `lag(amount) OVER w, sum(amount) OVER w` with `w AS (PARTITION BY
   user_id ORDER BY id)`; each epoch re-evaluates the partitions it touched;
2. `string-agg`: `string_agg(CAST(id AS VARCHAR), ',' ORDER BY id) GROUP BY user_id`.

Both recompute touched partitions/groups whole (their previous output is kept, not
recomputed), so the cost per event grows with the partition size (events / parts) and
the epoch size; the figures use the defaults. State tables are not written to a store.
Usage: .venv/bin/python bench/over_window_bench.py [--events N] [--epoch N] [--parts N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

from engine.chunk import Op, StreamChunk
from engine.plan.logical import AggSpec, PlanNode
from engine.plan.logical_window import WindowCall, WindowFrame
from engine.stream.operators import LocalStateAllocator
from engine.stream.operators.collect_agg import CollectAggOp
from engine.stream.operators.over_window import OverWindowOp
from engine.types import DOUBLE, INT, VARCHAR, Field

FACT = [Field("id", INT), Field("user_id", INT), Field("amount", DOUBLE)]


def chunks(events: int, epoch: int, parts: int, updates: float) -> list[StreamChunk]:
    rng = np.random.default_rng(1)
    out = []
    user = np.zeros(0, np.int32)
    amount = np.zeros(0)
    for start in range(0, events, epoch):
        n = min(epoch, events - start)
        nu = int(n * updates) if len(user) else 0
        ni = n - nu
        first = len(user)
        upd = np.unique(rng.integers(0, first, nu)) if nu else np.zeros(0, np.int64)
        new_ids = np.arange(first, first + ni)
        user = np.r_[user, rng.integers(0, parts, ni).astype(np.int32)]
        amount = np.r_[amount, rng.random(ni) * 100]
        old_amount = amount[upd].copy()
        amount[upd] = rng.random(len(upd)) * 100
        ids = np.r_[upd, upd, new_ids]
        ops = np.r_[
            np.full(len(upd), Op.DELETE), np.full(len(upd), Op.INSERT), np.full(ni, Op.INSERT)
        ].astype(np.int8)
        b = pa.RecordBatch.from_arrays(
            [
                pa.array(ids, pa.int32()),
                pa.array(user[ids], pa.int32()),
                pa.array(np.r_[old_amount, amount[upd], amount[new_ids]]),
            ],
            names=[f.name for f in FACT],
        )
        out.append(StreamChunk(pa.array(ops), b))
    return out


def events(c: StreamChunk) -> int:
    """An update (delete + insert) is one event."""
    return int((np.asarray(c.ops) != Op.DELETE).sum())


def run(name: str, op: object, cs: list[StreamChunk]) -> None:
    t0 = time.process_time()
    for c in cs:
        op.step([c])  # type: ignore[attr-defined]
    dt = time.process_time() - t0
    n = sum(events(c) for c in cs)
    print(f"{name:12s} {n:>9,d} events  {dt:6.2f} CPU-s  {n / dt:>10,.0f} events/CPU-s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--epoch", type=int, default=10_000)
    ap.add_argument("--parts", type=int, default=10_000)
    ap.add_argument("--updates", type=float, default=0.3)
    a = ap.parse_args()
    cs = chunks(a.events, a.epoch, a.parts, a.updates)
    rows = WindowFrame("rows", ("unbounded_preceding", 0), ("current_row", 0))
    calls = [WindowCall("lag", (2,), DOUBLE), WindowCall("sum", (2,), DOUBLE, rows)]
    op = OverWindowOp(
        FACT,
        [Field("l", DOUBLE), Field("s", DOUBLE)],
        [1],
        [(0, False, False)],
        calls,
        [0],
        LocalStateAllocator(),
        [0],
    )
    run("over-window", op, cs)
    pre = FACT + [Field("ids", VARCHAR)]
    spec = AggSpec("string_agg", 3, VARCHAR, separator=",", order=((0, False, False),))
    node = PlanNode([Field("user_id", INT), Field("s", VARCHAR)], [0])
    node.group_keys = [1]  # type: ignore[attr-defined]
    node.aggs = [spec]  # type: ignore[attr-defined]
    agg = CollectAggOp(pre, node, LocalStateAllocator())
    cs2 = []
    for c in cs:
        d = c.data
        ids = pa.compute.cast(d.column(0), pa.string())
        cs2.append(
            StreamChunk(
                c.ops, pa.RecordBatch.from_arrays([*d.columns, ids], names=[f.name for f in pre])
            )
        )
    run("string-agg", agg, cs2)


if __name__ == "__main__":
    main()
