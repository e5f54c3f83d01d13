"""`KafkaReader`: the streaming consumer of one Kafka source, with its own poll thread.

The poll thread assigns partitions itself (`incremental_assign`, no consumer group, no
rebalancing), consumes batches of up to `BATCH` messages, decodes each batch into one
chunk (connectors.kafka.decode) and appends it to a buffer together with the position
reached. The runtime's barrier calls `take()` under the epoch lock: it swaps the buffer out
under the reader's small lock (never waits for a poll) and gets the position that exactly
matches the chunks handed over, which it commits with the state they produce.

Position format (JSON, kept in checkpoints): `{"offsets": {partition: next offset},
"start": {partition: first offset delivered}}`. On start, a partition in `offsets` is
assigned at that offset; any other partition starts at the startup options
(`scan.startup.timestamp.millis`, else `scan.startup.mode` earliest/latest; with latest,
what arrives before a partition's first EOF event is skipped, as Tansu's end offset is
too low, and the EOF offset becomes the partition's position). Tansu answers
every offsets_for_times with 0, so with a startup timestamp the reader also drops each
partition's messages older than it until the first one at or after it. `start` lets a
new view on a running source be backfilled with exactly the messages delivered before it.

Every `discovery_interval_s` the thread re-reads the topic's metadata and assigns new
partitions from their beginning; it also refreshes the lag statistics. Backpressure: while
more than `MAX_BUFFERED_ROWS` rows wait for a barrier, the thread stops polling.
Lifecycle: created and started by `KafkaSourceConnector.open_reader`; `close()` stops the
thread and closes the consumer (the runtime closes it when the source loses its last view,
is dropped, or the server stops).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import uuid
from typing import Any

import numpy as np
import pyarrow as pa
from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from connectors.kafka.config import KafkaOptions
from connectors.kafka.decode import Decoder, message_fields
from engine.catalog import Relation
from engine.chunk import Op, StreamChunk
from engine.stream.source_status import SourceStatus

log = logging.getLogger("swell.kafka")

_ERROR = Message.error
BATCH = 20000
# error codes that mean the brokers cannot be reached (the reader keeps retrying)
_UNREACHABLE = {KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE}
MAX_BUFFERED_ROWS = 1_000_000


class KafkaReader:
    def __init__(
        self, rel: Relation, position: dict[str, Any] | None, status: SourceStatus
    ) -> None:
        self.rel = rel
        self.opts = KafkaOptions.parse(rel.options)
        self.decoder = Decoder(rel)
        self.offsets: dict[int, int] = {}
        self.start: dict[int, int] = {}
        if position:
            self.offsets = {int(k): int(v) for k, v in position.get("offsets", {}).items()}
            self.start = {int(k): int(v) for k, v in position.get("start", {}).items()}
        self.stats = status
        with status.lock:
            status.topic = self.opts.topic
        self._lock = threading.Lock()
        self._buf: list[StreamChunk] = []
        self._buf_rows = 0
        self._stop = threading.Event()
        self._assigned: set[int] = set()
        self._ts_floor: set[int] = set()  # partitions still before scan.startup.timestamp
        self._until_eof: set[int] = set()  # 'latest' partitions that have not reached EOF
        self._logged: set[str] = set()
        conf = self.opts.consumer_config(f"{rel.name}-{uuid.uuid4().hex[:8]}")
        conf["error_cb"] = self._on_error
        self.consumer = Consumer(conf)
        self._thread = threading.Thread(
            target=self._run, name=f"swell-kafka-{rel.name}", daemon=True
        )
        self._thread.start()

    # -- runtime side ----------------------------------------------------------------------
    def take(self) -> tuple[list[StreamChunk], dict[str, Any]]:
        with self._lock:
            chunks, self._buf, self._buf_rows = self._buf, [], 0
            pos = {
                "offsets": {str(p): o for p, o in self.offsets.items()},
                "start": {str(p): o for p, o in self.start.items()},
            }
        return chunks, pos

    def has_data(self) -> bool:
        return bool(self._buf)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)
        with contextlib.suppress(Exception):  # a broken connection: nothing left to release
            self.consumer.close()

    # -- poll thread -----------------------------------------------------------------------
    def _run(self) -> None:
        next_discovery = 0.0
        while not self._stop.is_set():
            try:
                now = time.monotonic()
                if now >= next_discovery:
                    self._discover()
                    next_discovery = now + self.opts.discovery_interval_s
                if self._buf_rows >= MAX_BUFFERED_ROWS:
                    self._stop.wait(0.01)
                    continue
                msgs = self.consumer.consume(BATCH, 0.1)
                if msgs:
                    self._handle(msgs)
            except KafkaException as e:  # a broker outage: metadata requests time out
                self.stats.set_state("unreachable", str(e))
                self._stop.wait(1.0)
            except Exception as e:  # an internal error: logged once, keep consuming
                if "poll" not in self._logged:
                    self._logged.add("poll")
                    log.error("kafka source %s: poll failed", self.rel.name, exc_info=e)
                self._stop.wait(1.0)

    def _on_error(self, err: KafkaError) -> None:
        """librdkafka's error callback (called from consume() on the poll thread)."""
        if err.code() in _UNREACHABLE:
            self.stats.set_state("unreachable", err.str())
        else:
            self._log_once(f"err{err.code()}", f"kafka source {self.rel.name}: {err.str()}")

    def _log_once(self, kind: str, text: str) -> None:
        if kind not in self._logged:
            self._logged.add(kind)
            log.warning("%s (logged once)", text)

    def _discover(self) -> None:
        topic = self.opts.topic
        md = self.consumer.list_topics(topic, timeout=5)
        self.stats.set_state("running")
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            self._log_once("topic", f"kafka source {self.rel.name}: topic {topic} not available")
            return
        new = sorted(set(t.partitions) - self._assigned)
        if new:
            tps = self._start_offsets(new, first=not self._assigned)
            self.consumer.incremental_assign(tps)
            self._assigned.update(new)
            log.info("kafka source %s: assigned partitions %s", self.rel.name, new)
        hw: dict[int, int] = {}
        for p in self._assigned:
            try:
                _lo, hi = self.consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=1, cached=True
                )
            except Exception:
                continue
            if hi is not None and hi >= 0:
                hw[p] = hi
        with self.stats.lock:
            self.stats.high_watermarks = hw

    def _start_offsets(self, parts: list[int], first: bool) -> list[TopicPartition]:
        topic = self.opts.topic
        out: list[TopicPartition] = []
        todo: list[int] = []
        for p in parts:
            if p in self.offsets:
                out.append(TopicPartition(topic, p, self.offsets[p]))
            else:
                todo.append(p)
        if not todo:
            return out
        if not first:  # a partition added while running: read it from its beginning
            return out + [TopicPartition(topic, p, OFFSET_BEGINNING) for p in todo]
        if self.opts.startup_timestamp_ms is not None:
            # brokers that ignore the time index (Tansu answers offset 0) are covered by
            # dropping earlier messages until a partition reaches the timestamp
            self._ts_floor.update(todo)
            found = self.consumer.offsets_for_times(
                [TopicPartition(topic, p, self.opts.startup_timestamp_ms) for p in todo],
                timeout=10,
            )
            return out + [TopicPartition(topic, tp.partition, tp.offset) for tp in found]
        if self.opts.startup_mode == "latest":
            # OFFSET_END comes from the high watermark, which Tansu reports too low: skip
            # what arrives before the partition's first EOF, which marks the real end
            self._until_eof.update(todo)
            return out + [TopicPartition(topic, p, OFFSET_END) for p in todo]
        where = OFFSET_BEGINNING
        return out + [TopicPartition(topic, p, where) for p in todo]

    def _handle(self, msgs: list[Any]) -> None:
        good = msgs
        if self._until_eof or any(map(_ERROR, msgs)):  # C loop: no bytecode per message
            good = self._sift(msgs)
        if not good:
            return
        self._take(good)

    def _sift(self, msgs: list[Any]) -> list[Any]:
        """The data messages of a poll batch; partition EOFs and errors handled here."""
        good = []
        for m in msgs:
            err = m.error()
            if err is None:
                if m.partition() not in self._until_eof:
                    good.append(m)
            elif err.code() == KafkaError._PARTITION_EOF:
                p = m.partition()
                if p in self._until_eof:
                    self._until_eof.discard(p)
                    with self._lock:  # 'latest' resolved: the position starts here
                        self.offsets.setdefault(p, m.offset())
                        self.start.setdefault(p, m.offset())
                    with self.stats.lock:
                        self.stats.offsets.setdefault(p, m.offset())
            else:
                self._log_once(f"err{err.code()}", f"kafka source {self.rel.name}: {err}")
        return good

    def _take(self, good: list[Any]) -> None:
        """Decode the data messages and buffer the chunk with the positions reached."""
        todo = good
        if self._ts_floor:
            floor = self.opts.startup_timestamp_ms or 0
            todo = []
            for m in good:
                p = m.partition()
                if p in self._ts_floor:
                    if m.timestamp()[1] < floor:
                        continue
                    self._ts_floor.discard(p)
                todo.append(m)
        fields = message_fields(good)
        batch, deletes, errors = self.decoder.decode(todo, fields if todo is good else None)
        self.stats.record_errors(errors)
        # position: the last offset per partition among all messages (bad ones included)
        parts, offs = fields[1].astype(np.int64), fields[2]
        order = np.lexsort((offs, parts))
        sp, so = parts[order], offs[order]
        last = np.r_[sp[1:] != sp[:-1], True]
        first = np.r_[True, sp[1:] != sp[:-1]]
        ends = dict(zip(sp[last].tolist(), (so[last] + 1).tolist()))
        starts = dict(zip(sp[first].tolist(), so[first].tolist()))
        if todo is not good:  # skipped (pre-timestamp) messages are not part of the stream
            kept = {m.partition() for m in todo}
            starts = {p: min(m.offset() for m in todo if m.partition() == p) for p in kept}
        if deletes is not None and deletes.any():
            ops = pa.array(np.where(deletes, int(Op.DELETE), int(Op.INSERT)).astype(np.int8))
            chunk = StreamChunk(ops, batch)
        else:
            chunk = StreamChunk.inserts(batch)
        with self._lock:
            if len(chunk):
                self._buf.append(chunk)
                self._buf_rows += len(chunk)
            self.offsets.update(ends)
            for p, o in starts.items():
                self.start.setdefault(p, o)
        if self.stats.state != "running":
            self.stats.set_state("running")
        with self.stats.lock:
            self.stats.messages += len(good)
            self.stats.offsets.update(ends)
