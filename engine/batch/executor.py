"""Interpret a logical plan over Arrow tables (see the package docstring)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import cancel as cancellation
from engine.chunk import StreamChunk
from engine.errors import EngineError, not_supported
from engine.expr import EvalContext
from engine.plan.logical import (
    Agg,
    Filter,
    Join,
    Limit,
    PlanNode,
    Project,
    ProjectSet,
    RecursiveUnion,
    Scan,
    Sort,
    SystemScan,
    TableFunction,
    UnionAll,
    Values,
    WorkTable,
)
from engine.plan.logical_window import OverWindow
from engine.stream.operators import AggCall, HashAggOp, LocalStateAllocator
from engine.stream.operators.window_kernel import compute_windows
from engine.types import arrow_schema

Snapshot = Callable[[int], pa.Table]


def execute_plan(plan: PlanNode, snapshot: Snapshot, ctx: EvalContext) -> pa.Table:
    """Evaluate `plan`; `snapshot(relation_id)` returns that relation's committed rows."""
    return _Exec(snapshot, ctx).run(plan)


class _Exec:
    def __init__(self, snapshot: Snapshot, ctx: EvalContext) -> None:
        self.snapshot = snapshot
        self.ctx = ctx

    def run(self, p: PlanNode) -> pa.Table:
        cancellation.check()  # cancel / statement_timeout stop the query between plan nodes
        m = getattr(self, "_" + type(p).__name__.lower(), None)
        if m is None:
            from engine.batch.time_exec import run_time_node

            return run_time_node(self, p)
        t: pa.Table = m(p)
        return t

    def _batch(self, t: pa.Table) -> pa.RecordBatch:
        t = t.combine_chunks()
        bs = t.to_batches()
        if not bs:
            return pa.RecordBatch.from_pylist([], schema=t.schema)
        return bs[0]

    def _scan(self, p: Scan) -> pa.Table:
        return self.snapshot(p.relation.id)

    def _systemscan(self, p: SystemScan) -> pa.Table:
        if p.table is None:
            raise not_supported(f"reading {p.relation.schema}.{p.relation.name} here")
        t: pa.Table = p.table
        return t

    def _worktable(self, p: WorkTable) -> pa.Table:
        t: pa.Table = p.table
        return t

    def _recursiveunion(self, p: RecursiveUnion) -> pa.Table:
        from engine.batch.table_functions import run_recursive_union

        return run_recursive_union(p, self.run)

    def _projectset(self, p: ProjectSet) -> pa.Table:
        from engine.batch.table_functions import run_project_set

        t = self.run(p.input)
        return run_project_set(p, t, self._batch(t), self.ctx)

    def _tablefunction(self, p: TableFunction) -> pa.Table:
        from engine.batch.table_functions import run_table_function

        return run_table_function(p, self.ctx)

    def _filter(self, p: Filter) -> pa.Table:
        t = self.run(p.input)
        if t.num_rows == 0:
            return t
        mask = p.predicate.eval(self._batch(t), self.ctx)
        return t.filter(pc.fill_null(mask, False))

    def _project(self, p: Project) -> pa.Table:
        t = self.run(p.input)
        b = self._batch(t)
        schema = arrow_schema(p.schema)
        n = b.num_rows
        cols = []
        for e, f in zip(p.exprs, schema, strict=True):
            a = e.eval(b, self.ctx)
            if isinstance(a, pa.ChunkedArray):
                a = a.combine_chunks()
            if len(a) != n:
                raise EngineError(
                    f"internal error: expression {e} gave {len(a)} rows, expected {n}"
                )
            if a.type != f.type:
                a = a.cast(f.type)
            cols.append(a)
        return pa.Table.from_arrays(cols, schema=schema)

    def _values(self, p: Values) -> pa.Table:
        schema = arrow_schema(p.schema)
        one = pa.RecordBatch.from_pydict({"_": [None]})
        if not p.schema:
            return pa.table({"_": pa.nulls(len(p.rows))}).select([])  # rows without columns
        cols: list[list[object]] = [[] for _ in p.schema]
        for row in p.rows:
            for i, e in enumerate(row):
                v = e.eval(one, self.ctx)
                cols[i].append(v[0].as_py() if len(v) else None)
        return pa.Table.from_arrays(
            [pa.array(c, type=schema.field(i).type) for i, c in enumerate(cols)], schema=schema
        )

    def _agg(self, p: Agg) -> pa.Table:
        t = self.run(p.input)
        if any(a.kind in ("string_agg", "array_agg", "jsonb_agg", "udaf") for a in p.aggs):
            from engine.batch.agg_batch import run_agg_batch

            return run_agg_batch(p, t)
        calls = [AggCall(a.kind, a.arg, a.type, a.distinct, a.filter) for a in p.aggs]
        op = HashAggOp(
            p.input.schema, p.group_keys, calls, LocalStateAllocator(), [f.name for f in p.schema]
        )
        chunk = StreamChunk.inserts(t) if t.num_rows else None
        out = op.step([chunk])
        schema = arrow_schema(p.schema)
        if out is None or len(out) == 0:
            return schema.empty_table()
        keep = pc.or_(pc.equal(out.ops, 1), pc.equal(out.ops, 4))
        data = out.data.filter(keep)
        return pa.Table.from_batches([data]).cast(schema)

    def _overwindow(self, p: OverWindow) -> pa.Table:
        t = self.run(p.input)
        order = [(k.index, k.desc, k.effective_nulls_first) for k in p.order_by]
        out = compute_windows(t, p.input.schema, p.partition_by, order, p.tiebreak, p.calls)
        return pa.Table.from_arrays(out.columns, schema=arrow_schema(p.schema))

    def _unionall(self, p: UnionAll) -> pa.Table:
        schema = arrow_schema(p.schema)
        parts = [self.run(c).rename_columns(schema.names).cast(schema) for c in p.children]
        return pa.concat_tables(parts)

    def _limit(self, p: Limit) -> pa.Table:
        if p.limit == 0:  # as PostgreSQL: LIMIT 0 evaluates nothing (and raises nothing)
            return arrow_schema(p.schema).empty_table()
        t = self.run(p.input)
        start = min(p.offset, t.num_rows)
        if p.limit is None:
            return t.slice(start)
        return t.slice(start, p.limit)

    def _sort(self, p: Sort) -> pa.Table:
        t = self.run(p.input)
        if t.num_rows <= 1:
            return t
        keys = []
        cols = {}
        for i, k in enumerate(p.keys):
            col = t.column(k.index)
            nulls = pc.is_null(col)
            # per-key null placement: sort by a null flag first, then by the value
            cols[f"n{i}"] = nulls
            keys.append((f"n{i}", "descending" if k.effective_nulls_first else "ascending"))
            cols[f"v{i}"] = _sortable(col)
            keys.append((f"v{i}", "descending" if k.desc else "ascending"))
        idx = pc.sort_indices(pa.table(cols), sort_keys=keys)
        return t.take(idx)

    def _join(self, p: Join) -> pa.Table:
        """Matching pairs (equality keys, then the residual condition), then the unmatched
        rows of preserved sides NULL-padded; semi/anti keep left rows with/without a pair."""
        left = self.run(p.left)
        right = self.run(p.right)
        if p.condition is not None and p.kind in ("left", "right", "full"):
            from engine.batch.outer_join import outer_join_with_condition

            return outer_join_with_condition(p, left, right, self.ctx)
        nl = left.num_columns
        ln = [f"l{i}" for i in range(nl)]
        rn = [f"r{i}" for i in range(right.num_columns)]
        left = left.rename_columns(ln)
        right = right.rename_columns(rn)
        schema = arrow_schema(p.schema)
        if p.kind == "cross" or not p.left_keys:
            li = np.repeat(np.arange(left.num_rows), right.num_rows)
            ri = np.tile(np.arange(right.num_rows), left.num_rows)
        else:
            # one name per key position: a column may be a key twice (t.a = u.c AND t.a = u.a)
            lk = [f"lk{j}" for j in range(len(p.left_keys))]
            rk = [f"rk{j}" for j in range(len(p.right_keys))]
            li_col = pa.array(np.arange(left.num_rows), pa.int64())
            ri_col = pa.array(np.arange(right.num_rows), pa.int64())
            lidx = pa.table([*(left.column(i) for i in p.left_keys), li_col], names=[*lk, "__li"])
            ridx = pa.table([*(right.column(i) for i in p.right_keys), ri_col], names=[*rk, "__ri"])
            # SQL: NULL keys never match
            lidx = lidx.filter(_all_valid(lidx, lk))
            ridx = ridx.filter(_all_valid(ridx, rk))
            m = lidx.join(
                ridx,
                keys=lk,
                right_keys=rk,
                join_type="inner",
                coalesce_keys=False,
                use_threads=False,
            )
            li = np.asarray(m.column("__li").to_numpy(), dtype=np.int64)
            ri = np.asarray(m.column("__ri").to_numpy(), dtype=np.int64)
        if p.condition is not None and len(li):
            pairs = _hcat(left.take(pa.array(li)), right.take(pa.array(ri)))
            pairs = pa.Table.from_arrays(
                pairs.columns, schema=arrow_schema(list(p.left.schema) + list(p.right.schema))
            )
            mask = np.asarray(pc.fill_null(p.condition.eval(self._batch(pairs), self.ctx), False))
            li, ri = li[mask], ri[mask]
        if p.kind in ("semi", "anti"):
            hit = np.zeros(left.num_rows, dtype=bool)
            hit[li] = True
            keep = hit if p.kind == "semi" else ~hit
            out = left.filter(pa.array(keep))
            return pa.Table.from_arrays(out.columns, schema=schema)
        parts_l = [pa.array(li, pa.int64())]
        parts_r = [pa.array(ri, pa.int64())]
        if p.kind in ("left", "full"):
            lonely = np.setdiff1d(np.arange(left.num_rows), li)
            parts_l.append(pa.array(lonely, pa.int64()))
            parts_r.append(pa.nulls(len(lonely), pa.int64()))
        if p.kind in ("right", "full"):
            lonely = np.setdiff1d(np.arange(right.num_rows), ri)
            parts_l.append(pa.nulls(len(lonely), pa.int64()))
            parts_r.append(pa.array(lonely, pa.int64()))
        lt = pa.concat_arrays(parts_l)
        rt = pa.concat_arrays(parts_r)
        joined = _hcat(left.take(lt), right.take(rt))
        return pa.Table.from_arrays(joined.columns, schema=schema) if joined.num_columns else joined


def _all_valid(t: pa.Table, cols: list[str]) -> pa.Array:
    mask = None
    for c in cols:
        v = pc.is_valid(t.column(c))
        mask = v if mask is None else pc.and_(mask, v)
    return mask


def _hcat(a: pa.Table, b: pa.Table) -> pa.Table:
    return pa.Table.from_arrays(a.columns + b.columns, names=a.column_names + b.column_names)


def _sortable(col: pa.ChunkedArray) -> pa.ChunkedArray:
    t = col.type
    if pa.types.is_interval(t):
        # month/day/nano: order by an approximate total (30-day months, like PostgreSQL)
        vals = col.to_pylist()
        return pa.chunked_array(
            [
                pa.array(
                    [
                        None
                        if v is None
                        else (v.months * 30 + v.days) * 86_400_000_000_000 + v.nanoseconds
                        for v in vals
                    ],
                    pa.float64(),
                )
            ]
        )
    return col
