"""The webhook HTTP front: `POST /webhook/{database}/{schema}/{table}` into webhook tables.

Answers (RisingWave's): 200 with an empty body when the rows are accepted; otherwise
`{"error": "..."}` with 404 (unknown database/table), 403 (not a webhook table), 401
(VALIDATE false), 400 (VALIDATE NULL, or not HTTP), 422 (body not JSON / a batched line not
JSON / typed decode failed), 413 (body over `max_body_bytes`, default 10 MiB), 405 (not
POST), 503 (shutting down), 500 (storage failed). A rejected request never writes
anything: each request's rows are decoded and validated completely before any of them is
queued. HTTP itself is `connectors.webhook.http` (keep-alive, chunked bodies, limits).

`WebhookFront` is the request path; where the rows go is its `Backend`:
- `LocalBackend` (in the server process, `--webhook-workers 0`): resolves tables from the
  catalog and writes them (WAL append + queue) itself;
- `acceptor.RemoteBackend` (in each acceptor process, `--webhook-workers N`): asks the
  server to resolve, and hands the decoded Arrow batch of a flush to the server, which
  does the write and answers after the WAL fsync (`pool.AcceptorPool`).

Request path and why it is shaped this way:
1. resolve the table (`engine.handlers.webhook.WebhookIngest`, cached per catalog
   version);
2. decode the body (inline when small, in a worker thread when large, so other
   connections on the same loop stay responsive): canonical jsonb texts for the
   single-jsonb-column form (one Arrow column is built per flush), else an Arrow batch;
   a single event into the single-jsonb form is decoded later, with the other accepted
   requests of its flush in one call (`WebhookTarget.decode_events`, after VALIDATE);
3. hand it to the table's `_Batcher`: the requests of one event-loop iteration (and those
   arriving while `max_inflight` earlier flushes are still being committed: one, in the
   server process) are flushed together: VALIDATE evaluated once over all of them, the
   accepted rows written as one chunk and one WAL record. This keeps per-request cost
   off the WAL and the barrier;
4. the write (WAL append + queue) never waits for a barrier; into a table with a primary
   key it takes the table's DML lock without blocking when it is free, else in a thread;
5. with `webhook.wait_for_persistence` (default true) answer after the WAL fsync covering
   the record (`Wal.wait_durable_async`: concurrent flushes share the fsync and the
   wake-up);
   otherwise answer once the rows are queued.
No Task, future or loop callback is created per request: each request is an `_Item` in its
table's batch, and when the batch's commit future is done one callback answers all of its
requests (`Request.respond`, straight onto the connection's transport).

Shutdown (`close()`): new requests get 503, in-flight ones finish (their acks are real),
then the listener and connections close.

Observability: counters are plain attributes (`requests`, `responses` by status,
`rows_ingested`, `flushes`, ack latency); each distinct error kind is logged once with its
first occurrence (not once per request). Requests that are not HTTP are logged through
`swell.webhook.http` as one line per kind per minute without a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Protocol
from urllib.parse import unquote

import pyarrow as pa

from connectors.webhook.http import HttpServer, Request, client_error, ok_response
from engine.errors import EngineError
from engine.handlers.webhook import (
    Decoded,
    IncomingRequest,
    WebhookError,
    WebhookIngest,
    WebhookTarget,
    decoded_rows,
)
from engine.latency import Histogram

log = logging.getLogger("swell.webhook")

DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024
INLINE_DECODE_BYTES = 64 * 1024  # bodies up to this size are decoded on the event loop
INLINE_VALIDATE_BYTES = 256 * 1024
"""Flushes up to this many body bytes validate on the event loop (bigger ones in a thread,
as an HMAC over the bodies costs per byte); a VALIDATE that reads only named headers
always validates inline (its verdicts are cached by those values)."""


class StaleTarget(Exception):
    """A backend's copy of the table is out of date: resolve again and redo the request."""


_MESSAGES = {401: "Signature verification failed", 400: "`SECURE_COMPARE()` failed"}


