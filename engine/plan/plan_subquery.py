"""Subqueries in ad-hoc queries: scalar, EXISTS, IN (SELECT ...), ARRAY(SELECT ...),
uncorrelated or correlated.

An uncorrelated subquery runs once while the outer query is planned and becomes a constant
(a literal, or a literal IN list). A correlated one (its WHERE or select list names a
column of the enclosing query, like psql's `(SELECT ... FROM pg_attrdef d WHERE
d.adrelid = a.attrelid)`) is planned once with each outer column replaced by an `OuterRef`
cell; the outer expression becomes a function of those outer columns that, per batch,
runs the subquery plan once for each distinct combination of outer values (setting the
cells first) and maps the answers back to the rows. Outer references may skip levels
(a subquery inside a subquery naming the outermost query).

Lifecycle: `Planner._common_hook` calls `plan_subquery` for subquery nodes; the
sub-planner's binding hook calls `outer_column` for a column its own FROM scope lacks.
Materialized views refuse subqueries before getting here.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from sqlglot import exp

from engine import expr as ex
from engine.errors import EngineError, SqlSyntaxError, UndefinedColumn, UndefinedTable
from engine.expr.core import Datum, EvalContext, as_array
from engine.numeric import array_of
from engine.plan.helpers import _literal_node, _select_columns, _visible
from engine.plan.logical import Limit, PlanNode
from engine.types import BOOLEAN, SqlType, TypeKind, list_of


class OuterRef(ex.Expr):
    """A column of an enclosing query inside a correlated subquery: a cell holding the
    value for the outer row being answered."""

    def __init__(self, type: SqlType, name: str) -> None:
        self.type = type
        self.name = name
        self.value: Any = None

    def _eval(self, batch: pa.RecordBatch, ctx: EvalContext) -> Datum:
        return pa.scalar(self.value, self.type.arrow)

    def children(self) -> list[ex.Expr]:
        return []

    def with_children(self, children: list[ex.Expr]) -> ex.Expr:
        return self

    def is_constant(self) -> bool:
        return False

    def __str__(self) -> str:
        return f"outer.{self.name}"


def _column_key(node: exp.Column) -> tuple[str, str | None]:
    ident = node.args["this"]
    name = ident.this if ident.args.get("quoted") else ident.this.lower()
    tid = node.args.get("table")
    table = None
    if tid is not None:
        table = tid.this if tid.args.get("quoted") else tid.this.lower()
    return name, table


def outer_column(planner: Any, node: exp.Column, scope: ex.Scope) -> ex.Expr | None:
    """An OuterRef for `node` if it names no column of `scope` but one of an enclosing
    query; None when `scope` has it (or nothing has it: the binder reports the error)."""
    if getattr(planner, "outer_scope", None) is None or isinstance(node.this, exp.Star):
        return None
    name, table = _column_key(node)
    try:
        scope.resolve(name, table)
        return None
    except (UndefinedColumn, UndefinedTable):
        pass
    found = _lookup(planner, name, table)
    return found


def _lookup(planner: Any, name: str, table: str | None) -> ex.Expr | None:
    """Resolve in the enclosing query of `planner` (recursively further out)."""
    outer_scope: ex.Scope | None = getattr(planner, "outer_scope", None)
    if outer_scope is None:
        return None
    key = (name, table)
    refs: dict[tuple[str, str | None], tuple[ex.Expr, OuterRef]] = planner.outer_refs
    if key in refs:
        return refs[key][1]
    try:
        col = outer_scope.resolve(name, table)
        outer_expr: ex.Expr | None = ex.InputRef(col.index, col.type, col.name)
    except (UndefinedColumn, UndefinedTable):
        parent = getattr(planner, "outer_planner", None)
        outer_expr = _lookup(parent, name, table) if parent is not None else None
    if outer_expr is None:
        return None
    ref = OuterRef(outer_expr.type, name)
    refs[key] = (outer_expr, ref)
    return ref


def _sub_planner(planner: Any, binder: ex.ExprBinder) -> Any:
    sub = type(planner)(
        planner.catalog,
        params=planner.params,
        subquery_runner=planner.subquery_runner,
        session_func=planner.session_func,
    )
    sub.ctes = list(planner.ctes)
    sub.outer_scope = binder.scope
    sub.outer_planner = planner
    sub.outer_refs = {}
    return sub


def plan_subquery(planner: Any, n: exp.Expression, binder: ex.ExprBinder) -> ex.Expr:
    """Bind a subquery expression (see the module docstring)."""
    if planner.subquery_runner is None:
        from engine.errors import not_supported

        raise not_supported("subqueries are not supported here")
    sub = _sub_planner(planner, binder)
    if isinstance(n, exp.Exists):
        q = n.this.this if isinstance(n.this, exp.Subquery) else n.this
        plan: PlanNode = sub.plan_query(q)
        plan = Limit(plan.schema, None, input=plan, limit=1, offset=0)
        return _finish(planner, sub, plan, "exists", None, binder)
    if isinstance(n, exp.In):
        q = n.args["query"]
        plan = sub.plan_query(q.this if isinstance(q, exp.Subquery) else q)
        vis = _visible(plan)
        if len(vis) != 1:
            raise SqlSyntaxError("subquery has too many columns")
        plan = _select_columns(plan, vis)
        if not sub.outer_refs:
            rows = planner.subquery_runner(plan)
            t = plan.schema[0].type
            lit_nodes = [_literal_node(r[0], t) for r in rows]
            if not lit_nodes:
                # x IN (empty) is false, even for NULL x
                return ex.Literal(value=False, type=SqlType(TypeKind.BOOLEAN))
            return _in_values(binder, n.this, lit_nodes, t)
        return _finish(planner, sub, plan, "in", binder.bind(n.this), binder)
    if isinstance(n, exp.Array):
        q = n.expressions[0]
        plan = sub.plan_query(q.this if isinstance(q, exp.Subquery) else q)
        vis = _visible(plan)
        if len(vis) != 1:
            raise SqlSyntaxError("subquery must return only one column")
        return _finish(planner, sub, _select_columns(plan, vis), "array", None, binder)
    # scalar subquery
    plan = sub.plan_query(n.this)
    vis = _visible(plan)
    if len(vis) != 1:
        raise SqlSyntaxError("subquery must return only one column")
    return _finish(planner, sub, _select_columns(plan, vis), "scalar", None, binder)


def _in_values(
    binder: ex.ExprBinder, this: exp.Expression, values: list[exp.Expression], t: SqlType
) -> ex.Expr:
    """`this IN (subquery)` over the subquery's rows as constants. Unlike an IN list
    (whose items and probe share their common type), IN (subquery) compares with the `=`
    operator between the probe's and the column's types: a real probe against an integer
    or numeric column compares as doubles (ex.operator_type)."""
    from engine.expr.ops import bind_in

    arg = binder.bind(this)
    items = [binder.bind(v) for v in values]
    if not ex.is_untyped(arg) and arg.type.is_numeric and t.is_numeric:
        ot = ex.operator_type([arg.type, t])
        items = [i if i.type == ot else ex.cast(i, ot) for i in items]
    return bind_in(arg, items, False)


def _answer(kind: str, rows: list[tuple[Any, ...]], probe: Any = None) -> Any:
    if kind == "exists":
        return bool(rows)
    if kind == "array":
        return [r[0] for r in rows]
    if kind == "in":
        values = [r[0] for r in rows]
        if probe is None:
            return None if values else False
        if probe in values:
            return True
        return None if any(v is None for v in values) else False
    if len(rows) > 1:
        raise EngineError("more than one row returned by a subquery used as an expression")
    return rows[0][0] if rows else None


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _hashable(x)) for k, x in v.items()))
    return v


def _finish(
    planner: Any,
    sub: Any,
    plan: PlanNode,
    kind: str,
    probe: ex.Expr | None,
    binder: ex.ExprBinder,
) -> ex.Expr:
    t = plan.schema[0].type if plan.schema else BOOLEAN
    rtype = BOOLEAN if kind in ("exists", "in") else list_of(t) if kind == "array" else t
    runner = planner.subquery_runner
    if not sub.outer_refs:
        value = _answer(kind, runner(plan))
        return ex.Literal(value=value, type=rtype)
    pairs = list(sub.outer_refs.values())
    outer_args = [p[0] for p in pairs]
    cells = [p[1] for p in pairs]
    if probe is not None:
        elem = plan.schema[0].type
        probe_c = ex.implicit_cast(probe, elem) if probe.type != elem else probe
        if probe_c is None:
            probe_c = probe
        outer_args = [probe_c, *outer_args]

    def kernel(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
        cols = [as_array(a, n).to_pylist() for a in args]
        probe_vals = cols.pop(0) if probe is not None else None
        cache: dict[Any, list[tuple[Any, ...]]] = {}
        out = []
        for i in range(n):
            key = tuple(_hashable(c[i]) for c in cols)
            rows = cache.get(key)
            if rows is None:
                for cell, c in zip(cells, cols, strict=True):
                    cell.value = c[i]
                rows = runner(plan)
                cache[key] = rows
            out.append(_answer(kind, rows, probe_vals[i] if probe_vals is not None else None))
        return array_of(out, rtype.arrow)

    return ex.Func(f"subquery_{kind}", tuple(outer_args), rtype, kernel, volatile=True)
