"""Transaction blocks, savepoints, cursors, COPY TO STDOUT and DISCARD for one session.

Swell runs every statement immediately and atomically on its own; there are no
multi-statement transactions. Drivers still wrap work in BEGIN ... COMMIT, SAVEPOINT and
cursors, so the session keeps the block bookkeeping PostgreSQL clients rely on:

- `session.in_transaction` and `session.savepoints` (names, oldest first): BEGIN inside a
  block warns 25001, COMMIT/ROLLBACK outside one warn 25P01, SAVEPOINT/RELEASE/ROLLBACK TO
  outside one fail 25P01 and name unknown savepoints with 3B001. ROLLBACK (TO) does not
  undo anything: statements already ran. pgwire derives ReadyForQuery's I/T/E and the
  25P02 refusals after an error from the command tags.
- `session.cursors`: DECLARE runs its query at once and keeps the rows (a snapshot, like
  an INSENSITIVE cursor); FETCH/MOVE walk them with PostgreSQL's position rules; cursors
  without HOLD close at COMMIT/ROLLBACK; CLOSE ALL and DISCARD ALL close every cursor.
- COPY ... TO STDOUT runs its query and returns the rows with `QueryResult.copy` set, so
  pgwire answers with CopyOutResponse / CopyData / CopyDone instead of a row set; a large
  result streams chunk by chunk as a SELECT's does (`QueryResult.more`), never built whole.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.api import Notice, QueryResult
from engine.errors import (
    DuplicateCursor,
    FeatureNotSupported,
    InvalidCursorName,
    InvalidSavepointSpecification,
    InvalidTransactionState,
    NoActiveSqlTransaction,
    ObjectNotInPrerequisiteState,
)
from engine.expr import ParamContext
from engine.sql.parser import Statement
from engine.types import Field

KINDS = frozenset(
    (
        "begin",
        "commit",
        "rollback",
        "savepoint",
        "release",
        "rollback_to",
        "declare",
        "fetch",
        "close",
        "copy",
        "copy_in",
        "discard",
    )
)


class ActiveSqlTransaction(InvalidTransactionState):
    sqlstate = "25001"


@dataclass
class Cursor:
    name: str
    columns: list[Field]
    rows: list[tuple[Any, ...]]
    hold: bool
    binary: bool
    scroll: bool
    pos: int = 0  # 0: before the first row, len(rows) + 1: after the last


def run(session: Any, st: Statement, params: ParamContext | None) -> QueryResult:
    return _HANDLERS[st.kind](session, st, params)


# -- transaction blocks ------------------------------------------------------------------------
def _end_block(session: Any) -> None:
    session.in_transaction = False
    session.savepoints.clear()
    for name in [n for n, c in session.cursors.items() if not c.hold]:
        del session.cursors[name]


def _begin(session: Any, st: Statement, params: ParamContext | None) -> QueryResult:
    notices = []
    if session.in_transaction:
        notices.append(Notice("there is already a transaction in progress", "WARNING", "25001"))
    session.in_transaction = True
    words = st.sql.split(None, 1)
    tag = "START TRANSACTION" if words and words[0].upper() == "START" else "BEGIN"
    return QueryResult(tag, notices=notices)


def _finish(tag: str) -> Any:
    def handler(session: Any, st: Statement, params: ParamContext | None) -> QueryResult:
        notices = []
        if not session.in_transaction:
            notices.append(Notice("there is no transaction in progress", "WARNING", "25P01"))
        _end_block(session)
        return QueryResult(tag, notices=notices)

    return handler


def _require_block(session: Any, what: str) -> None:
    if not session.in_transaction:
        raise NoActiveSqlTransaction(f"{what} can only be used in transaction blocks")


def _find_savepoint(session: Any, name: str) -> int:
    for i in range(len(session.savepoints) - 1, -1, -1):
        if session.savepoints[i] == name:
            return i
    raise InvalidSavepointSpecification(f'savepoint "{name}" does not exist')


def _savepoint(session: Any, st: Statement, params: ParamContext | None) -> QueryResult:
    _require_block(session, "SAVEPOINT")
    session.savepoints.append(st.args["name"])
    return QueryResult("SAVEPOINT")


def _release(session: Any, st: Statement, params: ParamContext | None) -> QueryResult:
    _require_block(session, "RELEASE SAVEPOINT")
    del session.savepoints[_find_savepoint(session, st.args["name"]) :]
    return QueryResult("RELEASE")


def _rollback_to(session: Any, st: Statement, params: ParamContext | None) -> QueryResult:
    _require_block(session, "ROLLBACK TO SAVEPOINT")
    del session.savepoints[_find_savepoint(session, st.args["name"]) + 1 :]
    return QueryResult("ROLLBACK")


def _discard(session: Any, st: Statement, params: ParamContext | None) -> QueryResult:
    what = st.sql.split()[1].upper() if len(st.sql.split()) > 1 else ""
    if what == "ALL" and session.in_transaction:
        raise ActiveSqlTransaction("DISCARD ALL cannot run inside a transaction block")
    status: dict[str, str] = {}
    if what == "ALL":
        session.cursors.clear()
        status = session.reset_all()
    return QueryResult(f"DISCARD {what}".strip(), status=status)


# -- cursors -----------------------------------------------------------------------------------
def _declare(session: Any, st: Statement, params: ParamContext | None) -> QueryResult:
    from engine.handlers.query import run_select

    a = st.args
    if not a["hold"]:
        _require_block(session, "DECLARE CURSOR")
    if a["name"] in session.cursors:
        raise DuplicateCursor(f'cursor "{a["name"]}" already exists')
    result = run_select(session, a["query"], params)
    assert result.columns is not None
    session.cursors[a["name"]] = Cursor(
        a["name"], result.columns, result.rows, a["hold"], a["binary"], a["scroll"]
    )
    return QueryResult("DECLARE CURSOR")


def cursor(session: Any, name: str) -> Cursor:
    c = session.cursors.get(name)
    if c is None:
        raise InvalidCursorName(f'cursor "{name}" does not exist')
    return c


def fetch_columns(session: Any, st: Statement) -> list[Field] | None:
    """Describe of a FETCH statement: its cursor's columns (None for MOVE)."""
    if st.args["move"]:
        return None
    c = session.cursors.get(st.args["name"])
    return c.columns if c is not None else None


