"""A small HTTP/1.1 server on asyncio's Protocol API, made for the webhook's request shape.

Why not aiohttp: a webhook request is a POST with a small body answered by a status code.
aiohttp spends about 80 us of CPU per such request in its own machinery (streams, a Task
per request, multidicts, routing, response objects), which caps one process near 12k
requests per CPU-second before any JSON is touched. Here a request costs one buffer scan,
one split of the header block and one `transport.write`, and the handler answers through a
callback on a future instead of a Task per request.

What it implements (RFC 9112, server side):
- request line `METHOD SP target SP HTTP/1.0|1.1` (other versions: 505), header fields
  `name: value` (no obs-fold, no whitespace before the colon: 400), header block at most
  `MAX_HEADER_BYTES` (431);
- bodies by `Content-Length` or `Transfer-Encoding: chunked` (chunk extensions ignored,
  trailers skipped); both at once, a bad length or another transfer coding: 400 / 501;
  a body over `max_body` answers 413 without reading it into memory (the rest is read and
  dropped, so the client sees the answer, then the connection closes);
- `Expect: 100-continue` gets the interim answer when the body is not there yet;
- keep-alive (HTTP/1.1 by default, HTTP/1.0 with `Connection: keep-alive`), pipelining
  (requests on one connection are answered in order, one at a time), `Connection: close`;
  idle keep-alive connections are closed after `idle_timeout_s`;
- every malformed request is answered (400/413/431/501/505) and the connection closed;
  it is logged through `swell.webhook.http`, one line per kind per minute.

Lifecycle: `HttpServer(handler, max_body=...)`; `await start(host, port, reuse_port=)` or
`await start_on(sock)`; `await close()` stops listening and closes idle connections (a
connection with a request in flight closes after its answer). The handler gets a
`Request` and returns the response bytes (`response(...)`), an awaitable of them, or None:
then it answers later with `req.respond(bytes)` (exactly once), which costs no future and
no loop callback per request (the webhook's batches answer their requests that way).

Parsing: the header block is decoded once (UTF-8, undecodable bytes kept as surrogate
escapes) and its field lines are checked by one regular expression, so a request costs a
few C-level string operations per header rather than several Python-level ones.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import socket
import time
from collections.abc import Awaitable, Callable
from email.utils import formatdate
from functools import partial

import orjson

from engine.log_throttle import LogThrottle

http_log = logging.getLogger("swell.webhook.http")
_throttle = LogThrottle(60.0)

MAX_HEADER_BYTES = 64 * 1024
IDLE_TIMEOUT_S = 75.0

REASONS = {
    100: "Continue",
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    413: "Content Too Large",
    422: "Unprocessable Content",
    431: "Request Header Fields Too Large",
    500: "Internal Server Error",
    501: "Not Implemented",
    503: "Service Unavailable",
    505: "HTTP Version Not Supported",
}
_TCHAR = r"[!#$%&'*+\-.^_`|~0-9A-Za-z]"
_TOKEN = re.compile(_TCHAR + "+")
_FIELDS = re.compile(f"{_TCHAR}+:[^\r\n]*(?:\r\n{_TCHAR}+:[^\r\n]*)*")
"""Header field lines `name: value` separated by CRLF (RFC 9110 token names, no obs-fold,
no whitespace before the colon)."""
_CONTINUE = b"HTTP/1.1 100 Continue\r\n\r\n"


class Request:
    """One parsed request: method, target (path and query), lower-cased headers, body."""

    __slots__ = ("method", "target", "headers", "body", "keep_alive", "conn")

    def __init__(
        self,
        method: str,
        target: str,
        headers: dict[str, str],
        body: bytes,
        keep_alive: bool,
        conn: _Conn | None = None,
    ) -> None:
        self.method = method
        self.target = target
        self.headers = headers  # lower-cased names; the first of repeated fields
        self.body = body
        self.keep_alive = keep_alive
        self.conn = conn  # the connection to answer on (None: built by hand)

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    def respond(self, out: bytes) -> None:
        """Answer a request whose handler returned None (once; later calls are ignored)."""
        conn, self.conn = self.conn, None
        if conn is not None:
            conn.respond(out, self.keep_alive)


Handler = Callable[[Request], "bytes | Awaitable[bytes] | None"]


class BadRequest(Exception):
    """A request that cannot be parsed; answered with `status` and the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Date:
    """The Date header value, formatted at most once a second."""

    sec = -1
    value = b""

    @classmethod
    def get(cls) -> bytes:
        now = int(time.time())
        if now != cls.sec:
            cls.sec = now
            cls.value = formatdate(now, usegmt=True).encode()
        return cls.value


