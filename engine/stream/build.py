"""Build dataflow operators from a stream plan (`engine.plan.stream_plan`).

One operator per stream node, in the plan's (topological) order. Every operator gets a
`PlannedAllocator` over its node's `TableDesc`s: the operator asks for its tables by
local name (`"groups"`), and gets the table with the id the planner decided, loaded from
the store on recovery. An operator asking for a table its node did not declare, or a
declared table that nobody asked for, is a planner/operator mismatch and fails the build
(InternalError) instead of silently creating fresh state.
"""

from __future__ import annotations

from typing import Any, cast

from engine.errors import InternalError
from engine.expr import EvalContext
from engine.plan.logical import Agg
from engine.plan.stream_plan import (
    StreamCollectAgg,
    StreamDynamicFilter,
    StreamEowcAgg,
    StreamEowcSort,
    StreamFilter,
    StreamHashAgg,
    StreamHashJoin,
    StreamIntervalJoin,
    StreamMaterialize,
    StreamNode,
    StreamOverWindow,
    StreamPlan,
    StreamProject,
    StreamProjectSet,
    StreamTemporalFilter,
    StreamTimeWindow,
    StreamTopN,
    StreamUnion,
    StreamValues,
    TableDesc,
)
from engine.state.disk_table import DiskTables
from engine.state.table import StateTable
from engine.stream.graph import Node
from engine.stream.operator import Operator
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
from engine.stream.operators.append_only_top_n import AppendOnlyTopNOp
from engine.stream.operators.collect_agg import CollectAggOp
from engine.stream.operators.dynamic_filter import DynamicFilterOp
from engine.stream.operators.eowc import EowcAggOp, EowcSortOp
from engine.stream.operators.interval_join import IntervalJoinOp
from engine.stream.operators.over_window import OverWindowOp
from engine.stream.operators.project_set import ProjectSetOp
from engine.stream.operators.temporal_filter import TemporalFilterOp
from engine.stream.operators.time_window import TimeWindowOp
from engine.stream.operators.values import ValuesOp


class PlannedAllocator:
    """Hands an operator the state tables its stream node declared (by local name)."""

    def __init__(
        self, node: StreamNode, owner: str, store: Any | None, disk: DiskTables | None = None
    ) -> None:
        self.by_local: dict[str, TableDesc] = {t.local: t for t in node.tables}
        self.owner = owner
        self.store = store
        self.disk = disk
        self.made: dict[str, StateTable] = {}

    def table(self, name: str, *, disk: bool = False, dist: bool = True) -> StateTable:
        """The declared table `name`; `disk=True` asks for a RocksDB-first table
        (`engine.state.disk_table`) when the runtime has a store, else a resident one."""
        t = self.made.get(name)
        if t is not None:
            return t
        desc = self.by_local.get(name)
        if desc is None:
            raise InternalError(
                f"operator asked for state table {name!r} that the stream plan did not declare"
            )
        full = f"{self.owner}.{desc.name}"
        if disk and self.disk is not None:
            # the distribution key as a key prefix decides the vnode (else one vnode)
            d = len(desc.dist_key) if desc.dist_key == desc.key[: len(desc.dist_key)] else 0
            d = d if dist else 0
            t = cast(StateTable, self.disk.table(desc.id, full, d))
            self.made[name] = t
            return t
        t = StateTable(desc.id, full)
        if self.store is not None:
            t.load(self.store)
        self.made[name] = t
        return t

    def check_used(self, node: StreamNode) -> None:
        unused = sorted(set(self.by_local) - set(self.made))
        if unused:
            raise InternalError(
                f"{node.kind}: state tables {unused} declared by the stream plan were not used"
            )


def build_plan(
    plan: StreamPlan,
    owner: str,
    store: Any | None,
    ctx: EvalContext,
    disk: DiskTables | None = None,
) -> tuple[list[Node], list[StateTable]]:
    """The operator nodes of `plan` and their state tables (loaded from `store` if given;
    disk tables from `disk`, which reads what the store holds); `owner` (the relation's
    name) prefixes the tables' names in logs."""
    nodes: list[Node] = []
    tables: list[StateTable] = []
    for sn in plan.nodes:
        alloc = PlannedAllocator(sn, owner, store, disk)
        op = build_op(sn, alloc, ctx)
        alloc.check_used(sn)
        tables.extend(alloc.made.values())
        nodes.append(Node(op, list(sn.inputs), sn.watermark_transfer()))
    return nodes, tables


