"""Rollback of a failed epoch with real connectors: Kafka sources re-seek to the committed
offsets (exactly once into views), Kafka sinks may resend (at least once), and Iceberg
staging reopens from the checkpoint (exactly once into the Iceberg table)."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import faults
from engine.database import Config, SwellDatabase
from engine.errors import EpochFailed
from harness.kafka import KafkaBroker


@pytest.fixture(autouse=True)
def _no_faults() -> Iterator[None]:
    faults.configure()
    yield
    faults.configure()


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SwellDatabase]:
    d = SwellDatabase(Config(data_dir=tmp_path / "data", barrier_interval_ms=3_600_000))
    try:
        yield d
    finally:
        d.close()


def rows(db: SwellDatabase, sql: str) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = db.connect("root", "dev").execute_simple(sql)[-1].rows
    return out


def flush_until(db: SwellDatabase, sql: str, want: Any, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    got = None
    while time.monotonic() < deadline:
        rows(db, "FLUSH")
        got = rows(db, sql)
        if got == want:
            return
        time.sleep(0.1)
    assert got == want


@pytest.mark.parametrize("point", ["sources_taken", "sinks_pre_committed"])
def test_kafka_source_reseeks_and_the_sink_is_at_least_once(
    db: SwellDatabase, kafka_broker: KafkaBroker, kafka_topic: Callable[..., str], point: str
) -> None:
    src, out = kafka_topic(partitions=2), kafka_topic()
    b = kafka_broker.bootstrap
    rows(
        db,
        f"CREATE SOURCE ks (id INT) WITH (connector = 'kafka', topic = '{src}', "
        f"properties.bootstrap.server = '{b}', scan.startup.mode = 'earliest')",
    )
    rows(db, "CREATE MATERIALIZED VIEW kv AS SELECT count(*) AS n, sum(id) AS s FROM ks")
    rows(
        db,
        f"CREATE SINK kout FROM ks WITH (connector = 'kafka', topic = '{out}', "
        f"properties.bootstrap.server = '{b}') FORMAT PLAIN ENCODE JSON",
    )
    kafka_broker.produce(src, ({"id": i} for i in range(50)), partition=lambda i, _v: i % 2)
    flush_until(db, "SELECT n, s FROM kv", [(50, sum(range(50)))])
    kafka_broker.produce(src, ({"id": i} for i in range(50, 80)), partition=lambda i, _v: i % 2)
    time.sleep(0.5)  # let the reader buffer them, so the failing epoch consumes them
    faults.configure(fail=f"{point}:1")
    with pytest.raises(EpochFailed):
        rows(db, "FLUSH")
    assert rows(db, "SELECT n FROM kv") == [(50,)]  # the failed epoch is not visible
    faults.configure()
    flush_until(db, "SELECT n, s FROM kv", [(80, sum(range(80)))])  # exactly once
    seen = Counter(m["id"] for m in kafka_broker.consume_json(out))
    assert set(seen) == set(range(80))  # at least once: a rolled-back epoch may repeat
    # the sink's counters carry over the rollback (rebuilt flow, same status)
    st = rows(db, "SELECT state, rows_written FROM rw_catalog.rw_sink_status")
    assert st[0][0] == "running" and st[0][1] >= 80


@pytest.mark.parametrize(
    "point", ["sinks_pre_committed", "checkpoint_batch", "checkpoint_written", "post_committed"]
)
def test_iceberg_staging_reopens_from_the_checkpoint(db: SwellDatabase, point: str) -> None:
    rows(
        db,
        "CREATE TABLE ice (a INT, b VARCHAR) WITH (commit_checkpoint_interval = 1) "
        "ENGINE = iceberg",
    )
    rows(db, "INSERT INTO ice VALUES (1, 'x'), (2, 'y')")
    rows(db, "FLUSH")
    rows(db, "INSERT INTO ice VALUES (3, 'z'), (3, 'z')")
    faults.configure(fail=f"{point}:1")
    with pytest.raises(EpochFailed):
        rows(db, "FLUSH")
    faults.configure()
    rows(db, "FLUSH")
    rows(db, "FLUSH")
    assert sorted(rows(db, "SELECT a, b FROM ice")) == [(1, "x"), (2, "y"), (3, "z"), (3, "z")]
