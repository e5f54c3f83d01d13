"""Reading an upstream relation's rows in key order, a slice at a time, while it changes.

Why: a new materialized view or sink over existing data must not stop the world. It
reads each upstream's rows in the order of the upstream's key (the primary key of a
table, the stream key of a view), a bounded slice at a time, while the upstream keeps
changing; the position (the last key read) decides what the job takes from the live
stream: a change whose key is at or before the position is forwarded (the job already
holds that key's row), one after it is dropped (the later snapshot read sees its result).
This is RisingWave's arrangement backfill rule (`mark_chunk`: `pk <= current_pos`).

The order: the key tuple compared column by column, NULL before any value, then values
by Arrow's comparison (numbers by value, strings by code point, as `engine.state.order`).
`key_le` evaluates "key <= position" for a whole chunk with Arrow compute kernels.

How a slice is found without re-sorting the upstream at every step (`SnapshotCursor`):

1. `prepare(pin)` (outside the runtime lock: a pin is immutable) takes the upstream's
   live rows at some moment, keeps those after the position and sorts them by key once.
   It remembers which immutable segment (`SegmentSnapshot.parts` batch) and row each
   sorted row came from.
2. `next_slice(fresh, n)` (under the lock, between barriers) reads the range
   (position, key of the n-th next sorted row] from the upstream's rows *now* (`fresh`):
   the sorted rows in that range whose segment row is still live in `fresh` (segments
   are immutable and never reused, so "still live" is a mask lookup), plus the rows of
   segments `fresh` has and the prepared pin had not (rows written since, and rows moved
   by compaction), filtered to the range. The union is exactly `fresh`'s rows in the
   range. The last slice's range is open-ended.

So the sort is once per backfill run (again after a restart, from the stored position),
and each slice costs its own rows plus the rows written since the sort.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

Key = tuple[Any, ...]

_PART = "__bf_part"
_ROW = "__bf_row"


def _cmp(col: pa.ChunkedArray | pa.Array, p: Any) -> tuple[np.ndarray, np.ndarray]:
    """(col < p, col == p) as numpy bools, NULL first, NaN after every number."""
    nulls = np.asarray(col.is_null().to_numpy(zero_copy_only=False), bool)
    if p is None:
        return np.zeros(len(col), bool), nulls
    if isinstance(p, float) and math.isnan(p):
        nan = np.asarray(pc.fill_null(pc.is_nan(col), False).to_numpy(zero_copy_only=False), bool)
        return nulls | (~nan & ~nulls), nan
    scalar = pa.scalar(p, type=col.type)
    lt = pc.fill_null(pc.less(col, scalar), False).to_numpy(zero_copy_only=False)
    eq = pc.fill_null(pc.equal(col, scalar), False).to_numpy(zero_copy_only=False)
    return nulls | np.asarray(lt, bool), np.asarray(eq, bool)


def orderable(types: list[pa.DataType]) -> bool:
    """Whether Arrow compares values of these key types (not intervals, lists, structs):
    an upstream keyed otherwise is read in one slice instead."""
    for t in types:
        try:
            pc.less(pa.array([], type=t), pa.array([], type=t))
        except (pa.ArrowNotImplementedError, pa.ArrowInvalid, pa.ArrowTypeError):
            return False
    return True


def key_le(data: pa.Table | pa.RecordBatch, key_cols: list[int], pos: Key) -> np.ndarray:
    """Rows of `data` whose key (columns `key_cols`) is at or before `pos`."""
    res = np.ones(data.num_rows, bool)
    for c, p in reversed(list(zip(key_cols, pos, strict=True))):
        lt, eq = _cmp(data.column(c), p)
        res = lt | (eq & res)
    return res


def key_in(data: pa.Table | pa.RecordBatch, key_cols: list[int], lo: Key | None,
           hi: Key | None) -> np.ndarray:  # fmt: skip
    """Rows whose key is in (lo, hi]; None is an open end."""
    keep = np.ones(data.num_rows, bool)
    if lo is not None:
        keep &= ~key_le(data, key_cols, lo)
    if hi is not None:
        keep &= key_le(data, key_cols, hi)
    return keep


def _filter(data: pa.Table, mask: np.ndarray) -> pa.Table:
    if mask.all():
        return data
    return data.filter(pa.array(mask))


class SnapshotCursor:
    """One upstream's rows in key order from a position; see the module docstring."""

    def __init__(self, key_cols: list[int], pos: Key | None) -> None:
        self.key_cols = key_cols
        self.pos = pos  # the last key read; None: nothing read yet
        self.sorted: pa.Table | None = None  # prepared rows after `pos`, by key
        self.offset = 0  # sorted rows already consumed
        self._base: dict[int, int] = {}  # id(segment batch) -> its part index in the pin
        self._keep: list[pa.RecordBatch] = []  # keeps those batches (and their ids) alive
        self._ordered = False

    @property
    def prepared(self) -> bool:
        return self.sorted is not None

    def prepare(self, pin: Any) -> None:
        """Sort the pinned rows after the position (no lock needed: `pin` is immutable)."""
        parts = list(getattr(pin, "parts", ()))
        batches = []
        for i, (batch, mask, live) in enumerate(parts):
            self._base[id(batch)] = i
            self._keep.append(batch)
            if not live:
                continue
            rows = np.arange(batch.num_rows, dtype=np.int64)
            if mask is not None and live != batch.num_rows:
                rows = rows[mask]
                batch = batch.take(pa.array(rows))
            batches.append(
                batch.append_column(_PART, pa.array(np.full(len(rows), i, np.int32))).append_column(
                    _ROW, pa.array(rows)
                )
            )
        if not batches:
            self.sorted = pa.table({})
            return
        t = pa.Table.from_batches(batches).combine_chunks()
        if self.pos is not None:
            t = _filter(t, ~key_le(t, self.key_cols, self.pos))
        if self.key_cols:
            names = [t.schema.field(c).name for c in self.key_cols]
            idx = pc.sort_indices(t, sort_keys=[(n, "ascending", "at_start") for n in names])
            t = t.take(idx)
        self.sorted = t

    def remaining(self) -> int:
        return 0 if self.sorted is None else self.sorted.num_rows - self.offset

    def next_slice(self, fresh: Any, n: int) -> tuple[pa.Table, bool]:
        """The upstream's current rows in (position, next boundary], with at most about
        `n` of the prepared rows; advances the position. Returns (rows, finished)."""
        assert self.sorted is not None
        total = self.sorted.num_rows
        end = min(total, self.offset + max(1, n))
        final = end >= total or not self.key_cols
        s = self.sorted.slice(self.offset, end - self.offset)
        hi: Key | None = None
        if not final:
            last = s.slice(s.num_rows - 1, 1)
            hi = tuple(last.column(c)[0].as_py() for c in self.key_cols)
        fresh_parts = list(getattr(fresh, "parts", ()))
        masks: dict[int, Any] = {}  # base part index -> its live mask now (None: all)
        new: list[pa.RecordBatch] = []
        for batch, mask, live in fresh_parts:
            i = self._base.get(id(batch))
            if i is None:
                if live:
                    new.append(batch.filter(pa.array(mask)) if mask is not None else batch)
            else:
                masks[i] = mask if live != batch.num_rows else None
        out: list[pa.Table] = []
        if s.num_rows:
            part = s.column(_PART).to_numpy()
            row = s.column(_ROW).to_numpy()
            alive = np.zeros(s.num_rows, bool)
            for i in np.unique(part):
                sel = part == i
                if int(i) not in masks:
                    continue  # the segment is gone: its live rows are in new segments
                m = masks[int(i)]
                alive[sel] = True if m is None else m[row[sel]]
            out.append(_filter(s, alive).drop_columns([_PART, _ROW]))
        if new:
            t = pa.Table.from_batches(new)
            out.append(_filter(t, key_in(t, self.key_cols, self.pos, hi)))
        self.offset = end
        self.pos = hi
        if not out:
            return pa.table({}), final
        return pa.concat_tables(out), final
