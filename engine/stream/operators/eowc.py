"""EowcAggOp: GROUP BY with EMIT ON WINDOW CLOSE.

Each group is emitted once, as an insert, when the watermark of its watermark column (a
group key, usually `window_start`) passes it; the output is append-only. Until then the
group's input rows wait in a buffer partitioned by that column's value, so closing windows
is a range cut over the buffer and dropping a closed window's state deletes its segments.

Per step:

1. rows whose watermark column is below the last emitted watermark (or NULL) are late:
   their windows are already emitted, so they are dropped (counted in `late_rows`), as
   RisingWave drops late events for EOWC operators;
2. the remaining rows (Z-set rows: inserts and retractions alike) are appended to the
   buffer, one segment per distinct watermark-column value, as Arrow batches;
3. when the input watermark (`input_watermarks`, set by the flow each epoch) moved, every
   segment with a value below it is taken out, aggregated in one vectorised pass (the
   same `HashAggOp` an ad-hoc query uses, over throwaway state) and emitted ordered by the
   watermark column; the segments are deleted.

State: `buffer` (watermark value, sequence) -> (Arrow IPC bytes of the rows with their
ops,), and `meta` ("emitted",) -> (watermark,), ("seq",) -> (next sequence,). Both are
small: only open windows' rows stay. After a restart the buffer is reloaded and the
decoded batches rebuilt lazily.
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pyarrow as pa

from engine.chunk import Op, StreamChunk
from engine.expr.nonstrict import ErrorSink
from engine.stream.operator import Operator
from engine.stream.operators.agg_calls import AggCall
from engine.stream.operators.base import LocalStateAllocator, StateAllocator
from engine.stream.operators.hash_agg import HashAggOp
from engine.stream.operators.watermark import as_int64
from engine.types import Field

_OPS = "__op"
_NULL = np.iinfo(np.int64).min


def _encode(batch: pa.RecordBatch, ops: pa.Array) -> bytes:
    b = batch.append_column(_OPS, ops)
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, b.schema) as w:
        w.write_batch(b)
    return sink.getvalue()


def _decode(data: bytes) -> StreamChunk:
    t = pa.ipc.open_stream(data).read_all().combine_chunks()
    b = t.to_batches()[0] if t.num_rows else pa.RecordBatch.from_pylist([], schema=t.schema)
    ops = b.column(b.num_columns - 1)
    return StreamChunk(ops, b.drop_columns([_OPS]))


class EowcAggOp(Operator):
    """`SELECT keys, aggs FROM input GROUP BY keys EMIT ON WINDOW CLOSE`."""

    def __init__(
        self,
        input_schema: list[Field],
        group_keys: list[int],
        aggs: list[AggCall],
        alloc: StateAllocator,
        output_names: list[str],
        wm_key: int,
        errors: ErrorSink | None = None,
    ) -> None:
        self.input_schema = input_schema
        self.errors = errors  # streaming: out-of-range aggregates are NULL (HashAggOp)
        self.group_keys = list(group_keys)
        self.aggs = list(aggs)
        self.output_names = output_names
        self.wm_key = wm_key
        self.wm_col = group_keys[wm_key]
        # the aggregation itself runs on throwaway state; only its schema is kept here
        probe = HashAggOp(input_schema, group_keys, aggs, LocalStateAllocator(), output_names)
        self.schema = probe.schema
        self.stream_key = list(range(len(group_keys)))
        self._buffer = alloc.table("buffer")
        self._meta = alloc.table("meta")
        self._cache: dict[tuple[int, int], StreamChunk] = {}
        self.input_watermarks: list[dict[int, int]] = [{}]
        self.late_rows = 0

    def state_tables(self) -> list[Any]:
        return [self._buffer, self._meta]

    @property
    def emitted(self) -> int | None:
        v = self._meta.get(("emitted",))
        return None if v is None else int(v[0])

    def _next_seq(self) -> int:
        v = self._meta.get(("seq",))
        n = 0 if v is None else int(v[0])
        self._meta.put(("seq",), (n + 1,))
        return n

    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        chunk = inputs[0]
        if chunk is not None and len(chunk):
            self._absorb(chunk)
        wm = (self.input_watermarks[0] if self.input_watermarks else {}).get(self.wm_col)
        done = self.emitted
        if wm is None or (done is not None and wm <= done):
            return None
        return self._close(wm)

    def _absorb(self, chunk: StreamChunk) -> None:
        vals = as_int64(chunk.data.column(self.wm_col))
        done = self.emitted
        keep = vals != _NULL
        if done is not None:
            keep &= vals >= done
        self.late_rows += int(len(vals) - keep.sum())
        if not keep.any():
            return
        if not keep.all():
            idx = np.nonzero(keep)[0]
            take = pa.array(idx)
            chunk = StreamChunk(chunk.ops.take(take), chunk.data.take(take))
            vals = vals[idx]
        uniq, inverse = np.unique(vals, return_inverse=True)
        if len(uniq) == 1:
            self._add_segment(int(uniq[0]), chunk)
            return
        order = np.argsort(inverse, kind="stable")
        bounds = np.searchsorted(inverse[order], np.arange(len(uniq) + 1))
        for j, v in enumerate(uniq):  # one segment per window: per group, not per row
            take = pa.array(order[bounds[j] : bounds[j + 1]])
            self._add_segment(int(v), StreamChunk(chunk.ops.take(take), chunk.data.take(take)))

    def _add_segment(self, value: int, chunk: StreamChunk) -> None:
        key = (value, self._next_seq())
        self._buffer.put(key, (_encode(chunk.data, chunk.ops),))
        self._cache[key] = chunk

    def _close(self, wm: int) -> StreamChunk | None:
        # the closed windows: an ordered range cut below the watermark
        closed = list(self._buffer.scan(end=(wm,)))
        self._meta.put(("emitted",), (wm,))
        if not closed:
            return None
        parts = []
        for k, (blob,) in closed:
            c = self._cache.pop(k, None)
            parts.append(_decode(blob) if c is None else c)
        self._buffer.delete_many([k for k, _ in closed])
        merged = StreamChunk.concat(parts)
        if merged is None:
            return None
        return self._emit(merged)

    def _emit(self, merged: StreamChunk) -> StreamChunk | None:
        agg = HashAggOp(
            self.input_schema,
            self.group_keys,
            self.aggs,
            LocalStateAllocator(),
            self.output_names,
            errors=self.errors,
        )
        out = agg.step([merged])
        if out is None or len(out) == 0:
            return None
        ops = out.ops.to_numpy(zero_copy_only=False)
        keep = (ops == Op.INSERT) | (ops == Op.UPDATE_INSERT)
        data = out.data.filter(pa.array(keep))
        if data.num_rows == 0:
            return None
        order = np.argsort(as_int64(data.column(self.wm_key)), kind="stable")
        data = data.take(pa.array(order))
        return StreamChunk.inserts(data)

    def explain(self) -> str:
        keys = ", ".join(f"${g}" for g in self.group_keys)
        aggs = ", ".join(str(a) for a in self.aggs)
        return (
            f"StreamHashAgg {{ group_key: [{keys}], aggs: [{aggs}], "
            f"emit_on_window_close: true, watermark: ${self.wm_col} }}"
        )


class EowcSortOp(EowcAggOp):
    """`SELECT ... EMIT ON WINDOW CLOSE` without aggregation: each row is emitted once, as an
    insert, when the watermark of column `wm_col` passes its value, ordered by it.

    Same buffer and late-row handling as `EowcAggOp`; closing consolidates the buffered
    Z-set rows (a row inserted and deleted before its window closed never appears).
    """

    def __init__(
        self, schema: list[Field], stream_key: list[int], alloc: StateAllocator, wm_col: int
    ) -> None:
        self.input_schema = schema
        self.schema = list(schema)
        self.stream_key = list(stream_key)
        self.wm_col = wm_col
        self.wm_key = wm_col
        self.group_keys = []
        self.aggs = []
        self._buffer = alloc.table("buffer")
        self._meta = alloc.table("meta")
        self._cache = {}
        self.input_watermarks = [{}]
        self.late_rows = 0

    def _emit(self, merged: StreamChunk) -> StreamChunk | None:
        data = merged.data
        names = [f"c{i}" for i in range(data.num_columns)]
        t = pa.Table.from_batches([data]).rename_columns(names)
        t = t.append_column("__w", pa.array(merged.weights().astype(np.int64)))
        g = t.group_by(names, use_threads=False).aggregate([("__w", "sum")])
        w = g.column("__w_sum").to_numpy()
        keep = w > 0
        if not keep.any():
            return None
        rows = g.select(names).filter(pa.array(keep))
        idx = np.repeat(np.arange(rows.num_rows), w[keep])
        rows = rows.take(pa.array(idx)).combine_chunks()
        order = np.argsort(as_int64(rows.column(self.wm_col)), kind="stable")
        rows = rows.take(pa.array(order)).rename_columns(data.schema.names).cast(data.schema)
        out = rows.to_batches()[0] if rows.num_rows else None
        return None if out is None else StreamChunk.inserts(out)

    def explain(self) -> str:
        return f"StreamEowcSort {{ sort_column: ${self.wm_col} }}"