def _calls(n: StreamHashAgg) -> list[AggCall]:
    return [
        AggCall(a.kind, a.arg, a.type, a.distinct, a.filter, a.udf, a.arg2, a.float_specials)
        for a in n.aggs
    ]


def build_op(n: StreamNode, alloc: Any, ctx: EvalContext) -> Operator:
    """One operator for one stream node."""
    ins = n.input_schemas[0] if n.input_schemas else []
    key = list(n.stream_key or [])
    names = [f.name for f in n.schema]
    if isinstance(n, StreamMaterialize):
        return ColumnarMaterializeOp(n.schema, list(n.pk), alloc)
    if isinstance(n, StreamFilter):
        return FilterOp(ins, n.predicate, ctx, key)
    if isinstance(n, StreamProject):
        return ProjectOp(ins, n.exprs, names, ctx, key)
    if isinstance(n, StreamProjectSet):
        return ProjectSetOp(list(n.schema), n.srfs, n.udtfs, ctx, key)
    if isinstance(n, StreamEowcAgg):
        return EowcAggOp(
            ins,
            n.group_keys,
            _calls(n),
            alloc,
            names,
            n.wm_key,
            errors=getattr(ctx, "errors", None),
        )
    if isinstance(n, StreamCollectAgg):
        agg = Agg(list(n.schema), n.stream_key, None, list(n.group_keys), list(n.aggs))  # type: ignore[arg-type]
        return CollectAggOp(ins, agg, alloc, list(n.input_key), errors=ctx.errors)
    if isinstance(n, StreamHashAgg):
        return HashAggOp(
            ins,
            n.group_keys,
            _calls(n),
            alloc,
            names,
            errors=ctx.errors,
            append_only_extremes=n.append_only_extremes,
        )
    if isinstance(n, StreamHashJoin):
        ls, rs = n.input_schemas
        join = HashJoinOp(
            ls,
            rs,
            n.join_type,
            n.left_keys,
            n.right_keys,
            n.condition,
            ctx,
            alloc,
            list(n.left_stream_key),
            list(n.right_stream_key),
            # an interval join's own cleaning sends the join deletes
            append_only=n.append_only and not isinstance(n, StreamIntervalJoin),
        )
        if not isinstance(n, StreamIntervalJoin):
            return join
        return IntervalJoinOp(
            join,
            (n.left_time, n.right_time),
            n.lo,
            n.hi,
            (n.left_keys, n.right_keys),
            (list(n.left_stream_key), list(n.right_stream_key)),
            alloc,
            append_only=n.append_only,
        )
    if isinstance(n, StreamTopN):
        order = [(k.index, k.desc, k.effective_nulls_first) for k in n.order_by]
        # over an append-only input a bounded top-N keeps only each group's first rows
        bounded = n.append_only and n.limit is not None
        return (AppendOnlyTopNOp if bounded else TopNOp)(
            ins,
            order,
            n.limit,  # type: ignore[arg-type]  # not None where AppendOnlyTopNOp is chosen
            n.offset,
            list(n.group_keys),
            alloc,
            list(n.input_key),
            with_rank_column=n.with_rank,
            rank_name=n.rank_name,
        )
    if isinstance(n, StreamOverWindow):
        order = [(k.index, k.desc, k.effective_nulls_first) for k in n.order_by]
        return OverWindowOp(
            ins,
            n.schema[len(ins) :],
            list(n.partition_by),
            order,
            n.calls,  # type: ignore[arg-type]
            list(n.tiebreak),
            alloc,
            list(n.input_key),
        )
    if isinstance(n, StreamUnion):
        return UnionOp(n.schema, len(n.inputs), key)
    if isinstance(n, StreamTimeWindow):
        return TimeWindowOp(
            ins, list(n.schema), n.ts_col, n.window_kind, n.hop, n.size, n.offset, key
        )
    if isinstance(n, StreamTemporalFilter):
        return TemporalFilterOp(ins, n.bounds, ctx, key, alloc)
    if isinstance(n, StreamDynamicFilter):
        t = n.input_schemas[1][n.right_col].type
        return DynamicFilterOp(ins, n.predicate, t, n.right_col, ctx, key, alloc, n.left_expr)
    if isinstance(n, StreamEowcSort):
        return EowcSortOp(list(n.schema), key, alloc, n.wm_col)
    if isinstance(n, StreamValues):
        return ValuesOp(
            list(n.schema), key, n.rows, n.func, n.func_args, n.func_ordinality, ctx, alloc
        )
    raise InternalError(f"no operator for stream node {n.kind}")
