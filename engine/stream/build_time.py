"""Operators for the time plan nodes (`engine.plan.plan_time`) and dynamic filters
(`engine.plan.plan_dynamic`), called by `build.py`.

Returns None for any other node so `build_view_nodes` goes on with its own cases.
"""

from __future__ import annotations

from typing import Any

from engine.plan.logical import Join, PlanNode
from engine.plan.plan_dynamic import DynamicFilter
from engine.plan.plan_time import (
    EowcAgg,
    EowcSort,
    TemporalFilter,
    TimeWindow,
    interval_spec,
)
from engine.stream.operator import Operator


def build_time_op(p: PlanNode, alloc: Any, ctx: Any) -> Operator | None:
    if isinstance(p, TimeWindow):
        from engine.stream.operators.time_window import TimeWindowOp

        return TimeWindowOp(
            p.input.schema,
            list(p.schema),
            p.ts_col,
            p.kind,
            p.hop,
            p.size,
            p.offset,
            list(p.stream_key or []),
        )
    if isinstance(p, TemporalFilter):
        from engine.stream.operators.temporal_filter import TemporalFilterOp

        return TemporalFilterOp(p.input.schema, p.bounds, ctx, list(p.stream_key or []), alloc)
    if isinstance(p, DynamicFilter):
        from engine.stream.operators.dynamic_filter import DynamicFilterOp

        t = p.right.schema[p.right_col].type
        return DynamicFilterOp(
            p.left.schema,
            p.predicate,
            t,
            p.right_col,
            ctx,
            list(p.stream_key or []),
            alloc,
            p.left_expr,
        )
    if isinstance(p, Join):
        spec = interval_spec(p)
        if spec is None:
            return None
        from engine.stream.operators import HashJoinOp
        from engine.stream.operators.interval_join import IntervalJoinOp

        left, right = p.left, p.right
        join = HashJoinOp(
            left.schema,
            right.schema,
            p.kind,
            p.left_keys,
            p.right_keys,
            p.condition,
            ctx,
            alloc,
            list(left.stream_key or []),
            list(right.stream_key or []),
        )
        return IntervalJoinOp(
            join,
            (spec.left_time, spec.right_time),
            spec.lo,
            spec.hi,
            (p.left_keys, p.right_keys),
            (list(left.stream_key or []), list(right.stream_key or [])),
            alloc,
        )
    if isinstance(p, EowcSort):
        from engine.stream.operators.eowc import EowcSortOp

        return EowcSortOp(list(p.schema), list(p.stream_key or []), alloc, p.wm_col)
    if isinstance(p, EowcAgg):
        from engine.stream.operators.agg_calls import AggCall
        from engine.stream.operators.eowc import EowcAggOp

        calls = [AggCall(a.kind, a.arg, a.type, a.distinct, a.filter) for a in p.aggs]
        return EowcAggOp(
            p.input.schema, p.group_keys, calls, alloc, [f.name for f in p.schema], p.wm_key,
            errors=getattr(ctx, "errors", None),
        )
    return None
