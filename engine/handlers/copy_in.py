"""COPY table [(columns)] FROM STDIN: the engine half.

The exchange has two steps because the rows arrive after the statement: `begin` (the
statement itself) checks the target table and remembers it on the session, returning a
`QueryResult` whose `copy` has `direction = "in"` and whose `columns` are the target
columns; pgwire then sends CopyInResponse, collects the CopyData, parses it (text, CSV or
binary, with the column types, into Arrow columns: `pgwire.copy_columns`) and calls
`Session.copy_in_columns(columns)`, which inserts the rows like one INSERT (one WAL
record, durable before `COPY n` is answered) and forgets the
pending COPY. A CopyFail or a parse error ends it with `Session.copy_in_abort()`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from engine import faults
from engine.api import QueryResult
from engine.errors import InvalidTransactionState, UndefinedColumn, UndefinedTable
from engine.sql.parser import Statement
from engine.types import Field


@dataclass
class PendingCopy:
    relation_id: int
    columns: list[int]  # indexes into the relation's fields


def begin(session: Any, st: Statement) -> QueryResult:
    from sqlglot import exp

    from engine.handlers.dml import _target

    table = exp.to_table(st.args["table"], dialect="postgres")
    rel = _target(session, table, "copy to")  # the catalog is read without a lock
    visible = [i for i, f in enumerate(rel.fields) if not f.hidden]
    if st.args["columns"] is None:
        cols = visible
    else:
        by_name = {rel.fields[i].name: i for i in visible}
        cols = []
        for name in st.args["columns"]:
            if name not in by_name:
                raise UndefinedColumn(f'column "{name}" of relation "{rel.name}" does not exist')
            cols.append(by_name[name])
    session.pending_copy = PendingCopy(rel.id, cols)
    fields = [Field(rel.fields[i].name, rel.fields[i].type) for i in cols]
    opts = dict(st.args["options"], direction="in", table=rel.name)
    return QueryResult("COPY 0", fields, [], copy=opts)


def insert_columns(session: Any, columns: list[pa.Array]) -> QueryResult:
    """Write the COPY's rows (one Arrow array per COPY column) as one insert chunk."""
    from engine.handlers.dml import insert_lock, write_inserts

    pending: PendingCopy | None = session.pending_copy
    session.pending_copy = None
    if pending is None:
        raise InvalidTransactionState("no COPY FROM STDIN in progress")
    n = len(columns[0]) if columns else 0
    if n == 0:
        return QueryResult("COPY 0")
    rt = session.db.runtime
    rel = session.db.catalog.relations.get(pending.relation_id)
    if rel is None:
        raise UndefinedTable("the table of the COPY was dropped")
    arrays = {}
    for c, col in zip(pending.columns, columns, strict=True):
        want = rel.fields[c].type.arrow
        arrays[c] = col if col.type == want else col.cast(want)
    with insert_lock(rt, rel):  # never waits for a barrier: WAL append + queue
        seq = write_inserts(rt, rel, arrays, n, session.eval_ctx())
        faults.hit("copy_queued")
    # durable (and flushed under implicit_flush) before the client sees COPY n, like INSERT
    result: QueryResult = session._after_dml((QueryResult(f"COPY {n}"), seq))
    return result
