"""TemporalFilterOp: `WHERE ts > now() - INTERVAL '1 hour'` in a materialized view.

A temporal filter compares a row expression with `now()` (the barrier's time, the same for
every view in an epoch). As time passes rows stop satisfying a lower bound (`ts > now() -
d`: they expire and are retracted) or start satisfying an upper bound (`ts <= now()`: they
enter). Every bound turns into a point in time, computed once per row with vectorised
kernels:

    ts >  now() + c   visible while now <  ts - c      (exit  = ts - c)
    ts >= now() + c   visible while now <= ts - c      (exit  = ts - c + 1us)
    ts <  now() + c   visible once  now >  ts - c      (enter = ts - c + 1us)
    ts <= now() + c   visible once  now >= ts - c      (enter = ts - c)

so a row is visible while `enter <= now < exit` (several bounds: the latest enter and the
earliest exit). Because `now()` only grows, each row changes state at most twice.

State is keyed by time, so expiry is a range cut rather than a scan:

* `active`: (exit, *stream key) -> row, the rows currently in the output;
* `pending`: (enter, *stream key) -> (exit, *row), rows waiting to enter.

Both tables are read by ordered range scans of the state layer (`StateTable.scan`,
keys in time order): each step takes the entries up to `now` and nothing else, with no
per-run index to rebuild after a restart.
Deletes and updates find their row by recomputing its times from the same values. The
operator steps every epoch even without input (`time_driven`), so expiry happens as time
passes. Output updates are plain deletes and inserts.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from engine.chunk import StreamChunk
from engine.numeric import array_of
from engine.stream.operator import Operator
from engine.stream.operators.base import StateAllocator
from engine.types import Field, arrow_schema

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_MIN = np.iinfo(np.int64).min
_MAX = np.iinfo(np.int64).max


class TemporalFilterOp(Operator):
    """Keeps the rows whose `now()` bounds hold at the current barrier."""

    time_driven = True

    def __init__(
        self,
        input_schema: list[Field],
        bounds: list[Any],  # engine.plan.plan_time.TimeBound
        ctx: Any,
        stream_key: list[int],
        alloc: StateAllocator,
    ) -> None:
        self.schema = list(input_schema)
        self.bounds = bounds
        self.ctx = ctx
        self.stream_key = stream_key
        self._arrow = arrow_schema(self.schema)
        self._active = alloc.table("active")
        self._pending = alloc.table("pending")

    def state_tables(self) -> list[Any]:
        return [self._active, self._pending]

    def _now_us(self) -> int:
        return (self.ctx.now_utc() - _EPOCH) // _US

    def _times(self, batch: pa.RecordBatch) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(enter, exit, valid) per row; rows with a NULL bound value are never visible."""
        n = batch.num_rows
        enter = np.full(n, _MIN, dtype=np.int64)
        exit_ = np.full(n, _MAX, dtype=np.int64)
        valid = np.ones(n, dtype=bool)
        for b in self.bounds:
            arr = b.expr.eval(batch, self.ctx)
            if isinstance(arr, pa.ChunkedArray):
                arr = arr.combine_chunks()
            ints = arr.cast(pa.int64())
            if ints.null_count:
                valid &= ints.is_valid().to_numpy(zero_copy_only=False)
                ints = ints.fill_null(0)
            t = ints.to_numpy(zero_copy_only=False) - b.offset_us
            if b.cmp == ">":
                exit_ = np.minimum(exit_, t)
            elif b.cmp == ">=":
                exit_ = np.minimum(exit_, t + 1)
            elif b.cmp == "<":
                enter = np.maximum(enter, t + 1)
            else:
                enter = np.maximum(enter, t)
        return enter, exit_, valid

    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        now = self._now_us()
        out_rows: list[tuple[Any, ...]] = []
        out_signs: list[int] = []
        chunk = inputs[0]
        if chunk is not None and len(chunk):
            self._apply(chunk, now, out_rows, out_signs)
        # pending rows whose enter time came (keys (enter, *stream key) in time order)
        due = list(self._pending.scan(end=(now + 1,)))
        if due:
            self._pending.delete_many([k for k, _ in due])
            enter = [((v[0], *k[1:]), v[1:]) for k, v in due if v[0] > now]
            self._active.put_many([k for k, _ in enter], [row for _, row in enter])
            out_rows.extend(row for _, row in enter)
            out_signs.extend([1] * len(enter))
        # active rows whose exit time came
        gone = list(self._active.scan(end=(now + 1,)))
        if gone:
            self._active.delete_many([k for k, _ in gone])
            out_rows.extend(row for _, row in gone)
            out_signs.extend([-1] * len(gone))
        if not out_rows:
            return None
        cols = list(zip(*out_rows, strict=True))
        arrays = [array_of(list(c), f.type) for c, f in zip(cols, self._arrow, strict=True)]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self._arrow)
        return StreamChunk.from_weights(batch, np.array(out_signs))

    def _apply(
        self, chunk: StreamChunk, now: int, out_rows: list[Any], out_signs: list[int]
    ) -> None:
        enter, exit_, valid = self._times(chunk.data)
        relevant = valid & (exit_ > now) & (enter < exit_)
        if not relevant.any():
            return
        idx = np.nonzero(relevant)[0]
        sub = chunk.data.take(pa.array(idx))
        weights = chunk.weights()[idx]
        enter = enter[idx].tolist()
        exit_ = exit_[idx].tolist()
        cols = [c.to_pylist() for c in sub.columns]
        rows = list(zip(*cols, strict=True))
        sk = self.stream_key
        for i, row in enumerate(rows):  # per surviving row: state access by key
            key = tuple(row[j] for j in sk)
            en, ex = enter[i], exit_[i]
            if weights[i] > 0:
                if en <= now:
                    self._active.put((ex, *key), row)
                    out_rows.append(row)
                    out_signs.append(1)
                else:
                    self._pending.put((en, *key), (ex, *row))
            else:
                k = (ex, *key)
                if k in self._active and en <= now:
                    self._active.delete(k)
                    out_rows.append(row)
                    out_signs.append(-1)
                else:
                    self._pending.delete((en, *key))

    def explain(self) -> str:
        return "StreamDynamicFilter { temporal: " + " AND ".join(str(b) for b in self.bounds) + " }"
