"""Throughput of the other time operators, in input rows per CPU-second (operator level).

Usage: .venv/bin/python bench/time_filters_bench.py [rows] [rows_per_epoch]

* `hop`: HOP(1 min slide, 5 min size) expansion (5 output rows per input row);
* `temporal filter`: `ts > now() - 10 min` with the clock advancing 1 s per epoch, so rows
  enter and expire continuously;
* `dynamic filter`: `v > (SELECT max(v) ...)`, the right value moving by 0.1% of the value
  range every epoch;
* `interval join`: inner equi-join on one of 1,000 keys with a 10 s band
  (`l.ts BETWEEN r.ts AND r.ts + 10 s`), both sides watermarked, state cleaned every epoch.
"""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine import expr as ex  # noqa: E402
from engine.chunk import StreamChunk  # noqa: E402
from engine.expr import EvalContext  # noqa: E402
from engine.plan.time_nodes import TimeBound  # noqa: E402
from engine.stream.operators import HashJoinOp, LocalStateAllocator  # noqa: E402
from engine.stream.operators.dynamic_filter import DynamicFilterOp  # noqa: E402
from engine.stream.operators.interval_join import IntervalJoinOp  # noqa: E402
from engine.stream.operators.temporal_filter import TemporalFilterOp  # noqa: E402
from engine.stream.operators.time_window import TimeWindowOp  # noqa: E402
from engine.types import BIGINT, BOOLEAN, TIMESTAMP, Field, arrow_schema  # noqa: E402

F = [Field("id", BIGINT), Field("k", BIGINT), Field("v", BIGINT), Field("ts", TIMESTAMP)]
T0 = datetime(2024, 1, 1, tzinfo=UTC)
T0_US = int(T0.timestamp()) * 1_000_000
RATE = 1_000  # events per second of event time


def epochs(total: int, per: int, seed: int = 5) -> list[pa.RecordBatch]:
    rng = np.random.default_rng(seed)
    schema = arrow_schema(F)
    out = []
    for s in range(0, total, per):
        n = min(per, total - s)
        ids = np.arange(s, s + n, dtype=np.int64)
        ts = T0_US + ids * (1_000_000 // RATE) - rng.integers(0, 2_000_000, n)
        out.append(
            pa.RecordBatch.from_arrays(
                [
                    pa.array(ids),
                    pa.array(rng.integers(0, 1000, n)),
                    pa.array(rng.integers(0, 10**6, n)),
                    pa.array(ts).cast(pa.timestamp("us")),
                ],
                schema=schema,
            )
        )
    return out


def run(name: str, total: int, fn) -> None:  # type: ignore[no-untyped-def]
    t0 = time.process_time()
    fn()
    cpu = time.process_time() - t0
    print(f"  {name:16s} {total / cpu:>12,.0f} rows/s per CPU-second ({cpu:.2f} s)")


def main() -> None:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    per = int(sys.argv[2]) if len(sys.argv) > 2 else 10_000
    batches = epochs(total, per)
    print(f"{total:,} rows, {per:,} per epoch")
    w = [*F, Field("window_start", TIMESTAMP), Field("window_end", TIMESTAMP)]

    def hop() -> None:
        op = TimeWindowOp(F, w, 3, "hop", 60_000_000, 300_000_000, 0, [0, 4])
        for b in batches:
            op.step([StreamChunk.inserts(b)])

    def temporal() -> None:
        ctx = EvalContext()
        op = TemporalFilterOp(
            F,
            [TimeBound(ex.InputRef(3, TIMESTAMP, "ts"), ">", -600_000_000)],
            ctx,
            [0],
            LocalStateAllocator(),
        )
        for i, b in enumerate(batches):
            ctx.now = T0 + timedelta(seconds=i * per / RATE)
            op.step([StreamChunk.inserts(b)])

    def dynamic() -> None:
        thr_field = [Field("m", BIGINT)]
        pred = ex.Func(
            "greater",
            (ex.InputRef(2, BIGINT, "v"), ex.InputRef(4, BIGINT, "m")),
            BOOLEAN,
            lambda a, n, c: pc.greater(a[0], a[1]),
            op=">",
        )
        op = DynamicFilterOp(
            F,
            pred,
            BIGINT,
            0,
            EvalContext(),
            [0],
            LocalStateAllocator(),
            ex.InputRef(2, BIGINT, "v"),
        )
        for i, b in enumerate(batches):
            right = StreamChunk.inserts(
                pa.RecordBatch.from_arrays(
                    [pa.array([500_000 + i * 1_000])], schema=arrow_schema(thr_field)
                )
            )
            op.step([StreamChunk.inserts(b), right])

    def interval() -> None:
        import sqlglot

        names = [f"l_{f.name}" for f in F] + [f"r_{f.name}" for f in F]
        scope = ex.Scope(
            [
                ex.ColumnBinding(name=n, type=f.type, index=i, table=None, hidden=False)
                for i, (n, f) in enumerate(zip(names, F + F, strict=True))
            ]
        )
        cond = ex.ExprBinder(scope).bind(
            sqlglot.parse_one(
                "l_ts BETWEEN r_ts AND r_ts + INTERVAL '10' SECOND", read="risingwave"
            )
        )
        alloc = LocalStateAllocator()
        join = HashJoinOp(F, F, "inner", [1], [1], cond, EvalContext(), alloc, [0], [0])
        op = IntervalJoinOp(join, (3, 3), 0, 10_000_000, ([1], [1]), ([0], [0]), alloc)
        for b in batches:
            half = b.num_rows // 2
            left, right = b.slice(0, half), b.slice(half)
            wm = int(pc.max(b.column(3).cast(pa.int64())).as_py()) - 2_000_000
            op.input_watermarks = [{3: wm}, {3: wm}]
            op.step([StreamChunk.inserts(left), StreamChunk.inserts(right)])

    run("hop", total, hop)
    run("temporal filter", total, temporal)
    run("dynamic filter", total, dynamic)
    run("interval join", total, interval)


if __name__ == "__main__":
    main()
