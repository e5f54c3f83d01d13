"""Lower a logical plan to a stream plan (`engine.plan.stream_plan`), deciding state tables.

One stream node per operator, in post-order, so the node list is topologically sorted.
Scans become inputs from the upstream relation (no node); the plan root gets a
`StreamMaterialize` keyed by the plan's stream key (a sink's plan has none: a root that is
a bare scan gets a pass-through union).

State tables: each stateful node lists the tables its operator will ask for, with their
key and value columns and distribution key. Node `i`'s tables are named `n<i>.<name>` and
the materialize node's `mat.<name>`; `ids(full_name)` gives each one its table id (a new
id from the catalog at CREATE, the id already recorded under that name when an old data
directory is migrated, local numbers for EXPLAIN). These names are the ones views created
before stream plans were stored recorded, so their state stays attached on migration.
"""

from __future__ import annotations

from engine.errors import not_supported
from engine.plan.append_only import (
    append_only_extremes,
    append_only_join,
    derived_append_only,
)
from engine.plan.logical import (
    ORDERED_SET_KINDS,
    Agg,
    AggSpec,
    Filter,
    Join,
    Limit,
    PlanNode,
    Project,
    ProjectSet,
    Scan,
    Sort,
    TableFunction,
    UnionAll,
    Values,
)
from engine.plan.logical_window import GroupTopN, OverWindow
from engine.plan.plan_time import interval_spec
from engine.plan.plan_udf import udtf_calls
from engine.plan.stream_plan import IdFn as IdFn
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
from engine.plan.stream_plan import local_ids as local_ids
from engine.plan.time_nodes import DynamicFilter, EowcAgg, EowcSort, TemporalFilter, TimeWindow
from engine.types import Field

# recomputed per touched group from the group's rows (CollectAggOp); "udaf": user-defined
# aggregates (engine.plan.plan_udf) that cannot be kept incrementally (`recomputes`)
COLLECT_KINDS = ("string_agg", "array_agg", "jsonb_agg", "udaf", *ORDERED_SET_KINDS)


def recomputes(a: AggSpec, append_only_input: bool) -> bool:
    """Whether aggregate `a` needs its group's rows (CollectAggOp). A user-defined
    aggregate with `retract`, or any over an input that never retracts, keeps only its
    state per group (HashAggOp, engine.stream.operators.agg_udaf); one without `retract`
    over an input with deletes or updates is recomputed from the group's rows, as
    RisingWave does ("the state can not be updated incrementally")."""
    if a.kind != "udaf":
        return a.kind in COLLECT_KINDS
    r = getattr(a.udf, "routine", None)
    return not append_only_input and (r is None or r.retract is None)


def lower_stream_plan(plan: PlanNode, ids: IdFn, *, materialize: bool = True) -> StreamPlan:
    """The stream plan of a materialized view (`materialize`) or of a sink's query."""
    nodes: list[StreamNode] = []
    scans: dict[int, tuple[str, list[str]]] = {}

    def visit(p: PlanNode) -> tuple[str, int]:
        if isinstance(p, Scan):
            scans[p.relation.id] = (p.relation.name, [f.name for f in p.schema])
            return ("rel", p.relation.id)
        if isinstance(p, Limit) and isinstance(p.input, Sort):
            # ORDER BY ... LIMIT n [OFFSET m] -> one top-N operator over the sort's input
            src = p.input.input
            ins = [visit(src)]
            node: StreamNode = StreamTopN(
                ins,
                [list(src.schema)],
                list(src.schema),
                None,
                [],
                order_by=list(p.input.keys),
                limit=p.limit,
                offset=p.offset,
                input_key=list(src.stream_key or []),
                append_only=p.limit is not None and derived_append_only(src),
            )
            node.stream_key = list(src.stream_key or []) or list(range(len(src.schema)))
            return add(node)
        ins = [visit(c) for c in p.inputs()]
        schemas = [list(c.schema) for c in p.inputs()]
        node = _node(p, ins, schemas)
        return add(node)

    def add(node: StreamNode) -> tuple[str, int]:
        i = len(nodes)
        node.tables = [
            TableDesc(f"n{i}.{name}", ids(f"n{i}.{name}"), cols, key, dist)
            for name, cols, key, dist in _tables(node)
        ]
        nodes.append(node)
        return ("node", i)

    root = visit(plan)
    if not materialize:
        if root[0] == "rel":
            schema = list(plan.schema)
            nodes.append(StreamUnion([root], [schema], schema, list(plan.stream_key or [])))
        return StreamPlan(nodes, scans, sink=True)
    if plan.stream_key is None:
        raise not_supported("this query has no stream key to materialize on")
    schema = list(plan.schema)
    pk = list(plan.stream_key)
    mat = StreamMaterialize([root], [schema], schema, pk, pk=pk)
    names = [f.name for f in schema]
    mat.tables = [TableDesc("mat.segments", ids("mat.segments"), names, pk, pk)]
    nodes.append(mat)
    return StreamPlan(nodes, scans)


