"""Rate-limited logging for events a remote client can cause at will.

Why: a client (or a scanner on the internet) can send malformed HTTP requests, open
connections past the limit or fail logins as fast as the network allows. Logging each one
with a traceback lets it fill the disk and bury real errors. `LogThrottle` lets the first
occurrence of each kind through, then at most one line per `interval_s`, saying how many
were suppressed meanwhile; tracebacks are dropped (the events are expected, not bugs).

Lifecycle: one `LogThrottle` per component (module-level or owned by a server), used from
the event loop or any thread (a lock guards the counters). `ThrottleFilter` attaches the
same policy to a whole logger, for libraries that log through their own logger
(aiohttp's request handler).
"""

from __future__ import annotations

import logging
import threading
import time


class LogThrottle:
    """Decides, per kind of event, whether a line should be logged now."""

    def __init__(self, interval_s: float = 60.0) -> None:
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._suppressed: dict[str, int] = {}

    def admit(self, kind: str) -> int | None:
        """None to stay quiet; else how many events of `kind` were suppressed since the
        last line (0 for the first)."""
        now = time.monotonic()
        with self._lock:
            last = self._last.get(kind)
            if last is not None and now - last < self.interval_s:
                self._suppressed[kind] = self._suppressed.get(kind, 0) + 1
                return None
            if len(self._last) > 1000:  # kinds are bounded by the callers; stay bounded anyway
                self._last.clear()
                self._suppressed.clear()
            self._last[kind] = now
            return self._suppressed.pop(kind, 0)

    def log(self, logger: logging.Logger, level: int, kind: str, msg: str, *args: object) -> None:
        """`logger.log(level, msg, *args)` unless `kind` was logged within the interval."""
        suppressed = self.admit(kind)
        if suppressed is None:
            return
        if suppressed:
            msg += " (%d more since the last such line)"
            args = (*args, suppressed)
        logger.log(level, msg, *args)


class ThrottleFilter(logging.Filter):
    """A logger filter: records carrying an exception of one of `types` are reduced to one
    line without traceback (`<label>: <message>: <ExcType>: <text>`) and throttled per exception
    type; other records pass untouched."""

    def __init__(
        self, types: tuple[type[BaseException], ...], label: str, interval_s: float = 60.0
    ) -> None:
        super().__init__()
        self.types = types
        self.label = label
        self.throttle = LogThrottle(interval_s)

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if exc is None or not isinstance(exc, self.types):
            return True
        suppressed = self.throttle.admit(type(exc).__name__)
        if suppressed is None:
            return False
        text = f"{self.label}: {record.getMessage()}: {type(exc).__name__}: {_one_line(exc)}"
        if suppressed:
            text += f" ({suppressed} more since the last such line)"
        record.msg, record.args = text, None
        record.exc_info, record.exc_text = None, None
        if record.levelno > logging.WARNING:  # expected from clients: not a server error
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:300]
