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
import contextlib
import ctypes
import os
import sys
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

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


# -- CPU scheduling of the threads that answer clients and of those that do bulk work -----
#
# Why: the server is one process whose threads share the interpreter lock, on machines with
# few cores that are often busy with other work. A webhook ack is a chain of short steps on
# different threads (the WAL writer's write and fsync, then the event loop's answer); each
# step starts with a wake-up and must get a core before it can even ask for the lock,
# while a barrier thread computing a 100k-row epoch keeps a core busy for hundreds of ms.
# Linux's fair scheduler (EEVDF, 6.6 and later) takes a thread's requested slice as its
# latency hint: a thread that asks for a short slice gets an earlier deadline when it
# wakes, so it runs before a thread with the default slice and does not wait for that
# thread's slice to end. So the WAL writer and the event loop ask for `ANSWER_SLICE_NS`
# (`answer_thread()`), and bulk work (a barrier, a backfill slice, a checkpoint upload)
# runs as SCHED_BATCH (`bulk_work()`), whose wake-ups never preempt another thread. Both
# keep the thread's weight (its nice value), so no thread gets more CPU over time than
# before: only who runs first after a wake-up changes. Threads and processes started from
# a marked thread inherit its mark (Linux does so): the event loop's session threads get
# the short slice, a worker process started by a barrier runs as SCHED_BATCH. No privilege
# is needed; where the system call is missing or refused (not Linux, an older kernel, a
# sandbox) they do nothing.

ANSWER_SLICE_NS = 300_000
"""The slice the client-answering threads request (the kernel's default is 0.7-3 ms)."""

_SCHED_OTHER, _SCHED_BATCH = 0, 3
_SYS_SCHED_SETATTR = {"x86_64": 314, "aarch64": 274}
_SYS_SCHED_GETATTR = {"x86_64": 315, "aarch64": 275}
_SCHED: object = False  # the system calls: False not looked up yet, None unavailable


def _sched_calls() -> tuple[Any, Any, int, int] | None:
    """(libc, attr struct, setattr nr, getattr nr), or None when unavailable."""
    global _SCHED
    if _SCHED is not False:
        return _SCHED  # type: ignore[return-value]
    _SCHED = None
    machine = os.uname().machine if hasattr(os, "uname") else ""
    if sys.platform != "linux" or machine not in _SYS_SCHED_SETATTR:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None

    class Attr(ctypes.Structure):
        _fields_: ClassVar[list[tuple[str, Any]]] = [
            ("size", ctypes.c_uint32),
            ("sched_policy", ctypes.c_uint32),
            ("sched_flags", ctypes.c_uint64),
            ("sched_nice", ctypes.c_int32),
            ("sched_priority", ctypes.c_uint32),
            ("sched_runtime", ctypes.c_uint64),
            ("sched_deadline", ctypes.c_uint64),
            ("sched_period", ctypes.c_uint64),
            ("sched_util_min", ctypes.c_uint32),
            ("sched_util_max", ctypes.c_uint32),
        ]

    _SCHED = (libc, Attr, _SYS_SCHED_SETATTR[machine], _SYS_SCHED_GETATTR[machine])
    return _SCHED


def _get_attr() -> Any | None:
    calls = _sched_calls()
    if calls is None:
        return None
    libc, attr_t, _, get_nr = calls
    a = attr_t()
    if libc.syscall(get_nr, 0, ctypes.byref(a), ctypes.sizeof(a), 0) != 0:
        return None
    return a


def _set_attr(policy: int, runtime_ns: int, nice: int) -> bool:
    calls = _sched_calls()
    if calls is None:
        return False
    libc, attr_t, set_nr, _ = calls
    a = attr_t(size=ctypes.sizeof(attr_t), sched_policy=policy, sched_nice=nice)
    a.sched_runtime = runtime_ns
    return bool(libc.syscall(set_nr, 0, ctypes.byref(a), 0) == 0)


def answer_thread() -> bool:
    """Mark the calling thread as one that answers clients (a short slice); True if set."""
    cur = _get_attr()
    if cur is None or cur.sched_policy != _SCHED_OTHER:
        return False
    return _set_attr(_SCHED_OTHER, ANSWER_SLICE_NS, cur.sched_nice)


def bulk_thread() -> bool:
    """Mark the calling thread, which only does bulk work, SCHED_BATCH; True if set."""
    cur = _get_attr()
    if cur is None or cur.sched_policy != _SCHED_OTHER:
        return False
    return _set_attr(_SCHED_BATCH, 0, cur.sched_nice)


@contextlib.contextmanager
def bulk_work() -> Iterator[None]:
    """Run the body with the calling thread as SCHED_BATCH, then restore its policy and
    slice (a session's thread runs a FLUSH's barrier, then answers its client again)."""
    cur = _get_attr()
    if cur is None or cur.sched_policy != _SCHED_OTHER:
        yield
        return
    runtime, nice = int(cur.sched_runtime), int(cur.sched_nice)
    changed = _set_attr(_SCHED_BATCH, 0, nice)
    try:
        yield
    finally:
        if changed:
            _set_attr(_SCHED_OTHER, runtime, nice)
