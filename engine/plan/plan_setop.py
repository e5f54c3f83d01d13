"""INTERSECT and EXCEPT (distinct), ad hoc and in materialized views.

Both become one grouping over the union of the two inputs, tagged with their branch:

    Project(visible columns)
      Filter(in_left > 0 AND in_right > 0)        -- EXCEPT: in_left > 0 AND in_right = 0
        Agg(group by the visible columns; count(*) FILTER (branch = 0), ... (branch = 1))
          UNION ALL of both sides (coerced to common types) with a branch number

Grouping treats NULLs as equal, as INTERSECT/EXCEPT do, and the group keys are the view's
stream key, so the streaming form reuses the union (`plan_union.stream_union_all`) and the
incremental hash aggregation: a row appears or disappears when its group's counts cross
zero. INTERSECT ALL / EXCEPT ALL (multiplicities) are refused.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from engine import expr as ex
from engine.errors import SqlSyntaxError, not_supported
from engine.expr.ops import bind_and_or, bind_compare
from engine.plan.helpers import _visible
from engine.plan.logical import Agg, AggSpec, Filter, PlanNode, Project, UnionAll
from engine.types import BIGINT, BOOLEAN, INT, Field


def plan_intersect_except(planner: Any, q: exp.Expression) -> PlanNode:
    op = "INTERSECT" if isinstance(q, exp.Intersect) else "EXCEPT"
    if not q.args.get("distinct"):
        raise not_supported(f"{op} ALL", hint=f"Use {op} (without ALL), or a join.")
    left = planner.plan_query(q.this)
    right = planner.plan_query(q.expression)
    lv, rv = _visible(left), _visible(right)
    if len(lv) != len(rv):
        raise SqlSyntaxError(f"each {op} query must have the same number of columns")
    types = [
        ex.common_type([left.schema[a].type, right.schema[b].type], op)
        for a, b in zip(lv, rv, strict=True)
    ]
    n = len(types)
    fields = [Field(left.schema[i].name, t) for i, t in zip(lv, types, strict=True)]
    if planner.streaming:
        from engine.plan.plan_union import stream_union_all

        union: PlanNode = stream_union_all(left, right, lv, rv, types)  # branch at column n
    else:
        children: list[PlanNode] = []
        for branch, (node, vis) in enumerate(((left, lv), (right, rv))):
            exprs: list[ex.Expr] = []
            for i, t in zip(vis, types, strict=True):
                e: ex.Expr = ex.InputRef(i, node.schema[i].type, node.schema[i].name)
                exprs.append(e if e.type == t else ex.cast(e, t))
            exprs.append(ex.Literal(value=branch, type=INT))
            children.append(
                Project(fields + [Field("_u_branch", INT, True)], None, input=node, exprs=exprs)
            )
        union = UnionAll(list(children[0].schema), None, children=children)
    branch = ex.InputRef(n, INT, "_u_branch")
    pre: list[ex.Expr] = [ex.InputRef(i, t, fields[i].name) for i, t in enumerate(types)]
    pre += [bind_compare("=", branch, ex.Literal(value=b, type=INT)) for b in (0, 1)]
    pre_fields = fields + [Field("_in_l", BOOLEAN, True), Field("_in_r", BOOLEAN, True)]
    proj = Project(pre_fields, None, input=union, exprs=pre)
    keys = list(range(n))
    specs = [AggSpec("count_star", None, BIGINT, False, n + b) for b in (0, 1)]
    agg_fields = fields + [Field("_a0", BIGINT, True), Field("_a1", BIGINT, True)]
    agg = Agg(agg_fields, keys, input=proj, group_keys=keys, aggs=specs)
    zero = ex.Literal(value=0, type=BIGINT)
    in_l = bind_compare(">", ex.InputRef(n, BIGINT, "_a0"), zero)
    in_r = bind_compare(">" if op == "INTERSECT" else "=", ex.InputRef(n + 1, BIGINT, "_a1"), zero)
    filt = Filter(agg_fields, keys, input=agg, predicate=bind_and_or("AND", in_l, in_r))
    out = Project(
        list(fields),
        keys,
        input=filt,
        exprs=[ex.InputRef(i, t, fields[i].name) for i, t in enumerate(types)],
    )
    return planner._order_limit_simple(out, q)  # type: ignore[no-any-return]
