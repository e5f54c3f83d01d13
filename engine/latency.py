"""Latency histograms the components fill and the metrics endpoint exports.

Why here: the engine (barriers, checkpoints, statements) and the connectors (webhook acks)
measure durations, but only pgwire's metrics endpoint knows Prometheus. A `Histogram` is a
plain thread-safe bucket counter: `observe(seconds)` costs a bisect and a lock, and
`snapshot()` gives cumulative bucket counts and the sum at scrape time, which
`pgwire.metrics` turns into Prometheus histograms (`_bucket{le=...}`, `_sum`, `_count`).

Statement latency is process-wide (`STATEMENTS`, one histogram per statement kind) because
one server process runs one database; the others live on the object that measures them.
"""

from __future__ import annotations

import bisect
import threading

# seconds: from sub-millisecond point queries to long DDL and stalled barriers
BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip


class Histogram:
    """Counts of observations per bucket upper bound, their sum and count."""

    def __init__(self, buckets: tuple[float, ...] = BUCKETS) -> None:
        self.buckets = buckets
        self._counts = [0] * (len(buckets) + 1)  # the last one is +Inf
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        i = bisect.bisect_left(self.buckets, seconds)
        with self._lock:
            self._counts[i] += 1
            self._sum += seconds

    def snapshot(self) -> tuple[list[tuple[float, int]], float, int]:
        """([(upper bound, cumulative count)...], sum, count); +Inf is `count`."""
        with self._lock:
            counts, total = list(self._counts), self._sum
        out, run = [], 0
        for le, n in zip(self.buckets, counts):
            run += n
            out.append((le, run))
        return out, total, run + counts[-1]


class LabeledHistograms:
    """One `Histogram` per label value, created on first use."""

    def __init__(self) -> None:
        self._by: dict[str, Histogram] = {}
        self._lock = threading.Lock()

    def observe(self, label: str, seconds: float) -> None:
        h = self._by.get(label)
        if h is None:
            with self._lock:
                h = self._by.setdefault(label, Histogram())
        h.observe(seconds)

    def items(self) -> list[tuple[str, Histogram]]:
        with self._lock:
            return sorted(self._by.items())


# statement kind (select, insert, update, delete, ddl, flush, other) -> execution time
STATEMENTS = LabeledHistograms()
STATEMENT_KINDS = {k: k for k in ("select", "insert", "update", "delete", "flush")}
