"""Worker handles: how the coordinator talks to a worker, and the local process transport.

A transport gives the coordinator `WorkerHandle`s: `submit(request)` sends one request,
`result()` returns the responses in request order. The coordinator keeps at most one
request outstanding per worker (it batches every actor of the worker into one request),
so neither side can block writing while the other is blocked writing too.

The local transport (`ProcessLauncher`) runs each worker as a child process
`python -m engine.stream.parallel.worker_main`, talking over its stdin/stdout pipes in
length-prefixed frames (8 bytes BE length, then the message). The first frame is the
worker's config (JSON). A worker that dies (kill -9, a crash) closes its end of the pipe:
the next `submit`/`result` raises `WorkerLost` naming the worker, its pid and how it
exited. A worker whose coordinator dies reads EOF on stdin and exits.

Ray actors (`transport_ray`) implement the same interfaces.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import IO, Any, Protocol

import engine
from engine.stream.parallel.protocol import WorkerLost

log = logging.getLogger("swell.parallel")

_FRAME = struct.Struct(">Q")

START_TIMEOUT = 120.0
"""Seconds a new worker process may take to answer its first request (it imports the
engine first: about a CPU-second, far more on a loaded machine)."""


class WorkerHandle(Protocol):
    worker_id: int

    def submit(self, request: bytes) -> None:
        """Send one request (returns once it is handed to the transport)."""

    def result(self, timeout: float | None = None) -> bytes:
        """The next response, in request order; raises WorkerLost (also when none came
        within `timeout` seconds: the worker is killed then)."""

    def alive(self) -> bool: ...

    def kill(self) -> None: ...

    def info(self) -> dict[str, object]:
        """{"pid": ..., "node": ..., "address": ...} for system tables and logs."""


class WorkerLauncher(Protocol):
    def start(self, worker_id: int, config: dict[str, object]) -> WorkerHandle: ...

    def close(self) -> None: ...


def write_frame(f: IO[bytes], payload: bytes) -> None:
    f.write(_FRAME.pack(len(payload)))
    f.write(payload)
    f.flush()


def read_exact(f: IO[bytes], n: int, deadline: float | None = None) -> bytes | None:
    """`n` bytes from `f`, or None at end of file (the other side went away). With
    `deadline` (`time.monotonic()`), `f` must be unbuffered (each read returns what the
    pipe has): it raises TimeoutError when the bytes have not all come by then, so a
    worker stopped half-way through a response cannot hold its reader forever.

    The bytes are read into one buffer made for them (`readinto`, which releases the
    interpreter lock): joining the pipe's 64 kB reads afterwards was a copy of the
    whole message holding the lock (about 10 ms for a 50 MB response)."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        if deadline is not None:
            ready, _, _ = select.select([f], [], [], max(deadline - time.monotonic(), 0.0))
            if not ready:
                raise TimeoutError
        k = f.readinto(view[got:])  # type: ignore[attr-defined]
        if not k:
            return None
        got += k
    return buf  # type: ignore[return-value]  # a bytearray: bytes' API without the copy


def read_frame(f: IO[bytes], deadline: float | None = None) -> bytes | None:
    head = read_exact(f, _FRAME.size, deadline)
    if head is None:
        return None
    (n,) = _FRAME.unpack(head)
    return read_exact(f, n, deadline) if n else b""


