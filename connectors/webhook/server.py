"""The webhook HTTP server: `POST /webhook/{database}/{schema}/{table}` into webhook tables.

Runs as an aiohttp app in the same process and event loop as pgwire. Answers (RisingWave's):
200 with an empty body when the rows are accepted; otherwise `{"error": "..."}` with 404
(unknown database/table), 403 (not a webhook table), 401 (VALIDATE false), 400 (VALIDATE
NULL), 422 (body not JSON / a batched line not JSON / typed decode failed), 413 (body over
`max_body_bytes`, default 10 MiB), 405 (not POST), 503 (shutting down), 500 (storage
failed). A rejected request never writes anything: each request's rows are decoded and
validated completely before any of them is queued.

Request path and why it is shaped this way:
1. resolve the table (`engine.handlers.webhook.WebhookIngest`, cached per catalog version);
2. read the body; decode it (inline when small, in a worker thread when large, so pgwire
   connections on the same loop stay responsive): canonical jsonb texts for the
   single-jsonb-column form (one Arrow column is built per flush), else an Arrow batch;
3. hand it to the table's `_Batcher`: every request that arrives while the previous flush
   is running (or in the same loop iteration) is flushed together: VALIDATE evaluated once
   over all of them, the accepted rows written as one chunk and one WAL record. This keeps
   per-request cost off the barrier (one chunk per flush, not per request);
4. the write (WAL append + queue) never waits for a barrier; into a table with a primary
   key it takes the table's DML lock without blocking when it is free, else in a thread
   (an UPDATE on the table, or the barrier storing its rows, holds it);
5. with `webhook.wait_for_persistence` (default true) answer after the WAL fsync covering
   the record (`DurableWaiter`; concurrent requests share the fsync and the wake-up);
   otherwise answer once the rows are queued.

Shutdown (`close()`): new requests get 503, in-flight ones finish (their acks are real),
then the listener and connections close.

Observability: counters are plain attributes (`requests`, `responses` by status,
`rows_ingested`, `flushes`, ack latency); each distinct error kind is logged once with its
first occurrence (not once per request). Requests aiohttp cannot parse (not HTTP, bad
headers, oversized lines) are logged through `swell.webhook.http` as one line per kind
per minute without a traceback: anyone reaching the port can send them.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from connectors.webhook.durable import DurableWaiter
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
from engine.log_throttle import ThrottleFilter

log = logging.getLogger("swell.webhook")
# aiohttp's request handler logs here (a traceback per malformed request by default)
http_log = logging.getLogger("swell.webhook.http")
http_log.addFilter(ThrottleFilter((HttpProcessingError,), "malformed HTTP request", 60.0))

DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024
INLINE_DECODE_BYTES = 64 * 1024  # bodies up to this size are decoded on the event loop
INLINE_VALIDATE_BYTES = 256 * 1024  # flushes up to this many body bytes validate inline

_MESSAGES = {401: "Signature verification failed", 400: "`SECURE_COMPARE()` failed"}


@dataclass
class _Item:
    req: IncomingRequest
    decoded: Decoded | WebhookError
    fut: asyncio.Future[int | None]


class _Batcher:
    """Coalesces concurrent requests for one resolved table into one validate + write."""

    def __init__(self, server: WebhookServer, target: WebhookTarget) -> None:
        self.server = server
        self.target = target
        self.pending: list[_Item] = []
        self.task: asyncio.Task[None] | None = None

    def submit(
        self, req: IncomingRequest, decoded: Decoded | WebhookError
    ) -> asyncio.Future[int | None]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int | None] = loop.create_future()
        self.pending.append(_Item(req, decoded, fut))
        if self.task is None:
            self.task = loop.create_task(self._run())
        return fut

    async def _run(self) -> None:
        try:
            while self.pending:
                items, self.pending = self.pending, []
                try:
                    await self._flush(items)
                except BaseException as e:  # noqa: BLE001 - every waiter must learn of it
                    for it in items:
                        if not it.fut.done():
                            it.fut.set_exception(e)
                    if isinstance(e, asyncio.CancelledError):
                        raise
        finally:
            self.task = None
            self.server._batcher_idle(self)

    async def _flush(self, items: list[_Item]) -> None:
        t = self.target
        reqs = [it.req for it in items]
        if t.validator is None:
            statuses: list[int | None] = [None] * len(items)
        elif sum(len(r.body) for r in reqs) <= INLINE_VALIDATE_BYTES:
            statuses = t.validate(reqs)
        else:
            statuses = await asyncio.to_thread(t.validate, reqs)
        ok: list[_Item] = []
        for it, st in zip(items, statuses, strict=True):
            if st is not None:
                _fail(it.fut, WebhookError(st, _MESSAGES[st]))
            elif isinstance(it.decoded, WebhookError):
                _fail(it.fut, it.decoded)
            else:
                ok.append(it)
        if not ok:
            return
        batches: list[Decoded] = [it.decoded for it in ok]
        rows = sum(decoded_rows(b) for b in batches)
        seq: int | None = None
        if rows:
            seq = t.write(batches, blocking=False)
            if seq is None:  # the table's DML lock is busy: wait in a thread
                seq = await asyncio.to_thread(t.write, batches)
            self.server.rows_ingested += rows
            self.server.flushes += 1
        for it in ok:
            if not it.fut.done():
                it.fut.set_result(seq)


def _fail(fut: asyncio.Future[Any], e: BaseException) -> None:
    if not fut.done():
        fut.set_exception(e)


class WebhookServer:
    """The running webhook listener; see the module docstring for the request lifecycle."""

    def __init__(
        self, db: Any, host: str, port: int, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    ) -> None:
        self.db = db
        self.host = host
        self.port = port
        self.max_body_bytes = max_body_bytes
        self.ingest = WebhookIngest(db)
        self.durable = DurableWaiter(db.wal)
        self._batchers: dict[int, _Batcher] = {}
        self._runner: web.AppRunner | None = None
        self._closing = False
        self._inflight = 0
        self._idle = asyncio.Event()
        self._idle.set()
        self._logged: set[tuple[int, str]] = set()
        # metrics (plain counters; exported later)
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
        app = web.Application(client_max_size=self.max_body_bytes)
        app.router.add_route("*", "/webhook/{database}/{schema}/{table}", self._handle)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, logger=http_log)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, reuse_address=True)
        await site.start()
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            self.port = server.sockets[0].getsockname()[1]
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
        try:
            await asyncio.wait_for(self._idle.wait(), timeout_s)
        except TimeoutError:
            log.warning(
                "webhook shutdown: %d requests still in flight after %.0f s",
                self._inflight,
                timeout_s,
            )
        if self._runner is not None:
            await self._runner.cleanup()
        await asyncio.to_thread(self.durable.close)
        log.info(
            "webhook stopped addr=%s:%d requests=%d rows=%d",
            self.host,
            self.port,
            self.requests,
            self.rows_ingested,
        )

    # -- handlers ----------------------------------------------------------------------------
    async def _not_found(self, request: web.Request) -> web.Response:
        return self._error(404, "not found: use POST /webhook/{database}/{schema}/{table}")

    async def _handle(self, request: web.Request) -> web.Response:
        self.requests += 1
        if self._closing:
            return self._error(503, "the server is shutting down")
        if request.method != "POST":
            return self._error(405, f"method {request.method} not allowed: use POST")
        self._inflight += 1
        self._idle.clear()
        t0 = time.perf_counter()
        try:
            return await self._ingest(request, t0)
        except WebhookError as e:
            return self._error(e.status, e.message, request)
        except EngineError as e:
            return self._error(500, f"failed to insert: {e}", request)
        finally:
            self._inflight -= 1
            if self._inflight == 0:
                self._idle.set()

    async def _ingest(self, request: web.Request, t0: float) -> web.Response:
        info = request.match_info
        target = self.ingest.resolve(info["database"], info["schema"], info["table"])
        if request.content_length is not None and request.content_length > self.max_body_bytes:
            raise WebhookError(413, f"request body exceeds {self.max_body_bytes} bytes")
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge as e:
            raise WebhookError(413, f"request body exceeds {self.max_body_bytes} bytes") from e
        keys = target.header_keys
        if keys is None:
            headers = {k.lower(): v for k, v in request.headers.items()}
        else:  # VALIDATE reads only these; names are lower-cased, so others never match
            get = request.headers.get
            headers = {k: v for k in keys if k == k.lower() and (v := get(k)) is not None}
        decoded: Decoded | WebhookError
        try:
            if len(body) <= INLINE_DECODE_BYTES:
                decoded = target.decode_rows(body)
            else:
                decoded = await asyncio.to_thread(target.decode_rows, body)
        except WebhookError as e:
            decoded = e  # reported after VALIDATE: a bad signature answers 401, not 422
        seq = await self._batcher(target).submit(IncomingRequest(headers, body), decoded)
        if seq is not None and target.wait_for_persistence:
            await self.durable.wait(seq)
        dt = time.perf_counter() - t0
        self.ack_count += 1
        self.ack_seconds_total += dt
        self.ack_seconds_max = max(self.ack_seconds_max, dt)
        self.ack_histogram.observe(dt)
        self.responses[200] += 1
        return web.Response(status=200)

    def _batcher(self, target: WebhookTarget) -> _Batcher:
        b = self._batchers.get(id(target))
        if b is None or b.target is not target:
            b = _Batcher(self, target)
            self._batchers[id(target)] = b
        return b

    def _batcher_idle(self, b: _Batcher) -> None:
        if not b.pending and self._batchers.get(id(b.target)) is b:
            del self._batchers[id(b.target)]

    def _error(self, status: int, message: str, request: web.Request | None = None) -> web.Response:
        self.responses[status] += 1
        key = (status, message)
        if key not in self._logged and len(self._logged) < 1000:
            self._logged.add(key)
            path = request.path if request is not None else "-"
            log.warning(
                'webhook rejected status=%d path=%s error="%s" '
                "(first of its kind; later ones are only counted)",
                status,
                path,
                message,
            )
        return web.Response(
            status=status, body=orjson.dumps({"error": message}), content_type="application/json"
        )

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


async def start_webhook_server(
    db: Any, host: str, port: int, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
) -> WebhookServer:
    """Start the webhook listener on host:port (0 picks a free port); `await s.close()`."""
    server = WebhookServer(db, host, port, max_body_bytes=max_body_bytes)
    await server.start()
    return server
