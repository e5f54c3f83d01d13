"""Transaction-block status as the client sees it (ReadyForQuery's `I`/`T`/`E`).

Swell has no multi-statement transactions, but drivers (psycopg, SQLAlchemy, asyncpg,
pgjdbc) wrap work in BEGIN...COMMIT and read the status byte, so pgwire tracks it from the
engine's command tags: BEGIN enters `T`, an error inside a block moves to `E`, where every
statement except the ones that end the block is refused with 25P02, and COMMIT/ROLLBACK
return to `I` (a COMMIT of a failed block is reported as ROLLBACK, as PostgreSQL does).

One `TxState` per connection, mutated only by that connection's task.
"""

from __future__ import annotations

import re

_COMMENT = re.compile(r"\s*(?:--[^\n]*(?:\n|$)|/\*.*?\*/)", re.S)
_WORD = re.compile(r"\s*([A-Za-z_]+)(?:\s+([A-Za-z_]+))?(?:\s+([A-Za-z_]+))?")
_EXIT_WORDS = {"commit", "rollback", "end", "abort"}


def leading_words(sql: str) -> list[str]:
    """Up to three leading keywords of `sql`, lower-cased, comments skipped."""
    pos = 0
    while True:
        m = _COMMENT.match(sql, pos)
        if not m or m.end() == pos:
            break
        pos = m.end()
    m = _WORD.match(sql, pos)
    if not m:
        return []
    return [w.lower() for w in m.groups() if w]


def ends_block(sql: str) -> bool:
    """True for the statements a failed block accepts (COMMIT, ROLLBACK, END, ABORT)."""
    words = leading_words(sql)
    return bool(words) and words[0] in _EXIT_WORDS


def is_rollback_to_savepoint(sql: str) -> bool:
    words = leading_words(sql)
    if not words or words[0] != "rollback":
        return False
    rest = [w for w in words[1:] if w not in ("work", "transaction")]
    return bool(rest) and rest[0] == "to"


class TxState:
    """The connection's transaction status byte and its transitions."""

    __slots__ = ("status",)

    def __init__(self) -> None:
        self.status = "I"

    @property
    def failed(self) -> bool:
        return self.status == "E"

    def after_tag(self, tag: str, sql: str = "") -> str:
        """Update the status after a successful statement; returns the tag to send."""
        head = tag.split(" ", 1)[0].upper()
        if head in ("BEGIN", "START") or tag.upper() == "START TRANSACTION":
            if self.status == "I":
                self.status = "T"
            return tag
        if head in ("COMMIT", "ROLLBACK", "END", "ABORT"):
            if is_rollback_to_savepoint(sql) and self.status != "I":
                self.status = "T"
                return tag
            was_failed = self.status == "E"
            self.status = "I"
            return "ROLLBACK" if was_failed and head == "COMMIT" else tag
        return tag

    def after_error(self) -> None:
        if self.status == "T":
            self.status = "E"