def response(
    status: int,
    body: bytes = b"",
    content_type: str | None = None,
    *,
    close: bool = False,
    extra: str = "",
) -> bytes:
    """The bytes of a complete response (status line, headers, body)."""
    head = (
        f"HTTP/1.1 {status} {REASONS.get(status, 'Unknown')}\r\n"
        f"Content-Length: {len(body)}\r\n"
        + (f"Content-Type: {content_type}\r\n" if content_type else "")
        + ("Connection: close\r\n" if close else "")
        + extra
    )
    return head.encode() + b"Date: " + _Date.get() + b"\r\n\r\n" + body


_OK_HEAD = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nDate: "


def ok_response() -> bytes:
    """`response(200)`, cheaper (the hot path of an accepted request)."""
    return _OK_HEAD + _Date.get() + b"\r\n\r\n"


def _error_body(status: int, message: str) -> bytes:
    return response(status, orjson.dumps({"error": message}), "application/json", close=True)


class _Conn(asyncio.Protocol):
    """One client connection: buffers bytes, parses requests, answers them in order."""

    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.busy = False  # a request is being handled; later ones wait in `buf`
        self.discard = 0  # bytes of a rejected body still to drop (-1: drop until close)
        self.closing = False
        self.paused = False
        self.last_active = time.monotonic()
        self.sent_continue = False
        self.processing = False  # inside `_process` (an answer given there must not recurse)

    # -- asyncio callbacks -----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.server.conns.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.conns.discard(self)
        self.closing = True
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.last_active = time.monotonic()
        if self.discard:
            if self.discard < 0:
                return
            n = min(self.discard, len(data))
            self.discard -= n
            if self.discard == 0:
                self._close()
            return
        self.buf += data
        if not self.busy:
            self._process()
        elif len(self.buf) > self.server.max_body + MAX_HEADER_BYTES and not self.paused:
            self.paused = True  # a pipelining client far ahead of us: stop reading
            assert self.transport is not None
            self.transport.pause_reading()

    def eof_received(self) -> bool | None:
        if not self.busy:
            self._close()
        return True  # keep the write side open so an in-flight answer still goes out

    # -- request handling ------------------------------------------------------------------
    def _process(self) -> None:
        self.processing = True
        try:
            self._process_buffered()
        finally:
            self.processing = False

    def _process_buffered(self) -> None:
        while not self.busy and not self.closing and self.buf:
            try:
                req = self._parse()
            except BadRequest as e:
                self._reject(e)
                return
            if req is None:
                return
            self.sent_continue = False
            self.busy = True
            self.server.requests_seen += 1
            try:
                out = self.server.handler(req)
            except Exception:  # noqa: BLE001 - a handler bug must not kill the connection
                http_log.exception("webhook handler failed")
                req.conn = None  # a late `respond` must not answer the next request
                out = _error_body(500, "internal error")
            if out is None:
                continue  # answered (or to be answered) through `req.respond`
            req.conn = None
            if isinstance(out, bytes):
                self._answer(out, req.keep_alive)
            else:
                fut = asyncio.ensure_future(out)
                fut.add_done_callback(partial(self._done, req.keep_alive))

    def respond(self, out: bytes, keep_alive: bool) -> None:
        """The answer to the request in flight (`Request.respond`); then the next one."""
        self._answer(out, keep_alive)
        if not self.closing and not self.processing:
            self._process()

    def _done(self, keep_alive: bool, fut: asyncio.Future[bytes]) -> None:
        if fut.cancelled():
            out = _error_body(503, "the server is shutting down")
        elif (e := fut.exception()) is not None:
            http_log.error("webhook handler failed", exc_info=e)
            out = _error_body(500, "internal error")
        else:
            out = fut.result()
        self._answer(out, keep_alive)
        if not self.closing:
            self._process()

    def _answer(self, out: bytes, keep_alive: bool) -> None:
        self.busy = False
        t = self.transport
        if t is None:
            return
        t.write(out)
        if not keep_alive or self.server.closing:
            self._close()
        elif self.paused:
            self.paused = False
            t.resume_reading()

    def _reject(self, e: BadRequest) -> None:
        _throttle.log(
            http_log, logging.WARNING, f"http-{e.status}", "malformed HTTP request: %s", e.message
        )
        if self.server.on_reject is not None:
            self.server.on_reject(e.status)
        t = self.transport
        if t is None:
            return
        t.write(_error_body(e.status, e.message))
        self.buf.clear()
        if self.discard:  # let the client finish sending, so it reads our answer
            if self.discard > 0 and self.discard <= 4 * self.server.max_body:
                return  # closed once the declared body has been read and dropped
            # half-close: the client sees the answer and EOF; the rest it sends is dropped
            self.discard = -1
            if t.can_write_eof():
                t.write_eof()
            asyncio.get_running_loop().call_later(10.0, self._close)
            return
        self._close()

    def _close(self) -> None:
        self.closing = True
        if self.transport is not None:
            self.transport.close()

    # -- parsing ---------------------------------------------------------------------------
    def _parse(self) -> Request | None:
        """The next complete request from `buf` (consumed), None if it is not all there."""
        buf = self.buf
        end = buf.find(b"\r\n\r\n")
        if end < 0:
            if len(buf) > MAX_HEADER_BYTES:
                raise BadRequest(431, "request header block too large")
            if buf.startswith(b"\r\n"):  # tolerated empty lines between requests
                del buf[:2]
            return None
        if end > MAX_HEADER_BYTES:
            raise BadRequest(431, "request header block too large")
        # one decode for the whole block: ASCII delimiters never occur inside a UTF-8
        # sequence, so each value equals its own decode
        head = bytes(buf[:end]).decode("utf-8", "surrogateescape")
        pos = 0
        while head.startswith("\r\n", pos):
            pos += 2  # RFC 9112 2.2: ignore empty lines before the request line
        if pos >= len(head):
            raise BadRequest(400, "empty request")
        eol = head.find("\r\n", pos)
        if eol < 0:
            eol = len(head)
        parts = head[pos:eol].split(" ")
        if len(parts) != 3 or not parts[0] or not parts[1]:
            raise BadRequest(400, "malformed request line")
        method, target, version = parts
        if _TOKEN.fullmatch(method) is None:
            raise BadRequest(400, "malformed request method")
        if version == "HTTP/1.1":
            keep_alive = True
        elif version == "HTTP/1.0":
            keep_alive = False
        elif version.startswith("HTTP/"):
            raise BadRequest(505, "only HTTP/1.0 and HTTP/1.1 are supported")
        else:
            raise BadRequest(400, "malformed request line")
        headers: dict[str, str] = {}
        fields = head[eol + 2 :]
        if fields:
            if _FIELDS.fullmatch(fields) is None:
                raise BadRequest(400, "malformed header field")
            for ln in fields.split("\r\n"):
                name, _, value = ln.partition(":")
                key = name.lower()
                if key in headers:
                    if key in ("content-length", "transfer-encoding", "host"):
                        if key == "transfer-encoding":
                            headers[key] += ", " + value.strip()
                            continue
                        if headers[key] != value.strip():
                            raise BadRequest(400, f"conflicting {key} header fields")
                    continue
                headers[key] = value.strip(" \t")
        conn = headers.get("connection")
        if conn is not None:
            tokens = {t.strip().lower() for t in conn.split(",")}
            if "close" in tokens:
                keep_alive = False
            elif "keep-alive" in tokens:
                keep_alive = True
        start = end + 4
        te = headers.get("transfer-encoding")
        cl = headers.get("content-length")
        limit = self.server.max_body
        if te is not None:
            if cl is not None:
                raise BadRequest(400, "both Content-Length and Transfer-Encoding")
            if te.strip().lower() != "chunked":
                raise BadRequest(501, f"unsupported transfer coding: {te}")
            got = self._chunked(start, limit, headers)
            if got is None:
                return None
            body, consumed = got
        elif cl is not None:
            if not cl.isdigit() or not cl.isascii():
                raise BadRequest(400, "malformed Content-Length")
            n = int(cl)
            if n > limit:
                self.discard = n - (len(buf) - start)
                raise BadRequest(413, f"request body exceeds {limit} bytes")
            if len(buf) - start < n:
                self._maybe_continue(headers)
                return None
            body = bytes(buf[start : start + n])
            consumed = start + n
        else:
            body = b""
            consumed = start
        del buf[:consumed]
        return Request(method, target, headers, body, keep_alive, self)

    def _maybe_continue(self, headers: dict[str, str]) -> None:
        if (
            not self.sent_continue
            and headers.get("expect", "").lower() == "100-continue"
            and self.transport is not None
        ):
            self.sent_continue = True
            self.transport.write(_CONTINUE)

    def _chunked(self, start: int, limit: int, headers: dict[str, str]) -> tuple[bytes, int] | None:
        """(body, bytes consumed) of a chunked body starting at `start`, or None for more."""
        buf = self.buf
        pos = start
        parts: list[bytes] = []
        size_total = 0
        while True:
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                if len(buf) - pos > 1024:
                    raise BadRequest(400, "malformed chunk size line")
                self._maybe_continue(headers)
                return None
            size_text = bytes(buf[pos:eol]).split(b";", 1)[0].strip()
            try:
                if not size_text or not all(c in b"0123456789abcdefABCDEF" for c in size_text):
                    raise ValueError
                size = int(size_text, 16)
            except ValueError:
                raise BadRequest(400, "malformed chunk size") from None
            if size_total + size > limit:
                self.discard = -1
                raise BadRequest(413, f"request body exceeds {limit} bytes")
            if size == 0:
                # trailer fields, then the empty line
                p = eol + 2
                while True:
                    e2 = buf.find(b"\r\n", p)
                    if e2 < 0:
                        if len(buf) - p > MAX_HEADER_BYTES:
                            raise BadRequest(431, "chunked trailer too large")
                        return None
                    if e2 == p:
                        return b"".join(parts), e2 + 2
                    p = e2 + 2
            data_start = eol + 2
            if len(buf) < data_start + size + 2:
                self._maybe_continue(headers)
                return None
            if buf[data_start + size : data_start + size + 2] != b"\r\n":
                raise BadRequest(400, "malformed chunk")
            parts.append(bytes(buf[data_start : data_start + size]))
            size_total += size
            pos = data_start + size + 2