def _node(p: PlanNode, ins: list[tuple[str, int]], schemas: list[list[Field]]) -> StreamNode:
    schema = list(p.schema)
    key = None if p.stream_key is None else list(p.stream_key)
    in_key = list(p.inputs()[0].stream_key or []) if p.inputs() else []
    if isinstance(p, TimeWindow):
        return StreamTimeWindow(
            ins,
            schemas,
            schema,
            key,
            ts_col=p.ts_col,
            window_kind=p.kind,
            hop=p.hop,
            size=p.size,
            offset=p.offset,
        )
    if isinstance(p, TemporalFilter):
        return StreamTemporalFilter(ins, schemas, schema, key, bounds=list(p.bounds))
    if isinstance(p, DynamicFilter):
        return StreamDynamicFilter(
            ins,
            schemas,
            schema,
            key,
            predicate=p.predicate,
            right_col=p.right_col,
            left_expr=p.left_expr,
        )
    if isinstance(p, EowcSort):
        return StreamEowcSort(ins, schemas, schema, key, wm_col=p.wm_col)
    if isinstance(p, EowcAgg):
        return StreamEowcAgg(
            ins,
            schemas,
            schema,
            key,
            group_keys=list(p.group_keys),
            aggs=list(p.aggs),
            wm_key=p.wm_key,
        )
    if isinstance(p, Filter):
        return StreamFilter(ins, schemas, schema, key, predicate=p.predicate)
    if isinstance(p, Project):
        return StreamProject(ins, schemas, schema, key, exprs=list(p.exprs))
    if isinstance(p, ProjectSet):
        return StreamProjectSet(
            ins, schemas, schema, key, srfs=list(p.srfs), udtfs=udtf_calls(p, schema)
        )
    if isinstance(p, Agg):
        ao = derived_append_only(p.inputs()[0])
        if any(recomputes(a, ao) for a in p.aggs):
            return StreamCollectAgg(
                ins,
                schemas,
                schema,
                key,
                group_keys=list(p.group_keys),
                aggs=list(p.aggs),
                input_key=in_key,
            )
        return StreamHashAgg(
            ins,
            schemas,
            schema,
            key,
            group_keys=list(p.group_keys),
            aggs=list(p.aggs),
            append_only_extremes=append_only_extremes(p.inputs()[0], list(p.aggs), schemas[0]),
        )
    if isinstance(p, Join):
        left, right = p.inputs()
        lk, rk = list(left.stream_key or []), list(right.stream_key or [])
        spec = interval_spec(p)
        common = dict(
            join_type=p.kind,
            left_keys=list(p.left_keys),
            right_keys=list(p.right_keys),
            condition=p.condition,
            left_stream_key=lk,
            right_stream_key=rk,
        )
        if spec is not None:
            return StreamIntervalJoin(
                ins,
                schemas,
                schema,
                key,
                **common,
                left_time=spec.left_time,
                right_time=spec.right_time,
                lo=spec.lo,
                hi=spec.hi,
                append_only=append_only_join(p),
            )
        return StreamHashJoin(ins, schemas, schema, key, **common, append_only=append_only_join(p))
    if isinstance(p, GroupTopN):
        return StreamTopN(
            ins,
            schemas,
            schema,
            key,
            order_by=list(p.order_by),
            limit=p.limit,
            offset=p.offset,
            group_keys=list(p.group_keys),
            input_key=in_key,
            with_rank=True,
            rank_name=p.schema[-1].name,
            append_only=p.limit is not None and derived_append_only(p.input),
        )
    if isinstance(p, OverWindow):
        return StreamOverWindow(
            ins,
            schemas,
            schema,
            key,
            partition_by=list(p.partition_by),
            order_by=list(p.order_by),
            calls=list(p.calls),
            tiebreak=list(p.tiebreak),
            input_key=in_key,
        )
    if isinstance(p, UnionAll):
        return StreamUnion(ins, schemas, schema, key)
    if isinstance(p, Values) and key is not None:  # constant rows, emitted once
        return StreamValues(ins, schemas, schema, key, rows=[list(r) for r in p.rows])
    if isinstance(p, TableFunction) and key is not None and p.udf is None:
        return StreamValues(
            ins,
            schemas,
            schema,
            key,
            func=p.name,
            func_args=list(p.args),
            func_ordinality=p.ordinality,
        )
    raise not_supported(f"{p.describe().split(' ')[0]} in a materialized view is not supported yet")


# ------------------------------------------------------------------------------------------
# the state tables each operator asks for
# ------------------------------------------------------------------------------------------
Spec = tuple[str, list[str], list[int], list[int]]  # local name, columns, key, dist key


