"""IntervalJoinOp: an inner hash join whose time band lets watermarks clean its state.

`a JOIN b ON a.id = b.id AND a.ts BETWEEN b.ts - INTERVAL '1' MINUTE AND b.ts` over inputs
with watermarks on `a.ts` and `b.ts`: the join itself is the ordinary `HashJoinOp` (equality
keys + residual band), and this wrapper drops rows that can no longer match. With the band
written as `lo <= a.ts - b.ts <= hi` and every future row at or above its side's watermark:

* a left row is needed only while `a.ts >= wm(b.ts) + lo`;
* a right row is needed only while `b.ts >= wm(a.ts) - hi`.

Cleaning goes through the join's own code path: the expired rows are fed to the join as
deletes in an extra step whose output is discarded, so the join's state and index stay
consistent without this class knowing them. To find expired rows without scanning the
state, every inserted row is also kept in an expiry buffer partitioned by epoch, keyed by
the smallest time it holds: `(min_time, seq) -> (Arrow IPC of the rows,)`; each epoch cuts
the partitions whose minimum is below the cut. A row the user already deleted is skipped
(`HashJoinOp.stored_rows` says which expired rows are still stored exactly as buffered).
When both inputs are append-only (`append_only`, the planner's `StreamIntervalJoin
[append_only]`) no row is ever deleted by the user, so every buffered row is still stored
and that check, which compares each expired row with every stored row under its key, is
skipped. The wrapped join is then an ordinary one: it receives the cleaning deletes.

Cleaning assumes the usual append-mostly event streams: after a row is cleaned, a delete
of it no longer retracts its pairs (as in RisingWave, state below the watermark is gone).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pyarrow as pa

from engine.chunk import Op, StreamChunk
from engine.stream.operator import Operator
from engine.stream.operators.base import StateAllocator
from engine.stream.operators.watermark import as_int64

_NULL = np.iinfo(np.int64).min


def _encode(batch: pa.RecordBatch) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return sink.getvalue()


def _decode(data: bytes) -> pa.RecordBatch:
    t = pa.ipc.open_stream(data).read_all().combine_chunks()
    return t.to_batches()[0] if t.num_rows else pa.RecordBatch.from_pylist([], schema=t.schema)


class IntervalJoinOp(Operator):
    """Wraps a `HashJoinOp` (inner, with a time band) and cleans it by watermark."""

    def __init__(
        self,
        join: Any,  # HashJoinOp
        times: tuple[int, int],  # time column of the left / right input
        lo: int | None,  # band: lo <= left.t - right.t (None: no lower bound)
        hi: int | None,  # band: left.t - right.t <= hi
        keys: tuple[list[int], list[int]],
        idents: tuple[list[int], list[int]],
        alloc: StateAllocator,
        append_only: bool = False,
    ) -> None:
        self.join = join
        self.append_only = append_only
        self.schema = join.schema
        self.stream_key = join.stream_key
        self.times = times
        self.lo = lo
        self.hi = hi
        self.keys = keys
        self.idents = idents
        self.input_watermarks: list[dict[int, int]] = [{}, {}]
        self._expiry = (alloc.table("left_expiry"), alloc.table("right_expiry"))
        self._meta = alloc.table("expiry_meta")
        self.cleaned = [0, 0]

    def state_tables(self) -> list[Any]:
        return [*self.join.state_tables(), *self._expiry, self._meta]

    def _seq(self) -> int:
        v = self._meta.get(("seq",))
        n = 0 if v is None else int(v[0])
        self._meta.put(("seq",), (n + 1,))
        return n

    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        out = self.join.step(inputs)
        for side in (0, 1):
            c = inputs[side] if side < len(inputs) else None
            if c is not None and len(c):
                self._remember(side, c)
        wms = self.input_watermarks
        cuts: list[int | None] = [None, None]
        wl = wms[0].get(self.times[0]) if wms else None
        wr = wms[1].get(self.times[1]) if len(wms) > 1 else None
        if self.lo is not None and wr is not None:
            cuts[0] = wr + self.lo
        if self.hi is not None and wl is not None:
            cuts[1] = wl - self.hi
        dels = [self._expire(side, cuts[side]) for side in (0, 1)]
        if any(d is not None for d in dels):
            self.join.step(dels)  # cleaning: the retractions it emits are not real changes
        return out

    def _remember(self, side: int, c: StreamChunk) -> None:
        ops = c.ops.to_numpy(zero_copy_only=False)
        ins = (ops == Op.INSERT) | (ops == Op.UPDATE_INSERT)
        if not ins.any():
            return
        data = c.data if ins.all() else c.data.filter(pa.array(ins))
        t = as_int64(data.column(self.times[side]))
        ok = t != _NULL
        if not ok.any():
            return
        if not ok.all():
            data = data.filter(pa.array(ok))
            t = t[ok]
        self._expiry[side].put((int(t.min()), self._seq()), (_encode(data),))

    def _expire(self, side: int, cut: int | None) -> StreamChunk | None:
        if cut is None:
            return None
        table = self._expiry[side]
        due = list(table.scan(end=(cut,)))  # partitions whose minimum time is below the cut
        if not due:
            return None
        parts = []
        for k, (blob,) in due:
            batch = _decode(blob)
            table.delete(k)
            t = as_int64(batch.column(self.times[side]))
            old = t < cut
            if not old.all():
                rest = batch.filter(pa.array(~old))
                table.put((int(t[~old].min()), self._seq()), (_encode(rest),))
            parts.append(batch.filter(pa.array(old)))
        expired = pa.Table.from_batches(parts).combine_chunks()
        if expired.num_rows and not self.append_only:
            batch = expired.to_batches()[0]
            present = self.join.stored_rows(side, batch)
            expired = expired if present.all() else expired.filter(pa.array(present))
        if expired.num_rows == 0:
            return None
        self.cleaned[side] += expired.num_rows
        return StreamChunk.deletes(expired)

    def explain(self) -> str:
        ao = " [append_only]" if self.append_only else ""
        return self.join.explain().replace("StreamHashJoin", f"StreamIntervalJoin{ao}", 1)
