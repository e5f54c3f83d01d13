"""Choosing an index for an ad-hoc query: `Filter(Scan t)` -> `Filter(IndexScan idx)`.

`use_indexes` runs on a batch plan after planning (SELECT and EXPLAIN). Where a filter
sits right on a scan of a table or materialized view and one of its AND-ed conjuncts
compares the leading column of one of the relation's indexes with a constant
(`=`, `<`, `<=`, `>`, `>=`, so BETWEEN too; a constant is literals under operators and
casts, evaluated once when the query runs) or tests it with `IN (constants)` (one point
lookup per distinct value), the scan becomes an `IndexScan`: the rows of
the index whose leading column is within the conjuncts' range, in the scanned relation's
column order. A multi-column index is searched on as many of its columns as the filter
pins: equalities on a prefix of them (the first may be an IN list instead), then
optionally a range on the next one. The filter stays above it, whole, so the result is
exactly the scan's: the index only narrows the rows the filter sees (a superset of its
answer is all the lookup must return). An index whose backfill is not done is never
used. When it does not hold every column of the scan (an INCLUDE list), it still
answers if it holds the relation's primary key: the lookup finds the keys, then reads
those rows of the relation by key (EXPLAIN: `lookup: t by primary key (id)`; a table
without a primary key by its hidden `_row_id`, which every index stores as the
upstream's stream key). Among usable indexes the one
searching the most columns wins, a covering one before a non-covering one.

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
    """The rows of `relation` (the indexed table or view, in its column order) within
    `bounds`, read from index `index`. `keys` are the index columns searched, in the
    index's order; a bound `(j, op, constant Expr)` constrains `keys[j]` (constants are
    evaluated when the query runs). Covering (`fetch` None): `columns[i]` is the index
    column holding the relation's column i. Non-covering: `columns` are the index
    columns holding the relation's primary key, and `fetch` its positions in the
    relation, whose rows are then read by that key."""

    relation: Relation = None  # type: ignore[assignment]
    index: Relation = None  # type: ignore[assignment]
    keys: list[int] = field(default_factory=list)
    bounds: list[tuple[int, str, Any]] = field(default_factory=list)
    # `keys[0] IN (constants)`: one lookup per distinct value (within `bounds`); None: no list
    points: list[Any] | None = None
    shown: list[str] = field(default_factory=list)  # the conjuncts used, for EXPLAIN
    columns: list[int] = field(default_factory=list)
    fetch: list[int] | None = None
    table: Any = None  # pyarrow.Table once looked up

    def describe(self) -> str:
        cols = ", ".join(f.name for f in self.schema)
        how = ""
        if self.fetch is not None:
            pk = ", ".join(self.relation.fields[i].name for i in self.fetch)
            how = f", lookup: {self.relation.name} by primary key ({pk})"
        return (
            f"IndexScan {{ table: {self.relation.name}, index: {self.index.name}, "
            f"scan_ranges: [{' AND '.join(self.shown)}]{how}, "
            f"columns: [{cols}] }}"
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
    """The best index scan for `f`: the most index columns searched (equalities on a
    prefix of the index's columns, then at most one column with a range; an IN list on
    the first), a covering index before one that must read the table's rows too."""
    scan = f.input
    assert isinstance(scan, Scan)
    conj = _conjuncts(f.predicate)
    cmps = [c for c in map(_comparison, conj) if c is not None]
    lists = [c for c in map(_in_list, conj) if c is not None]
    if not cmps and not lists:
        return None
    best: tuple[tuple[int, int], IndexScan] | None = None
    for idx in indexes:
        if idx.extra.get("creating"):
            continue  # still backfilling: not a complete copy yet
        found = _with_index(scan, idx, cmps, lists)
        if found is None:
            continue
        score = (len(found.keys), int(found.fetch is None))
        if best is None or score > best[0]:
            best = (score, found)
    return None if best is None else best[1]


def _stored(scan: Scan, idx: Relation, cols: list[int]) -> list[int] | None:
    """The index column holding each of the relation's columns `cols`, or None."""
    names = {fl.name: i for i, fl in enumerate(idx.fields)}
    out = []
    for c in cols:
        fl = scan.schema[c]
        pos = names.get(fl.name)
        if pos is None or idx.fields[pos].type != fl.type:
            return None
        out.append(pos)
    return out


def _with_index(
    scan: Scan,
    idx: Relation,
    cmps: list[tuple[int, str, Expr]],
    lists: list[tuple[int, list[Expr]]],
) -> IndexScan | None:
    names = {fl.name: i for i, fl in enumerate(idx.fields)}
    fetch: list[int] | None = None
    columns = _stored(scan, idx, list(range(len(scan.schema))))
    if columns is None:  # not covering: the index must hold the primary key to read the rest
        pk = list(scan.relation.pk)
        columns = _stored(scan, idx, pk) if pk else None
        if columns is None or scan.schema[pk[0]].type.kind not in _ORDERED:
            return None
        fetch = pk
    by_name = {fl.name: i for i, fl in enumerate(scan.schema)}
    keys: list[int] = []
    bounds: list[tuple[int, str, Any]] = []
    points: list[Any] | None = None
    shown: list[str] = []
    for j, name in enumerate(idx.extra["index"]["columns"]):
        col = by_name.get(name)
        if col is None or scan.schema[col].type.kind not in _ORDERED:
            break
        eqs = [(op, lit) for c, op, lit in cmps if c == col and op == "="]
        ranges = [(op, lit) for c, op, lit in cmps if c == col and op != "="]
        items = next((it for c, it in lists if c == col), None) if j == 0 else None
        if not eqs and not ranges and items is None:
            break
        keys.append(names[name])
        bounds += [(j, op, lit) for op, lit in eqs + ranges]
        shown += [f"{name} {op} {lit}" for op, lit in eqs + ranges]
        if items is not None:
            points = items
            shown.append(f"{name} IN ({', '.join(str(p) for p in items)})")
        if not eqs and items is None:
            break  # a range: the columns after it are not ordered within it
    if not keys:
        return None
    return IndexScan(
        schema=scan.schema,
        stream_key=scan.stream_key,
        relation=scan.relation,
        index=idx,
        keys=keys,
        bounds=bounds,
        points=points,
        shown=shown,
        columns=columns,
        fetch=fetch,
    )
