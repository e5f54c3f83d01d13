"""Dynamic filters: `WHERE v > (SELECT max(v) FROM t2)` in materialized views.

RisingWave's pattern: one side of a comparison (`<`, `<=`, `>`, `>=`, AND-ed with the rest of
WHERE) is an uncorrelated subquery (correlated ones are left to the WHERE binder, which joins
them as correlated scalar subqueries) returning a single row, whose value changes over time.
The planner hook `plan_dynamic_filters` (called for streaming queries before WHERE is bound)
takes such conjuncts out of the WHERE clause and plans each into a `DynamicFilter` node over
(the FROM plan, the subquery plan); the rest of WHERE is bound as usual.

The comparison is bound once over the left columns plus one extra column, the subquery's
value (index `len(left.schema)`), so type coercion is the binder's. Operator:
`engine.stream.operators.dynamic_filter.DynamicFilterOp`; ad hoc: `engine.batch.time_exec`.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from engine import expr as ex
from engine.errors import UndefinedColumn, UndefinedTable, not_supported
from engine.plan.helpers import _conjuncts, _visible
from engine.plan.logical import Agg, Filter, PlanNode, Project
from engine.plan.time_nodes import DynamicFilter

_CMP = {exp.GT: ">", exp.GTE: ">=", exp.LT: "<", exp.LTE: "<="}
_FLIP = {">": "<", ">=": "<=", "<": ">", "<=": ">="}
HINT = "The subquery must return a single row: use an aggregate without GROUP BY, such as max(v)."


def plan_dynamic_filters(
    planner: Any, node: PlanNode, cols: list[Any], where: exp.Expression
) -> tuple[PlanNode, exp.Expression | None]:
    """Plan the dynamic-filter conjuncts of `where`; returns the node and the rest of WHERE."""
    rest: list[exp.Expression] = []
    for conj in _conjuncts(where):
        cmp = _CMP.get(type(conj))
        if cmp is None or _is_sub(conj.this) == _is_sub(conj.expression):
            rest.append(conj)  # not a comparison with exactly one subquery side
            continue
        a, b = conj.this, conj.expression
        if _is_sub(a):
            a, b, cmp = b, a, _FLIP[cmp]
        try:
            node = _dynamic(planner, node, cols, a, cmp, b)
        except (UndefinedColumn, UndefinedTable):
            # a correlated subquery (or a wrong name, reported again when WHERE is bound):
            # the WHERE binder joins it as a correlated scalar subquery
            rest.append(conj)
    if not rest:
        return node, None
    out = rest[0]
    for r in rest[1:]:
        out = exp.And(this=out, expression=r)
    return node, out


def _is_sub(e: exp.Expression) -> bool:
    while isinstance(e, exp.Paren):
        e = e.this
    return isinstance(e, exp.Subquery)


def _dynamic(
    planner: Any,
    node: PlanNode,
    cols: list[Any],
    left: exp.Expression,
    cmp: str,
    sub: exp.Expression,
) -> PlanNode:
    while isinstance(sub, exp.Paren):
        sub = sub.this
    # a fresh planner of the caller's class (engine.plan.planner imports this module)
    inner = type(planner)(
        planner.catalog,
        params=planner.params,
        streaming=True,
        session_func=planner.session_func,
    )
    right = inner.plan_query(sub.this)
    for r in inner.dependencies:
        if all(r.id != d.id for d in planner.dependencies):
            planner.dependencies.append(r)
    vis = _visible(right)
    if len(vis) != 1:
        from engine.errors import SqlSyntaxError

        raise SqlSyntaxError("subquery must return only one column")
    if not _single_row(right):
        raise not_supported(
            "dynamic filter with a subquery that may return several rows", hint=HINT
        )
    scope = planner._scope(cols)
    lhs = planner._bind(left, scope)
    if lhs.has_now():
        raise not_supported("General `now()` function in streaming queries")
    n = len(node.schema)
    t = right.schema[vis[0]].type
    from engine.expr import ops

    pred = ops.bind_compare(cmp, lhs, ex.InputRef(index=n, type=t, name="$subquery"))
    return DynamicFilter(
        node.schema,
        node.stream_key,
        left=node,
        right=right,
        right_col=vis[0],
        predicate=pred,
        left_expr=lhs,
    )


def _single_row(p: PlanNode) -> bool:
    while isinstance(p, (Project, Filter)):
        p = p.input  # type: ignore[attr-defined]
    return isinstance(p, Agg) and not p.group_keys
