"""Turn a logical plan into dataflow nodes for a materialized view.

One operator per plan node, in post-order, so the node list is topologically sorted. Scans
become edges from the upstream relation (no operator); the plan root gets a
`MaterializeOp` keyed by the plan's stream key. State tables are named after the node's
position (`n2.groups`), which is stable as long as the same SQL plans to the same tree,
so a view re-planned after a restart finds its state.
"""

from __future__ import annotations

from typing import Any

from engine.errors import not_supported
from engine.expr import EvalContext
from engine.plan.logical import (
    Agg,
    Filter,
    Join,
    Limit,
    PlanNode,
    Project,
    Scan,
    Sort,
    UnionAll,
)
from engine.plan.logical_window import GroupTopN, OverWindow
from engine.plan.plan_time import watermark_transfer
from engine.stream.build_time import build_time_op
from engine.stream.graph import Allocator, Node
from engine.stream.operators import (
    AggCall,
    ColumnarMaterializeOp,
    FilterOp,
    HashAggOp,
    HashJoinOp,
    ProjectOp,
    TopNOp,
    UnionOp,
)

COLLECT_KINDS = ("string_agg", "array_agg", "jsonb_agg")


def build_window_op(p: OverWindow | GroupTopN, in_schema: list[Any], alloc: Allocator) -> Any:
    """OverWindowOp for a window node, TopNOp (per group, with rank) for a group top-N."""
    from engine.stream.operators.over_window import OverWindowOp

    order = [(k.index, k.desc, k.effective_nulls_first) for k in p.order_by]
    key = list(p.input.stream_key or [])
    if isinstance(p, GroupTopN):
        return TopNOp(
            in_schema, order, p.limit, p.offset, list(p.group_keys), alloc, key,
            with_rank_column=True, rank_name=p.schema[-1].name,
        )
    out = p.schema[len(in_schema) :]
    return OverWindowOp(
        in_schema, out, list(p.partition_by), order, p.calls, list(p.tiebreak), alloc, key
    )


def build_view_nodes(
    plan: PlanNode, alloc: Allocator, ctx: EvalContext, *, materialize: bool = True
) -> list[Node]:
    """Operator nodes for `plan`; the last one is the MaterializeOp (a pass-through for a
    sink, `materialize=False`, when the plan has no operator of its own)."""
    nodes: list[Node] = []

    def visit(p: PlanNode) -> tuple[str, int]:
        if isinstance(p, Scan):
            return ("rel", p.relation.id)
        if isinstance(p, Limit) and isinstance(p.input, Sort):
            # ORDER BY ... LIMIT n [OFFSET m] -> one top-N operator over the sort's input
            src = p.input.input
            ins = [visit(src)]
            alloc.prefix = f"n{len(nodes)}."
            order = [(k.index, k.desc, k.effective_nulls_first) for k in p.input.keys]
            op: Any = TopNOp(src.schema, order, p.limit, p.offset, [], alloc,
                             list(src.stream_key or []))
            nodes.append(Node(op, ins))
            return ("node", len(nodes) - 1)
        ins = [visit(c) for c in p.inputs()]
        alloc.prefix = f"n{len(nodes)}."
        in_schema = p.inputs()[0].schema if p.inputs() else []
        key = p.stream_key or []
        op = build_time_op(p, alloc, ctx)
        if op is not None:
            pass  # TUMBLE/HOP, temporal filter, EOWC aggregation
        elif isinstance(p, Filter):
            op = FilterOp(in_schema, p.predicate, ctx, key)
        elif isinstance(p, Project):
            op = ProjectOp(in_schema, p.exprs, [f.name for f in p.schema], ctx, key)
        elif isinstance(p, Agg) and any(a.kind in COLLECT_KINDS for a in p.aggs):
            from engine.stream.operators.collect_agg import CollectAggOp

            op = CollectAggOp(in_schema, p, alloc, list(p.input.stream_key or []))
        elif isinstance(p, Agg):
            calls = [AggCall(a.kind, a.arg, a.type, a.distinct, a.filter) for a in p.aggs]
            op = HashAggOp(in_schema, p.group_keys, calls, alloc, [f.name for f in p.schema],
                           errors=ctx.errors)
        elif isinstance(p, Join):
            left, right = p.inputs()
            op = HashJoinOp(left.schema, right.schema, p.kind, p.left_keys, p.right_keys,
                            p.condition, ctx, alloc, list(left.stream_key or []),
                            list(right.stream_key or []))
        elif isinstance(p, (OverWindow, GroupTopN)):
            op = build_window_op(p, in_schema, alloc)
        elif isinstance(p, UnionAll):
            op = UnionOp(p.schema, len(p.children), list(p.stream_key or []))
        else:
            raise not_supported(
                f"{p.describe().split(' ')[0]} in a materialized view is not supported yet"
            )
        nodes.append(Node(op, ins, watermark_transfer(p)))
        return ("node", len(nodes) - 1)

    root = visit(plan)
    if not materialize:
        if root[0] == "rel":
            nodes.append(Node(UnionOp(plan.schema, 1, list(plan.stream_key or [])), [root]))
        return nodes
    if plan.stream_key is None:
        raise not_supported("this query has no stream key to materialize on")
    alloc.prefix = "mat."
    mat = ColumnarMaterializeOp(plan.schema, list(plan.stream_key), alloc)
    nodes.append(Node(mat, [root], [(i, [(0, i)], None) for i in range(len(plan.schema))]))
    return nodes
