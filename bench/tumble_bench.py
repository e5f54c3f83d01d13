"""Throughput of a TUMBLE aggregation with a watermark, in events per CPU-second.

Usage: .venv/bin/python bench/tumble_bench.py [events] [events_per_epoch]

1,000,000 events by default (user id in 0..999, amount, event time advancing 2,000 events
per second with up to 5 s of disorder), aggregated per 1-minute window and user:

    SELECT window_start, user_id, count(*), sum(amount)
    FROM TUMBLE(events, ts, INTERVAL '1' MINUTE) GROUP BY window_start, user_id
    [EMIT ON WINDOW CLOSE]

Three cases, each timed with `time.process_time()` (CPU seconds of this process):

* `operators`: TimeWindowOp -> HashAggOp (emit on update), one step per epoch;
* `operators eowc`: TimeWindowOp -> EowcAggOp, watermark `max(ts) - 5 s` per epoch;
* `engine eowc`: the whole engine in process (table with `WATERMARK FOR ts`, materialized
  view with EMIT ON WINDOW CLOSE): chunks written through the runtime (WAL, table
  materialization, watermark tracking, the view's dataflow, RocksDB checkpoint per epoch).

Target: at least 200,000 events/s per core.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.chunk import StreamChunk  # noqa: E402
from engine.stream.operators import AggCall, HashAggOp, LocalStateAllocator  # noqa: E402
from engine.stream.operators.eowc import EowcAggOp  # noqa: E402
from engine.stream.operators.time_window import TimeWindowOp  # noqa: E402
from engine.types import BIGINT, DOUBLE, INT, TIMESTAMP, Field, arrow_schema  # noqa: E402

F = [
    Field("id", BIGINT),
    Field("user_id", INT),
    Field("amount", DOUBLE),
    Field("ts", TIMESTAMP),
]
W = [*F, Field("window_start", TIMESTAMP), Field("window_end", TIMESTAMP)]
MIN_US = 60_000_000
T0_US = 1_704_067_200_000_000  # 2024-01-01


def epochs(total: int, per_epoch: int, seed: int = 3) -> list[pa.RecordBatch]:
    rng = np.random.default_rng(seed)
    out = []
    schema = arrow_schema(F)
    for start in range(0, total, per_epoch):
        n = min(per_epoch, total - start)
        ids = np.arange(start, start + n, dtype=np.int64)
        ts = T0_US + ids * 500 - rng.integers(0, 5_000_000, n)  # 2,000 events/s, 5 s disorder
        cols = [
            pa.array(ids),
            pa.array(rng.integers(0, 1000, n, dtype=np.int32)),
            pa.array(rng.random(n) * 100),
            pa.array(ts).cast(pa.timestamp("us")),
        ]
        out.append(pa.RecordBatch.from_arrays(cols, schema=schema))
    return out


CALLS = [AggCall("count_star", None, BIGINT), AggCall("sum", 2, DOUBLE)]
NAMES = ["window_start", "user_id", "n", "s"]


def bench_operators(batches: list[pa.RecordBatch], eowc: bool) -> tuple[float, int]:
    tw = TimeWindowOp(F, W, 3, "tumble", MIN_US, MIN_US, 0, [0])
    if eowc:
        agg: object = EowcAggOp(W, [4, 1], CALLS, LocalStateAllocator(), NAMES, 0)
    else:
        agg = HashAggOp(W, [4, 1], CALLS, LocalStateAllocator(), NAMES)
    out_rows = 0
    wm = None
    t0 = time.process_time()
    for b in batches:
        c = tw.step([StreamChunk.inserts(b)])
        if eowc:
            m = int(np.asarray(b.column(3).cast(pa.int64())).max()) - 5_000_000
            wm = m if wm is None else max(wm, m)
            agg.input_watermarks = [{4: tw.window_start_watermark(wm)}]  # type: ignore[attr-defined]
        o = agg.step([c])  # type: ignore[attr-defined]
        out_rows += 0 if o is None else len(o)
    return time.process_time() - t0, out_rows


def bench_engine(batches: list[pa.RecordBatch]) -> tuple[float, int]:
    from engine.database import Config, open_database

    with tempfile.TemporaryDirectory() as d:
        db = open_database(Config(data_dir=Path(d), barrier_interval_ms=3_600_000))
        try:
            s = db.connect("root", "dev")
            s.execute_simple(
                "CREATE TABLE events (id BIGINT PRIMARY KEY, user_id INT, amount DOUBLE "
                "PRECISION, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)"
            )
            s.execute_simple(
                "CREATE MATERIALIZED VIEW per_user AS SELECT window_start, user_id, "
                "count(*) AS n, sum(amount) AS s FROM TUMBLE(events, ts, INTERVAL '1' MINUTE) "
                "GROUP BY window_start, user_id EMIT ON WINDOW CLOSE"
            )
            rt = db.runtime
            rel = db.catalog.get("events", None)
            t0 = time.process_time()
            for b in batches:
                rt.write(rel.id, StreamChunk.inserts(b))
                rt.barrier()
            cpu = time.process_time() - t0
            rows = s.execute_simple("SELECT count(*) FROM per_user")[0].rows[0][0]
            return cpu, rows
        finally:
            db.close()


def main() -> None:
    total = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    per_epoch = int(sys.argv[2]) if len(sys.argv) > 2 else 20_000
    batches = epochs(total, per_epoch)
    print(f"{total:,} events, {per_epoch:,} per epoch, 1-minute TUMBLE, 1,000 users")
    for name, fn in (
        ("operators", lambda: bench_operators(batches, False)),
        ("operators eowc", lambda: bench_operators(batches, True)),
        ("engine eowc", lambda: bench_engine(batches)),
    ):
        cpu, rows = fn()
        print(
            f"  {name:15s} {total / cpu:>12,.0f} events/s per CPU-second  ({cpu:.2f} s, "
            f"{rows:,} output rows)"
        )


if __name__ == "__main__":
    main()