class Backend(Protocol):
    """Where a front's tables come from and its flushes go."""

    max_inflight: int  # flushes of one table being committed at once

    def resolve(
        self, database: str, schema: str, table: str
    ) -> WebhookTarget | Awaitable[WebhookTarget]:
        """The target (raises WebhookError), or an awaitable of it when not known here."""
        ...

    def commit(self, target: WebhookTarget, rows: list[Decoded], n: int) -> asyncio.Future[Any]:
        """Write the rows of one flush; the future is done when the requests may be
        answered 200 (durable, or queued without `wait_for_persistence`), or fails with
        WebhookError / EngineError."""
        ...


class LocalBackend:
    """The in-process backend: the server's own catalog, WAL and queues."""

    max_inflight = 1
    """One flush of a table in flight: the requests arriving during its WAL fsync wait and
    go together as the next one. More flushes in flight do not share more fsyncs (the log
    is synced in sequence order), they only cut the same requests into more WAL records,
    chunks and wake-ups: measured with 32 concurrent single-event clients, one in flight
    answers about 30% more requests per second at less CPU per request than 16."""

    def __init__(self, db: Any) -> None:
        self.db = db
        self.ingest = WebhookIngest(db)
        self.wal = db.wal

    def resolve(self, database: str, schema: str, table: str) -> WebhookTarget:
        return self.ingest.resolve(database, schema, table)

    def commit(self, target: WebhookTarget, rows: list[Decoded], n: int) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        try:
            seq = target.write(rows, blocking=False) if n else None
        except (WebhookError, EngineError) as e:
            fut: asyncio.Future[Any] = loop.create_future()
            fut.set_exception(e)
            return fut
        if seq is None and n:  # the table's DML lock is busy: wait in a thread
            return asyncio.ensure_future(self._write_in_thread(target, rows))
        return self._durable(target, seq)

    async def _write_in_thread(self, target: WebhookTarget, rows: list[Decoded]) -> Any:
        seq = await asyncio.to_thread(target.write, rows)
        return await self._durable(target, seq)

    def _durable(self, target: WebhookTarget, seq: int | None) -> asyncio.Future[Any]:
        if seq is not None and target.wait_for_persistence:
            durable: asyncio.Future[Any] = self.wal.wait_durable_async(seq)
            return durable
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        fut.set_result(seq)
        return fut

    def close(self) -> None:
        """Nothing to stop: durability futures are resolved by the WAL's writer thread."""


class _Item:
    """One accepted-for-processing request: its rows and how to answer it (once)."""

    __slots__ = ("req", "decoded", "http", "path", "t0", "again", "reply", "done")

    def __init__(
        self,
        req: IncomingRequest,
        decoded: Decoded | WebhookError | None,  # None: a single event, decoded per flush
        http: Request,
        path: str,
        t0: float,
        again: bool,
        reply: Callable[[bytes], None],
    ) -> None:
        self.req = req
        self.decoded = decoded
        self.http = http
        self.path = path
        self.t0 = t0
        self.again = again  # already redone once after a StaleTarget
        self.reply = reply
        self.done = False


