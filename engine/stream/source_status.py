"""Per-source bad-message log and consumer lag, and the two system tables that show them.

- `rw_catalog.rw_source_errors`: one row per bad message kept (the newest `MAX_KEPT` per
  source): source id and name, topic, partition, offset, error kind, error text, time
  seen. A message that is not JSON is dropped; a field of the wrong type becomes NULL;
  both are counted and kept here. Each kind is logged once per source (WARNING), later
  ones only counted.
- `rw_catalog.rw_source_status`: one row per connector source or table: its state
  (`idle`: no reader, nothing consumes it yet; `starting`: the reader has not heard from
  the brokers yet; `running`: it reaches them; `unreachable`: it cannot and retries), the
  last broker error and when it was seen, messages read and bad messages. The reader moves
  the state; a change to `unreachable` is logged once as a WARNING, the return to `running`
  at INFO.
- `rw_catalog.rw_source_lag`: one row per source and partition: the offset after the
  last message read (committed with the state at the next barrier), the partition's high
  watermark as the broker last reported it to the consumer, and lag = high watermark -
  offset (never negative). Tansu reports a wrong high watermark (about the last batch's
  base offset), so lag there reads 0 or too low; real Kafka reports it correctly.

Lifecycle: each `SourceFlow` (engine.stream.source) owns one `SourceStatus` for as long as
the relation exists and hands it to every reader it starts; the reader updates it from its
poll thread (under `status.lock`). Providers read the runtime's flows at query time.
Process-local, not persisted: after a restart the error log starts empty.
"""

from __future__ import annotations

import collections
import datetime as dt
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from engine.catalog.system import RW_CATALOG, SystemContext, register_system_relation
from engine.types import BIGINT, INT, TIMESTAMPTZ, VARCHAR, Field

log = logging.getLogger("swell.source")

MAX_KEPT = 1000


@dataclass
class SourceStatus:
    source: str
    topic: str = ""
    errors: collections.deque[tuple[Any, ...]] = field(
        default_factory=lambda: collections.deque(maxlen=MAX_KEPT)
    )
    error_counts: collections.Counter[str] = field(default_factory=collections.Counter)
    messages: int = 0
    offsets: dict[int, int] = field(default_factory=dict)
    high_watermarks: dict[int, int] = field(default_factory=dict)
    state: str = "idle"
    last_error: str | None = None
    last_error_at: float | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def set_state(self, state: str, error: str | None = None) -> None:
        """Move to `state` (`idle`, `starting`, `running`, `unreachable`); log real changes."""
        with self.lock:
            old = self.state
            self.state = state
            if error is not None:
                self.last_error, self.last_error_at = error, time.time()
        if old == state:
            return
        if state == "unreachable":
            log.warning(
                'kafka source %s: brokers unreachable, retrying error="%s" (state in '
                "rw_catalog.rw_source_status)",
                self.source,
                error,
            )
        elif state == "running" and old == "unreachable":
            log.info("kafka source %s: brokers reachable again", self.source)

    def record_errors(self, errs: list[tuple[int, int, str, str]]) -> None:
        if not errs:
            return
        now = time.time()
        with self.lock:
            for part, off, kind, msg in errs:
                if self.error_counts[kind] == 0:
                    log.warning(
                        'kafka source %s: bad message topic=%s partition=%d offset=%d kind="%s" '
                        'error="%s" (first of its kind; later ones are counted in '
                        "rw_catalog.rw_source_errors)",
                        self.source,
                        self.topic,
                        part,
                        off,
                        kind,
                        msg,
                    )
                self.error_counts[kind] += 1
                self.errors.append((part, off, kind, msg, now))


ERROR_FIELDS = [
    Field("source_id", INT),
    Field("source_name", VARCHAR),
    Field("topic", VARCHAR),
    Field("partition", INT),
    Field("offset", BIGINT),
    Field("error_kind", VARCHAR),
    Field("error", VARCHAR),
    Field("seen_at", TIMESTAMPTZ),
]
STATUS_FIELDS = [
    Field("source_id", INT),
    Field("source_name", VARCHAR),
    Field("topic", VARCHAR),
    Field("state", VARCHAR),
    Field("last_error", VARCHAR),
    Field("last_error_at", TIMESTAMPTZ),
    Field("messages", BIGINT),
    Field("errors", BIGINT),
]
LAG_FIELDS = [
    Field("source_id", INT),
    Field("source_name", VARCHAR),
    Field("topic", VARCHAR),
    Field("partition", INT),
    Field("offset", BIGINT),
    Field("high_watermark", BIGINT),
    Field("lag", BIGINT),
    Field("messages", BIGINT),
    Field("errors", BIGINT),
]


def _flows(ctx: SystemContext) -> list[tuple[int, SourceStatus]]:
    sources = getattr(ctx.db.runtime, "sources", {})
    return [(rid, sf.status) for rid, sf in sorted(sources.items())]


def _error_rows(ctx: SystemContext) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for rid, st in _flows(ctx):
        with st.lock:
            kept = list(st.errors)
        for part, off, kind, msg, at in kept:
            seen = dt.datetime.fromtimestamp(at, dt.UTC)
            out.append((rid, st.source, st.topic, part, off, kind, msg, seen))
    return out


def _status_rows(ctx: SystemContext) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for rid, st in _flows(ctx):
        with st.lock:
            at = st.last_error_at
            seen = dt.datetime.fromtimestamp(at, dt.UTC) if at is not None else None
            nerr = sum(st.error_counts.values())
            out.append((rid, st.source, st.topic, st.state, st.last_error, seen, st.messages, nerr))
    return out


def _lag_rows(ctx: SystemContext) -> list[tuple[Any, ...]]:
    out: list[tuple[Any, ...]] = []
    for rid, st in _flows(ctx):
        with st.lock:
            nerr = sum(st.error_counts.values())
            for p in sorted(set(st.offsets) | set(st.high_watermarks)):
                off = st.offsets.get(p)
                hw = st.high_watermarks.get(p)
                lag = max(0, hw - off) if hw is not None and off is not None else None
                out.append((rid, st.source, st.topic, p, off, hw, lag, st.messages, nerr))
    return out


register_system_relation(
    RW_CATALOG,
    "rw_source_errors",
    ERROR_FIELDS,
    _error_rows,
    description="bad messages of connector sources (newest 1000 per source)",
)
register_system_relation(
    RW_CATALOG,
    "rw_source_status",
    STATUS_FIELDS,
    _status_rows,
    description="state of each connector source (idle, running, unreachable) and its last error",
)
register_system_relation(
    RW_CATALOG,
    "rw_source_lag",
    LAG_FIELDS,
    _lag_rows,
    description="consumer position and lag per source and partition",
)
