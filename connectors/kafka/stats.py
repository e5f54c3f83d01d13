"""Per-source bad-message log and consumer lag, the data behind two system tables.

- `rw_catalog.rw_kafka_source_errors`: one row per bad message kept (the newest
  `MAX_KEPT` per source): source name, topic, partition, offset, error kind, error text,
  time seen. A message that is not JSON is dropped; a field of the wrong type becomes NULL;
  both are counted and kept here. Each kind is logged once per source (WARNING), later
  ones only counted.
- `rw_catalog.rw_kafka_source_lag`: one row per source and partition: the next offset the
  source will deliver (committed with the state at the next barrier), the partition's high
  watermark as the broker last reported it to the consumer, and lag = high watermark -
  offset (never negative). Tansu reports a wrong high watermark (about the last batch's
  base offset), so lag there reads 0 or too low; real Kafka reports it correctly.

Lifecycle: a reader registers its `SourceStats` under the relation id when it starts and
keeps it updated from its poll thread; dropping the source removes it. Process-local, not
persisted: after a restart the error log starts empty.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("swell.kafka")

MAX_KEPT = 1000


@dataclass
class SourceStats:
    source: str
    topic: str
    errors: collections.deque[tuple[Any, ...]] = field(
        default_factory=lambda: collections.deque(maxlen=MAX_KEPT)
    )
    error_counts: collections.Counter[str] = field(default_factory=collections.Counter)
    messages: int = 0
    offsets: dict[int, int] = field(default_factory=dict)
    high_watermarks: dict[int, int] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

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
                        "rw_catalog.rw_kafka_source_errors)",
                        self.source,
                        self.topic,
                        part,
                        off,
                        kind,
                        msg,
                    )
                self.error_counts[kind] += 1
                self.errors.append((self.source, self.topic, part, off, kind, msg, now))


_STATS: dict[int, SourceStats] = {}
_LOCK = threading.Lock()


def register(rel_id: int, stats: SourceStats) -> None:
    with _LOCK:
        old = _STATS.get(rel_id)
        if old is not None:  # a restarted reader keeps the error history
            stats.errors = old.errors
            stats.error_counts = old.error_counts
        _STATS[rel_id] = stats


def unregister(rel_id: int) -> None:
    with _LOCK:
        _STATS.pop(rel_id, None)


def error_rows() -> list[tuple[Any, ...]]:
    """(source, topic, partition, offset, kind, error, seen_at epoch seconds) rows."""
    with _LOCK:
        all_stats = list(_STATS.values())
    out: list[tuple[Any, ...]] = []
    for s in all_stats:
        with s.lock:
            out.extend(s.errors)
    return out


def lag_rows() -> list[tuple[Any, ...]]:
    """(source, topic, partition, offset, high_watermark, lag) rows."""
    with _LOCK:
        all_stats = list(_STATS.values())
    out: list[tuple[Any, ...]] = []
    for s in all_stats:
        with s.lock:
            for p in sorted(set(s.offsets) | set(s.high_watermarks)):
                off = s.offsets.get(p)
                hw = s.high_watermarks.get(p)
                lag = max(0, hw - off) if hw is not None and off is not None else None
                out.append((s.source, s.topic, p, off, hw, lag))
    return out