class _Batcher:
    """Coalesces concurrent requests for one resolved table into one validate + write."""

    def __init__(self, front: WebhookFront, target: WebhookTarget) -> None:
        self.front = front
        self.target = target
        self.loop = asyncio.get_running_loop()
        self.pending: list[_Item] = []
        self.scheduled = False
        self.inflight = 0

    def submit(self, item: _Item) -> None:
        self.pending.append(item)
        if not self.scheduled:
            self._schedule()

    def _schedule(self) -> None:
        if not self.scheduled and self.inflight < self.front.backend.max_inflight:
            self.scheduled = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self.scheduled = False
        items, self.pending = self.pending, []
        if not items:
            return
        t = self.target
        self.inflight += 1
        if t.validator is None:
            self._validated(items, [None] * len(items))
        elif (
            t.header_keys is not None  # reads named headers only: no work per body byte
            or sum(len(it.req.body) for it in items) <= INLINE_VALIDATE_BYTES
        ):
            try:
                statuses = t.validate([it.req for it in items])
            except BaseException as e:  # noqa: BLE001 - every waiter must learn of it
                self._finish(items, e)
                return
            self._validated(items, statuses)
        else:
            task = asyncio.ensure_future(asyncio.to_thread(t.validate, [it.req for it in items]))
            task.add_done_callback(lambda f: self._validated_in_thread(items, f))

    def _validated_in_thread(self, items: list[_Item], f: asyncio.Future[Any]) -> None:
        if f.cancelled() or f.exception() is not None:
            self._finish(items, f.exception() or asyncio.CancelledError())
            return
        self._validated(items, f.result())

    def _validated(self, items: list[_Item], statuses: list[int | None]) -> None:
        settle = self.front._settle
        ok: list[_Item] = []
        for it, st in zip(items, statuses, strict=True):
            if st is not None:
                settle(it, WebhookError(st, _MESSAGES[st]))
            elif isinstance(it.decoded, WebhookError):
                settle(it, it.decoded)
            else:
                ok.append(it)
        later = [it for it in ok if it.decoded is None]
        if later:  # single events: decoded together (`WebhookTarget.decode_events`)
            got = self.target.decode_events([it.req.body for it in later])
            bad = False
            for it, d in zip(later, got, strict=True):
                it.decoded = d
                if isinstance(d, WebhookError):
                    settle(it, d)
                    bad = True
            if bad:
                ok = [it for it in ok if not isinstance(it.decoded, WebhookError)]
        if not ok:
            self._finish([], None)
            return
        rows = [d for it in ok if (d := it.decoded) is not None and not isinstance(d, WebhookError)]
        n = sum(decoded_rows(b) for b in rows)
        try:
            fut = self.front.backend.commit(self.target, rows, n)
        except BaseException as e:  # noqa: BLE001
            self._finish(ok, e)
            return
        fut.add_done_callback(lambda f: self._committed(ok, n, f))

    def _committed(self, items: list[_Item], n: int, f: asyncio.Future[Any]) -> None:
        if f.cancelled():
            self._finish(items, WebhookError(503, "the server is shutting down"))
            return
        e = f.exception()
        if e is None and n:
            self.front.rows_ingested += n
            self.front.flushes += 1
        self._finish(items, e)

    def _finish(self, items: list[_Item], error: BaseException | None) -> None:
        self.inflight -= 1
        if error is None:
            self.front._settle_ok(items)
        else:
            settle = self.front._settle
            for it in items:
                settle(it, error)
        if self.pending:
            self._schedule()
        elif not self.inflight:
            self.front._batcher_idle(self)


def _setter(fut: asyncio.Future[bytes]) -> Callable[[bytes], None]:
    """A reply callback that resolves `fut` (for the request paths that await)."""

    def reply(out: bytes) -> None:
        if not fut.done():
            fut.set_result(out)

    return reply


def _reply_when_done(reply: Callable[[bytes], None], src: asyncio.Future[bytes]) -> None:
    if src.cancelled():
        reply(client_error(503, "the server is shutting down"))
    elif (e := src.exception()) is not None:
        log.error("webhook request failed", exc_info=e)
        reply(client_error(500, "internal error"))
    else:
        reply(src.result())


