"""A SELECT's rows handed to pgwire chunk by chunk as the executor produces them.

`run_select` in streaming mode (sessions served by pgwire set `stream_results`) pulls the
first chunks of the plan's stream; when the whole result arrived within `FIRST_ROWS` rows
it answers an ordinary `QueryResult`. Otherwise the result carries the rows so far and a
`ResultStream` in `QueryResult.more`: pgwire sends those rows, then calls `next()` on the
connection's worker thread for each further chunk (None at the end, when the result's
`tag` becomes `SELECT n`, or `COPY n` for COPY ... TO STDOUT), so a 10M-row result is
never built whole and its first rows reach the client while the rest is computed.

The statement is still running while its rows stream: each `next()` makes the statement's
cancel token current again (a CancelRequest, `statement_timeout` or a dropped client
stops it between chunks) and pg_stat_activity keeps showing it; `close()` (pgwire calls
it whatever happened) closes the executor's generators and ends the statement.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from engine import cancel as cancellation
from engine.api import QueryResult
from engine.numeric import py_values

FIRST_ROWS = 65_536


def rows_of(t: pa.Table) -> list[tuple[Any, ...]]:
    if t.num_columns == 0:
        return [() for _ in range(t.num_rows)]
    cols = [py_values(c) for c in t.columns]
    return list(zip(*cols, strict=True))


class ResultStream:
    """The rest of a streaming SELECT's rows (see the module docstring)."""

    def __init__(
        self,
        session: Any,
        result: QueryResult,
        parts: Iterator[pa.Table],
        visible: list[int] | None,
        sent: int,
    ) -> None:
        self.session = session
        self.result = result
        self.parts = parts
        self.visible = visible
        self.count = sent
        self.token = cancellation.current()
        self.done = False
        self.verb = "SELECT"  # the final tag's verb (COPY ... TO STDOUT: "COPY")
        session._stream_token = self.token  # a cancel between chunks still reaches it

    def next(self) -> list[tuple[Any, ...]] | None:
        """The next chunk of rows (never empty), or None once the result is complete."""
        if self.done:
            return None
        s = self.session
        outer = s._token
        s._token = self.token
        try:
            with cancellation.running(self.token):
                for t in self.parts:
                    if t.num_rows == 0:
                        continue
                    if self.visible is not None:
                        t = t.select(self.visible)
                    rows = rows_of(t)
                    self.count += len(rows)
                    return rows
        except BaseException:
            self.close()
            raise
        finally:
            s._token = outer
        self.result.tag = f"{self.verb} {self.count}"
        self.close()
        return None

    def close(self) -> None:
        if self.done:
            return
        self.done = True
        close = getattr(self.parts, "close", None)
        if close is not None:
            close()
        if self.session._stream_token is self.token:
            self.session._stream_token = None
        self.session.active_query = None


def first_rows(
    session: Any, result: QueryResult, parts: Iterator[pa.Table], visible: list[int] | None
) -> QueryResult:
    """Fill `result` with the stream's first rows; attach the rest as `result.more`."""
    held: list[pa.Table] = []
    n = 0
    for t in parts:
        if t.num_rows == 0:
            continue
        held.append(t.select(visible) if visible is not None else t)
        n += t.num_rows
        if n >= FIRST_ROWS:
            result.rows = [r for h in held for r in rows_of(h)]
            result.tag = ""  # final once the stream ended (ResultStream.next)
            result.more = ResultStream(session, result, parts, visible, n)
            return result
    result.rows = [r for h in held for r in rows_of(h)]
    result.tag = f"SELECT {n}"
    return result
