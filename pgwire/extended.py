"""The extended query protocol: Parse, Bind, Describe, Execute, Close and Sync.

Objects: a `Statement` is a parsed engine `PreparedStatement` plus the parameter OIDs the
client declared; a `Portal` is a statement bound to decoded parameter values and result
format codes. A portal runs its statement on its first Execute and keeps the result rows,
so an Execute with a row limit answers PortalSuspended and the next Execute resumes at the
saved position. Statements live until Close; portals until Close, replacement (unnamed),
or the Sync that ends an implicit transaction.

Error rule: after an error in any extended message, every message up to the next Sync is
discarded (`ignore_till_sync`); Sync clears it and answers ReadyForQuery. Messages are
only buffered here; the connection writes them at Sync or Flush, so pipelined batches
(several Parse/Bind/Execute before one Sync) cost one write.
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import tzinfo
from typing import TYPE_CHECKING, Any

from engine.api import PreparedStatement, QueryResult
from engine.errors import InvalidCursorName, InvalidPreparedStatement, ProtocolViolation
from engine.types import Field, SqlType, TypeKind, type_from_oid
from pgwire import codecs
from pgwire import messages as msg
from pgwire.errors import (
    DuplicateCursor,
    DuplicatePreparedStatement,
    aborted_transaction,
    error_response,
    notice_response,
)
from pgwire.limits import MessageTooLong
from pgwire.txstate import ends_block

if TYPE_CHECKING:
    from pgwire.connection import Connection


@dataclass(slots=True)
class Statement:
    name: str
    sql: str
    prepared: PreparedStatement
    client_types: list[SqlType | None]

    @property
    def param_types(self) -> list[SqlType]:
        return self.prepared.description.param_types


@dataclass(slots=True)
class Portal:
    name: str
    stmt: Statement
    params: list[Any]
    result_formats: list[int]
    columns: list[Field] | None = None
    described: bool = False
    result: QueryResult | None = None
    pos: int = 0
    done: bool = False
    sent_now: int = 0  # rows of a streaming result sent by the current Execute


def expand_formats(codes: list[int], n: int, what: str) -> list[int]:
    """Format codes as sent (none = all text, one = all alike, or one per item)."""
    for c in codes:
        if c not in (codecs.TEXT, codecs.BINARY):
            raise ProtocolViolation(f"unsupported format code: {c}")
    if not codes:
        return [codecs.TEXT] * n
    if len(codes) == 1:
        return codes * n
    if len(codes) != n:
        raise ProtocolViolation(f"bind message has {len(codes)} {what} formats but {n} {what}s")
    return codes


def _select_tag(tag: str, count: int) -> str:
    return f"SELECT {count}" if tag.upper().startswith("SELECT") else tag


class ExtendedProtocol:
    """Per-connection statement/portal tables and the extended-message handlers."""

    HANDLERS = frozenset((b"P", b"B", b"D", b"E", b"C"))

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.statements: dict[str, Statement] = {}
        self.portals: dict[str, Portal] = {}
        self.ignore_till_sync = False
        self._dispatch: dict[bytes, Callable[[msg.Reader], Awaitable[None]]] = {
            b"P": self._parse,
            b"B": self._bind,
            b"D": self._describe,
            b"E": self._execute,
            b"C": self._close,
        }

    async def handle(self, kind: bytes, body: bytes) -> None:
        try:
            await self._dispatch[kind](msg.Reader(body))
        except (ConnectionError, MessageTooLong):
            raise
        except Exception as exc:  # noqa: BLE001 - reported, then skip to Sync
            self.conn.server.errors_total += 1
            self.conn.tx.after_error()
            self.conn.send(error_response(exc))
            self.ignore_till_sync = True
            # PostgreSQL writes errors at once: a client waiting after Flush must see it.
            await self.conn.flush()

    async def sync(self) -> None:
        self.ignore_till_sync = False
        if self.conn.tx.status == "I":
            await self.conn.close_streams([p.result for p in self.portals.values() if p.result])
            self.portals.clear()
        self.conn.send(msg.ready_for_query(self.conn.tx.status))
        await self.conn.flush()

    # -- Parse -----------------------------------------------------------------------------------
    async def _parse(self, r: msg.Reader) -> None:
        name = r.cstring()
        sql = r.cstring()
        n = r.int16()
        oids = [r.uint32() for _ in range(n)]
        if self.conn.tx.failed and not ends_block(sql):
            raise aborted_transaction()
        if name and name in self.statements:
            raise DuplicatePreparedStatement(f'prepared statement "{name}" already exists')
        client_types = [type_from_oid(o) for o in oids]
        session = self.conn.session
        assert session is not None
        prepared: PreparedStatement = await self.conn.call(session.prepare, sql, client_types)
        self.statements[name] = Statement(name, sql, prepared, client_types)
        self.conn.send(msg.parse_complete())

    # -- Bind ------------------------------------------------------------------------------------
    async def _bind(self, r: msg.Reader) -> None:
        portal_name = r.cstring()
        stmt_name = r.cstring()
        param_codes = [r.int16() for _ in range(r.int16())]
        values = [r.bytes_or_null() for _ in range(r.int16())]
        result_codes = [r.int16() for _ in range(r.int16())]
        stmt = self.statements.get(stmt_name)
        if stmt is None:
            raise InvalidPreparedStatement(f'prepared statement "{stmt_name}" does not exist')
        if portal_name and portal_name in self.portals:
            raise DuplicateCursor(f'portal "{portal_name}" already exists')
        types = stmt.param_types
        if len(values) != len(types):
            raise ProtocolViolation(
                f"bind message supplies {len(values)} parameters, but prepared statement "
                f'"{stmt_name}" requires {len(types)}'
            )
        formats = expand_formats(param_codes, len(values), "parameter")
        tz = self.conn.timezone()
        params = [
            self._decode_param(i, v, stmt, f, tz)
            for i, (v, f) in enumerate(zip(values, formats, strict=True))
        ]
        for c in result_codes:
            if c not in (codecs.TEXT, codecs.BINARY):
                raise ProtocolViolation(f"unsupported format code: {c}")
        old = self.portals.get(portal_name)
        if old is not None and old.result is not None:
            await self.conn.close_streams([old.result])
        self.portals[portal_name] = Portal(portal_name, stmt, params, result_codes)
        self.conn.send(msg.bind_complete())

    @staticmethod
    def _decode_param(i: int, data: bytes | None, stmt: Statement, fmt: int, tz: tzinfo) -> Any:
        if data is None:
            return None
        target = stmt.param_types[i]
        declared = stmt.client_types[i] if i < len(stmt.client_types) else None
        wire_type = declared or target
        if wire_type.kind is TypeKind.UNKNOWN:
            wire_type = SqlType(TypeKind.VARCHAR)
        try:
            value = codecs.decoder(wire_type, fmt, tz)(data)
            if wire_type != target and target.kind is not TypeKind.UNKNOWN:
                # The client encoded per its declared type; convert through text to ours.
                text = codecs.text_formatter(wire_type, tz)(value)
                value = codecs.text_parser(target, tz)(text)
        except (struct.error, ValueError, IndexError, UnicodeDecodeError) as exc:
            raise ProtocolViolation(
                f"incorrect binary data format in bind parameter {i + 1}"
            ) from exc
        return value

    # -- Describe ----------------------------------------------------------------------------------
    async def _describe(self, r: msg.Reader) -> None:
        what = r.byte()
        name = r.cstring()
        if what == b"S":
            stmt = self.statements.get(name)
            if stmt is None:
                raise InvalidPreparedStatement(f'prepared statement "{name}" does not exist')
            oids = getattr(stmt.prepared, "param_oids", None) or [
                msg.wire_oid(t.oid, t.kind) for t in stmt.param_types
            ]
            self.conn.send(msg.parameter_description(oids))
            cols = stmt.prepared.description.columns
            if cols is None:
                self.conn.send(msg.no_data())
            else:
                col_oids = getattr(stmt.prepared, "column_oids", None)
                self.conn.send(msg.row_description(cols, [codecs.TEXT] * len(cols), col_oids))
        elif what == b"P":
            if name and name not in self.portals:
                await self._describe_cursor(name)
                return
            portal = self._portal(name)
            cols = await self._portal_columns(portal)
            if cols is None:
                self.conn.send(msg.no_data())
            else:
                formats = expand_formats(portal.result_formats, len(cols), "result")
                col_oids = getattr(portal.stmt.prepared, "column_oids", None)
                self.conn.send(msg.row_description(cols, formats, col_oids))
        else:
            raise ProtocolViolation(f"invalid DESCRIBE message subtype {what!r}")

    async def _describe_cursor(self, name: str) -> None:
        """Describe P of a SQL cursor (DECLARE): psycopg's server-side cursors ask this."""
        session = self.conn.session
        assert session is not None
        describe = getattr(session, "describe_cursor", None)
        if describe is None:
            raise InvalidCursorName(f'portal "{name}" does not exist')
        cols, binary = await self.conn.call(describe, name)
        fmt = codecs.BINARY if binary else codecs.TEXT
        self.conn.send(msg.row_description(cols, [fmt] * len(cols)))

    async def _portal_columns(self, portal: Portal) -> list[Field] | None:
        if portal.result is not None:
            return portal.result.columns
        if not portal.described:
            session = self.conn.session
            assert session is not None
            portal.columns = await self.conn.call(
                session.describe_portal, portal.stmt.prepared, portal.params
            )
            portal.described = True
        return portal.columns

    def _portal(self, name: str) -> Portal:
        portal = self.portals.get(name)
        if portal is None:
            raise InvalidCursorName(f'portal "{name}" does not exist')
        return portal

    # -- Execute -----------------------------------------------------------------------------------
    async def _execute(self, r: msg.Reader) -> None:
        name = r.cstring()
        max_rows = r.int32()
        portal = self._portal(name)
        conn = self.conn
        if conn.tx.failed and not ends_block(portal.stmt.sql):
            raise aborted_transaction()
        if portal.result is None:
            session = conn.session
            assert session is not None
            prepared = portal.stmt.prepared
            conn.server.statements_total += 1
            portal.result = await conn.run_statement(session.execute, prepared, portal.params)
            for notice in portal.result.notices:
                conn.send(notice_response(notice))
        result = portal.result
        if result.empty:
            conn.send(msg.empty_query_response())
            return
        if result.copy is not None and result.copy.get("direction") == "in":
            if not portal.done:
                portal.done = True
                conn.send(msg.command_complete(await conn.copy_in(result, conn.timezone())))
            return
        if result.copy is not None and not portal.done:
            await conn.send_copy(result, conn.timezone())
        if result.columns is None or result.copy is not None:
            if not portal.done:
                portal.done = True
                conn.send(msg.command_complete(conn.tx.after_tag(result.tag, portal.stmt.sql)))
                conn.send_status(result)
            else:
                conn.send(msg.command_complete(result.tag))
            return
        formats = expand_formats(portal.result_formats, len(result.columns), "result")
        if result.more is not None:
            if await self._send_stream(portal, result, formats, max_rows):
                conn.send(msg.portal_suspended())
                return
            total = stop = portal.pos
            start = portal.pos - portal.sent_now
        else:
            total = len(result.rows)
            start = portal.pos
            stop = total if max_rows <= 0 else min(total, start + max_rows)
            await conn.send_rows(result, formats, conn.timezone(), start, stop)
            portal.pos = stop
        if stop < total:
            conn.send(msg.portal_suspended())
            return
        resumed = start > 0 or portal.done
        tag = _select_tag(result.tag, stop - start) if resumed else result.tag
        if not portal.done:
            portal.done = True
            tag = conn.tx.after_tag(tag, portal.stmt.sql)
            conn.send(msg.command_complete(tag))
            conn.send_status(result)
        else:
            conn.send(msg.command_complete(tag))

    async def _send_stream(
        self, portal: Portal, result: Any, formats: list[int], max_rows: int
    ) -> bool:
        """Send up to `max_rows` (0: all) of a streaming result, pulling chunks as needed
        (`result.rows` holds the unsent rows); True when rows remain (PortalSuspended).
        `portal.pos` counts the rows sent in all, `portal.sent_now` in this Execute."""
        conn = self.conn
        tz = conn.timezone()
        portal.sent_now = 0
        while True:
            rows = result.rows
            want = len(rows) if max_rows <= 0 else min(len(rows), max_rows - portal.sent_now)
            await conn.send_rows(result, formats, tz, 0, want)
            portal.sent_now += want
            portal.pos += want
            result.rows = rows[want:]
            if result.rows:
                return True  # max_rows reached with rows left over
            if not await conn.pull_rows(result):
                return False
            if max_rows > 0 and portal.sent_now >= max_rows:
                return True

    # -- Close -------------------------------------------------------------------------------------
    async def _close(self, r: msg.Reader) -> None:
        what = r.byte()
        name = r.cstring()
        if what == b"S":
            self.statements.pop(name, None)
        elif what == b"P":
            gone = self.portals.pop(name, None)
            if gone is not None and gone.result is not None:
                await self.conn.close_streams([gone.result])
        else:
            raise ProtocolViolation(f"invalid CLOSE message subtype {what!r}")
        self.conn.send(msg.close_complete())
