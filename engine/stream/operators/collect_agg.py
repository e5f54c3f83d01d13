"""CollectAggOp: GROUP BY with string_agg / array_agg / jsonb_agg in materialized views.

These aggregates are order-sensitive collections, not invertible accumulators, so the
operator keeps every input row of every group and, per epoch, recomputes only the groups
the delta touched, with the same kernel ad-hoc queries use
(`engine.batch.agg_batch.run_agg_batch`, one polars group-by over all touched groups):

1. consolidate the delta by full row;
2. take the touched groups' input rows and their previous output rows out of the two
   `PartitionStore`s (the old output is kept, never recomputed);
3. apply the delta to the input rows (`recompute.apply_delta`) and aggregate them: the
   new output; both go back into their stores;
4. emit the output rows that changed (matched by group key), deletes first.

Every other aggregate of the same GROUP BY (count, sum, min, FILTER, DISTINCT, ...) is
computed by that kernel too. Without GROUP BY one row always exists: the first step
emits it (also with no input), like `HashAggOp`.

State: `groups`: the input rows by group key; `outs`: the output row of every group by
group key (both `PartitionStore`s: one value per hash bucket); `meta`: `("emitted",)`
once the global row was emitted. Input rows are identified by the input stream key
(every column when it is empty).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from engine.chunk import Op, StreamChunk
from engine.expr.nonstrict import ErrorSink
from engine.state.table import StateTable
from engine.stream.operator import Operator
from engine.stream.operators.base import StateAllocator
from engine.stream.operators.frames import consolidate
from engine.stream.operators.partition_store import PartitionStore
from engine.stream.operators.recompute import apply_delta, changes, conform, table_batch
from engine.types import Field, arrow_schema


class CollectAggOp(Operator):
    """`SELECT g.., agg(..) .. GROUP BY g..` recomputed per touched group; see the module
    docstring. `plan` is the logical `Agg` node (its specs drive the shared kernel)."""

    def __init__(
        self,
        input_schema: list[Field],
        plan: Any,
        alloc: StateAllocator,
        input_key: list[int] | None = None,
        errors: ErrorSink | None = None,
    ) -> None:
        self.errors = errors  # where a user-defined aggregate's failures go (nonstrict)
        self.input_schema = list(input_schema)
        self.plan = plan
        self.group_keys = list(plan.group_keys)
        self.schema = list(plan.schema)
        self.stream_key = list(range(len(self.group_keys)))
        self._global = not self.group_keys
        self._key = list(input_key or [])
        self._in_schema = arrow_schema(self.input_schema)
        self._out_schema = arrow_schema(self.schema)
        self._groups_t = alloc.table("groups")
        self._outs_t = alloc.table("outs")
        self._meta = alloc.table("meta")
        self._groups = PartitionStore(self._groups_t, self._in_schema, self.group_keys)
        self._outs = PartitionStore(self._outs_t, self._out_schema, self.stream_key)

    def state_tables(self) -> list[StateTable]:
        return [self._groups_t, self._outs_t, self._meta]

    def explain(self) -> str:
        aggs = ", ".join(str(a) for a in self.plan.aggs)
        keys = ", ".join(f"${g}" for g in self.group_keys)
        return f"StreamCollectAgg {{ group_key: [{keys}], aggs: [{aggs}] }}"

    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        chunk = inputs[0]
        first = self._global and ("emitted",) not in self._meta
        if first:
            self._meta.put(("emitted",), (True,))
        if chunk is None or len(chunk) == 0:
            if not first:
                return None
            batch = self._in_schema.empty_table().to_batches() or [
                pa.RecordBatch.from_pylist([], schema=self._in_schema)
            ]
            return self._recompute(batch[0], np.zeros(0, np.int64), True)
        batch, w = consolidate(chunk)
        if batch.num_rows == 0 and not first:
            return None
        return self._recompute(batch, w, first)

    def _recompute(self, batch: pa.RecordBatch, w: Any, first: bool) -> StreamChunk | None:
        from engine.batch.agg_batch import run_agg_batch

        delta = conform(pa.Table.from_batches([batch], self._in_schema), self._in_schema)
        probe = delta.select(self.group_keys)
        if first:  # the global row: its one group is touched even without input
            probe = pa.table({"x": [0]}).select([])
        old_in = self._groups.take(probe)
        old_out = self._outs.take(probe)
        rows = apply_delta(old_in, table_batch(delta), w, self._key, "collect-agg")
        new_out = conform(run_agg_batch(self.plan, rows, self.errors), self._out_schema)
        self._groups.put(rows)
        self._outs.put(new_out)
        return changes(old_out, new_out, self.stream_key, self._out_schema)


__all__ = ["CollectAggOp", "Op"]
