"""TimeWindowOp: the TUMBLE and HOP table functions, vectorised over whole chunks.

`TUMBLE(t, ts, size [, offset])` appends `window_start` / `window_end` to every row: the
start is `ts` floored to a multiple of `size` (shifted by `offset`). `HOP(t, ts, hop, size
[, offset])` turns each row into `size / hop` rows, one per sliding window containing `ts`.

Stateless. Both work on the int64 microseconds behind Arrow `timestamp[us]` columns with
numpy (floor division, `np.repeat`), never per row in Python; ad-hoc queries call the same
kernels (`window_columns`), so a view equals its query run ad hoc.

Update pairs: TUMBLE keeps the input's ops (its stream key is the input's). HOP's stream
key includes `window_start`, so an update of `ts` may move a row to other windows; HOP
therefore emits updates as plain deletes and inserts.

Rows whose time column is NULL get NULL windows from TUMBLE and are dropped by HOP (they
belong to no window), as in RisingWave.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from engine.chunk import Op, StreamChunk
from engine.stream.operator import Operator
from engine.types import Field


def floor_to(us: np.ndarray, step: int, offset: int) -> np.ndarray:
    """Largest `offset + k*step` that is <= each value (k any integer)."""
    return us - np.mod(us - offset, step)


def _ts_us(col: pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
    """The column as int64 microseconds (0 for NULL) plus its validity mask (None: no NULLs)."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    ints = col.cast(pa.int64()) if not pa.types.is_int64(col.type) else col
    valid = None
    if ints.null_count:
        valid = ints.is_valid().to_numpy(zero_copy_only=False)
        ints = ints.fill_null(0)
    return ints.to_numpy(zero_copy_only=False), valid


def _as_ts(us: np.ndarray, typ: pa.DataType, valid: np.ndarray | None) -> pa.Array:
    mask = None if valid is None else ~valid
    return pa.array(us, pa.int64(), mask=mask).cast(typ)


def window_columns(
    batch: pa.RecordBatch, ts_col: int, kind: str, hop: int, size: int, offset: int
) -> tuple[np.ndarray | None, pa.Array, pa.Array]:
    """(row indices to take or None for all rows, window_start, window_end) for a batch."""
    col = batch.column(ts_col)
    typ = col.type
    us, valid = _ts_us(col)
    if kind == "tumble":
        start = floor_to(us, size, offset)
        return None, _as_ts(start, typ, valid), _as_ts(start + size, typ, valid)
    k = size // hop
    rows = np.arange(len(us), dtype=np.int64)
    if valid is not None:
        rows = rows[valid]
    last = floor_to(us[rows], hop, offset)
    # window-major order: each block is a copy of the (valid) input rows
    idx = np.tile(rows, k)
    starts = np.concatenate([last - j * hop for j in range(k)]) if k else last[:0]
    return idx, _as_ts(starts, typ, None), _as_ts(starts + size, typ, None)


def apply_windows(
    batch: pa.RecordBatch,
    ts_col: int,
    kind: str,
    hop: int,
    size: int,
    offset: int,
    schema: pa.Schema,
) -> tuple[np.ndarray | None, pa.RecordBatch]:
    idx, ws, we = window_columns(batch, ts_col, kind, hop, size, offset)
    base = batch if idx is None else batch.take(pa.array(idx))
    cols = [*base.columns, ws, we]
    return idx, pa.RecordBatch.from_arrays(cols, schema=schema)


class TimeWindowOp(Operator):
    """TUMBLE / HOP over one input; output = input columns + window_start, window_end."""

    def __init__(
        self,
        input_schema: list[Field],
        schema: list[Field],
        ts_col: int,
        kind: str,
        hop: int,
        size: int,
        offset: int,
        stream_key: list[int],
    ) -> None:
        from engine.types import arrow_schema

        self.input_schema = input_schema
        self.schema = schema
        self.ts_col = ts_col
        self.kind = kind
        self.hop = hop
        self.size = size
        self.offset = offset
        self.stream_key = stream_key
        self._arrow = arrow_schema(schema)

    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        chunk = inputs[0]
        if chunk is None or len(chunk) == 0:
            return None
        idx, out = apply_windows(
            chunk.data, self.ts_col, self.kind, self.hop, self.size, self.offset, self._arrow
        )
        if idx is None:
            return StreamChunk(chunk.ops, out)
        if not len(idx):
            return None
        ops = chunk.ops.to_numpy(zero_copy_only=False)[idx]
        ops = np.where(ops == Op.UPDATE_DELETE, Op.DELETE, ops)
        ops = np.where(ops == Op.UPDATE_INSERT, Op.INSERT, ops).astype(np.int8)
        return StreamChunk(pa.array(ops), out)

    def window_start_watermark(self, wm: int) -> int:
        """Every future row's window_start is >= this, given event times >= `wm`."""
        if self.kind == "tumble":
            return int(floor_to(np.array([wm]), self.size, self.offset)[0])
        return int(floor_to(np.array([wm]), self.hop, self.offset)[0]) - self.size + self.hop

    def explain(self) -> str:
        us = _fmt_us
        if self.kind == "tumble":
            return f"StreamTumble {{ time_col: ${self.ts_col}, size: {us(self.size)} }}"
        return (
            f"StreamHopWindow {{ time_col: ${self.ts_col}, slide: {us(self.hop)}, "
            f"size: {us(self.size)} }}"
        )


def _fmt_us(v: Any) -> str:
    from engine.expr.temporal import format_interval

    return format_interval(0, 0, int(v) * 1000)
