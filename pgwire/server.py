"""The listening side of pgwire: accepts sockets, owns the live connections, routes cancels.

Lifecycle: `await serve(db, host, port, limits=...)` binds and starts accepting; each
accepted socket gets a `Connection` (with a fresh process id and secret key for
BackendKeyData) running in its own task. A connection takes one of `limits.max_connections`
slots once its startup message is read (`admit`) and gives it back when it closes
(`release`); cancel requests and SSL negotiation take none. A CancelRequest arriving on a
new socket is matched by (pid, key) against the registry of live connections and forwarded
to that connection's `Session.cancel()`.
`await server.stop()` closes the listeners, sends each client FATAL 57P01, cancels the
connection tasks and waits for their sessions to close; the `Database` stays open (its
owner closes it).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import secrets
import ssl

from engine.api import Database
from engine.errors import AdminShutdown, TooManyConnections
from pgwire.connection import Connection
from pgwire.limits import Limits

log = logging.getLogger("pgwire")


class PgServer:
    """A running pgwire listener and its connections."""

    def __init__(
        self,
        db: Database,
        host: str,
        port: int,
        ssl_context: ssl.SSLContext | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.db = db
        self.limits = limits or Limits()
        self.ssl_context = ssl_context  # None: SSLRequest is answered `N`
        # DER of the server certificate, for SCRAM channel binding (set by the CLI)
        self.tls_cert_der: bytes | None = None
        self.host = host
        self.port = port
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._live: dict[int, Connection] = {}
        self._admitted: set[int] = set()  # pids holding a connection slot
        # salts the mock SCRAM exchange of users without a password (pgwire/auth.py)
        self.mock_auth_secret = secrets.token_bytes(32)
        self._pids = itertools.count(secrets.randbelow(1 << 20) + 1000)
        # metrics (pgwire/metrics.py reads them)
        self.connections_total = 0
        self.auth_failures = 0
        self.cancel_requests = 0
        self.statements_total = 0  # statements executed (simple and extended)
        self.errors_total = 0  # ErrorResponses for statements
        self.connections_refused = 0  # over max_connections

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, self.host, self.port)
        sock = self._server.sockets[0]
        self.port = sock.getsockname()[1]
        log.info("listening addr=%s:%d", self.host, self.port)

    @property
    def addresses(self) -> list[str]:
        if self._server is None:
            return []
        return [f"{s.getsockname()[0]}:{s.getsockname()[1]}" for s in self._server.sockets]

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections_total += 1
        conn = Connection(self, reader, writer, next(self._pids), secrets.randbelow(1 << 31))
        try:
            await conn.run()
        except asyncio.CancelledError:
            pass
        finally:
            self._tasks.discard(task)

    # -- registry ----------------------------------------------------------------------------
    def admit(self, conn: Connection) -> None:
        """Take a connection slot for `conn` or raise 53300 when all are taken."""
        if len(self._admitted) >= self.limits.max_connections:
            self.connections_refused += 1
            raise TooManyConnections("sorry, too many clients already")
        self._admitted.add(conn.pid)

    def release(self, conn: Connection) -> None:
        self._admitted.discard(conn.pid)

    def register(self, conn: Connection) -> None:
        self._live[conn.pid] = conn

    def unregister(self, conn: Connection) -> None:
        if self._live.get(conn.pid) is conn:
            del self._live[conn.pid]
        self.release(conn)

    @property
    def connection_count(self) -> int:
        return len(self._live)

    async def cancel(self, pid: int, key: int) -> None:
        """Serve a CancelRequest; unknown or mismatched keys are ignored, as in PostgreSQL."""
        self.cancel_requests += 1
        conn = self._live.get(pid)
        if conn is None or conn.secret != key or conn.session is None:
            log.debug("cancel request ignored pid=%d", pid)
            return
        log.debug("cancel request pid=%d", pid)
        try:
            conn.cancel()  # sets flags only: safe on the loop thread
        except Exception as exc:  # noqa: BLE001 - a failing cancel must not hurt the server
            log.error("cancel failed pid=%d", pid, exc_info=exc)

    # -- shutdown ----------------------------------------------------------------------------
    async def stop(self, timeout_s: float = 5.0) -> None:
        if self._server is not None:
            self._server.close()
        shutdown = AdminShutdown("terminating connection due to administrator command")
        for conn in list(self._live.values()):
            await conn.terminate(shutdown)
        tasks = list(self._tasks)
        for t in tasks:
            t.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=timeout_s)
        if self._server is not None:
            await self._server.wait_closed()
        log.info("stopped addr=%s:%d", self.host, self.port)


async def serve(
    db: Database,
    host: str,
    port: int,
    ssl_context: ssl.SSLContext | None = None,
    limits: Limits | None = None,
) -> PgServer:
    """Start a pgwire server for `db` on host:port (port 0 picks a free port); with an
    `ssl_context`, clients may upgrade to TLS (SSLRequest); `limits` defaults to trust
    authentication and the default limits."""
    server = PgServer(db, host, port, ssl_context, limits)
    await server.start()
    return server
