"""Rows per CPU-second from a materialized view into a Kafka sink (Tansu broker, in process).

Usage: .venv/bin/python bench/kafka_sink_bench.py [rows] [rows_per_epoch]

Setup: an append-only table `src (id bigint, name varchar, price double, ts timestamptz,
doc jsonb)`, a view `v` that filters and projects it, and a sink `FROM v ... FORMAT PLAIN
ENCODE JSON (force_append_only = 'true')` to a 1-partition topic on a local Tansu broker.
Rows enter through the runtime's table write path (WAL + queue, like INSERT and webhook
batches) in epochs of `rows_per_epoch`; each barrier steps the table, the view and the sink
(JSON encoding + produce) and flushes the producer before the checkpoint commits.

Reported, per case: rows/s of wall time and rows per CPU-second (process CPU time, which
includes librdkafka's threads) over the barriers only:

* `encode only`: the JSON encoder on the same rows (no Kafka);
* `view -> blackhole sink`: the same dataflow with the blackhole connector (framework and
  view cost without Kafka);
* `view -> kafka sink`: the full path; afterwards every message is counted on the topic.
"""

from __future__ import annotations

import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from connectors.kafka.sink_json import JsonRowEncoder  # noqa: E402
from engine.chunk import StreamChunk  # noqa: E402
from engine.database import Config, SwellDatabase  # noqa: E402
from engine.types import arrow_schema  # noqa: E402
from harness.kafka import KafkaBroker  # noqa: E402

TABLE = "CREATE TABLE src (id BIGINT, name VARCHAR, price DOUBLE PRECISION, ts TIMESTAMPTZ, \
doc JSONB) APPEND ONLY"
VIEW = "CREATE MATERIALIZED VIEW v AS SELECT id, name, price * 2 AS price2, ts, doc FROM src \
WHERE price >= 0"


def make_chunks(rows: int, per_epoch: int, db: SwellDatabase) -> list[StreamChunk]:
    """Epoch chunks for `src`, with its hidden `_row_id` column filled like INSERT does."""
    rel = db.catalog.find("src")
    assert rel is not None
    schema = arrow_schema(rel.fields)
    rng = np.random.default_rng(7)
    out = []
    base = dt.datetime(2023, 11, 11, tzinfo=dt.UTC)
    for start in range(0, rows, per_epoch):
        n = min(per_epoch, rows - start)
        ids = np.arange(start, start + n, dtype=np.int64)
        names = pa.array([f"user_{i % 1000}" for i in range(n)])
        prices = rng.random(n) * 100
        ts = pa.array(
            (np.datetime64(base.replace(tzinfo=None)) + ids.astype("timedelta64[ms]")).astype(
                "datetime64[us]"
            ),
            pa.timestamp("us", tz="UTC"),
        )
        docs = pa.array([f'{{"k": {i % 7}, "tags": ["a", "b"]}}' for i in range(n)])
        row_ids = pa.array(db.runtime.row_ids.take(n))
        batch = pa.RecordBatch.from_arrays(
            [pa.array(ids), names, pa.array(prices), ts, docs, row_ids], schema=schema
        )
        out.append(StreamChunk.inserts(batch))
    return out


def report(name: str, rows: int, wall: float, cpu: float) -> None:
    print(
        f"{name:<28} {rows / wall:>12,.0f} rows/s wall   {rows / cpu:>12,.0f} rows/CPU-s"
        f"   ({rows} rows, {wall:.2f}s wall, {cpu:.2f}s CPU)"
    )


def run_sink(connector_sql: str, rows: int, per_epoch: int) -> tuple[float, float, SwellDatabase]:
    db = SwellDatabase(
        Config(data_dir=Path(tempfile.mkdtemp()) / "d", barrier_interval_ms=3_600_000)
    )
    s = db.connect("root", "dev")
    s.execute_simple(TABLE)
    s.execute_simple(VIEW)
    s.execute_simple(
        f"CREATE SINK k FROM v WITH ({connector_sql}) "
        "FORMAT PLAIN ENCODE JSON (force_append_only = 'true')"
    )
    rel = db.catalog.find("src")
    assert rel is not None
    chunks = make_chunks(rows, per_epoch, db)
    wall = cpu = 0.0
    for c in chunks:
        db.runtime.write(rel.id, c)
        w0, c0 = time.perf_counter(), time.process_time()
        db.runtime.barrier(force=True)
        wall += time.perf_counter() - w0
        cpu += time.process_time() - c0
    return wall, cpu, db


def main() -> None:
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 500_000
    per_epoch = int(sys.argv[2]) if len(sys.argv) > 2 else 50_000
    broker = KafkaBroker().start()
    try:
        broker.create_topic("bench_out")
        # encoder only
        db = SwellDatabase(Config(data_dir=Path(tempfile.mkdtemp()) / "d"))
        s = db.connect("root", "dev")
        s.execute_simple(TABLE)
        rel = db.catalog.find("src")
        assert rel is not None
        chunks = make_chunks(rows, per_epoch, db)
        enc = JsonRowEncoder(rel.visible_fields)
        enc.encode(chunks[0].data.select(range(5)))
        w0, c0 = time.perf_counter(), time.process_time()
        for c in chunks:
            enc.encode(c.data.select(range(5)))
        report("encode only", rows, time.perf_counter() - w0, time.process_time() - c0)
        db.close()

        wall, cpu, db = run_sink("connector = 'blackhole'", rows, per_epoch)
        report("view -> blackhole sink", rows, wall, cpu)
        db.close()

        wall, cpu, db = run_sink(
            f"connector = 'kafka', topic = 'bench_out', "
            f"properties.bootstrap.server = '{broker.bootstrap}'",
            rows,
            per_epoch,
        )
        report("view -> kafka sink", rows, wall, cpu)
        db.close()
        n = broker.count("bench_out", idle=2.0)
        print(f"messages on the topic: {n} (expected {rows})")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