class WebhookFront:
    """The request path over HTTP; see the module docstring for the request lifecycle."""

    def __init__(
        self,
        backend: Backend,
        host: str,
        port: int,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        reuse_port: bool = False,
    ) -> None:
        self.backend = backend
        self.host = host
        self.port = port
        self.reuse_port = reuse_port
        self.max_body_bytes = max_body_bytes
        self.http = HttpServer(self._handle, max_body=max_body_bytes, on_reject=self._rejected)
        self._batchers: dict[int, _Batcher] = {}
        self._closing = False
        self._inflight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._logged: set[tuple[int, str]] = set()
        # metrics (plain counters)
        self.requests = 0
        self.responses: Counter[int] = Counter()
        self.rows_ingested = 0
        self.flushes = 0
        self.ack_count = 0
        self.ack_seconds_total = 0.0
        self.ack_seconds_max = 0.0
        self.ack_histogram = Histogram()  # request to answer, per accepted request

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        await self.http.start(self.host, self.port, reuse_port=self.reuse_port)
        self.port = self.http.port
        log.debug(
            "webhook listening addr=%s:%d max_body_bytes=%d",
            self.host,
            self.port,
            self.max_body_bytes,
        )

    async def close(self, timeout_s: float = 10.0) -> None:
        """503 for new requests, let in-flight ones finish, then stop listening."""
        if self._closing:
            return
        self._closing = True
        self.http.stop_listening()
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            log.warning(
                "webhook shutdown: %d requests still in flight after %.0f s",
                self._inflight,
                timeout_s,
            )
        await self.http.close()

    # -- the request path ----------------------------------------------------------------------
    def _handle(self, req: Request) -> bytes | Awaitable[bytes] | None:
        """The answer now (bytes), later (an awaitable), or None: `req.respond` answers."""
        self.requests += 1
        if self._closing:
            return self._error(503, "the server is shutting down")
        path = req.path
        parts = path.split("/")
        if len(parts) != 5 or parts[0] or parts[1] != "webhook" or not all(parts[2:]):
            return self._error(404, "not found: use POST /webhook/{database}/{schema}/{table}")
        if req.method != "POST":
            return self._error(405, f"method {req.method} not allowed: use POST")
        names = [unquote(p) for p in parts[2:]] if "%" in path else parts[2:]
        t0 = time.perf_counter()
        try:
            target = self.backend.resolve(*names)
        except WebhookError as e:
            return self._error(e.status, e.message, path)
        if not isinstance(target, WebhookTarget):
            return self._ingest_later(target, req, path, t0, False)
        return self._ingest(target, req, path, t0, False, req.respond)

    async def _ingest_later(
        self, target: Awaitable[WebhookTarget], req: Request, path: str, t0: float, again: bool
    ) -> bytes:
        try:
            resolved = await target
        except WebhookError as e:
            return self._error(e.status, e.message, path)
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        out = self._ingest(resolved, req, path, t0, again, _setter(fut))
        if isinstance(out, bytes):
            return out
        return await (fut if out is None else out)

    def _again(self, req: Request, path: str, t0: float) -> Awaitable[bytes]:
        """Redo a request whose table changed under the backend's copy (once)."""
        names = [unquote(p) for p in path.split("/")[2:]]
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        try:
            target = self.backend.resolve(*names)
        except WebhookError as e:
            fut.set_result(self._error(e.status, e.message, path))
            return fut
        if not isinstance(target, WebhookTarget):
            return self._ingest_later(target, req, path, t0, True)
        out = self._ingest(target, req, path, t0, True, _setter(fut))
        if isinstance(out, bytes):
            fut.set_result(out)
        return fut if out is None or isinstance(out, bytes) else out

    def _ingest(
        self,
        target: WebhookTarget,
        req: Request,
        path: str,
        t0: float,
        again: bool,
        reply: Callable[[bytes], None],
    ) -> bytes | Awaitable[bytes] | None:
        """Queue the request in its table's batch; None: `reply` is called with the answer
        (an awaitable for a body big enough to be decoded in a thread)."""
        keys = target.header_keys
        if keys is None:
            headers = req.headers
        else:  # VALIDATE reads only these; names are lower-cased, so others never match
            get = req.headers.get
            headers = {k: v for k in keys if k == k.lower() and (v := get(k)) is not None}
        body = req.body
        inc = IncomingRequest(headers, body)
        if len(body) > INLINE_DECODE_BYTES:
            return self._ingest_big(target, req, inc, path, t0, again)
        decoded: Decoded | WebhookError | None = None
        if not target.jsonb_body or target.batched:  # else decoded with its flush
            try:
                decoded = target.decode_rows(body)
            except WebhookError as e:
                decoded = e  # reported after VALIDATE: a bad signature answers 401, not 422
        self._inflight += 1
        self._idle.clear()
        self._batcher(target).submit(_Item(inc, decoded, req, path, t0, again, reply))
        return None

    async def _ingest_big(
        self,
        target: WebhookTarget,
        req: Request,
        inc: IncomingRequest,
        path: str,
        t0: float,
        again: bool,
    ) -> bytes:
        decoded: Decoded | WebhookError
        try:
            decoded = await asyncio.to_thread(target.decode_rows, inc.body)
        except WebhookError as e:
            decoded = e
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        self._inflight += 1
        self._idle.clear()
        self._batcher(target).submit(_Item(inc, decoded, req, path, t0, again, _setter(fut)))
        return await fut

    def _settle_ok(self, items: list[_Item]) -> None:
        """Answer 200 to the requests of a committed flush (one timestamp for all)."""
        now = time.perf_counter()
        ok = ok_response()
        observe = self.ack_histogram.observe
        n = 0
        for it in items:
            if it.done:
                continue
            it.done = True
            n += 1
            dt = now - it.t0
            self.ack_seconds_total += dt
            if dt > self.ack_seconds_max:
                self.ack_seconds_max = dt
            observe(dt)
            it.reply(ok)
        self.ack_count += n
        self.responses[200] += n
        self._inflight -= n
        if self._inflight == 0:
            self._idle.set()

    def _settle(self, it: _Item, e: BaseException) -> None:
        """Answer a request that failed (or redo it once when its table changed)."""
        if it.done:
            return
        it.done = True
        self._inflight -= 1
        if self._inflight == 0:
            self._idle.set()
        path = it.path
        if isinstance(e, StaleTarget) and not it.again and not self._closing:
            retry = asyncio.ensure_future(self._again(it.http, path, it.t0))
            retry.add_done_callback(partial(_reply_when_done, it.reply))
            return
        if isinstance(e, WebhookError):
            out = self._error(e.status, e.message, path)
        elif isinstance(e, StaleTarget):
            out = self._error(503, "the table changed meanwhile: retry", path)
        elif isinstance(e, asyncio.CancelledError):
            out = self._error(503, "the server is shutting down", path)
        elif isinstance(e, EngineError):
            out = self._error(500, f"failed to insert: {e}", path)
        else:
            log.error("webhook write failed", exc_info=e)
            out = self._error(500, "internal error", path)
        it.reply(out)

    def _batcher(self, target: WebhookTarget) -> _Batcher:
        b = self._batchers.get(id(target))
        if b is None or b.target is not target:
            b = _Batcher(self, target)
            self._batchers[id(target)] = b
        return b

    def _batcher_idle(self, b: _Batcher) -> None:
        if not b.pending and self._batchers.get(id(b.target)) is b:
            del self._batchers[id(b.target)]

    def _rejected(self, status: int) -> None:
        self.responses[status] += 1

    def _error(self, status: int, message: str, path: str = "-") -> bytes:
        self.responses[status] += 1
        key = (status, message)
        if key not in self._logged and len(self._logged) < 1000:
            self._logged.add(key)
            log.warning(
                'webhook rejected status=%d path=%s error="%s" '
                "(first of its kind; later ones are only counted)",
                status,
                path,
                message,
            )
        return client_error(status, message)

    def stats(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "responses": dict(self.responses),
            "rows_ingested": self.rows_ingested,
            "flushes": self.flushes,
            "ack_count": self.ack_count,
            "ack_seconds_avg": self.ack_seconds_total / self.ack_count if self.ack_count else 0,
            "ack_seconds_max": self.ack_seconds_max,
            "inflight": self._inflight,
        }


