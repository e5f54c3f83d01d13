"""Cancellation of a running statement: user cancel, statement_timeout, dropped clients.

A `CancelToken` belongs to one statement. The session creates it when the statement starts
(with the deadline of `statement_timeout`, if set), makes it the thread's current token
(`current()`, a context variable), and forgets it when the statement ends. Anyone may
`cancel(reason)` it from another thread (pgwire on a CancelRequest or when the client's
socket closed); the statement's own work notices at its next `check()`, which raises
`QueryCanceled` (SQLSTATE 57014) with PostgreSQL's message for the reason.

Long work calls `check()` between chunks (batch operators, COPY, backfill of a new view):
it costs one attribute read and one `time.monotonic()`, so it belongs per chunk, never per
row. Work that runs on another thread than the statement (a backfill driven by the barrier
loop) captures the token with `current()` in the statement's thread and passes it along;
it may call `check()` or read `cancelled` from any thread. Blocking waits use
`token.wait(seconds)` (returns early when cancelled) or poll `check()` with a short timeout.

Outside a statement `current()` returns `NEVER`, a token that is never cancelled, so
library code can call `current().check()` unconditionally.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Iterator

from engine.errors import QueryCanceled

USER = "user"  # CancelRequest (psql's Ctrl-C, psycopg's conn.cancel())
TIMEOUT = "timeout"  # statement_timeout elapsed
DISCONNECT = "disconnect"  # the client's connection closed
SHUTDOWN = "shutdown"  # the server is stopping

_MESSAGES = {
    USER: "canceling statement due to user request",
    TIMEOUT: "canceling statement due to statement timeout",
    DISCONNECT: "canceling statement due to user request",
    SHUTDOWN: "canceling statement due to user request",
}


class CancelToken:
    """One statement's stop signal. Thread-safe: `cancel` from anywhere, `check` anywhere.

    `deadline` is a `time.monotonic()` value (None: no timeout); once it passed, `check`
    raises with the statement-timeout message even if nobody called `cancel`.
    """

    __slots__ = ("_event", "_reason", "deadline")

    def __init__(self, deadline: float | None = None) -> None:
        self._event = threading.Event()
        self._reason: str | None = None
        self.deadline = deadline

    @classmethod
    def with_timeout(cls, timeout_ms: int) -> CancelToken:
        """A token whose deadline is `timeout_ms` from now (0: none)."""
        return cls(time.monotonic() + timeout_ms / 1000.0 if timeout_ms > 0 else None)

    def cancel(self, reason: str = USER) -> None:
        """Ask the statement to stop; the first reason given is the one reported."""
        if self._reason is None:
            self._reason = reason
        self._event.set()

    @property
    def reason(self) -> str | None:
        """Why the statement is being stopped (USER, TIMEOUT, ...), None while it may run."""
        if self._reason is None and self.deadline is not None and time.monotonic() >= self.deadline:
            self.cancel(TIMEOUT)
        return self._reason

    @property
    def cancelled(self) -> bool:
        return self.reason is not None

    def error(self) -> QueryCanceled:
        return QueryCanceled(_MESSAGES.get(self._reason or USER, _MESSAGES[USER]))

    def check(self) -> None:
        """Raise QueryCanceled (57014) when cancelled or past the deadline."""
        if self._event.is_set() or (
            self.deadline is not None and time.monotonic() >= self.deadline
        ):
            if self._reason is None:
                self._reason = TIMEOUT
            raise self.error()

    def remaining(self) -> float | None:
        """Seconds left before the deadline (None: no deadline)."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def wait(self, seconds: float | None) -> bool:
        """Sleep up to `seconds` (None: until cancelled), waking at once when cancelled or
        at the deadline; True when the token is cancelled (then `check()` raises)."""
        rem = self.remaining()
        if rem is not None:
            seconds = rem if seconds is None else min(seconds, rem)
        self._event.wait(seconds)
        return self.cancelled


class _Never(CancelToken):
    """The token outside any statement: cancelling it is ignored."""

    __slots__ = ()

    def cancel(self, reason: str = USER) -> None:
        return None


NEVER: CancelToken = _Never()

_current: contextvars.ContextVar[CancelToken] = contextvars.ContextVar(
    "swell_cancel_token", default=NEVER
)


def current() -> CancelToken:
    """The running statement's token in this thread (NEVER outside a statement)."""
    return _current.get()


def check() -> None:
    """`current().check()`: the one-line cancellation point for per-chunk loops."""
    _current.get().check()


@contextlib.contextmanager
def running(token: CancelToken) -> Iterator[CancelToken]:
    """Make `token` the current one for the block (a statement's execution, or a worker
    thread doing work on the statement's behalf)."""
    reset = _current.set(token)
    try:
        yield token
    finally:
        _current.reset(reset)