def _fetch(session: Any, st: Statement, params: ParamContext | None) -> QueryResult:
    from engine.handlers.subscription import SubscriptionCursor, fetch

    a = st.args
    c = cursor(session, a["name"])
    if isinstance(c, SubscriptionCursor):
        return fetch(session, c, st)
    if a.get("options"):
        raise FeatureNotSupported(
            "FETCH ... WITH (...) is only for subscription cursors",
            hint="DECLARE c SUBSCRIPTION CURSOR FOR s, then FETCH n FROM c WITH (timeout = '5s').",
        )
    picked = _walk(c, a["direction"], a["count"])
    if a["move"]:
        return QueryResult(f"MOVE {len(picked)}")
    rows = [c.rows[i - 1] for i in picked]
    return QueryResult(f"FETCH {len(rows)}", c.columns, rows, binary=c.binary)


def _backward(c: Cursor) -> None:
    if not c.scroll:
        raise ObjectNotInPrerequisiteState(
            "cursor can only scan forward",
            hint="Declare it with SCROLL option to enable backward scan.",
        )


def _walk(c: Cursor, direction: str, count: int) -> list[int]:
    """Move `c` as PostgreSQL does; the 1-based row numbers read on the way."""
    n = len(c.rows)
    if direction in ("absolute", "relative"):
        target = count if direction == "absolute" else c.pos + count
        if direction == "absolute" and count < 0:
            target = n + 1 + count
        if target < c.pos:
            _backward(c)
        if 1 <= target <= n:
            c.pos = target
            return [target]
        c.pos = 0 if target < 1 else n + 1
        return []
    if count == -1:
        count = n + 1
    if direction == "forward":
        stop = min(c.pos + count, n)
        picked = list(range(c.pos + 1, stop + 1))
        c.pos = c.pos + count if c.pos + count <= n else n + 1
        return picked
    _backward(c)
    stop = max(c.pos - count, 1)
    picked = list(range(min(c.pos - 1, n), stop - 1, -1))
    c.pos = c.pos - count if c.pos - count >= 1 else 0
    return picked


def _close(session: Any, st: Statement, params: ParamContext | None) -> QueryResult:
    name = st.args["name"]
    if name is None:
        session.cursors.clear()
        return QueryResult("CLOSE CURSOR ALL")
    cursor(session, name)
    del session.cursors[name]
    return QueryResult("CLOSE CURSOR")


# -- COPY --------------------------------------------------------------------------------------
def _copy(session: Any, st: Statement, params: ParamContext | None) -> QueryResult:
    from engine.handlers.query import run_select

    # served to pgwire, a large result streams like a SELECT's (ResultStream, `COPY n`)
    stream, session._stream_this = session._stream_this, False
    result = run_select(session, st.args["query"], params, stream=stream)
    result.copy = dict(st.args["options"])
    if result.more is not None:
        result.more.verb = "COPY"
    else:
        result.tag = f"COPY {len(result.rows)}"
    return result


def _copy_in(session: Any, st: Statement, params: ParamContext | None) -> QueryResult:
    from engine.handlers import copy_in

    return copy_in.begin(session, st)


_HANDLERS = {
    "copy_in": _copy_in,
    "begin": _begin,
    "commit": _finish("COMMIT"),
    "rollback": _finish("ROLLBACK"),
    "savepoint": _savepoint,
    "release": _release,
    "rollback_to": _rollback_to,
    "declare": _declare,
    "fetch": _fetch,
    "close": _close,
    "copy": _copy,
    "discard": _discard,
}