class WebhookServer(WebhookFront):
    """The in-process webhook listener (`--webhook-workers 0`): front + `LocalBackend`."""

    def __init__(
        self, db: Any, host: str, port: int, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    ) -> None:
        self.db = db
        self.local = LocalBackend(db)
        super().__init__(self.local, host, port, max_body_bytes=max_body_bytes)
        self.ingest = self.local.ingest

    async def close(self, timeout_s: float = 10.0) -> None:
        if self._closing:
            return
        await super().close(timeout_s)
        await asyncio.to_thread(self.local.close)
        log.info(
            "webhook stopped addr=%s:%d requests=%d rows=%d",
            self.host,
            self.port,
            self.requests,
            self.rows_ingested,
        )


def as_batch(target: WebhookTarget, rows: list[Decoded]) -> pa.RecordBatch:
    """The rows of one flush as one batch of the target's visible columns."""
    texts = [t for d in rows if not isinstance(d, pa.RecordBatch) for t in d]
    batches = [b for b in rows if isinstance(b, pa.RecordBatch) and b.num_rows]
    if texts:
        batches.append(target.as_batch(texts))
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=target.schema)
    if len(batches) == 1:
        return batches[0]
    cols = [pa.concat_arrays([b.column(j) for b in batches]) for j in range(len(target.schema))]
    return pa.RecordBatch.from_arrays(cols, schema=target.schema)
