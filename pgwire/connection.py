"""One client connection: startup handshake, then the message loop of the v3 protocol.

Lifecycle: `PgServer` creates a `Connection` per accepted socket and awaits `run()`.
`run()` answers an SSLRequest with `S` and a TLS handshake when the server has a
certificate (`N` otherwise; GSSENCRequest always `N`), serves a CancelRequest (then
closes), or performs the StartupMessage handshake (a connection slot from the server, password
authentication per the server's `Limits.auth` and the user's verifier, see pgwire/auth.py;
ParameterStatus set, BackendKeyData), opens an engine `Session`, and loops over frontend
messages until Terminate, EOF or shutdown. The session is closed, the slot released and
the socket shut in `run()`'s `finally`, whatever happened.

Limits (pgwire/limits.py): until authentication succeeds a message may be at most
`MAX_AUTH_MESSAGE_BYTES` (startup packets `MAX_STARTUP_BYTES`), afterwards
`limits.max_message_bytes`; a longer one is answered FATAL 08P01 and the connection
closes (its bytes are never read). A failed authentication waits
`limits.auth_failure_delay_s` before its FATAL is sent.

Session calls are synchronous and may block (FLUSH waits for a checkpoint), so each runs
on this connection's own single worker thread: statements of one connection stay ordered
and one slow connection never holds the event loop or another connection's thread.

Output is buffered and written at ReadyForQuery, Flush, and whenever the buffer grows
large, so a pipelined extended-protocol batch costs one write per Sync.

Isolation: every exception inside a connection is caught here; engine errors become
ErrorResponses (the fatal ones a client can provoke, such as a protocol violation, are
logged in one throttled line), anything else is logged with its traceback and closes only
this connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import tzinfo
from typing import TYPE_CHECKING, Any, TypeVar

from engine.api import Notice, QueryResult, Session
from engine.errors import (
    EngineError,
    FeatureNotSupported,
    InvalidAuthorization,
    InvalidPassword,
    ProtocolViolation,
    QueryCanceled,
)
from engine.log_throttle import LogThrottle
from pgwire import codecs, copy
from pgwire import messages as msg
from pgwire.auth import authenticate
from pgwire.copy_columns import CopyColumns, is_utc, parse_copy
from pgwire.errors import aborted_transaction, error_response, notice_response
from pgwire.extended import ExtendedProtocol
from pgwire.limits import MAX_AUTH_MESSAGE_BYTES, MAX_STARTUP_BYTES, MessageTooLong
from pgwire.temporal import zone
from pgwire.txstate import TxState, ends_block

if TYPE_CHECKING:
    from pgwire.server import PgServer

log = logging.getLogger("pgwire")
# client-caused fatal errors (bad lengths, refused logins, too many clients): one line per
# kind per minute, so a hostile client cannot flood the log
_client_errors = LogThrottle(60.0)

T = TypeVar("T")

FLUSH_THRESHOLD = 64 * 1024
# while a statement runs, how often the loop looks whether its client went away
DISCONNECT_POLL_S = 0.25
STARTUP_TIMEOUT_S = 60.0

SERVER_VERSION = "13.14.0"
DEFAULT_PARAMETERS: dict[str, str] = {
    "server_version": SERVER_VERSION,
    "server_encoding": "UTF8",
    "client_encoding": "UTF8",
    "DateStyle": "ISO, MDY",
    "TimeZone": "UTC",
    "integer_datetimes": "on",
    "standard_conforming_strings": "on",
    "IntervalStyle": "postgres",
    "is_superuser": "on",
    "application_name": "",
    "default_transaction_read_only": "off",
    "in_hot_standby": "off",
}


class ConnectionClosed(Exception):
    """The client went away or asked to terminate; unwinds the message loop quietly."""


class Connection:
    """Protocol state of one client: session, transaction status, statements and portals."""

    def __init__(
        self,
        server: PgServer,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        pid: int,
        secret: int,
    ) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.pid = pid
        self.secret = secret
        self.session: Session | None = None
        self.user = ""
        self.tx = TxState()
        self.out = bytearray()
        self.peer = _peer(writer)
        self.extended = ExtendedProtocol(self)
        self._executor: ThreadPoolExecutor | None = None
        self.tls = False
        # the largest message read_message accepts: small until authenticated
        self.max_message = MAX_AUTH_MESSAGE_BYTES
        # a CancelRequest arrived while results were being sent (checked at each flush)
        self.cancel_sending = False

    # -- plumbing ------------------------------------------------------------------------------
    async def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a blocking session call on this connection's worker thread."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"pgwire-{self.pid}")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, functools.partial(fn, *args))

    async def run_statement(self, fn: Callable[..., T], *args: Any, fresh: bool = True) -> T:
        """A session call that runs a statement. While it runs, the loop watches the
        socket: a client that closed its connection (EOF, reset) has its statement
        cancelled, as PostgreSQL does, instead of leaving it running to the end."""
        if fresh:  # a new statement: an earlier cancel no longer applies
            self.cancel_sending = False
        fut = asyncio.ensure_future(self.call(fn, *args))
        cancelled = False
        try:
            while True:
                done, _ = await asyncio.wait({fut}, timeout=DISCONNECT_POLL_S)
                if done:
                    return fut.result()
                if not cancelled and self.client_gone():
                    cancelled = True
                    log.info("client disconnected, canceling its statement pid=%d", self.pid)
                    if self.session is not None:
                        self.session.cancel("disconnect")
        except asyncio.CancelledError:
            if self.session is not None:
                self.session.cancel("shutdown")
            raise

    def client_gone(self) -> bool:
        """The peer closed or reset the connection (data it sent before is still read)."""
        return (
            self.reader.at_eof()
            or self.reader.exception() is not None
            or self.writer.transport.is_closing()
        )

    def cancel(self) -> None:
        """A CancelRequest for this backend: stops the running statement, or the sending of
        its results."""
        self.cancel_sending = True
        if self.session is not None:
            self.session.cancel()

    def check_send_cancel(self) -> None:
        if self.cancel_sending:
            self.cancel_sending = False
            raise QueryCanceled("canceling statement due to user request")

    def send(self, data: bytes) -> None:
        self.out += data

    async def maybe_flush(self) -> None:
        if len(self.out) >= FLUSH_THRESHOLD:
            await self.flush()

    async def flush(self) -> None:
        if self.out:
            self.writer.write(bytes(self.out))
            self.out.clear()
        await self.writer.drain()

    def _notifier(self, loop: asyncio.AbstractEventLoop) -> Callable[[Notice], bool]:
        """`Session.notify`: a NOTICE sent while a statement runs (a waiting CREATE's
        progress), from the worker thread, written with whatever is buffered before it."""

        def send_now(data: bytes) -> None:
            self.send(data)
            self.writer.write(bytes(self.out))
            self.out.clear()

        def notify(notice: Notice) -> bool:
            loop.call_soon_threadsafe(send_now, notice_response(notice))
            return True

        return notify

    def timezone(self) -> tzinfo:
        assert self.session is not None
        return zone(self.session.timezone)

    # -- lifecycle -----------------------------------------------------------------------------
    async def run(self) -> None:
        try:
            if await asyncio.wait_for(self._startup(), STARTUP_TIMEOUT_S):
                await self._loop()
        except (ConnectionClosed, asyncio.IncompleteReadError, ConnectionError, TimeoutError):
            pass
        except asyncio.CancelledError:
            raise
        except EngineError as exc:  # a client-caused FATAL (protocol violation, limits)
            _client_errors.log(
                log,
                logging.WARNING,
                type(exc).__name__,
                "connection closed pid=%d peer=%s sqlstate=%s error=%r",
                self.pid,
                self.peer,
                exc.sqlstate,
                str(exc),
            )
            await self._send_fatal(exc)
        except Exception as exc:  # noqa: BLE001 - one client must never take the server down
            log.error("connection failed pid=%d peer=%s", self.pid, self.peer, exc_info=exc)
            await self._send_fatal(exc)
        finally:
            await self._teardown()

    async def _send_fatal(self, exc: BaseException) -> None:
        with contextlib.suppress(Exception):  # the socket may already be gone
            self.send(error_response(exc, severity="FATAL"))
            await self.flush()

    async def _teardown(self) -> None:
        self.server.unregister(self)
        await self.close_streams([p.result for p in self.extended.portals.values() if p.result])
        session, self.session = self.session, None
        if session is not None:
            try:
                await self.call(session.close)
            except Exception as exc:  # noqa: BLE001
                log.error("session close failed pid=%d", self.pid, exc_info=exc)
            log.debug("session closed pid=%d user=%s", self.pid, self.user)
        if self._executor is not None:
            self._executor.shutdown(wait=False)
        with contextlib.suppress(Exception):
            self.writer.close()

    async def terminate(self, exc: BaseException) -> None:
        """Server shutdown: tell the client why, stop its statement, close the socket."""
        session = self.session
        if session is not None:
            with contextlib.suppress(Exception):
                await asyncio.to_thread(session.cancel)
        await self._send_fatal(exc)

    # -- startup -------------------------------------------------------------------------------
    async def _startup(self) -> bool:
        """Handshake; True when a session is open and the message loop should run."""
        while True:
            head = await self.reader.readexactly(4)
            length = int.from_bytes(head, "big", signed=True)
            if length < 8 or length > MAX_STARTUP_BYTES:
                raise ProtocolViolation("invalid length of startup packet")
            body = await self.reader.readexactly(length - 4)
            r = msg.Reader(body)
            code = r.int32()
            if code == msg.SSL_REQUEST and self.server.ssl_context is not None and not self.tls:
                self.writer.write(b"S")
                await self.writer.drain()
                # the reader keeps working: it now reads the decrypted stream
                await self.writer.start_tls(self.server.ssl_context)
                self.tls = True
                continue
            if code in (msg.SSL_REQUEST, msg.GSSENC_REQUEST):
                self.writer.write(b"N")
                await self.writer.drain()
                continue
            if code == msg.CANCEL_REQUEST:
                pid, key = r.int32(), r.int32()
                await self.server.cancel(pid, key)
                return False
            major, minor = code >> 16, code & 0xFFFF
            if major != 3:
                raise FeatureNotSupported(
                    f"unsupported frontend protocol {major}.{minor}: server supports 3.0 to 3.0"
                )
            params = msg.parse_startup_params(body[4:])
            self.server.admit(self)  # 53300 when every slot is taken
            return await self._open_session(minor, params)

    async def _open_session(self, minor: int, params: dict[str, str]) -> bool:
        unknown = [k for k in params if k.startswith("_pq_.")]
        if minor > 0 or unknown:
            self.send(msg.negotiate_protocol_version(0, unknown))
        user = params.get("user", "")
        if not user:
            raise InvalidAuthorization("no PostgreSQL user name specified in startup packet")
        database = params.get("database") or user
        options = {
            k: v
            for k, v in params.items()
            if k not in ("user", "database") and not k.startswith("_pq_.")
        }
        self.user = user
        try:
            await authenticate(self, user)
            self.session = await self.call(self.server.db.connect, user, database, options)
            self.session.notify = self._notifier(asyncio.get_running_loop())
            if hasattr(self.session, "stream_results"):
                self.session.stream_results = True  # large SELECT results stream
        except Exception as exc:  # noqa: BLE001 - answered as FATAL, then the socket closes
            if isinstance(exc, (InvalidAuthorization, InvalidPassword)):
                self.server.auth_failures += 1
                # as PostgreSQL's auth_delay: a guess costs the guesser this long
                await asyncio.sleep(self.server.limits.auth_failure_delay_s)
            _client_errors.log(
                log,
                logging.INFO,
                "refused",
                "connection refused pid=%d user=%s database=%s peer=%s error=%r",
                self.pid,
                user,
                database,
                self.peer,
                str(exc),
            )
            await self._send_fatal(exc)
            return False
        self.max_message = self.server.limits.max_message_bytes
        status = dict(DEFAULT_PARAMETERS)
        status["session_authorization"] = user
        if "application_name" in params:
            status["application_name"] = params["application_name"]
        status.update(await self.call(self.session.parameter_status))
        self.send(msg.authentication_ok())
        for name, value in status.items():
            self.send(msg.parameter_status(name, value))
        self.send(msg.backend_key_data(self.pid, self.secret))
        self.send(msg.ready_for_query(self.tx.status))
        # registered before the client can see ReadyForQuery, so a cancel or a shutdown
        # right after connecting finds this connection
        self.server.register(self)
        await self.flush()
        log.debug(
            "session started pid=%d user=%s database=%s peer=%s",
            self.pid,
            user,
            database,
            self.peer,
        )
        return True

    # -- message loop --------------------------------------------------------------------------
    async def read_message(self) -> tuple[bytes, bytes]:
        """One frontend message (type byte, body); refuses lengths over `max_message`
        before reading the body, so a declared size never turns into a buffer."""
        head = await self.reader.readexactly(5)
        kind = head[:1]
        length = int.from_bytes(head[1:], "big", signed=True)
        if length < 4:
            raise ProtocolViolation(f"invalid message length {length}")
        if length > self.max_message:
            if self.session is None:
                raise MessageTooLong(
                    f"message of {length} bytes is too long before authentication "
                    f"(at most {self.max_message})"
                )
            raise MessageTooLong(
                f"message of {length} bytes exceeds the server's maximum of "
                f"{self.max_message} bytes",
                hint="The server's limit is set with --max-message-bytes.",
            )
        body = await self.reader.readexactly(length - 4) if length > 4 else b""
        return kind, body

    async def _loop(self) -> None:
        ext = self.extended
        while True:
            kind, body = await self.read_message()
            if kind == b"X":
                raise ConnectionClosed
            if kind == b"S":
                await ext.sync()
                continue
            if ext.ignore_till_sync:
                continue
            if kind == b"Q":
                reader = msg.Reader(body)
                sql = reader.cstring()
                if reader.remaining():  # text after a NUL byte: refused, never dropped
                    self.send(error_response(ProtocolViolation("invalid message format")))
                    self.send(msg.ready_for_query(self.tx.status))
                    await self.flush()
                    continue
                await self._simple_query(sql)
            elif kind in ext.HANDLERS:
                await ext.handle(kind, body)
            elif kind == b"H":
                await self.flush()
            elif kind in (b"d", b"c", b"f"):
                continue  # COPY traffic outside COPY is ignored, as PostgreSQL does
            elif kind == b"F":
                self.send(error_response(FeatureNotSupported("Not supported: function call")))
                self.send(msg.ready_for_query(self.tx.status))
                await self.flush()
            else:
                raise ProtocolViolation(f"invalid frontend message type {kind[0]}")

    # -- simple query --------------------------------------------------------------------------
    async def _simple_query(self, sql: str) -> None:
        session = self.session
        assert session is not None
        if self.tx.failed and not ends_block(sql):
            self.send(error_response(aborted_transaction()))
        else:
            error: Exception | None = None
            try:
                results = await self.run_statement(session.execute_simple, sql)
            except Exception as exc:  # noqa: BLE001 - reported to the client
                results = list(getattr(exc, "partial_results", None) or [])
                error = exc
            try:
                await self._send_results(results, sql)
            except (ConnectionError, MessageTooLong):
                raise
            except Exception as exc:  # noqa: BLE001 - e.g. a value the codec cannot encode
                error = exc
            finally:
                await self.close_streams(results)
            self.server.statements_total += len(results) + (error is not None)
            if error is not None:
                self.server.errors_total += 1
                self.tx.after_error()
                self.send(error_response(error))
        self.send(msg.ready_for_query(self.tx.status))
        await self.flush()

    async def _send_results(self, results: list[QueryResult], sql: str) -> None:
        if not results:
            return
        tz = self.timezone()
        for result in results:
            for notice in result.notices:
                self.send(notice_response(notice))
            if result.empty:
                self.send(msg.empty_query_response())
                continue
            if result.copy is not None and result.copy.get("direction") == "in":
                self.send(msg.command_complete(await self.copy_in(result, tz)))
                continue
            if result.copy is not None:
                await self.send_copy(result, tz)
            elif result.columns is not None:
                fmt = codecs.BINARY if result.binary else codecs.TEXT
                formats = [fmt] * len(result.columns)
                self.send(msg.row_description(result.columns, formats))
                await self.send_rows(result, formats, tz, 0, len(result.rows))
                while result.more is not None and await self.pull_rows(result):
                    await self.send_rows(result, formats, tz, 0, len(result.rows))
            self.send(msg.command_complete(self.tx.after_tag(result.tag, sql)))
            self.send_status(result)

    async def send_copy(self, result: QueryResult, tz: tzinfo) -> None:
        """COPY ... TO STDOUT: CopyOutResponse, a CopyData per line, CopyDone. A large result
        arrives chunk by chunk (`result.more`), so it is never held whole."""
        assert result.columns is not None and result.copy is not None
        self.send(copy.copy_out_response(len(result.columns)))
        if result.copy.get("header"):
            self.send(copy.copy_data(copy.header_line(result)))
        line = copy.line_renderer(result, tz)
        while True:
            for row in result.rows:
                self.send(copy.copy_data(line(row)))
                if len(self.out) >= FLUSH_THRESHOLD:
                    self.check_send_cancel()
                    await self.flush()
            # a streaming result: the next chunk, computed on the worker thread
            if result.more is None or not await self.pull_rows(result):
                break
        self.send(copy.copy_done())

    async def copy_in(self, result: QueryResult, tz: tzinfo) -> str:
        """COPY FROM STDIN: CopyInResponse, collect CopyData until CopyDone (or CopyFail),
        parse, hand the rows to the session; returns the `COPY n` tag."""
        assert result.columns is not None and result.copy is not None
        session = self.session
        assert session is not None
        binary = result.copy.get("format") == "binary"
        self.send(copy.copy_in_response(len(result.columns), 1 if binary else 0))
        await self.flush()
        chunks: list[bytes] = []
        token = session.cancel_token  # the COPY's: a cancel or its timeout stops the data
        try:
            while True:
                kind, body = await self.read_message()
                token.check()
                if kind == b"d":
                    chunks.append(body)
                elif kind == b"c":
                    break
                elif kind == b"f":
                    reason = msg.Reader(body).cstring()
                    raise QueryCanceled(f"COPY from stdin failed: {reason}")
                elif kind in (b"H", b"S"):
                    continue  # Flush/Sync during COPY IN are ignored, as PostgreSQL does
                else:
                    raise ProtocolViolation(
                        f"unexpected message type 0x{kind[0]:02x} during COPY from stdin"
                    )
            target = CopyColumns(
                result.copy.get("table", ""),
                [c.name for c in result.columns],
                [c.type for c in result.columns],
                tz,
            )
            # parsed on the connection's worker thread: a big COPY does not stall the loop;
            # by the parallel workers when the server runs some (None: here)
            data = b"".join(chunks)
            utc = is_utc(tz)
            columns = await self.run_statement(
                session.copy_in_decode, data, result.copy, target.types, utc
            )
            if columns is None:
                columns = await self.run_statement(parse_copy, data, result.copy, target)
            token.check()
        except BaseException:
            await self.call(session.copy_in_abort)
            raise
        done = await self.run_statement(session.copy_in_columns, columns)
        return done.tag

    async def pull_rows(self, result: QueryResult) -> bool:
        """Replace `result.rows` with the next chunk of a streaming result (computed on the
        worker thread); False once it ended (then `result.tag` is final)."""
        self.check_send_cancel()
        rows = await self.run_statement(result.more.next, fresh=False)
        if rows is None:
            return False
        result.rows = rows
        return True

    async def close_streams(self, results: list[QueryResult]) -> None:
        """End the statements of streaming results that were not read to the end."""
        for r in results:
            if r is not None and r.more is not None and not r.more.done:
                with contextlib.suppress(Exception):
                    await self.call(r.more.close)

    def send_status(self, result: QueryResult) -> None:
        for name, value in result.status.items():
            self.send(msg.parameter_status(name, value))

    async def send_rows(
        self, result: QueryResult, formats: list[int], tz: tzinfo, start: int, stop: int
    ) -> None:
        """DataRows for `result.rows[start:stop]`, flushing when the buffer grows large."""
        assert result.columns is not None
        encs = [codecs.encoder(c.type, f, tz) for c, f in zip(result.columns, formats)]
        rows = result.rows
        data_row = msg.data_row
        for i in range(start, stop):
            row = rows[i]
            self.send(data_row([None if v is None else e(v) for e, v in zip(encs, row)]))
            if len(self.out) >= FLUSH_THRESHOLD:
                self.check_send_cancel()
                await self.flush()


def _peer(writer: asyncio.StreamWriter) -> str:
    info = writer.get_extra_info("peername")
    if isinstance(info, tuple) and len(info) >= 2:
        return f"{info[0]}:{info[1]}"
    return str(info)
