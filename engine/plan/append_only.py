"""Which stream plans never retract, and which aggregates that lets run without a multiset.

Why: an aggregation over an input that only ever inserts (RisingWave plans this from the
APPEND ONLY property) needs no retractable state for min/max: the current extreme is
replaced only by a better new value, so the operator keeps one value per group instead
of a multiset of every value (`HashAggOp`, `AppendOnlyExtremeImpl`). The decision is the
planner's, recorded in the stored stream plan (`StreamHashAgg.append_only_extremes`), so
a plan built once keeps its state layout.

Append-only: sources, APPEND ONLY tables and append-only materialized views
(`Relation.append_only`), through filters, projections, time windows, UNION ALL, inner
joins of append-only inputs and GROUP BY without aggregate calls over an append-only
input (a group appears once and its row never changes). Table TTL cleanup sends no
deletes downstream (`engine.stream.ttl`), so it does not break this.

An inner equi-join whose inputs are both append-only is planned as an append-only hash
join (`StreamHashJoin.append_only`, `append_only_join`): its sides only ever insert, so
the operator keeps no retraction bookkeeping and its output consists of inserts only.
"""

from __future__ import annotations

import pyarrow as pa

from engine.catalog import RelationKind
from engine.plan.logical import Agg, AggSpec, Filter, Join, PlanNode, Project, Scan, UnionAll
from engine.types import Field


def derived_append_only(plan: PlanNode) -> bool:
    """True if `plan`'s output never retracts (see the module docstring)."""
    if isinstance(plan, Scan):
        rel = plan.relation
        return rel.kind is RelationKind.SOURCE or bool(rel.append_only)
    if isinstance(plan, (Filter, Project)) or type(plan).__name__ == "TimeWindow":
        return derived_append_only(plan.inputs()[0])
    if isinstance(plan, UnionAll) or (
        isinstance(plan, Join) and str(getattr(plan, "kind", "")).lower() == "inner"
    ):
        return all(derived_append_only(c) for c in plan.inputs())
    if isinstance(plan, Agg) and plan.group_keys and not plan.aggs:
        return derived_append_only(plan.input)
    return False


def append_only_join(plan: Join) -> bool:
    """Plan `plan` (an inner equi-join) as an append-only hash join: both inputs never
    retract. Outer joins are not: a NULL-padded row is retracted when its first match
    arrives."""
    return (
        str(plan.kind).lower() == "inner"
        and bool(plan.left_keys)
        and all(derived_append_only(c) for c in plan.inputs())
    )


def _plain_extreme_type(t: pa.DataType) -> bool:
    """Argument types whose min/max polars computes in SQL order (floats' NaN, intervals
    and arrays keep the multiset path)."""
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_decimal(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
    )


def append_only_extremes(
    input_plan: PlanNode, aggs: list[AggSpec], schema: list[Field]
) -> list[int]:
    """Indexes of the min/max calls that keep only their current value (no multiset)."""
    if not derived_append_only(input_plan):
        return []
    return [
        i
        for i, a in enumerate(aggs)
        if a.kind in ("min", "max")
        and not a.distinct
        and a.arg is not None
        and _plain_extreme_type(schema[a.arg].type.arrow)
    ]
