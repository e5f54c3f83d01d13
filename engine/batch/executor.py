"""Interpret a logical plan over Arrow tables (see the package docstring)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import cancel as cancellation
from engine.batch.memory import MemoryBudget, default_limit, row_width
from engine.batch.stream_join import CHUNK_ROWS, stream_join
from engine.errors import EngineError, not_supported
from engine.expr import EvalContext
from engine.plan.logical import (
    ORDERED_SET_KINDS,
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
from engine.sort_keys import sortable
from engine.stream.operators.window_kernel import compute_windows
from engine.types import arrow_schema

#: aggregates computed by the polars kernel of `engine.batch.agg_batch` (with every other
#: aggregate of their GROUP BY), not by `HashAggOp`
BATCH_KERNEL_KINDS = ("string_agg", "array_agg", "jsonb_agg", "udaf", *ORDERED_SET_KINDS)

Snapshot = Callable[[int], pa.Table]


def execute_plan(
    plan: PlanNode, snapshot: Snapshot, ctx: EvalContext, budget: MemoryBudget | None = None
) -> pa.Table:
    """Evaluate `plan`; `snapshot(relation_id)` returns that relation's committed rows."""
    return _Exec(snapshot, ctx, budget).run(plan)


def stream_plan(
    plan: PlanNode, snapshot: Snapshot, ctx: EvalContext, budget: MemoryBudget | None = None
) -> Iterator[pa.Table]:
    """Evaluate `plan` as a stream of tables of at most about `CHUNK_ROWS` rows (at least
    one, maybe empty), produced as the consumer pulls them. A result whose size is known
    before it is computed (a cross product of scans) and exceeds the memory limit is
    refused up front (53200): clients hold results whole, and an answer of hundreds of
    gigabytes is a missing join condition far more often than a request."""
    ex = _Exec(snapshot, ctx, budget)
    exact = ex._exact_rows(plan)
    if exact is not None:
        ex.budget.reserve(exact * row_width(arrow_schema(plan.schema)), "the result")
    return ex.stream(plan)


def query_budget(ctx: EvalContext) -> MemoryBudget:
    """The memory budget of a query run in `ctx`'s session (its `query_memory_limit`)."""
    session = ctx.session
    limit = getattr(session, "query_memory_limit", None) if session is not None else None
    return MemoryBudget(default_limit() if limit is None else int(limit()))


