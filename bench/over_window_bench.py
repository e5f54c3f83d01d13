"""Rough throughput of OverWindowOp and CollectAggOp (rows per CPU-second), operator only.

Workloads (`--events` insert events split into epochs of `--epoch` rows, partition key
uniform over `--parts` values):

1. `over-window`: `lag(amount) OVER w, sum(amount) OVER w` with `w AS (PARTITION BY
   user_id ORDER BY id)`; each epoch re-evaluates the partitions it touched;
2. `string-agg`: `string_agg(CAST(id AS VARCHAR), ',' ORDER BY id) GROUP BY user_id`.

Both recompute touched partitions/groups whole, so the cost per event grows with the
partition size (events / parts); the figures below use the defaults. State tables are
not written to a store.
Usage: .venv/bin/python bench/over_window_bench.py [--events N] [--epoch N] [--parts N]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import pyarrow as pa

from engine.chunk import StreamChunk
from engine.plan.logical import AggSpec, PlanNode
from engine.plan.logical_window import WindowCall, WindowFrame
from engine.stream.operators import LocalStateAllocator
from engine.stream.operators.collect_agg import CollectAggOp
from engine.stream.operators.over_window import OverWindowOp
from engine.types import DOUBLE, INT, VARCHAR, Field

FACT = [Field("id", INT), Field("user_id", INT), Field("amount", DOUBLE)]


def chunks(events: int, epoch: int, parts: int) -> list[StreamChunk]:
    rng = np.random.default_rng(1)
    out = []
    for start in range(0, events, epoch):
        n = min(epoch, events - start)
        b = pa.RecordBatch.from_arrays(
            [
                pa.array(np.arange(start, start + n), pa.int32()),
                pa.array(rng.integers(0, parts, n), pa.int32()),
                pa.array(rng.random(n) * 100),
            ],
            names=[f.name for f in FACT],
        )
        out.append(StreamChunk.inserts(b))
    return out


def run(name: str, op: object, cs: list[StreamChunk]) -> None:
    t0 = time.process_time()
    for c in cs:
        op.step([c])  # type: ignore[attr-defined]
    dt = time.process_time() - t0
    n = sum(len(c) for c in cs)
    print(f"{name:12s} {n:>9,d} events  {dt:6.2f} CPU-s  {n / dt:>10,.0f} events/CPU-s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--epoch", type=int, default=10_000)
    ap.add_argument("--parts", type=int, default=10_000)
    a = ap.parse_args()
    cs = chunks(a.events, a.epoch, a.parts)
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
            StreamChunk.inserts(
                pa.RecordBatch.from_arrays([*d.columns, ids], names=[f.name for f in pre])
            )
        )
    run("string-agg", agg, cs2)


if __name__ == "__main__":
    main()
