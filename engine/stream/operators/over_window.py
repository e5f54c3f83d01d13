"""OverWindowOp: incremental window functions (`f(..) OVER (PARTITION BY p ORDER BY o)`).

A window function's value for a row depends on the other rows of its partition, so a
change to one row can change the output of every row of that partition (ranks shift,
lag/lead neighbours move, running sums change) and of no other partition. The operator
keeps every row of every partition together with its current window values (the output
it emitted last), in a `PartitionStore` keyed by the PARTITION BY columns. Per step:

1. the epoch's delta is consolidated by full row (net Z-set weights);
2. the stored rows of the partitions it touches are taken out of the store, with their
   window values: that is the old output, never recomputed;
3. the delta is applied to them (`recompute.apply_delta`) and the shared window kernel
   (`window_kernel.compute_windows`) evaluates all touched partitions in one vectorised
   pass: the new output, which goes back into the store;
4. the rows of old and new output that differ (matched by stream key) are emitted,
   deletes first (`recompute.changes`).

Because ad-hoc queries run the same kernel over the whole input, a view equals its query.
Ties on the ORDER BY keys are broken by the stream key ascending (`tiebreak`).

State: table `parts`, the `PartitionStore` of output rows (input columns + one column per
call), one store value per hash bucket of partitions. In a server it is a disk table:
the buckets live in RocksDB and a step reads the touched ones with one multi-get, so
nothing of the state is held in Python memory between steps. Rows are identified by the
input stream key (or every column when it is empty; duplicates are then separate rows).

Cost per epoch: O(rows of the touched partitions) kernel work plus reading and decoding
the touched buckets (zero-copy Arrow IPC); untouched buckets cost nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from engine.chunk import StreamChunk
from engine.state.table import StateTable
from engine.stream.operator import Operator
from engine.stream.operators.base import StateAllocator
from engine.stream.operators.frames import consolidate
from engine.stream.operators.partition_store import PartitionStore
from engine.stream.operators.recompute import apply_delta, changes, conform, table_batch
from engine.stream.operators.window_kernel import CallLike, OrderSpec, compute_windows
from engine.types import Field, arrow_schema


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
        self._key = list(stream_key)
        self.stream_key = list(stream_key) or list(range(len(input_schema)))
        self._in_schema = arrow_schema(self.input_schema)
        self._out_schema = arrow_schema(self.schema)
        self._table = alloc.table("parts", disk=True, dist=False)
        self._store = PartitionStore(self._table, self._out_schema, self.partition_by)

    def state_tables(self) -> list[StateTable]:
        return [self._table]

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
        batch, w = consolidate(chunk)
        if batch.num_rows == 0:
            return None
        delta = conform(pa.Table.from_batches([batch]), self._in_schema)
        old = self._store.take(delta.select(self.partition_by))
        nin = len(self.input_schema)
        rows = apply_delta(old.select(range(nin)), table_batch(delta), w, self._key, "over-window")
        new = self.evaluate(rows)
        self._store.put(new)
        return changes(old, new, self._key, self._out_schema)

    def evaluate(self, rows: pa.Table) -> pa.Table:
        """The window values of `rows` (whole partitions), as output rows."""
        t = compute_windows(
            rows, self.input_schema, self.partition_by, self.order_by, self.tiebreak, self.calls
        )
        return pa.Table.from_arrays(t.columns, schema=self._out_schema)
