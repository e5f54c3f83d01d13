"""`VERIFY MATERIALIZED VIEW v`: check a view's rows against its query recomputed now.

Why: a materialized view is maintained incrementally, epoch after epoch; a bug in an
operator (or a state that went wrong) would show as rows that differ from what the query
gives. This statement lets a user check any view at any time, without stopping anything.

How: without any lock the statement takes the last committed epoch's snapshot
(`Runtime.committed()`: every table's and view's rows as of one epoch E) and plans the
view's query ad hoc (the batch planner, with the view owner's rights). Then the query
runs over the relations' rows of that same snapshot, with the streaming jobs'
NULL-on-error semantics (a failing expression yields NULL for its row, as in the view),
and both row multisets are compared on the view's visible columns (floating-point values
to 12 significant digits, since an incremental sum adds in another order).

Answer: one row `ok | <row count> | NULL...` when they agree; else one row per differing
row: `missing` (the query has it, the view does not) or `extra` (the view has it, the
query does not), how many times, and the row's values, in the view's column order.
A SOURCE keeps no rows: its rows are read again from the connector up to the position
the views have consumed at that epoch. Views whose query reads the clock (`now()`,
temporal filters) may differ legitimately, and so may `ORDER BY ... LIMIT` views with ties
at the limit.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pyarrow as pa

from engine.api import QueryResult
from engine.catalog import Relation, RelationKind
from engine.catalog.privileges import check_read, reading_as_owner
from engine.errors import EngineError
from engine.expr.core import job_context
from engine.plan.logical import relations_scanned
from engine.sql.parser import Statement, parse_one
from engine.types import BIGINT, VARCHAR, Field, TypeKind


class _Discard:
    """Error sink of the recomputation: failing rows are NULL, as in the view; the view's
    own failures are already in rw_event_logs, so nothing is recorded twice."""

    def report(self, expression: str, error: EngineError, count: int, sample: str) -> None:
        return None


def verify(session: Any, st: Statement) -> QueryResult:
    from engine.handlers.query import planner_for

    rt = session.db.runtime
    cat = session.db.catalog
    # no lock: the catalog is copy-on-write and `committed()` is one immutable epoch
    rel = cat.get_kind(st.args["name"], RelationKind.MATERIALIZED_VIEW, st.args["schema"])
    check_read(rel)
    # the snapshot and the sources' positions of the same epoch: taken together under the
    # lock (a moment, between barriers); a SOURCE keeps no rows, its connector re-reads them
    with rt.lock:
        snap = rt.committed()
        positions = {sid: sf.position for sid, sf in rt.sources.items()}
    ast = parse_one(rel.query).ast
    assert ast is not None
    with reading_as_owner(rel):
        plan = planner_for(session, None).plan_query(ast)
    from engine.batch import execute_plan

    tables = {
        r.id: snap.table(r.id) if r.id in snap else _source_rows(r, positions.get(r.id))
        for r in relations_scanned(plan)
    }
    ctx = job_context(session.eval_ctx(), _Discard())
    got = execute_plan(plan, tables.__getitem__, ctx)
    vis_q = [i for i, f in enumerate(plan.schema) if not f.hidden]
    got = got.select(vis_q)
    view = snap.table(rel.id)
    vis_v = [i for i, f in enumerate(rel.fields) if not f.hidden]
    view = view.select(vis_v)
    fields = [rel.fields[i] for i in vis_v]
    floats = [f.type.kind in (TypeKind.DOUBLE, TypeKind.REAL) for f in fields]
    shown: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    want = _multiset(got, floats, shown)
    have = _multiset(view, floats, shown)
    columns = [Field("verdict", VARCHAR), Field("count", BIGINT), *fields]
    if want == have:
        return QueryResult("VERIFY", columns, [("ok", view.num_rows, *([None] * len(fields)))])
    rows: list[tuple[Any, ...]] = []
    for key, n in sorted((want - have).items(), key=_order):
        rows.append(("missing", n, *shown[key]))
    for key, n in sorted((have - want).items(), key=_order):
        rows.append(("extra", n, *shown[key]))
    return QueryResult("VERIFY", columns, rows)


def _source_rows(rel: Relation, position: dict[str, Any] | None) -> pa.Table:
    """A source's rows up to the position its views have consumed (none before any)."""
    from engine.stream.source import connector_for
    from engine.types import arrow_schema

    if rel.kind is not RelationKind.SOURCE or not position:
        return arrow_schema(rel.fields).empty_table()
    return connector_for(rel).read_now(rel, position, None)


def _multiset(
    t: pa.Table, floats: list[bool], shown: dict[tuple[Any, ...], tuple[Any, ...]]
) -> Counter[tuple[Any, ...]]:
    """Rows as hashable, normalised tuples; `shown` keeps one original row per key."""
    cols = [c.to_pylist() for c in t.columns]
    out: Counter[tuple[Any, ...]] = Counter()
    for row in zip(*cols, strict=True):
        key = tuple(_norm(v, fl) for v, fl in zip(row, floats, strict=True))
        out[key] += 1
        shown.setdefault(key, row)
    return out


def _norm(v: Any, is_float: bool) -> Any:
    if is_float and isinstance(v, float):
        return float(f"{v:.12g}")
    return _hashable(v)


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    return v


def _order(item: tuple[tuple[Any, ...], int]) -> str:
    return repr(item[0])
