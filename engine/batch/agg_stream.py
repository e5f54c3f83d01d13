"""Aggregation of an ad-hoc query over a stream of chunks.

The same `HashAggOp` as a materialized view's aggregation (so an ad-hoc query and a view
of the same SQL compute the same thing), stepped once per batch of up to `STEP_ROWS`
input rows gathered from the stream: the input is never held whole, so `SELECT count(*)`
over a streamed 27e9-row cross join runs in bounded memory (and stops at the next check
when cancelled). Each step outputs the groups it changed (inserts, and `U+` rows for
groups that existed); the last output row of each group is its final value. Those rows
are kept, de-duplicated by group key whenever they outgrow the groups, and charged to the
query's memory budget together with an estimate of the operator's per-group state
(`GROUP_STATE_BYTES`), so a GROUP BY with too many groups fails with 53200.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import cancel as cancellation
from engine.batch.memory import MemoryBudget
from engine.chunk import StreamChunk
from engine.plan.logical import Agg
from engine.stream.operators import AggCall, HashAggOp, LocalStateAllocator
from engine.types import arrow_schema

STEP_ROWS = 1 << 20
# Python state per group of HashAggOp (key tuple, slot tuple, dict entry): about 550 bytes
GROUP_STATE_BYTES = 600


def aggregate_stream(p: Agg, parts: Iterator[pa.Table], budget: MemoryBudget) -> pa.Table:
    calls = [AggCall(a.kind, a.arg, a.type, a.distinct, a.filter, arg2=a.arg2) for a in p.aggs]
    op = HashAggOp(
        p.input.schema, p.group_keys, calls, LocalStateAllocator(), [f.name for f in p.schema]
    )
    schema = arrow_schema(p.schema)
    nk = len(p.group_keys)
    outs: list[pa.Table] = []
    out_rows = 0
    kept_groups = 0
    pending: list[pa.Table] = []
    pending_rows = 0
    stepped = False

    def step(tables: list[pa.Table]) -> None:
        nonlocal out_rows, stepped
        t = tables[0] if len(tables) == 1 else pa.concat_tables(tables)
        out = op.step([StreamChunk.inserts(t)])
        stepped = True
        if out is not None and len(out):
            keep = pc.or_(pc.equal(out.ops, 1), pc.equal(out.ops, 4))
            data = pa.Table.from_batches([out.data.filter(keep)])
            outs.append(data)
            out_rows += data.num_rows

    for t in parts:
        if t.num_rows == 0:
            continue
        pending.append(t)
        pending_rows += t.num_rows
        if pending_rows >= STEP_ROWS:
            step(pending)
            pending, pending_rows = [], 0
            cancellation.check()
            if len(outs) > 1 and out_rows > 2 * max(kept_groups, 1):
                merged = _last_per_group(outs, nk)
                outs, out_rows, kept_groups = [merged], merged.num_rows, merged.num_rows
            groups = max(kept_groups, outs[-1].num_rows if outs else 0)
            budget.reserve(
                sum(int(o.nbytes) for o in outs) + groups * GROUP_STATE_BYTES,
                "the groups of an aggregation",
            )
    if pending:
        step(pending)
    if not stepped:
        out = op.step([None])  # no input rows: a global aggregate still answers one row
        if out is None or len(out) == 0:
            return schema.empty_table()
        keep = pc.or_(pc.equal(out.ops, 1), pc.equal(out.ops, 4))
        return pa.Table.from_batches([out.data.filter(keep)]).cast(schema)
    if not outs:
        return schema.empty_table()
    result = outs[0] if len(outs) == 1 else _last_per_group(outs, nk)
    return result.cast(schema)


def _last_per_group(outs: list[pa.Table], nk: int) -> pa.Table:
    """The last row of each group key (the first `nk` columns) across `outs`, in order."""
    t = pa.concat_tables(outs)
    if nk == 0:
        return t.slice(t.num_rows - 1, 1)
    keys = [f"k{i}" for i in range(nk)]
    idx = pa.table(
        [*t.columns[:nk], pa.array(np.arange(t.num_rows), pa.int64())], names=[*keys, "__i"]
    )
    last = idx.group_by(keys, use_threads=False).aggregate([("__i", "max")])
    order = np.sort(last.column("__i_max").to_numpy())
    return t.take(pa.array(order))
