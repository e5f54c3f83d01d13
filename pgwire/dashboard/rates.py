"""Rates for the dashboard: rows/s and CPU share from the overview's cumulative counters.

`engine.stream.overview` reports counters that only grow (rows into a table or source,
rows out of each operator, view and sink, CPU seconds per operator). A rate needs two
readings apart in time, so `Rates` keeps the readings of the last `WINDOW_S` seconds and
compares the newest with the oldest of them: a rate is the mean over up to that window.
Readings are taken when the API is asked (no background task: nothing runs while nobody
looks), at most one per `MIN_GAP_S`.

A counter that went down was reset (a rolled-back epoch rebuilds the flows, a dropped and
recreated relation reuses nothing): its rate is unknown (None) until a new window builds
up. So is a rate with fewer than two readings (the first request).

Lifecycle: one `Rates` per dashboard server; `annotate(snapshot)` records the snapshot's
counters and writes `rows_per_s` (relations and operator nodes) and `cpu_share` (operator
nodes: CPU seconds per wall second, 1.0 = one core) into it.
"""

from __future__ import annotations

import collections
from typing import Any

WINDOW_S = 10.0
MIN_GAP_S = 0.5

Key = tuple[Any, ...]


def counters(snapshot: dict[str, Any]) -> dict[Key, float]:
    """The cumulative counters of one overview snapshot, by a stable key."""
    out: dict[Key, float] = {}
    for r in snapshot.get("relations", []):
        if r.get("counter") is not None:
            out[("rel", r["id"])] = float(r["counter"])
    for job in snapshot.get("jobs", []):
        for n in job.get("nodes", []):
            if n.get("kind") != "node":
                continue
            out[("rows", job["id"], n["id"])] = float(n.get("rows", 0))
            out[("cpu", job["id"], n["id"])] = float(n.get("cpu_seconds", 0.0))
    return out


class Rates:
    """Readings of the last `WINDOW_S` seconds; see the module docstring."""

    def __init__(self, window_s: float = WINDOW_S, min_gap_s: float = MIN_GAP_S) -> None:
        self.window_s = window_s
        self.min_gap_s = min_gap_s
        self.readings: collections.deque[tuple[float, dict[Key, float]]] = collections.deque()

    def record(self, t: float, values: dict[Key, float]) -> None:
        if self.readings and t - self.readings[-1][0] < self.min_gap_s:
            return  # too close to the last one to tell anything new
        self.readings.append((t, values))
        # drop readings older than the window, but keep one to compare with
        while len(self.readings) > 2 and t - self.readings[1][0] >= self.window_s:
            self.readings.popleft()

    def rate(self, key: Key, t: float, value: float) -> float | None:
        """Per second over the window, from the oldest reading with this key; None when
        unknown (no older reading, or the counter was reset)."""
        for t0, values in self.readings:
            if t - t0 < self.min_gap_s:
                break
            old = values.get(key)
            if old is None:
                continue
            if value < old:
                return None
            return (value - old) / (t - t0)
        return None

    def annotate(self, snapshot: dict[str, Any]) -> dict[str, Any]:
        t = float(snapshot["time"])
        now = counters(snapshot)
        for r in snapshot.get("relations", []):
            key = ("rel", r["id"])
            r["rows_per_s"] = self.rate(key, t, now[key]) if key in now else None
        for job in snapshot.get("jobs", []):
            for n in job.get("nodes", []):
                if n.get("kind") != "node":
                    continue
                rk, ck = ("rows", job["id"], n["id"]), ("cpu", job["id"], n["id"])
                n["rows_per_s"] = self.rate(rk, t, now[rk])
                n["cpu_share"] = self.rate(ck, t, now[ck])
        self.record(t, now)
        return snapshot
