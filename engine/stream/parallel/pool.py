"""The server's worker pool: W workers (the server's --parallelism), started on demand.

Lifecycle: the runtime owns one `WorkerPool`. A worker starts the first time an actor is
placed on it (actor i of a job runs on worker i mod W); `reset()` at every recovery
empties the live workers and replaces the lost ones (the flows are rebuilt right after,
shipping their state again); `close()` at shutdown stops them.

`call({worker: request})` sends one request to each worker first and then reads every
response, so the workers run concurrently; it always reads every response before raising
(the first `WorkerLost`, else the first worker error), keeping each pipe in step.
`start(requests)` sends without waiting and `result(pending)` reads later, so the
coordinator can work while the workers answer (the checkpoint's collect is sent right
after the barrier's step); a request to a worker whose earlier response is still unread
reads that one first, so every pipe has at most one request in flight.

Hung workers: a call gives its workers `timeout` seconds (the server's
`--max-heartbeat-interval-secs`, RisingWave's name for how long a silent worker is still
alive) to answer, counted from when its response is awaited; a worker that has not
answered by then (stopped, deadlocked, swapping)
is declared lost like one that died: it is killed, `WORKER_LOST` is recorded with
`"reason": "timeout"`, and the `WorkerLost` rolls the epoch back, so recovery replaces it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.stream.parallel import protocol
from engine.stream.parallel.protocol import WorkerLost
from engine.stream.parallel.transport import ProcessLauncher, WorkerHandle, WorkerLauncher

log = logging.getLogger("swell.parallel")

DEFAULT_TIMEOUT = 60.0
"""Seconds a worker may take to answer one request before it is declared lost."""


@dataclass
class Pending:
    """Requests sent by `WorkerPool.start` and what was read of their responses."""

    t0: float
    sync: bool  # `call`: the caller waits at once (alignment wait is measured)
    sent: list[int] = field(default_factory=list)
    read: set[int] = field(default_factory=set)
    out: dict[int, tuple[dict[str, Any], list[memoryview]]] = field(default_factory=dict)
    busy: dict[int, float] = field(default_factory=dict)
    first: BaseException | None = None  # the first WorkerLost
    failed: BaseException | None = None  # the first error a worker answered


class WorkerPool:
    def __init__(
        self,
        size: int,
        config: dict[str, object] | None = None,
        launcher: WorkerLauncher | None = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
    ) -> None:
        self.size = max(1, int(size))
        self.timeout = timeout if timeout is None or timeout > 0 else None  # None: wait
        self.config = dict(config or {})
        self.launcher: WorkerLauncher = launcher if launcher is not None else ProcessLauncher()
        self.workers: dict[int, WorkerHandle] = {}
        self.on_event = on_event  # (event type, info): WORKER_LOST for the event log
        self.restarts = 0
        self.lost = 0
        self._lock = threading.Lock()  # the barrier thread and DDL share the workers
        # per worker: [requests, bytes out, bytes in, seconds waited for its responses,
        # its CPU seconds (as last reported), seconds busy with requests, seconds it sat
        # idle in a call waiting for the slowest worker (barrier alignment)]
        self.traffic: dict[int, list[float]] = {}
        self._outstanding: dict[int, Pending] = {}  # worker -> a `start` not yet read
        # workers lost since the last `reset`: their actors are gone, so a request for
        # actors raises `WorkerLost` (recovery follows) instead of reaching a new process
        # that lacks them; a stateless one (`decode`) starts the replacement
        self._gone: set[int] = set()

    def worker_of(self, actor: int) -> int:
        return actor % self.size

    def handle(self, i: int) -> WorkerHandle:
        w = self.workers.get(i)
        if w is None:
            w = self.launcher.start(i, self.config)
            self.workers[i] = w
        return w

    def call(
        self, requests: dict[int, bytes], *, stateless: bool = False
    ) -> dict[int, tuple[dict[str, Any], list[memoryview]]]:
        """Each worker's response (header, bodies) to its request; see the module docstring."""
        return self.result(self.start(requests, sync=True, stateless=stateless))

    def start(
        self, requests: dict[int, bytes], *, sync: bool = False, stateless: bool = False
    ) -> Pending:
        """Send one request to each worker and return without reading the responses:
        `result(pending)` reads them later (the coordinator works meanwhile). A worker's
        earlier unread response is read first, so each pipe keeps one request in flight.
        Unless `stateless` (the requests need no actor), a worker lost since the last
        `reset` is not asked: the result raises `WorkerLost` for it."""
        with self._lock:
            p = Pending(time.perf_counter(), sync)
            for i, req in requests.items():
                if i in self._gone and not stateless:
                    p.first = p.first or WorkerLost(f"worker {i} was lost")
                    continue
                self._drain(i)
                try:
                    self.handle(i).submit(req)
                    p.sent.append(i)
                    self._outstanding[i] = p
                    t = self.traffic.setdefault(i, [0, 0, 0, 0.0, 0.0, 0.0, 0.0])
                    t[0] += 1
                    t[1] += len(req)
                except WorkerLost as e:
                    p.first = p.first or e
                    self._forget(i, "died")
            return p

    def result(self, p: Pending) -> dict[int, tuple[dict[str, Any], list[memoryview]]]:
        """The responses of `start`'s requests; raises the first `WorkerLost`, else the
        first worker error, after reading every response."""
        with self._lock:
            for i in p.sent:
                if i not in p.read:
                    self._read(p, i)
            if p.sync:  # a worker's idle time while the slowest one finished
                wall = time.perf_counter() - p.t0
                for i, b in p.busy.items():
                    self.traffic[i][6] += max(wall - b, 0.0)
            if p.first is not None:
                raise p.first
            if p.failed is not None:
                raise p.failed
            return p.out

    def _drain(self, i: int) -> None:
        """Read worker `i`'s response to an earlier `start` still unread (under the lock)."""
        p = self._outstanding.get(i)
        if p is not None and i not in p.read:
            self._read(p, i)

    def _read(self, p: Pending, i: int) -> None:
        """Read worker `i`'s response into `p` (under the lock)."""
        p.read.add(i)
        if self._outstanding.get(i) is p:
            del self._outstanding[i]
        w = self.workers.get(i)
        if w is None:  # forgotten meanwhile (lost during another request)
            p.first = p.first or WorkerLost(f"worker {i} was lost")
            return
        t0 = time.perf_counter()
        try:
            raw = w.result(timeout=self.timeout)
        except WorkerLost as e:
            p.first = p.first or e
            self._forget(i, "timeout" if e.timed_out else "died")
            return
        t = self.traffic[i]
        t[2] += len(raw)
        t[3] += time.perf_counter() - t0
        header, bodies = protocol.decode(raw)
        t[4] = float(header.get("cpu", t[4]))
        p.busy[i] = float(header.get("busy", 0.0))
        t[5] += p.busy[i]
        if not header.get("ok"):
            p.failed = p.failed or protocol.remote_error(header, f"worker {i}")
            return
        p.out[i] = (header, bodies)

    def _forget(self, i: int, reason: str) -> None:
        w = self.workers.pop(i, None)
        self.lost += 1
        self._gone.add(i)
        if w is not None:
            info = w.info()
            w.kill()
            if self.on_event is not None:
                self.on_event("WORKER_LOST", {"worker": i, **info, "reason": reason})

    def reset(self) -> None:
        """Recovery: every live worker drops its actors; lost ones are replaced."""
        with self._lock:
            for i in list(self._outstanding):  # responses nobody will read any more
                self._drain(i)
            for i, w in list(self.workers.items()):
                if not w.alive():
                    self._forget(i, "died")
                    continue
                try:
                    w.submit(protocol.encode({"cmd": "reset"}))
                    header, _ = protocol.decode(w.result(timeout=self.timeout))
                    if not header.get("ok"):
                        raise WorkerLost(f"worker {i}: reset failed: {header.get('error')}")
                except (WorkerLost, OSError) as e:
                    log.warning("worker %s replaced at recovery: %s", i, e)
                    self._forget(i, "timeout" if getattr(e, "timed_out", False) else "died")
            self._gone.clear()  # the flows are rebuilt next: replacements start on demand
            self.restarts += 1

    def infos(self) -> dict[int, dict[str, object]]:
        return {i: w.info() for i, w in self.workers.items()}

    def close(self) -> None:
        with self._lock:
            self._outstanding = {}
            self.workers = {}
            self.launcher.close()
