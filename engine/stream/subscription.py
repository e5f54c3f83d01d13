"""Subscriptions: a table's or materialized view's changes, kept per committed epoch.

`CREATE SUBSCRIPTION s FROM t WITH (retention = '1D')` (RisingWave's feature) makes the
runtime keep every epoch's change rows of `t` for the retention period, so clients can
pull them with subscription cursors (`engine.handlers.subscription`) instead of running a
Kafka sink and a broker.

A subscription is a sink in the runtime (a `SinkFlow` over `SELECT * FROM t`, so it is
created, backfilled, recovered and dropped with the sink machinery) whose writer is
`SubscriptionWriter` (connector "subscription", built in). Its log lives in one state
table of its own, committed in the same checkpoint as the epoch that produced it:

* key `(rw_timestamp,)`: the epoch's commit time in Unix milliseconds, strictly
  increasing across epochs (`max(now, previous + 1)`), which is the `rw_timestamp` column
  a cursor returns and the value `SINCE <ms>` resumes from;
* value `(epoch, Arrow IPC stream)`: the epoch's rows (the visible columns plus the
  int8 op column `__op`), in the order the upstream emitted them; update pairs stay
  adjacent (`UpdateDelete` before `UpdateInsert`).

Lifecycle of the writer (see `engine.stream.sink` for the call order): `write` collects
the epoch's chunks; `pre_commit` puts the epoch's entry into the state table and deletes
the entries older than the retention (so the RocksDB commit contains both); `post_commit`
makes the entry visible to readers (`SubscriptionLog.entries`) and wakes cursors waiting
in `FETCH ... WITH (timeout = ...)`; `recover` (restart, or an epoch rolled back) loads
the table and rebuilds the readable log from it. An epoch that is not committed is never
visible. Readers take no runtime lock: the log's entry list is replaced, never changed in
place, so a reader holds a consistent list.
"""

from __future__ import annotations

import threading
import time
from bisect import bisect_left
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from engine.chunk import StreamChunk
from engine.connector_registry import register_sink
from engine.state.table import StateTable
from engine.stream.sink_base import BaseSinkWriter, SinkSpec

CONNECTOR = "subscription"
OP_FIELD = "__op"


@dataclass(frozen=True)
class LogEntry:
    """One committed epoch's changes."""

    ts: int  # rw_timestamp: Unix milliseconds, strictly increasing
    epoch: int
    rows: pa.RecordBatch  # visible columns + `__op` (int8, engine.chunk.Op)


class SubscriptionLog:
    """The committed, retained entries of one subscription, oldest first."""

    def __init__(self) -> None:
        self.entries: tuple[LogEntry, ...] = ()
        self.cond = threading.Condition()
        self.trimmed_ts = 0  # newest rw_timestamp deleted by retention (0: none)
        self.trimmed_epoch = 0

    def first_index(self, ts: int, after_epoch: int) -> int:
        """Index of the first entry with `rw_timestamp >= ts` and `epoch > after_epoch`."""
        entries = self.entries
        i = bisect_left(entries, ts, key=lambda e: e.ts)
        while i < len(entries) and entries[i].epoch <= after_epoch:
            i += 1
        return i

    def publish(self, entries: tuple[LogEntry, ...]) -> None:
        with self.cond:
            self.entries = entries
            self.cond.notify_all()

    def wait(self, seconds: float) -> None:
        with self.cond:
            self.cond.wait(seconds)


def encode_rows(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return bytes(sink.getvalue().to_pybytes())


def decode_rows(data: bytes) -> pa.RecordBatch:
    table = pa.ipc.open_stream(pa.py_buffer(data)).read_all()
    return table.combine_chunks().to_batches()[0] if table.num_rows else _empty(table.schema)


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=schema)


def retention_seconds(spec: SinkSpec) -> int:
    return int(spec.writer_options.get("retention_seconds", 86400))


class SubscriptionWriter(BaseSinkWriter):
    """The log writer of one subscription; see the module docstring."""

    def __init__(self, spec: SinkSpec) -> None:
        super().__init__(spec)
        tid = int(spec.writer_options["log_table"])
        self.table = StateTable(tid, f"{spec.name}.subscription.log")
        self.table.prefer_keyed()
        self.log = SubscriptionLog()
        self._staged: list[StreamChunk] = []
        self._pending: LogEntry | None = None  # put into the table, not yet committed
        self._trim: list[int] = []  # rw_timestamps deleted in the pending checkpoint

    @property
    def state_tables(self) -> list[StateTable]:
        return [self.table]

    def recover(self, last_checkpoint_epoch: int, state: bytes | None) -> None:
        rt = self.spec.runtime
        if rt is not None and rt.store is not None:
            self.table = StateTable(self.table.table_id, self.table.name)
            self.table.prefer_keyed()
            self.table.load(rt.store)
        entries = [LogEntry(int(k[0]), int(v[0]), decode_rows(v[1])) for k, v in self.table.scan()]
        self.log.publish(tuple(entries))

    def write(self, chunk: StreamChunk, epoch: int) -> None:
        self._staged.append(chunk)

    def pre_commit(self, epoch: int) -> bytes | None:
        now = int(time.time() * 1000)
        if self._staged:
            chunk = StreamChunk.concat(self._staged)
            self._staged = []
            if chunk is not None and len(chunk) > 0:
                entries = self.log.entries
                last = entries[-1].ts if entries else 0
                if self._pending is not None:
                    last = max(last, self._pending.ts)
                ts = max(now, last + 1)
                rows = chunk.data
                batch = pa.RecordBatch.from_arrays(
                    [*rows.columns, chunk.ops.cast(pa.int8())],
                    names=[*rows.schema.names, OP_FIELD],
                )
                if self._pending is not None and self._pending.epoch == epoch:
                    ts = self._pending.ts  # the same epoch again (a retried checkpoint)
                self._pending = LogEntry(ts, epoch, batch)
                self.table.put((ts,), (epoch, encode_rows(batch)))
        cutoff = now - retention_seconds(self.spec) * 1000
        old = [k for k, _ in self.table.scan(end=(cutoff,))]
        if old:
            self.table.delete_many(old)
            self._trim.extend(int(k[0]) for k in old)
        return None

    def post_commit(self, epoch: int) -> None:
        entries = list(self.log.entries)
        if self._trim:
            gone = set(self._trim)
            dropped = [e for e in entries if e.ts in gone]
            if dropped:
                self.log.trimmed_ts = max(self.log.trimmed_ts, dropped[-1].ts)
                self.log.trimmed_epoch = max(self.log.trimmed_epoch, dropped[-1].epoch)
            entries = [e for e in entries if e.ts not in gone]
            self._trim = []
        if self._pending is not None and self._pending.epoch <= epoch:
            entries.append(self._pending)
            self._pending = None
        self.log.publish(tuple(entries))

    def close(self) -> None:
        self.log.publish(self.log.entries)  # wake waiting cursors: they look the log up again


def subscription_log(runtime: Any, sub_id: int) -> SubscriptionLog | None:
    """The readable log of subscription `sub_id` (None while it is not running)."""
    flow = getattr(runtime, "sinks", {}).get(sub_id)
    writer = getattr(flow, "writer", None)
    return writer.log if isinstance(writer, SubscriptionWriter) else None


register_sink(CONNECTOR, SubscriptionWriter)
