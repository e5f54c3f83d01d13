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

Step 3 looks only at rows whose compared value lies between the old and the new threshold:
an in-memory index keeps the stored rows' values sorted (numeric and temporal values, as
float64, with their keys), so a range lookup finds the candidates and the exact predicate
decides. Other value types, or a threshold that was or becomes NULL, re-evaluate every
stored row. State: `rows` and `meta` ("thr",) -> (value,); the index is rebuilt from `rows`
after a restart or when many entries went stale. Outputs are plain inserts and deletes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.chunk import Op, StreamChunk
from engine.numeric import array_of
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
        left_expr: Any = None,
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
        self.left_expr = left_expr
        self._index: _ValueIndex | None = None  # built on the first threshold change
        self.scanned = 0  # rows re-evaluated by threshold changes (tests, tuning)

    def state_tables(self) -> list[Any]:
        return [self._rows, self._meta]

    def _threshold(self) -> Any:
        v = self._meta.get(("thr",))
        return _NONE if v is None else v[0]

    def _mask(self, batch: pa.RecordBatch, thr: Any) -> np.ndarray:
        if thr is _NONE or thr is None or batch.num_rows == 0:
            return np.zeros(batch.num_rows, dtype=bool)
        col = array_of([thr] * batch.num_rows, self.value_type.arrow)
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
        else:  # in order: the last change of each key wins (an update's delete comes first)
            last = dict(zip(keys, zip(pos.tolist(), rows, strict=True), strict=True))
            self._rows.delete_many([k for k, (ins, _) in last.items() if not ins])
            put = [(k, r) for k, (ins, r) in last.items() if ins]
            self._rows.put_many([k for k, _ in put], [r for _, r in put])
        if self._index is not None:
            self._index.stale += int((~pos).sum())  # deleted rows leave entries behind
        if self._index is not None and pos.any():
            vals = self._values(data)
            if vals is None:
                self._index = None
            else:
                sel = pos & ~np.isnan(vals)
                self._index.add(vals[sel], [k for k, p in zip(keys, sel.tolist()) if p])
        mask = self._mask(data, thr)
        if mask.any():
            parts.append(StreamChunk.from_weights(data.filter(pa.array(mask)), w[mask]))

    def _values(self, batch: pa.RecordBatch) -> np.ndarray | None:
        """The compared expression as float64 (NaN for NULL), None if not numeric/temporal."""
        if self.left_expr is None:
            return None
        return _as_float(self.left_expr.eval(batch, self.ctx))

    def _candidates(self, old: Any, new: Any) -> list[Any] | None:
        """Rows whose value lies between the two thresholds (None: scan everything)."""
        if old is _NONE or old is None or new is None or self.left_expr is None:
            return None
        a = _as_float(array_of([old], self.value_type.arrow))
        b = _as_float(array_of([new], self.value_type.arrow))
        if a is None or b is None:
            return None
        if self._index is None:
            rows = list(self._rows.values())
            if not rows:
                return []
            batch = self._batch(rows)
            vals = self._values(batch)
            if vals is None:
                return None
            keep = ~np.isnan(vals)
            sk = self.stream_key or list(range(len(self.schema)))
            keys = [tuple(r[j] for j in sk) for r in rows]
            self._index = _ValueIndex()
            self._index.add(vals[keep], [k for k, p in zip(keys, keep.tolist()) if p])
        lo, hi = min(a[0], b[0]), max(a[0], b[0])
        eps = 1e-9 * max(1.0, abs(lo), abs(hi))
        # candidates only: rows between the old and the new threshold (deleted ones are
        # stale index entries: their keys are gone from the table)
        keys = list(dict.fromkeys(self._index.between(lo - eps, hi + eps)))
        out = [row for row in self._rows.get_many(keys) if row is not None]
        if self._index.stale > len(self._rows):
            self._index = None  # many deleted entries: rebuild on the next change
        return out

    def _batch(self, rows: list[Any]) -> pa.RecordBatch:
        cols = list(zip(*rows, strict=True))
        return pa.RecordBatch.from_arrays(
            [array_of(list(c), f.type) for c, f in zip(cols, self._arrow, strict=True)],
            schema=self._arrow,
        )

    def _flip(self, old: Any, new: Any, parts: list[StreamChunk]) -> None:
        if not len(self._rows):
            return
        cand = self._candidates(old, new)
        rows = list(self._rows.values()) if cand is None else cand
        if not rows:
            return
        self.scanned += len(rows)
        cols = list(zip(*rows, strict=True))
        batch = pa.RecordBatch.from_arrays(
            [array_of(list(c), f.type) for c, f in zip(cols, self._arrow, strict=True)],
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


def _as_float(arr: pa.Array) -> np.ndarray | None:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    t = arr.type
    try:
        if pa.types.is_timestamp(t) or pa.types.is_date(t):
            arr = arr.cast(pa.int64())
        out = arr.cast(pa.float64())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return out.fill_null(np.nan).to_numpy(zero_copy_only=False)


class _ValueIndex:
    """The stored rows' compared values, sorted, with their keys (for range lookups).

    Deleted rows are not removed here (their keys are simply missing from the rows table
    when looked up); `stale` counts them, so the owner can rebuild the index.
    """

    def __init__(self) -> None:
        self.vals = np.empty(0, dtype=np.float64)
        self.keys = np.empty(0, dtype=object)
        self.stale = 0

    def add(self, vals: np.ndarray, keys: list[Any]) -> None:
        if not len(vals):
            return
        order = np.argsort(vals, kind="stable")
        k = np.empty(len(keys), dtype=object)
        k[:] = keys
        pos = np.searchsorted(self.vals, vals[order])
        self.vals = np.insert(self.vals, pos, vals[order])
        self.keys = np.insert(self.keys, pos, k[order])

    def between(self, lo: float, hi: float) -> list[Any]:
        i = int(np.searchsorted(self.vals, lo, side="left"))
        j = int(np.searchsorted(self.vals, hi, side="right"))
        return list(self.keys[i:j])