class _Exec:
    """One query's evaluation. `stream(p)` yields `p`'s rows chunk by chunk where the node
    can (`_s_<node>` methods: scans, filters, projections, joins, LIMIT, UNION ALL), else
    it runs the node whole; `run(p)` gives the whole table (collecting a stream, charged
    to the memory budget). Every chunk passes a cancellation check."""

    def __init__(
        self, snapshot: Snapshot, ctx: EvalContext, budget: MemoryBudget | None = None
    ) -> None:
        self.snapshot = snapshot
        self.ctx = ctx
        self.budget = budget if budget is not None else query_budget(ctx)

    def run(self, p: PlanNode) -> pa.Table:
        cancellation.check()  # cancel / statement_timeout stop the query between plan nodes
        if hasattr(self, "_s_" + type(p).__name__.lower()):
            return self._collect(p, self.stream(p))
        m = getattr(self, "_" + type(p).__name__.lower(), None)
        if m is None:
            from engine.batch.time_exec import run_time_node

            return self.budget.charge(run_time_node(self, p), "an intermediate result")
        t: pa.Table = m(p)
        if not isinstance(p, (Scan, SystemScan, WorkTable)):
            self.budget.charge(t, "an intermediate result")
        return t

    def stream(self, p: PlanNode) -> Iterator[pa.Table]:
        m = getattr(self, "_s_" + type(p).__name__.lower(), None)
        if m is None:
            yield from _slices(self.run(p))
            return
        for t in m(p):
            cancellation.check()
            yield t

    def _collect(self, p: PlanNode, parts: Iterator[pa.Table]) -> pa.Table:
        """A stream gathered into one table; the gathered bytes count against the budget
        as they arrive, so an oversized result fails before it is whole."""
        exact = self._exact_rows(p)
        if exact is not None:
            width = row_width(arrow_schema(p.schema))
            self.budget.reserve(exact * width, "an intermediate result")
        held: list[pa.Table] = []
        n = 0
        for t in parts:
            n += int(t.nbytes)
            self.budget.reserve(n, "an intermediate result")
            held.append(t)
        out = held[0] if len(held) == 1 else pa.concat_tables(held)
        if isinstance(p, Scan):
            return out
        return self.budget.charge(out, "an intermediate result")

    def _exact_rows(self, p: PlanNode) -> int | None:
        """The row count of `p` when it is known before running it (scans, projections
        and cross joins of those): lets a product be refused before it is built."""
        if isinstance(p, Scan):
            return int(self.snapshot(p.relation.id).num_rows)
        if isinstance(p, Project):
            return self._exact_rows(p.input)
        if isinstance(p, Join) and p.kind == "cross" and p.condition is None:
            a, b = self._exact_rows(p.left), self._exact_rows(p.right)
            return None if a is None or b is None else a * b
        return None

    def _batch(self, t: pa.Table) -> pa.RecordBatch:
        t = t.combine_chunks()
        bs = t.to_batches()
        if not bs:
            return pa.RecordBatch.from_pylist([], schema=t.schema)
        return bs[0]

    def _s_scan(self, p: Scan) -> Iterator[pa.Table]:
        yield from _slices(self.snapshot(p.relation.id))

    def _systemscan(self, p: SystemScan) -> pa.Table:
        if p.table is None:
            raise not_supported(f"reading {p.relation.schema}.{p.relation.name} here")
        t: pa.Table = p.table
        return t

    def _indexscan(self, p: PlanNode) -> pa.Table:  # engine.plan.index_scan.IndexScan
        t = getattr(p, "table", None)
        if t is None:
            raise not_supported("an index lookup here")
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

    def _s_filter(self, p: Filter) -> Iterator[pa.Table]:
        for t in self.stream(p.input):
            if t.num_rows == 0:
                yield t
                continue
            mask = p.predicate.eval(self._batch(t), self.ctx)
            yield t.filter(pc.fill_null(mask, False))

    def _s_project(self, p: Project) -> Iterator[pa.Table]:
        for t in self.stream(p.input):
            yield self._project_chunk(p, t)

    def _project_chunk(self, p: Project, t: pa.Table) -> pa.Table:
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
        # each cell as a one-row Arrow array, concatenated: values Python cannot hold (a
        # date beyond year 9999, numeric NaN) keep their raw slots
        cols: list[list[pa.Array]] = [[] for _ in p.schema]
        for row in p.rows:
            for i, e in enumerate(row):
                v = e.eval(one, self.ctx)
                t = schema.field(i).type
                a = pa.repeat(v, 1) if isinstance(v, pa.Scalar) else v[:1]
                if len(a) == 0:
                    a = pa.nulls(1, t)
                cols[i].append(a if a.type == t else a.cast(t))
        return pa.Table.from_arrays([pa.concat_arrays(c) for c in cols], schema=schema)

    def _agg(self, p: Agg) -> pa.Table:
        if any(a.kind in BATCH_KERNEL_KINDS for a in p.aggs):
            from engine.batch.agg_batch import run_agg_batch

            return run_agg_batch(p, self.run(p.input))
        from engine.batch.agg_stream import aggregate_stream

        return aggregate_stream(p, self.stream(p.input), self.budget)

    def _overwindow(self, p: OverWindow) -> pa.Table:
        t = self.run(p.input)
        order = [(k.index, k.desc, k.effective_nulls_first) for k in p.order_by]
        out = compute_windows(t, p.input.schema, p.partition_by, order, p.tiebreak, p.calls)
        return pa.Table.from_arrays(out.columns, schema=arrow_schema(p.schema))

    def _s_unionall(self, p: UnionAll) -> Iterator[pa.Table]:
        schema = arrow_schema(p.schema)
        yield schema.empty_table()
        for c in p.children:
            for t in self.stream(c):
                if t.num_rows:
                    yield t.rename_columns(schema.names).cast(schema)

    def _s_limit(self, p: Limit) -> Iterator[pa.Table]:
        """Stops pulling its input once it has its rows (`SELECT * FROM a, b LIMIT 10`
        reads one chunk of the product)."""
        if p.limit == 0:  # as PostgreSQL: LIMIT 0 evaluates nothing (and raises nothing)
            yield arrow_schema(p.schema).empty_table()
            return
        if p.with_ties and p.limit is not None:
            yield _with_ties(self.run(p.input), p)
            return
        skip = p.offset
        left = p.limit
        first = True
        for t in self.stream(p.input):
            if skip:
                cut = min(skip, t.num_rows)
                skip -= cut
                t = t.slice(cut)
            if left is not None:
                t = t.slice(0, left)
                left -= t.num_rows
            if t.num_rows or first:
                first = False
                yield t
            if left == 0:
                return

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
            cols[f"v{i}"] = sortable(col)
            keys.append((f"v{i}", "descending" if k.desc else "ascending"))
        idx = pc.sort_indices(pa.table(cols), sort_keys=keys)
        return t.take(idx)

    def _s_join(self, p: Join) -> Iterator[pa.Table]:
        """Matching pairs (equality keys, then the residual condition), then the unmatched
        rows of preserved sides NULL-padded; semi/anti keep left rows with/without a pair.
        The right side is built whole, the left one streams (engine/batch/stream_join.py)."""
        if p.condition is not None and p.kind in ("left", "right", "full"):
            from engine.batch.outer_join import outer_join_with_condition

            left, right = self.run(p.left), self.run(p.right)
            self._reserve_product(p, left.num_rows, right)
            yield from _slices(outer_join_with_condition(p, left, right, self.ctx))
            return
        right = self.run(p.right)
        yield from stream_join(p, self.stream(p.left), right, self.ctx)

    def _reserve_product(self, p: Join, nl: int, right: pa.Table) -> None:
        width = row_width(arrow_schema(p.schema))
        self.budget.reserve(nl * right.num_rows * width, "the pairs of a join")


