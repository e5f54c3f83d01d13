"""The server's worker pool: W workers (the server's --parallelism), started on demand.

Lifecycle: the runtime owns one `WorkerPool`. A worker starts the first time an actor is
placed on it (actor i of a job runs on worker i mod W); `reset()` at every recovery
empties the live workers and replaces the lost ones (the flows are rebuilt right after,
shipping their state again); `close()` at shutdown stops them.

`call({worker: request})` sends one request to each worker first and then reads every
response, so the workers run concurrently; it always reads every response before raising
(the first `WorkerLost`, else the first worker error), keeping each pipe in step.

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
from typing import Any

from engine.stream.parallel import protocol
from engine.stream.parallel.protocol import WorkerLost
from engine.stream.parallel.transport import ProcessLauncher, WorkerHandle, WorkerLauncher

log = logging.getLogger("swell.parallel")

DEFAULT_TIMEOUT = 60.0
"""Seconds a worker may take to answer one request before it is declared lost."""


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

    def worker_of(self, actor: int) -> int:
        return actor % self.size

    def handle(self, i: int) -> WorkerHandle:
        w = self.workers.get(i)
        if w is None:
            w = self.launcher.start(i, self.config)
            self.workers[i] = w
        return w

    def call(self, requests: dict[int, bytes]) -> dict[int, tuple[dict[str, Any], list[bytes]]]:
        """Each worker's response (header, bodies) to its request; see the module docstring."""
        with self._lock:
            t_call = time.perf_counter()
            busy: dict[int, float] = {}
            sent: list[int] = []
            first: BaseException | None = None
            for i, req in requests.items():
                try:
                    self.handle(i).submit(req)
                    sent.append(i)
                    t = self.traffic.setdefault(i, [0, 0, 0, 0.0, 0.0, 0.0, 0.0])
                    t[0] += 1
                    t[1] += len(req)
                except WorkerLost as e:
                    first = first or e
                    self._forget(i, "died")
            out: dict[int, tuple[dict[str, Any], list[bytes]]] = {}
            failed: BaseException | None = None
            for i in sent:
                t0 = time.perf_counter()
                try:
                    raw = self.workers[i].result(timeout=self.timeout)
                except WorkerLost as e:
                    first = first or e
                    self._forget(i, "timeout" if e.timed_out else "died")
                    continue
                t = self.traffic[i]
                t[2] += len(raw)
                t[3] += time.perf_counter() - t0
                header, bodies = protocol.decode(raw)
                t[4] = float(header.get("cpu", t[4]))
                busy[i] = float(header.get("busy", 0.0))
                t[5] += busy[i]
                if not header.get("ok"):
                    failed = failed or protocol.remote_error(header, f"worker {i}")
                    continue
                out[i] = (header, bodies)
            wall = time.perf_counter() - t_call
            for i, b in busy.items():
                self.traffic[i][6] += max(wall - b, 0.0)
            if first is not None:
                raise first
            if failed is not None:
                raise failed
            return out

    def _forget(self, i: int, reason: str) -> None:
        w = self.workers.pop(i, None)
        self.lost += 1
        if w is not None:
            info = w.info()
            w.kill()
            if self.on_event is not None:
                self.on_event("WORKER_LOST", {"worker": i, **info, "reason": reason})

    def reset(self) -> None:
        """Recovery: every live worker drops its actors; lost ones are replaced."""
        with self._lock:
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
            self.restarts += 1

    def infos(self) -> dict[int, dict[str, object]]:
        return {i: w.info() for i, w in self.workers.items()}

    def close(self) -> None:
        with self._lock:
            self.workers = {}
            self.launcher.close()
