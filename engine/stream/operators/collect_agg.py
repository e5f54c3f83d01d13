"""CollectAggOp: GROUP BY with string_agg / array_agg in materialized views.

These aggregates are order-sensitive collections, not invertible accumulators, so the
operator keeps every input row of every group (in state) and, per epoch, recomputes only
the groups the delta touched, with the same kernel ad-hoc queries use
(`engine.batch.agg_batch.run_agg_batch`, one polars group-by over all touched groups):

1. consolidate the delta by full row; collect the touched group keys;
2. evaluate the touched groups' current rows — the old output;
3. apply the delta to state; evaluate again — the new output;
4. emit old (-) and new (+) rows that differ (consolidated by full row), deletes first.

Every other aggregate of the same GROUP BY (count, sum, min, FILTER, DISTINCT, ...) is
computed by that kernel too. Without GROUP BY one row always exists: the first step
emits it (also with no input), like `HashAggOp`.

State: `rows`: `(*group key, *row) -> (count,)` over the aggregation's input columns;
`meta`: `("emitted",)` once the global row was emitted. The per-run index `group ->
set of state keys` is rebuilt on the first step after construction.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from engine.chunk import Op, StreamChunk
from engine.errors import InternalError
from engine.state.table import StateTable
from engine.stream.operator import Operator
from engine.stream.operators.base import StateAllocator
from engine.stream.operators.frames import batch_from_rows, consolidate
from engine.stream.operators.hash_join import hashable_values
from engine.stream.operators.over_window import _diff, _tuples, prefix_index
from engine.types import Field, arrow_schema

Key = tuple[Any, ...]


class CollectAggOp(Operator):
    """`SELECT g.., agg(..) .. GROUP BY g..` recomputed per touched group; see the module
    docstring. `plan` is the logical `Agg` node (its specs drive the shared kernel)."""

    def __init__(self, input_schema: list[Field], plan: Any, alloc: StateAllocator) -> None:
        self.input_schema = list(input_schema)
        self.plan = plan
        self.group_keys = list(plan.group_keys)
        self.schema = list(plan.schema)
        self.stream_key = list(range(len(self.group_keys)))
        self._global = not self.group_keys
        self._rows = alloc.table("rows")
        self._meta = alloc.table("meta")
        self._index: dict[Key, set[Key]] | None = None
        self._out_schema = arrow_schema(self.schema)

    def state_tables(self) -> list[StateTable]:
        return [self._rows, self._meta]

    def explain(self) -> str:
        aggs = ", ".join(str(a) for a in self.plan.aggs)
        keys = ", ".join(f"${g}" for g in self.group_keys)
        return f"StreamCollectAgg {{ group_key: [{keys}], aggs: [{aggs}] }}"

    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        if self._index is None:
            self._build_index()
        assert self._index is not None
        chunk = inputs[0]
        first = self._global and ("emitted",) not in self._meta
        if chunk is None or len(chunk) == 0:
            if not first:
                return None
            self._meta.put(("emitted",), (True,))
            new = self._eval([()])
            return StreamChunk.inserts(new)
        batch, w = consolidate(chunk)
        n = batch.num_rows
        if n == 0 and not first:
            return None
        cols = [hashable_values(c) for c in batch.columns]
        rows = _tuples(cols, n)
        ng = len(self.group_keys)
        gk = _tuples([cols[g] for g in self.group_keys], n)
        touched = list(dict.fromkeys(gk)) if not self._global else [()]
        old = self._eval(touched) if not first else self._out_schema.empty_table()
        data = self._rows.data
        for i in np.argsort(w > 0, kind="stable").tolist():  # deletes first
            sk = gk[i] + rows[i]
            v = data.get(sk)
            c = (0 if v is None else v[0]) + int(w[i])
            if c < 0:
                raise InternalError(
                    "collect-agg state row count became negative",
                    detail=f"A row of {self.explain()} was deleted but never inserted.",
                )
            part = sk[:ng]
            if c == 0:
                self._rows.delete(sk)
                members = self._index.get(part)
                if members is not None:
                    members.discard(sk)
                    if not members:
                        del self._index[part]
            else:
                self._rows.put(sk, (c,))
                self._index.setdefault(part, set()).add(sk)
        if first:
            self._meta.put(("emitted",), (True,))
        new = self._eval(touched)
        return _diff(old, new, self._out_schema)

    def _eval(self, groups: list[Key]) -> pa.Table:
        from engine.batch.agg_batch import run_agg_batch

        assert self._index is not None
        ng = len(self.group_keys)
        data = self._rows.data
        rows: list[Key] = []
        for g in groups:
            for sk in self._index.get(g, ()):
                rows.extend([sk[ng:]] * data[sk][0])
        t = pa.Table.from_batches([batch_from_rows(self.input_schema, rows)])
        out = run_agg_batch(self.plan, t)
        return pa.Table.from_arrays(out.columns, schema=self._out_schema)

    def _build_index(self) -> None:
        self._index = prefix_index(self._rows, len(self.group_keys))


__all__ = ["CollectAggOp", "Op"]
