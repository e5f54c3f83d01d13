"""Choosing an index for an ad-hoc query: `Filter(Scan t)` -> `Filter(IndexScan idx)`.

`use_indexes` runs on a batch plan after planning (SELECT and EXPLAIN). Where a filter
sits right on a scan of a table or materialized view and one of its AND-ed conjuncts
compares the leading column of one of the relation's indexes with a constant
(`=`, `<`, `<=`, `>`, `>=`, so BETWEEN too; a constant is literals under operators and
casts, evaluated once when the query runs) or tests it with `IN (constants)` (one point
lookup per distinct value), the scan becomes an `IndexScan`: the rows of
the index whose leading column is within the conjuncts' range, in the scanned relation's
column order. The filter stays above it, whole, so the result is exactly the scan's:
the index only narrows the rows the filter sees (a superset of its answer is all the
lookup must return). An index is used only when it holds every column of the scan
(INCLUDE omitted, or listing them) and its backfill is done; otherwise the query scans.

The lookup itself (`engine.batch.index_lookup`) runs when the query does: the caller
fills `IndexScan.table` from the index's rows of the query's committed epoch, the same
epoch as every other relation the query reads (an index is stepped in the same barrier
as its upstream, so it never lags it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.catalog import Relation
from engine.catalog.indexes import index_info, indexes_on
from engine.expr.core import Expr, Func, InputRef, Literal
from engine.plan.logical import Filter, PlanNode, Scan
from engine.types import TypeKind

# column types whose values Arrow and numpy order the same way (the lookup's sort)
_ORDERED = {
    TypeKind.SMALLINT,
    TypeKind.INT,
    TypeKind.BIGINT,
    TypeKind.REAL,
    TypeKind.DOUBLE,
    TypeKind.VARCHAR,
    TypeKind.DATE,
    TypeKind.TIMESTAMP,
    TypeKind.TIMESTAMPTZ,
}
_FLIP = {"=": "=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}


@dataclass(eq=False)
class IndexScan(PlanNode):
    """The rows of `relation` (the indexed table or view, in its column order) whose
    index key lies within `bounds` (constants, evaluated when the query runs), read from
    index `index`; `columns[i]` is the index
    column holding the relation's column i, `key` the index column searched."""

    relation: Relation = None  # type: ignore[assignment]
    index: Relation = None  # type: ignore[assignment]
    key: int = 0
    bounds: list[tuple[str, Any]] = field(default_factory=list)  # (op, constant Expr)
    # `key IN (constants)`: one lookup per distinct value (within `bounds`); None: no list
    points: list[Any] | None = None
    shown: list[str] = field(default_factory=list)  # the conjuncts used, for EXPLAIN
    columns: list[int] = field(default_factory=list)
    table: Any = None  # pyarrow.Table once looked up

    def describe(self) -> str:
        cols = ", ".join(f.name for f in self.schema)
        return (
            f"IndexScan {{ table: {self.relation.name}, index: {self.index.name}, "
            f"scan_ranges: [{' AND '.join(self.shown)}], columns: [{cols}] }}"
        )


def use_indexes(plan: PlanNode, catalog: Any) -> PlanNode:
    """`plan` with each filtered scan an index can answer replaced (see module doc)."""
    if not any(index_info(r) for r in catalog.relations.values()):
        return plan  # no index anywhere: nothing to look at
    stack = [plan]
    seen: set[int] = set()
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, Filter) and isinstance(n.input, Scan):
            found = _index_scan(n, indexes_on(catalog, n.input.relation.id))
            if found is not None:
                n.input = found
                continue
        stack.extend(n.inputs())
    return plan


def _conjuncts(e: Expr) -> list[Expr]:
    if isinstance(e, Func) and e.op == "AND" and len(e.args) == 2:
        return _conjuncts(e.args[0]) + _conjuncts(e.args[1])
    return [e]


def _in_list(e: Expr) -> tuple[int, list[Expr]] | None:
    """(column, constants) of `col IN (constant, ...)`."""
    if not isinstance(e, Func) or e.in_items is None or len(e.args) != 1:
        return None
    col = e.args[0]
    if not isinstance(col, InputRef):
        return None
    items = list(e.in_items)
    if not items or not all(_constant(i) and i.type == col.type for i in items):
        return None
    return col.index, items


def _comparison(e: Expr) -> tuple[int, str, Expr] | None:
    """(column, op, constant) of `col op constant` or `constant op col`."""
    if not isinstance(e, Func) or e.op not in _FLIP or len(e.args) != 2:
        return None
    a, b = e.args
    if isinstance(a, InputRef) and _constant(b):
        col, op, lit = a, e.op, b
    elif isinstance(b, InputRef) and _constant(a):
        col, op, lit = b, _FLIP[e.op], a
    else:
        return None
    if (isinstance(lit, Literal) and lit.value is None) or lit.type != col.type:
        return None
    return col.index, op, lit


def _constant(e: Expr) -> bool:
    """A constant the lookup may evaluate once: literals under operators and casts only
    (`42`, `41 + 1`, `'2024-01-01'::timestamp`), never a function call, which could be
    volatile or a user's function (the filter above still evaluates it per row)."""
    if isinstance(e, Literal):
        return True
    if isinstance(e, Func) and (e.op is not None or e.name == "cast"):
        return not e.volatile and not e.uses_now and all(_constant(c) for c in e.args)
    return False


def _index_scan(f: Filter, indexes: list[Relation]) -> IndexScan | None:
    scan = f.input
    assert isinstance(scan, Scan)
    conj = _conjuncts(f.predicate)
    cmps = [c for c in map(_comparison, conj) if c is not None]
    lists = [c for c in map(_in_list, conj) if c is not None]
    if not cmps and not lists:
        return None
    for idx in indexes:
        if idx.extra.get("creating"):
            continue  # still backfilling: not a complete copy yet
        lead = idx.extra["index"]["columns"][0]
        names = {fl.name: i for i, fl in enumerate(idx.fields)}
        columns = []
        for fl in scan.schema:
            pos = names.get(fl.name)
            if pos is None or idx.fields[pos].type != fl.type:
                break
            columns.append(pos)
        else:
            key_col = next((i for i, fl in enumerate(scan.schema) if fl.name == lead), None)
            if key_col is None or scan.schema[key_col].type.kind not in _ORDERED:
                continue
            used = [(op, lit) for col, op, lit in cmps if col == key_col]
            points = next((items for col, items in lists if col == key_col), None)
            if not used and points is None:
                continue
            shown = [f"{lead} {op} {lit}" for op, lit in used]
            if points is not None:
                shown.append(f"{lead} IN ({', '.join(str(p) for p in points)})")
            return IndexScan(
                schema=scan.schema,
                stream_key=scan.stream_key,
                relation=scan.relation,
                index=idx,
                key=names[lead],
                bounds=used,
                points=points,
                shown=shown,
                columns=columns,
            )
    return None
