"""WITH RECURSIVE in ad-hoc queries.

`WITH RECURSIVE r(cols) AS (anchor UNION [ALL] step) ...` where `step` reads `r`: the
anchor is planned normally; `r` inside `step` is a `WorkTable` node holding the rows the
previous iteration produced. The batch executor (`RecursiveUnion`) runs the anchor, then
the step over the work table until it yields no (new, for UNION) rows; the CTE's rows are
everything produced. asyncpg's type introspection and pgjdbc's type queries use this.
Materialized views refuse it (0A000).
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from engine.errors import SqlSyntaxError, not_supported
from engine.plan.helpers import _visible
from engine.plan.logical import PlanNode, RecursiveUnion, WorkTable
from engine.types import Field


def is_recursive(cte: exp.CTE) -> bool:
    q = cte.this
    if not isinstance(q, exp.Union):
        return False
    name = cte.alias_or_name.lower()
    return any(t.name.lower() == name and not t.db for t in q.expression.find_all(exp.Table))


def plan_recursive_cte(planner: Any, cte: exp.CTE, scope: dict[str, PlanNode]) -> PlanNode:
    if planner.streaming:
        raise not_supported("WITH RECURSIVE in materialized views")
    q = cte.this
    assert isinstance(q, exp.Union)
    name = cte.alias_or_name.lower()
    anchor = planner.plan_query(q.this)
    vis = _visible(anchor)
    alias = cte.args.get("alias")
    names = (
        [c.name for c in alias.columns]
        if isinstance(alias, exp.TableAlias) and alias.columns
        else [anchor.schema[i].name for i in vis]
    )
    if len(names) != len(vis):
        raise SqlSyntaxError(f'WITH query "{name}" has {len(vis)} columns available but '
                             f"{len(names)} columns specified")  # fmt: skip
    fields = [Field(n, anchor.schema[i].type) for n, i in zip(names, vis, strict=True)]
    work = WorkTable(list(fields), None)
    scope[name] = work
    step = planner.plan_query(q.expression)
    svis = _visible(step)
    if len(svis) != len(fields):
        raise SqlSyntaxError("each UNION query must have the same number of columns")
    node = RecursiveUnion(
        list(fields),
        None,
        anchor=anchor,
        step=step,
        work=work,
        distinct=bool(q.args.get("distinct")),
    )
    return node
