"""Turning exceptions into ErrorResponse/NoticeResponse fields.

Every failure a client sees passes through `error_fields`: it walks the exception's
`__cause__`/`__context__` chain to the first `engine.errors.EngineError` and takes its
severity, SQLSTATE, message, detail, hint and position. Anything else is a bug in Swell:
it is logged with its traceback (never sent) and answered as XX000 "internal error".

Also holds the few protocol-level errors the engine's tree does not define (duplicate
prepared statement or portal, failed transaction block); they are `EngineError`s too, so
the same walk handles them.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from engine.api import Notice
from engine.errors import EngineError
from pgwire import messages as msg

log = logging.getLogger("pgwire")


class DuplicatePreparedStatement(EngineError):
    sqlstate = "42P05"


class DuplicateCursor(EngineError):
    sqlstate = "42P03"


class InFailedSqlTransaction(EngineError):
    sqlstate = "25P02"


def aborted_transaction() -> InFailedSqlTransaction:
    return InFailedSqlTransaction(
        "current transaction is aborted, commands ignored until end of transaction block"
    )


@dataclass(frozen=True, slots=True)
class ErrorFields:
    severity: str
    sqlstate: str
    message: str
    detail: str | None = None
    hint: str | None = None
    position: int | None = None
    context: str | None = None

    def pairs(self) -> list[tuple[str, str]]:
        out = [
            ("S", self.severity),
            ("V", self.severity),
            ("C", self.sqlstate),
            ("M", self.message),
        ]
        if self.detail:
            out.append(("D", self.detail))
        if self.hint:
            out.append(("H", self.hint))
        if self.position is not None:
            out.append(("P", str(self.position)))
        if self.context:
            out.append(("W", self.context))
        return out


def find_engine_error(exc: BaseException) -> EngineError | None:
    """The first EngineError on the cause/context chain (cycles are cut)."""
    seen: set[int] = set()
    cur: BaseException | None = exc
    while cur is not None and id(cur) not in seen:
        if isinstance(cur, EngineError):
            return cur
        seen.add(id(cur))
        cur = cur.__cause__ if cur.__cause__ is not None else cur.__context__
    return None


def error_fields(exc: BaseException, *, severity: str | None = None) -> ErrorFields:
    """ErrorResponse fields for `exc`; non-engine errors are logged and become XX000."""
    err = find_engine_error(exc)
    if err is None:
        log.error("internal error error=%s", type(exc).__name__, exc_info=exc)
        return ErrorFields(severity or "ERROR", "XX000", "internal error")
    return ErrorFields(
        severity or err.severity,
        err.sqlstate,
        err.message,
        err.detail,
        err.hint,
        err.position,
        getattr(err, "context", None),
    )


def error_response(exc: BaseException, *, severity: str | None = None) -> bytes:
    return msg.error_or_notice(b"E", error_fields(exc, severity=severity).pairs())


def notice_response(notice: Notice) -> bytes:
    fields = ErrorFields(
        notice.severity, notice.sqlstate, notice.message, notice.detail, notice.hint
    )
    return msg.error_or_notice(b"N", fields.pairs())