def _slices(t: pa.Table) -> Iterator[pa.Table]:
    """`t` as zero-copy slices of at most CHUNK_ROWS rows (an empty `t` once)."""
    if t.num_rows <= CHUNK_ROWS:
        yield t
        return
    for s in range(0, t.num_rows, CHUNK_ROWS):
        yield t.slice(s, CHUNK_ROWS)


def _with_ties(t: pa.Table, p: Limit) -> pa.Table:
    """FETCH FIRST n ROWS WITH TIES over the sorted rows `t`: rows offset..offset+n, then
    those after them equal to the last one on every sort key (NULL ties NULL, NaN NaN)."""
    assert isinstance(p.input, Sort) and p.limit is not None
    end = p.offset + p.limit
    if end >= t.num_rows:
        return t.slice(p.offset)
    same = np.ones(t.num_rows - end, dtype=bool)
    for k in p.input.keys:
        col = t.column(k.index).combine_chunks()
        ref, rest = col[end - 1], col.slice(end)
        if not ref.is_valid:
            eq = pc.is_null(rest)
        elif pa.types.is_floating(col.type) and ref.as_py() != ref.as_py():
            eq = pc.is_nan(rest)
        else:
            eq = pc.equal(rest, ref)
        same &= pc.fill_null(eq, False).to_numpy(zero_copy_only=False)
    extra = int(np.argmin(same)) if not same.all() else len(same)
    return t.slice(p.offset, p.limit + extra)