class ProcessWorker:
    """One worker child process (see the module docstring)."""

    def __init__(self, worker_id: int, proc: subprocess.Popen[bytes]) -> None:
        self.worker_id = worker_id
        self.proc = proc
        self._lost: str | None = None
        self._started = False  # it answered once: its imports are done

    def _gone(self, what: str) -> WorkerLost:
        if self._lost is None:
            try:
                code = self.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                code = None
            how = (
                f"killed by signal {-code}"
                if code is not None and code < 0
                else f"exited with status {code}"
                if code is not None
                else "stopped answering"
            )
            self._lost = f"worker {self.worker_id} (pid {self.proc.pid}) was lost: {how}"
            log.error("%s (%s)", self._lost, what)
        return WorkerLost(self._lost)

    def submit(self, request: bytes) -> None:
        if self._lost is not None:
            raise WorkerLost(self._lost)
        assert self.proc.stdin is not None
        try:
            write_frame(self.proc.stdin, request)
        except (BrokenPipeError, OSError, ValueError) as e:
            raise self._gone("sending a request") from e

    def result(self, timeout: float | None = None) -> bytes:
        if self._lost is not None:
            raise WorkerLost(self._lost)
        out = self.proc.stdout
        assert out is not None
        # read unbuffered (no other reader of this pipe): `select` then sees every byte
        # not read yet, and a response that stops coming half-way times out too
        raw: Any = getattr(out, "raw", out)
        deadline = None
        if timeout is not None:
            if not self._started:  # the first answer waits for the engine's imports too
                timeout = max(timeout, START_TIMEOUT)
            deadline = time.monotonic() + max(timeout, 0.0)
        try:
            msg = read_frame(raw, deadline)
        except TimeoutError:
            # hung (e.g. stopped), not dead: killed, since a late answer would be read
            # as the response to the next request
            self._lost = (
                f"worker {self.worker_id} (pid {self.proc.pid}) was lost: "
                f"no answer within {timeout:g} s"
            )
            log.error("%s; killing it", self._lost)
            self.kill()
            err = WorkerLost(self._lost)
            err.timed_out = True
            raise err from None
        except (OSError, ValueError) as e:
            raise self._gone("reading a response") from e
        if msg is None:
            raise self._gone("reading a response")
        self._started = True
        return msg

    def alive(self) -> bool:
        return self._lost is None and self.proc.poll() is None

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        for f in (self.proc.stdin, self.proc.stdout):
            try:
                if f is not None:
                    f.close()
            except OSError:
                pass

    def stop(self) -> None:
        """End the worker: closing its stdin makes it exit; kill it if it does not."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self.kill()

    def info(self) -> dict[str, object]:
        return {"pid": self.proc.pid, "node": "local", "address": f"pid:{self.proc.pid}"}


WORKER_NICE = 10
"""Worker processes lower their CPU priority by this much (`os.nice`) when they start.

Why: on a machine with a few cores the workers computing a big epoch took the CPU from
the server process, whose threads answer every client (pgwire, webhook acks, the WAL
writer): a `SELECT 1` waited for a core behind a worker's partition of the epoch. A
niced worker still gets every idle cycle, so a barrier on an otherwise idle machine takes
as long; when both want a core, the client's answer comes first (measured by
bench/read_latency_bench.py on a 2-core machine at load 12-13: p99 during 100k-row epochs
62-76 -> 42-59 ms, during 1M-row COPYs 95-158 -> 60-92 ms, FLUSH unchanged). The server
itself is not niced: a thread of it holding the interpreter lock while descheduled would
stall every other thread."""


class ProcessLauncher:
    """Starts workers as child processes of the server (the local transport); they run at
    a lower CPU priority (`WORKER_NICE`)."""

    def __init__(self) -> None:
        self.workers: list[ProcessWorker] = []

    def start(self, worker_id: int, config: dict[str, object]) -> ProcessWorker:
        env = dict(os.environ)
        root = str(Path(engine.__file__).resolve().parent.parent)  # this engine's tree
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        proc = subprocess.Popen(
            [sys.executable, "-m", "engine.stream.parallel.worker_main"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            close_fds=True,
        )
        w = ProcessWorker(worker_id, proc)
        w.submit(json.dumps({**config, "worker_id": worker_id}).encode())
        self.workers = [x for x in self.workers if x.alive()] + [w]
        log.info("worker started worker=%s pid=%s", worker_id, proc.pid)
        return w

    def close(self) -> None:
        for w in self.workers:
            w.stop()
        self.workers = []


def config_of(scratch_dir: str | None, **extra: Any) -> dict[str, object]:
    """A worker config: its scratch directory and options (`host.WorkerHost`)."""
    return {"scratch_dir": scratch_dir, **extra}
