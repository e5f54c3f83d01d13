"""DynamicFilterOp: `WHERE v > (SELECT max(v) FROM t2)`, the right side a single-row stream.

Two inputs: the left rows and a one-row stream (a global aggregation) whose value is the
threshold. The output is the left rows for which the predicate holds against the current
threshold. Per step:

1. the right delta gives the new threshold: the value of its last inserted row (a global
   aggregation emits `U-`/`U+` per change), kept in `meta`; a deleted row with nothing
   inserted means no row, so no left row passes (as SQL's NULL comparison);
2. the left delta is applied with the *old* threshold: passing inserts and deletes are
   emitted, and every left row is kept in `rows` (stream key -> row), because rows that
   fail now may pass after the threshold moves;
3. if the threshold changed, the stored rows are evaluated against the old and the new
   value in one vectorised pass and the rows that flip are emitted (+ now passing,
   - no longer passing).

Step 3 touches all stored rows when the threshold moves (rows are not kept sorted by the
compared value); step 2 is proportional to the delta. State: `rows` and `meta` ("thr",)
-> (value,). Outputs are plain inserts and deletes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.chunk import Op, StreamChunk
from engine.stream.operator import Operator
from engine.stream.operators.base import StateAllocator
from engine.types import Field, SqlType, arrow_schema

_NONE = ("none",)


class DynamicFilterOp(Operator):
    """Left rows passing `predicate` against the right input's single value."""

    def __init__(
        self,
        left_schema: list[Field],
        predicate: Any,
        value_type: SqlType,
        right_col: int,
        ctx: Any,
        stream_key: list[int],
        alloc: StateAllocator,
    ) -> None:
        self.schema = list(left_schema)
        self.predicate = predicate
        self.value_type = value_type
        self.right_col = right_col
        self.ctx = ctx
        self.stream_key = stream_key
        self._arrow = arrow_schema(self.schema)
        self._rows = alloc.table("rows")
        self._meta = alloc.table("meta")

    def state_tables(self) -> list[Any]:
        return [self._rows, self._meta]

    def _threshold(self) -> Any:
        v = self._meta.get(("thr",))
        return _NONE if v is None else v[0]

    def _mask(self, batch: pa.RecordBatch, thr: Any) -> np.ndarray:
        if thr is _NONE or thr is None or batch.num_rows == 0:
            return np.zeros(batch.num_rows, dtype=bool)
        col = pa.array([thr] * batch.num_rows, type=self.value_type.arrow)
        b = pa.RecordBatch.from_arrays(
            [*batch.columns, col], names=[*batch.schema.names, "$subquery"]
        )
        m = self.predicate.eval(b, self.ctx)
        return pc.fill_null(m, False).to_numpy(zero_copy_only=False).astype(bool)

    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        left = inputs[0]
        right = inputs[1] if len(inputs) > 1 else None
        old = self._threshold()
        new = old
        if right is not None and len(right):
            ops = right.ops.to_numpy(zero_copy_only=False)
            ins = np.nonzero((ops == Op.INSERT) | (ops == Op.UPDATE_INSERT))[0]
            if len(ins):
                new = right.data.column(self.right_col)[int(ins[-1])].as_py()
            else:
                new = None
        parts: list[StreamChunk] = []
        if left is not None and len(left):
            self._apply_left(left, old, parts)
        if new != old:
            self._meta.put(("thr",), (new,))
            self._flip(old, new, parts)
        return StreamChunk.concat(parts)

    def _apply_left(self, chunk: StreamChunk, thr: Any, parts: list[StreamChunk]) -> None:
        data = chunk.data
        w = chunk.weights()
        cols = [c.to_pylist() for c in data.columns]
        rows = list(zip(*cols, strict=True))
        sk = self.stream_key or list(range(len(cols)))
        keys = list(zip(*[cols[j] for j in sk], strict=True))
        pos = w > 0
        if pos.all():
            self._rows.put_many(keys, rows)
        else:  # in order: an update's delete comes before its insert
            for key, row, ins in zip(keys, rows, pos.tolist(), strict=True):
                if ins:
                    self._rows.put(key, row)
                else:
                    self._rows.delete(key)
        mask = self._mask(data, thr)
        if mask.any():
            parts.append(StreamChunk.from_weights(data.filter(pa.array(mask)), w[mask]))

    def _flip(self, old: Any, new: Any, parts: list[StreamChunk]) -> None:
        if not len(self._rows):
            return
        rows = list(self._rows.values())
        cols = list(zip(*rows, strict=True))
        batch = pa.RecordBatch.from_arrays(
            [pa.array(list(c), type=f.type) for c, f in zip(cols, self._arrow, strict=True)],
            schema=self._arrow,
        )
        was = self._mask(batch, old)
        now = self._mask(batch, new)
        enter = now & ~was
        leave = was & ~now
        if enter.any():
            parts.append(StreamChunk.inserts(batch.filter(pa.array(enter))))
        if leave.any():
            parts.append(StreamChunk.deletes(batch.filter(pa.array(leave))))

    def explain(self) -> str:
        return f"StreamDynamicFilter {{ predicate: {self.predicate} }}"
