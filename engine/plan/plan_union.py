"""UNION ALL / UNION in materialized views.

A view's rows need a stream key unique across the branches of a UNION ALL, so the
streaming plan of `a UNION ALL b` is a `UnionAll` of two projections with the layout

    visible columns (coerced to the common types) | _u_branch | a's key | b's key

where `_u_branch` is the constant 0 or 1 and each branch fills the other branch's key
columns with NULLs; the stream key is every hidden column. `UnionOp` then only
concatenates the branches' deltas. `UNION` (distinct) groups the union on the visible
columns (an `Agg` without aggregates), which also makes them the key. Nested unions
(`a UNION ALL b UNION ALL c`) nest: an inner union's hidden columns are its key.
"""

from __future__ import annotations

from engine import expr as ex
from engine.errors import not_supported
from engine.plan.logical import PlanNode, Project, UnionAll
from engine.types import INT, Field, SqlType


def stream_union_all(
    left: PlanNode, right: PlanNode, lv: list[int], rv: list[int], types: list[SqlType]
) -> PlanNode:
    if left.stream_key is None or right.stream_key is None:
        raise not_supported("UNION input without a stream key")
    names = [left.schema[i].name for i in lv]
    lk = [left.schema[k] for k in left.stream_key]
    rk = [right.schema[k] for k in right.stream_key]
    fields = [Field(n, t) for n, t in zip(names, types, strict=True)]
    fields.append(Field("_u_branch", INT, hidden=True))
    fields += [Field(f"_u_l{i}", f.type, hidden=True) for i, f in enumerate(lk)]
    fields += [Field(f"_u_r{i}", f.type, hidden=True) for i, f in enumerate(rk)]
    children: list[PlanNode] = []
    for branch, (node, vis) in enumerate(((left, lv), (right, rv))):
        exprs: list[ex.Expr] = []
        for i, t in zip(vis, types, strict=True):
            e: ex.Expr = ex.InputRef(index=i, type=node.schema[i].type, name=node.schema[i].name)
            exprs.append(e if e.type == t else ex.cast(e, t))
        exprs.append(ex.Literal(value=branch, type=INT))
        for side, keys in ((0, left.stream_key), (1, right.stream_key)):
            for k in keys:
                src = (left if side == 0 else right).schema[k]
                if side == branch:
                    exprs.append(ex.InputRef(index=k, type=src.type, name=src.name))
                else:
                    exprs.append(ex.Literal(value=None, type=src.type))
        children.append(Project(list(fields), None, input=node, exprs=exprs))
    n = len(types)
    key = list(range(n, len(fields)))
    for c in children:
        c.stream_key = key
    return UnionAll(fields, key, children=children)
