"""OverWindowOp: incremental window functions (`f(..) OVER (PARTITION BY p ORDER BY o)`).

A window function's value for a row depends on the other rows of its partition, so a
change to one row can change the output of every row of that partition (ranks shift,
lag/lead neighbours move, running sums change) and of no other partition. Per step:

1. the epoch's delta is consolidated by full row (net Z-set weights);
2. the partitions it touches are collected; their current rows (from the in-memory
   index over the `rows` state table) are evaluated with the shared window kernel
   (`window_kernel.compute_windows`, vectorised across all touched partitions at once) —
   the old output;
3. the delta is applied to state and the touched partitions are evaluated again — the
   new output;
4. old (weight -1) and new (weight +1) outputs are consolidated by full row, so rows whose
   window values did not change cancel; the rest is emitted, deletes first.

Because ad-hoc queries run the same kernel over the whole input, a view equals its query.
Ties on the ORDER BY keys are broken by the stream key ascending (`tiebreak`).

State: table `rows`, key `(*partition values, *ident) -> (*row, count)`, where `ident`
is the input stream key (or every column when it is empty; `count` then records identical
rows). The per-run index `partition -> set of state keys` is rebuilt from the table on the
first step after construction (the runtime loads tables before stepping).

Cost per epoch: O(rows of the touched partitions) kernel work, twice; untouched
partitions cost nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from engine.chunk import Op, StreamChunk
from engine.errors import InternalError
from engine.state.table import StateTable
from engine.stream.operator import Operator
from engine.stream.operators.base import StateAllocator
from engine.stream.operators.frames import (
    batch_from_rows,
    consolidate,
    net_rows,
)
from engine.stream.operators.hash_join import canonical_nan, hashable_values
from engine.stream.operators.window_kernel import CallLike, OrderSpec, compute_windows
from engine.types import Field, arrow_schema

Key = tuple[Any, ...]


class OverWindowOp(Operator):
    """Window function calls sharing one PARTITION BY / ORDER BY; see the module docstring.

    Output schema: the input fields plus one column per call (`out_fields`). Stream key:
    the input stream key (every input column when that is empty).
    """

    def __init__(
        self,
        input_schema: list[Field],
        out_fields: list[Field],
        partition_by: list[int],
        order_by: list[OrderSpec],
        calls: Sequence[CallLike],
        tiebreak: list[int],
        alloc: StateAllocator,
        stream_key: list[int],
    ) -> None:
        self.input_schema = list(input_schema)
        self.schema = list(input_schema) + list(out_fields)
        self.partition_by = list(partition_by)
        self.order_by = list(order_by)
        self.calls = list(calls)
        self.tiebreak = list(tiebreak)
        self._ident = list(stream_key) or list(range(len(input_schema)))
        self.stream_key = list(self._ident)
        self._rows = alloc.table("rows")
        self._index: dict[Key, set[Key]] | None = None
        self._out_schema = arrow_schema(self.schema)

    def state_tables(self) -> list[StateTable]:
        return [self._rows]

    def explain(self) -> str:
        part = ", ".join(f"${p}" for p in self.partition_by)
        order = ", ".join(f"${c} {'DESC' if d else 'ASC'}" for c, d, _ in self.order_by)
        calls = ", ".join(str(c) for c in self.calls)
        return (
            f"StreamOverWindow {{ partition_by: [{part}], order_by: [{order}], calls: [{calls}] }}"
        )

    # -- step ---------------------------------------------------------------------------
    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        chunk = inputs[0]
        if chunk is None or len(chunk) == 0:
            return None
        if self._index is None:
            self._build_index()
        assert self._index is not None
        batch, w = consolidate(chunk)
        n = batch.num_rows
        if n == 0:
            return None
        cols = [hashable_values(c) for c in batch.columns]
        rows = _tuples(cols, n)
        np_ = len(self.partition_by)
        skeys = _tuples([cols[c] for c in self.partition_by + self._ident], n)
        touched = list(dict.fromkeys(k[:np_] for k in skeys))
        old = self._eval(touched)
        data = self._rows.data
        table = self._rows
        for i in np.argsort(w > 0, kind="stable").tolist():  # deletes first
            wi, sk = int(w[i]), skeys[i]
            v = data.get(sk)
            c = (0 if v is None else v[-1]) + wi
            if c < 0:
                raise InternalError(
                    "over-window state row count became negative",
                    detail=f"A row of {self.explain()} was deleted but never inserted.",
                )
            part = sk[:np_]
            if c == 0:
                table.delete(sk)
                members = self._index.get(part)
                if members is not None:
                    members.discard(sk)
                    if not members:
                        del self._index[part]
            else:
                table.put(sk, rows[i] + (c,))
                self._index.setdefault(part, set()).add(sk)
        new = self._eval(touched)
        return _diff(old, new, self._out_schema)

    def _eval(self, parts: list[Key]) -> pa.Table:
        assert self._index is not None
        data = self._rows.data
        rows: list[Key] = []
        for p in parts:
            for sk in self._index.get(p, ()):
                v = data[sk]
                rows.extend([v[:-1]] * v[-1])
        batch = batch_from_rows(self.input_schema, rows)
        t = compute_windows(
            pa.Table.from_batches([batch]),
            self.input_schema,
            self.partition_by,
            self.order_by,
            self.tiebreak,
            self.calls,
        )
        return pa.Table.from_arrays(t.columns, schema=self._out_schema)

    def _build_index(self) -> None:
        self._index = prefix_index(self._rows, len(self.partition_by))


def prefix_index(rows: StateTable, n: int) -> dict[Key, set[Key]]:
    """The stored keys of `rows` grouped by their first `n` columns (the partition or group
    key), built once after recovery; NaNs made canonical first so equal keys meet."""
    canonical_nan(rows)
    index: dict[Key, set[Key]] = {}
    for k in rows.data:
        index.setdefault(k[:n], set()).add(k)
    return index


def _diff(old: pa.Table, new: pa.Table, schema: pa.Schema) -> StreamChunk | None:
    both = pa.concat_tables([old, new]).combine_chunks()
    if both.num_rows == 0:
        return None
    w = np.r_[np.full(old.num_rows, -1, np.int64), np.full(new.num_rows, 1, np.int64)]
    batches = both.to_batches()
    batch = batches[0] if batches else pa.RecordBatch.from_pylist([], schema=schema)
    batch, w = net_rows(batch, w)
    if batch.num_rows == 0:
        return None
    order = np.argsort(w > 0, kind="stable")  # deletes first
    reps = np.abs(w[order])
    take = np.repeat(order, reps)
    ops = np.where(np.repeat(w[order], reps) > 0, Op.INSERT, Op.DELETE).astype(np.int8)
    return StreamChunk(pa.array(ops), batch.take(pa.array(take)))


def _tuples(columns: list[list[Any]], n: int) -> list[Key]:
    if not columns:
        return [()] * n
    return list(zip(*columns, strict=True))