class HttpServer:
    """Listens and runs `_Conn` per connection; see the module docstring."""

    def __init__(
        self,
        handler: Handler,
        *,
        max_body: int,
        idle_timeout_s: float = IDLE_TIMEOUT_S,
        on_reject: Callable[[int], None] | None = None,
    ) -> None:
        self.handler = handler
        self.on_reject = on_reject
        self.max_body = max_body
        self.idle_timeout_s = idle_timeout_s
        self.conns: set[_Conn] = set()
        self.closing = False
        self.requests_seen = 0
        self._server: asyncio.Server | None = None
        self._sweeper: asyncio.TimerHandle | None = None
        self.port = 0

    async def start(self, host: str, port: int, *, reuse_port: bool = False) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(
            lambda: _Conn(self), host, port, reuse_address=True, reuse_port=reuse_port or None,
            backlog=1024,
        )  # fmt: skip
        self.port = self._server.sockets[0].getsockname()[1]
        self._schedule_sweep()

    async def start_on(self, sock: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: _Conn(self), sock=sock, backlog=1024)
        self.port = sock.getsockname()[1]
        self._schedule_sweep()

    def stop_listening(self) -> None:
        """Refuse new connections (existing ones keep being served)."""
        if self._server is not None:
            self._server.close()

    async def close(self) -> None:
        self.closing = True
        self.stop_listening()
        if self._sweeper is not None:
            self._sweeper.cancel()
        for c in list(self.conns):
            if not c.busy:
                c._close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5.0)

    def _schedule_sweep(self) -> None:
        loop = asyncio.get_running_loop()
        self._sweeper = loop.call_later(min(10.0, self.idle_timeout_s), self._sweep)

    def _sweep(self) -> None:
        """Close keep-alive connections idle for longer than `idle_timeout_s`."""
        cutoff = time.monotonic() - self.idle_timeout_s
        for c in list(self.conns):
            if not c.busy and c.last_active < cutoff:
                c._close()
        if not self.closing:
            self._schedule_sweep()


def client_error(status: int, message: str) -> bytes:
    """An error answer `{"error": message}` that keeps the connection open."""
    return response(status, orjson.dumps({"error": message}), "application/json")


__all__ = [
    "BadRequest",
    "HttpServer",
    "Request",
    "client_error",
    "ok_response",
    "response",
]
