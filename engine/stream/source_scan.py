"""Ad-hoc SELECT over a SOURCE: read the topic as it is now, seeking by WHERE bounds.

`read_source_now(rel, plan)` is called by the batch query path outside the epoch lock (a
topic read may take a while and must not hold up barriers). It looks for the Filter
directly above the source's Scan and turns conjuncts comparing a hidden message column
with a constant into `SeekBounds`:

    _rw_kafka_timestamp  >, >=, <, <=, =   (-> start each partition at offsets_for_times)
    _rw_kafka_offset     >, >=, <, <=, =   (-> start / stop offsets per partition)
    _rw_kafka_partition  =                 (-> only that partition)

The Filter still runs on the decoded rows, so the bounds only need to be conservative.
The same Filter's predicate (when it uses neither now() nor volatile functions) is also
applied to each decoded poll batch (`SeekBounds.row_filter`), so a selective query over a
large topic never holds the rows it discards. Projection: when the scan feeds a projection or an
aggregation (through filters), only the columns they use are decoded
(`SeekBounds.columns`; the others are NULL), and undeclared fields never are.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.catalog import Relation
from engine.expr import EvalContext
from engine.expr.core import Expr, Func, InputRef
from engine.plan.logical import Agg, AggSpec, Filter, PlanNode, Project, Scan
from engine.stream.source import SeekBounds, connector_for

TS_COL = "_rw_kafka_timestamp"
OFFSET_COL = "_rw_kafka_offset"
PARTITION_COL = "_rw_kafka_partition"
_AGG_FIELDS = {"kind", "arg", "type", "distinct", "filter", "separator", "order"}
_FLIP = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}


def read_source_now(rel: Relation, plan: PlanNode, ctx: EvalContext | None = None) -> pa.Table:
    bounds = seek_bounds(rel, plan)
    preds = _find_filters(plan, rel)
    if len(preds) == 1 and _stable(preds[0]):
        pred, ectx = preds[0], ctx or EvalContext()

        def row_filter(b: pa.RecordBatch) -> pa.RecordBatch:
            return b.filter(pc.fill_null(pred.eval(b, ectx), False))

        bounds = bounds or SeekBounds()
        bounds.row_filter = row_filter
    cols = columns_read(rel, plan)
    if cols is not None:
        bounds = bounds or SeekBounds()
        bounds.columns = cols
    return connector_for(rel).read_now(rel, None, bounds)


def columns_read(rel: Relation, plan: PlanNode) -> set[int] | None:
    """Fields of `rel` the query uses, when the source is scanned once and consumed by a
    projection or an aggregation (through filters); None = all fields."""
    chains: list[tuple[PlanNode | None, list[Filter]]] = []

    def visit(p: PlanNode, parent: PlanNode | None, filters: list[Filter]) -> None:
        if isinstance(p, Scan) and p.relation.id == rel.id:
            chains.append((parent, filters))
            return
        for c in p.inputs():
            if isinstance(p, Filter):
                visit(c, parent, [*filters, p])
            else:
                visit(c, p, [])

    visit(plan, None, [])
    if len(chains) != 1:
        return None
    parent, filters = chains[0]
    used: set[int] = set()
    for f in filters:
        used |= f.predicate.input_refs()
    if isinstance(parent, Project):
        for e in parent.exprs:
            used |= e.input_refs()
    elif isinstance(parent, Agg):
        if {f.name for f in dataclasses.fields(AggSpec)} != _AGG_FIELDS:
            return None  # an aggregate shape this function does not know: read everything
        used |= set(parent.group_keys)
        for a in parent.aggs:
            used |= {a.arg} if a.arg is not None else set()
            used |= {a.filter} if a.filter is not None else set()
            used |= {i for i, _d, _n in a.order}
    else:
        return None
    return used


def _stable(e: Expr) -> bool:
    """No now() and no volatile function anywhere in `e` (safe to evaluate twice)."""
    if isinstance(e, Func) and (e.uses_now or e.volatile):
        return False
    return all(_stable(c) for c in e.children())


def _find_filters(plan: PlanNode, rel: Relation) -> list[Expr]:
    out: list[Expr] = []
    stack = [plan]
    while stack:
        p = stack.pop()
        if isinstance(p, Filter) and isinstance(p.input, Scan) and p.input.relation.id == rel.id:
            out.append(p.predicate)
        stack.extend(p.inputs())
    return out


def _conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, Func) and e.op == "AND":
        return [x for a in e.args for x in _conjuncts(a)]
    return [e]


def _const(e: Expr) -> Any:
    v = e.eval(pa.record_batch([pa.array([0])], names=["_"]), EvalContext())
    if isinstance(v, pa.Array):
        v = v[0]
    return v.as_py()


def seek_bounds(rel: Relation, plan: PlanNode) -> SeekBounds | None:
    preds = _find_filters(plan, rel)
    if len(preds) != 1:  # none, or the source is scanned twice with different filters
        return None
    names = {i: f.name for i, f in enumerate(rel.fields)}
    b = SeekBounds()
    found = False
    for c in _conjuncts(preds[0]):
        if not isinstance(c, Func) or c.op not in _FLIP or len(c.args) != 2:
            continue
        left, right = c.args
        op = c.op
        if isinstance(right, InputRef) and not isinstance(left, InputRef):
            left, right, op = right, left, _FLIP[op]
        if not isinstance(left, InputRef) or not right.is_constant():
            continue
        col = names.get(left.index)
        if col not in (TS_COL, OFFSET_COL, PARTITION_COL):
            continue
        try:
            v = _const(right)
        except Exception:
            continue
        if v is None:
            continue
        if col == TS_COL:
            if not isinstance(v, dt.datetime):
                continue
            if v.tzinfo is None:
                v = v.replace(tzinfo=dt.UTC)
            ms = int(v.timestamp() * 1000)
            if op in (">", ">=", "="):
                lo = ms if op != ">" else ms
                b.lo_ts = lo if b.lo_ts is None else max(b.lo_ts, lo)
            if op in ("<", "<=", "="):
                b.hi_ts = ms if b.hi_ts is None else min(b.hi_ts, ms)
        elif col == OFFSET_COL:
            n = int(v)
            if op in (">", ">=", "="):
                lo = n + 1 if op == ">" else n
                b.lo_offset = lo if b.lo_offset is None else max(b.lo_offset, lo)
            if op in ("<", "<=", "="):
                hi = n - 1 if op == "<" else n
                b.hi_offset = hi if b.hi_offset is None else min(b.hi_offset, hi)
        elif op == "=":
            p = {int(v)}
            b.partitions = p if b.partitions is None else b.partitions & p
        found = True
    return b if found else None