def _tables(n: StreamNode) -> list[Spec]:
    ins = n.input_schemas[0] if n.input_schemas else []
    names = [f.name for f in ins]
    if isinstance(n, StreamEowcAgg):
        wm = names[n.group_keys[n.wm_key]]
        return [
            ("buffer", [wm, "_seq", "_chunk"], [0, 1], []),
            ("meta", ["_key", "_value"], [0], []),
        ]
    if isinstance(n, StreamCollectAgg):
        dist = [0] if n.group_keys else []
        return [
            ("groups", ["_bucket", "_rows"], [0], dist),
            ("outs", ["_bucket", "_rows"], [0], dist),
            ("meta", ["_key", "_value"], [0], []),
        ]
    if isinstance(n, StreamHashAgg):
        out_names = [f.name for f in n.schema]
        return _agg_tables(n.group_keys, n.aggs, names, out_names, n.append_only_extremes)
    if isinstance(n, StreamHashJoin):
        ls, rs = n.input_schemas
        out = [
            _side("left", ls, n.left_keys, n.left_stream_key),
            _side("right", rs, n.right_keys, n.right_stream_key),
        ]
        if isinstance(n, StreamIntervalJoin):
            out += [
                ("left_expiry", ["_min_time", "_seq", "_rows"], [0, 1], []),
                ("right_expiry", ["_min_time", "_seq", "_rows"], [0, 1], []),
                ("expiry_meta", ["_key", "_value"], [0], []),
            ]
        return out
    if isinstance(n, StreamTopN) and n.append_only:
        g = [names[c] for c in n.group_keys] or ["_all"]
        return [("top", [*g, "_rows"], list(range(len(g))), list(range(len(n.group_keys))))]
    if isinstance(n, StreamTopN):  # rows in window order per group (top_n.py)
        g = [names[c] for c in n.group_keys]
        cols = [*g, "_order", *names, "_count"]
        return [("rows", cols, list(range(len(g) + 1)), list(range(len(g))))]
    if isinstance(n, StreamOverWindow):
        cols = [f"_bucket({', '.join(names[c] for c in n.partition_by)})", "_rows"]
        return [("parts", cols, [0], [0] if n.partition_by else [])]
    if isinstance(n, StreamTemporalFilter):
        sk = [names[c] for c in (n.stream_key or range(len(ins)))]
        k = list(range(1 + len(sk)))
        return [
            ("active", ["_exit_time", *sk, *names], k, []),
            ("pending", ["_enter_time", *sk, "_exit_time", *names], k, []),
        ]
    if isinstance(n, StreamDynamicFilter):
        ident = n.stream_key or list(range(len(ins)))
        return [
            ("rows", [*[names[c] for c in ident], *names], list(range(len(ident))), []),
            ("meta", ["_key", "_threshold"], [0], []),
        ]
    if isinstance(n, StreamEowcSort):
        return [
            ("buffer", [names[n.wm_col], "_seq", "_chunk"], [0, 1], []),
            ("meta", ["_key", "_value"], [0], []),
        ]
    if isinstance(n, StreamValues):
        return [("meta", ["_key", "_value"], [0], [])]
    return []


def _side(name: str, schema: list[Field], keys: list[int], ident: list[int]) -> Spec:
    """A join input's rows (JoinSide: Arrow segments probed by join key)."""
    cols = [f.name for f in schema]
    key = list(keys) + [c for c in (ident or range(len(cols))) if c not in keys]
    return (name, cols, key, list(keys))


def _agg_tables(
    group_keys: list[int],
    aggs: list[AggSpec],
    names: list[str],
    out_names: list[str],
    plain: list[int] | None = None,
) -> list[Spec]:
    """HashAggOp's tables: `groups`, one `minmax_<i>` per (argument, FILTER) of min/max
    calls (shared) except those in `plain` (append-only: no multiset), one
    `distinct_<i>` per DISTINCT call (see HashAggOp's docstring)."""
    skip = set(plain or ())
    g = [names[k] for k in group_keys]
    gk = list(range(len(g)))
    nk = len(group_keys)
    out: list[Spec] = [("groups", [*g, "_row_count", *out_names[nk:]], gk, gk)]
    owners: dict[tuple[int | None, int | None], int] = {}
    for i, a in enumerate(aggs):
        if a.kind in ("min", "max") and i in skip:
            continue
        if a.kind in ("min", "max"):
            owner = owners.setdefault((a.arg, a.filter), i)
            if owner == i:
                assert a.arg is not None
                out.append((f"minmax_{i}", [*g, names[a.arg], "_count"], [*gk, nk], gk))
        elif a.distinct and a.arg is not None:
            out.append((f"distinct_{i}", [*g, names[a.arg], "_count"], [*gk, nk], gk))
    return out
