"""The server side of `--webhook-workers N`: N acceptor processes on one port.

Why: one process tops out at what one core can parse, decode and validate. Acceptor
processes (`acceptor.py`) do that part of every request in parallel; the server process
keeps what must stay in one place: the catalog, the WAL append + queue (so WAL order is
queue order) and the fsync an acknowledgement waits for.

How:
- `start()` binds a placeholder socket to the webhook address with SO_REUSEPORT (it
  fixes the port when 0 was asked for and keeps it reserved; it never listens, so the
  kernel gives it no connections), then starts N acceptors, each with its end of a
  socketpair (`channel.py`), and waits until every one listens (READY);
- RESOLVE: the table through `WebhookIngest` (404/403 as in-process) -> the pickled
  relation, the value of its VALIDATE secret and a fingerprint of both;
- WRITE: the Arrow batch of one acceptor flush. The server resolves the table again and
  answers STALE when the fingerprint differs (DDL or a new secret since the acceptor
  resolved; it redoes the requests), else writes it like the in-process listener
  (`LocalBackend.commit`: WAL append + queue, then the WAL fsync; the WRITEs of one
  loop iteration, from every acceptor, share one WAL record) and answers ACK only then.
  A 200 therefore always follows the fsync of its rows;
- an acceptor that exits (crash, kill) is logged and restarted after a pause (longer if
  it keeps dying at once); its clients' in-flight requests lose their connection and get
  no answer, so nothing unacknowledged was promised. If the server dies, its acceptors
  see the channel close (and Linux kills them with the parent) and exit;
- `close()` sends CLOSE: each acceptor stops listening, answers its in-flight requests
  (the server keeps serving their writes meanwhile) and exits.

Counters: `stats()` adds up the acceptors' request counters (reported every second) and
the server's own rows and flushes.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import pickle
import socket
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from connectors.webhook import channel as ch
from connectors.webhook.server import DEFAULT_MAX_BODY_BYTES, LocalBackend
from engine.errors import EngineError
from engine.handlers.webhook import WebhookError, WebhookTarget

log = logging.getLogger("swell.webhook")
READY_TIMEOUT_S = 60.0
RESTART_DELAY_S = (0.5, 30.0)  # first and longest pause before restarting an acceptor


@dataclass
class _Acceptor:
    index: int
    proc: subprocess.Popen[bytes]
    writer: asyncio.StreamWriter | None = None
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    started: float = field(default_factory=time.monotonic)
    stats: dict[str, Any] = field(default_factory=dict)
    task: asyncio.Task[None] | None = None


class AcceptorPool:
    """Runs the acceptor processes and serves their channels; see the module docstring."""

    def __init__(
        self,
        db: Any,
        host: str,
        port: int,
        *,
        workers: int,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        self.db = db
        self.host = host
        self.port = port
        self.workers = workers
        self.max_body_bytes = max_body_bytes
        self.local = LocalBackend(db)
        self.ingest = self.local.ingest
        self.acceptors: dict[int, _Acceptor] = {}
        self.restarts = 0
        self.rows_ingested = 0
        self.flushes = 0
        self._closing = False
        self._placeholder: socket.socket | None = None
        self._fps: dict[int, tuple[WebhookTarget, str]] = {}
        self._pending: dict[int, tuple[WebhookTarget, list[tuple[_Acceptor, int, Any]]]] = {}
        self._gone: dict[str, float] = {}  # counters of acceptors that exited
        self._gone_responses: Counter[str] = Counter()
        self._delay = RESTART_DELAY_S[0]

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        s = socket.socket(family, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        s.bind((self.host, self.port))
        self._placeholder = s
        self.port = s.getsockname()[1]
        for i in range(self.workers):
            self._spawn(i)
        waits = [asyncio.wait_for(a.ready.wait(), READY_TIMEOUT_S) for a in self.acceptors.values()]
        results = await asyncio.gather(*waits, return_exceptions=True)
        ready = sum(1 for r in results if not isinstance(r, BaseException))
        if not ready:
            await self.close()
            raise OSError(f"no webhook acceptor started on {self.host}:{self.port}")
        log.info("webhook acceptors ready workers=%d addr=%s:%d", ready, self.host, self.port)

    def _spawn(self, index: int) -> None:
        parent, child = socket.socketpair()
        cmd = [
            sys.executable,
            "-m",
            "connectors.webhook.acceptor",
            "--fd",
            str(child.fileno()),
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--max-body",
            str(self.max_body_bytes),
            "--log-level",
            logging.getLevelName(logging.getLogger().getEffectiveLevel()),
        ]
        proc = subprocess.Popen(cmd, pass_fds=[child.fileno()], stdin=subprocess.DEVNULL)
        child.close()
        a = _Acceptor(index, proc)
        self.acceptors[index] = a
        a.task = asyncio.get_running_loop().create_task(self._serve(a, parent))

    async def close(self, timeout_s: float = 10.0) -> None:
        if self._closing:
            return
        self._closing = True
        for a in self.acceptors.values():
            if a.writer is not None and not a.writer.is_closing():
                a.writer.write(ch.frame(ch.CLOSE, {}))
        for a in list(self.acceptors.values()):
            try:
                await asyncio.wait_for(asyncio.to_thread(a.proc.wait), timeout_s)
            except TimeoutError:
                log.warning("webhook acceptor pid=%d did not stop: killed", a.proc.pid)
                a.proc.kill()
                await asyncio.to_thread(a.proc.wait)
            if a.task is not None:
                with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                    await asyncio.wait_for(a.task, 5.0)
        if self._placeholder is not None:
            self._placeholder.close()
        await asyncio.to_thread(self.local.close)
        st = self.stats()
        log.info(
            "webhook stopped addr=%s:%d requests=%d rows=%d",
            self.host,
            self.port,
            st["requests"],
            self.rows_ingested,
        )

    # -- one acceptor's channel ------------------------------------------------------------------
    async def _serve(self, a: _Acceptor, sock: socket.socket) -> None:
        reader, writer = await asyncio.open_unix_connection(sock=sock)
        a.writer = writer
        try:
            while True:
                try:
                    kind, h, payload = await ch.read_frame(reader)
                except (asyncio.IncompleteReadError, ConnectionError):
                    break
                if kind == ch.WRITE:
                    self._on_write(a, h, payload)
                elif kind == ch.RESOLVE:
                    self._on_resolve(a, h)
                elif kind == ch.STATS:
                    a.stats = h
                elif kind == ch.READY:
                    a.ready.set()
                    self._delay = RESTART_DELAY_S[0]
        finally:
            writer.close()
            self._gone_acceptor(a)

    def _gone_acceptor(self, a: _Acceptor) -> None:
        for k, v in a.stats.items():
            if k == "responses":
                self._gone_responses.update(v)
            elif isinstance(v, (int, float)) and k != "inflight" and k != "ack_seconds_max":
                self._gone[k] = self._gone.get(k, 0) + v
        a.stats = {}
        if self._closing:
            return
        code = a.proc.poll()
        log.error(
            "webhook acceptor exited pid=%d code=%s: restarting in %.1f s",
            a.proc.pid,
            code,
            self._delay,
        )
        delay = self._delay
        if time.monotonic() - a.started < 5.0:  # dying at once: back off
            self._delay = min(self._delay * 2, RESTART_DELAY_S[1])
        asyncio.get_running_loop().call_later(delay, self._restart, a)

    def _restart(self, a: _Acceptor) -> None:
        if self._closing:
            return
        if a.proc.poll() is None:
            a.proc.kill()
        with contextlib.suppress(Exception):
            a.proc.wait(timeout=1)
        self.restarts += 1
        self._spawn(a.index)

    def _send(self, a: _Acceptor, kind: int, h: dict[str, Any], payload: bytes = b"") -> None:
        if a.writer is not None and not a.writer.is_closing():
            a.writer.write(ch.frame(kind, h, payload))

    def _fingerprint(self, t: WebhookTarget) -> str:
        got = self._fps.get(id(t))
        if got is not None and got[0] is t:
            return got[1]
        secret = t._secret_value() if t.secret is not None else None
        fp = hashlib.sha1(pickle.dumps((t.rel, secret))).hexdigest()
        if len(self._fps) > 1000:
            self._fps.clear()
        self._fps[id(t)] = (t, fp)
        return fp

    def _on_resolve(self, a: _Acceptor, h: dict[str, Any]) -> None:
        version = self.db.catalog.version
        try:
            t = self.ingest.resolve(*h["key"])
            secret = t._secret_value() if t.secret is not None else None
            spec = {
                "rel": t.rel,
                "secret": t.secret,
                "secret_value": secret,
                "fp": self._fingerprint(t),
            }
        except WebhookError as e:
            self._send(a, ch.RESOLVED, {"id": h["id"], "status": e.status,
                                        "message": e.message, "version": version})  # fmt: skip
            return
        self._send(
            a,
            ch.RESOLVED,
            {"id": h["id"], "status": 0, "message": "", "version": version},
            pickle.dumps(spec),
        )

    def _on_write(self, a: _Acceptor, h: dict[str, Any], payload: bytes) -> None:
        i = h["id"]
        try:
            t = self.ingest.resolve(*h["key"])
            if self._fingerprint(t) != h["fp"]:
                self._ack(a, i, ch.STALE, "")
                return
            batch = ch.ipc_batch(payload)
            if batch.schema != t.schema:
                self._ack(a, i, ch.STALE, "")
                return
        except WebhookError as e:
            self._ack(a, i, e.status, e.message)
            return
        except Exception as e:  # noqa: BLE001 - answer the acceptor, log the cause
            log.error("webhook acceptor write failed", exc_info=e)
            self._ack(a, i, 500, "internal error")
            return
        # the writes of one loop iteration (from every acceptor) share one WAL record
        pending = self._pending.get(id(t))
        if pending is None:
            pending = self._pending[id(t)] = (t, [])
            asyncio.get_running_loop().call_soon(self._write, id(t))
        pending[1].append((a, i, batch))

    def _write(self, key: int) -> None:
        t, writes = self._pending.pop(key)
        n = sum(b.num_rows for _, _, b in writes)
        try:
            fut = self.local.commit(t, [b for _, _, b in writes], n)
        except Exception as e:  # noqa: BLE001 - commit reports through its future
            log.error("webhook acceptor write failed", exc_info=e)
            for a, i, _ in writes:
                self._ack(a, i, 500, "internal error")
            return
        fut.add_done_callback(lambda f: self._committed(writes, n, f))

    def _committed(
        self, writes: list[tuple[_Acceptor, int, Any]], n: int, f: asyncio.Future[Any]
    ) -> None:
        e: BaseException | None
        if f.cancelled():
            e = WebhookError(503, "the server is shutting down")
        else:
            e = f.exception()
        if e is None:
            self.rows_ingested += n
            self.flushes += 1
            status, message = 0, ""
        elif isinstance(e, WebhookError):
            status, message = e.status, e.message
        elif isinstance(e, EngineError):
            status, message = 500, f"failed to insert: {e}"
        else:
            log.error("webhook write failed", exc_info=e)
            status, message = 500, "internal error"
        for a, i, _ in writes:
            self._ack(a, i, status, message)

    def _ack(self, a: _Acceptor, i: int, status: int, message: str) -> None:
        h = {"id": i, "status": status, "message": message, "version": self.db.catalog.version}
        self._send(a, ch.ACK, h)

    # -- counters ------------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        total: dict[str, float] = {
            k: self._gone.get(k, 0) for k in ("requests", "ack_count", "ack_seconds_total")
        }
        responses: Counter[str] = Counter(self._gone_responses)
        ack_max = 0.0
        inflight = 0
        for a in self.acceptors.values():
            st = a.stats
            for k in ("requests", "ack_count", "ack_seconds_total"):
                total[k] += float(st.get(k, 0))
            responses.update(st.get("responses", {}))
            ack_max = max(ack_max, st.get("ack_seconds_max", 0.0))
            inflight += st.get("inflight", 0)
        acks = total["ack_count"]
        return {
            "requests": int(total["requests"]),
            "responses": {int(k): v for k, v in responses.items()},
            "rows_ingested": self.rows_ingested,
            "flushes": self.flushes,
            "ack_count": int(acks),
            "ack_seconds_avg": total["ack_seconds_total"] / acks if acks else 0,
            "ack_seconds_max": ack_max,
            "inflight": inflight,
            "workers": sum(1 for a in self.acceptors.values() if a.proc.poll() is None),
            "restarts": self.restarts,
        }
