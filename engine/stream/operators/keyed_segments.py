"""KeyedSegments: rows by unique key in Arrow segments with live masks, compacted as they thin.

Why: `ColumnarMaterializeOp` (a relation's rows by pk) and `TopNOp` (every input row by
stream key) both keep rows that are found by key, deleted by marking them dead, and
appended in bulk, without a Python tuple or a store key per row. This class is that
store, built on `segments.SegmentTable` (persistence as few large values):

* rows live in immutable Arrow record batches ("segments") with a numpy live-mask each;
  a key index (`key_index`: compact numpy arrays for one integer or temporal key
  column, else a dict; over `segments.key_fn` values) maps each stored key to its
  location `segment_id << 32 | row`. Keys are unique: the owner kills a key's old row
  (`kill`) before appending a new one (`append`);
* a stored key whose row changes is rewritten in place (`overwrite`): its segment gets a
  new batch with the row at the same position, so neither the index nor the masks move;
* persisted in ONE state table: `(sid,)` -> Arrow IPC bytes (written when the segment is
  created and again when `overwrite` changes its rows),
  `("mask", sid)` -> packed live bitmap (rewritten only for segments whose mask changed),
  `("meta",)` -> (format version, next segment id);
* compaction keeps this amortised: `finish` drops segments with no live rows, and
  rewrites segments whose live fraction fell below `MIN_LIVE_FRACTION`, and all small
  segments once more than `MAX_SMALL_SEGMENTS` have accumulated (one-row epochs), into
  new segments of at most `MAX_SEGMENT_ROWS` rows (and about `SEGMENT_BYTES`); it
  returns the locations it moved so owners holding locations (the top-N cache) can follow.

Snapshots (`pin`): a segment's batch is immutable (`overwrite` replaces it with a new one)
and a live mask is never changed in place (`kill` writes a new array), so pinning the
current rows is O(segments): a tuple of (batch, mask) pairs that later steps cannot change.
The runtime pins every relation's rows at each committed epoch (`SegmentSnapshot`), and
readers turn a pin into an Arrow table without any lock while the next epoch is computed.

Owners reach the rows only through the methods here (never the segment or index dicts).

Lifecycle: the owner constructs it over its state table once the runtime loaded that
table (the constructor rebuilds segments, masks and the index); per step the owner looks
keys up, reads rows with `gather` (dead rows stay readable until `finish`), kills deleted
rows, overwrites changed ones, appends new ones, then calls `finish` once.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from engine.numeric import array_of
from engine.state.table import StateTable
from engine.stream.operators.key_index import IntIndex, make_index
from engine.stream.operators.segments import (
    MASK,
    ROW_BITS,
    SHIFT,
    SegmentTable,
    by_segment,
    gather,
    key_fn,
    replace_rows,
    row_keys,
    unpack_mask,
)

Row = tuple[Any, ...]

SMALL_SEGMENT_ROWS = 4096
"""Segments with fewer rows are "small"; too many of them are merged."""
MAX_SMALL_SEGMENTS = 16
MAX_SEGMENT_ROWS = 1 << 18
"""Segments are split at this size so no single store value grows unboundedly."""
SEGMENT_BYTES = 1 << 18
"""... and at about this many bytes (not below `SMALL_SEGMENT_ROWS` rows): a segment is one
store value, and RocksDB holds the interpreter lock for a whole `db.write`, so the
checkpoint piece carrying a 5 MB segment of a COPY stopped every session for 10-15 ms,
and one of 1 MB still for 6-11 CPU-ms on a loaded machine (the size of a checkpoint
piece, `checkpoint.PIECE_BYTES`, keeps a piece to about one such value)."""
MIN_LIVE_FRACTION = 0.5
GROWN_BYTES = 4 * SEGMENT_BYTES
"""A segment whose rows grew past this by `overwrite` (longer strings) is rewritten (and so
split at `SEGMENT_BYTES`) by the next `finish`."""

EMPTY = np.empty(0, np.int64)


@dataclass(slots=True)
class Segment:
    """One immutable batch of rows; `mask` None means every row is live."""

    batch: pa.RecordBatch
    mask: np.ndarray | None
    live: int

    def live_batch(self, mask: np.ndarray | None = None) -> pa.RecordBatch:
        m = self.mask if mask is None else mask
        if m is None or self.live == self.batch.num_rows and mask is None:
            return self.batch
        return self.batch.filter(pa.array(m))

    def live_rows(self) -> np.ndarray:
        n = self.batch.num_rows
        return np.arange(n, dtype=np.int64) if self.mask is None else np.flatnonzero(self.mask)


class SegmentSnapshot:
    """The live rows of a `KeyedSegments` at one point (see `KeyedSegments.pin`).

    Immutable: its batches are the store's immutable segments and its masks are arrays
    no later step writes, so it may be read from any thread while the store changes.
    `table()` builds the Arrow table once and keeps it (two threads racing build equal
    tables; either is kept).
    """

    __slots__ = ("schema", "parts", "rows", "_table")

    def __init__(
        self,
        schema: pa.Schema,
        parts: tuple[tuple[pa.RecordBatch, np.ndarray | None, int], ...],
        rows: int,
    ) -> None:
        self.schema = schema
        self.parts = parts  # (batch, live mask or None, live rows) per segment with rows
        self.rows = rows
        self._table: pa.Table | None = None

    def __len__(self) -> int:
        return self.rows

    def batches(self) -> list[pa.RecordBatch]:
        """The live rows as record batches (row order unspecified)."""
        out = []
        for batch, mask, live in self.parts:
            if live == batch.num_rows:
                out.append(batch)
            elif live:
                out.append(batch.filter(pa.array(mask)))
        return out

    def table(self) -> pa.Table:
        """The live rows as one Arrow table (row order unspecified)."""
        t = self._table
        if t is None:
            t = self._table = pa.Table.from_batches(self.batches(), self.schema)
        return t


class KeyedSegments:
    """Rows by unique key in Arrow segments; see the module docstring."""

    def __init__(
        self, table: StateTable, schema: pa.Schema, key_cols: list[int], version: int, what: str
    ) -> None:
        self.schema = schema
        self.key_cols = list(key_cols)
        self.key_fns = [key_fn(schema.field(i).type) for i in self.key_cols]
        self.segments: dict[int, Segment] = {}
        self.index = make_index([schema.field(i).type for i in self.key_cols])
        self._small: set[int] = set()
        self._grown: set[int] = set()  # overwritten past GROWN_BYTES: split at `finish`
        self._table = SegmentTable(table, schema, version, what)
        self._pinned: SegmentSnapshot | None = None  # valid until the rows change
        # not len(table): a counted disk table keeps its count through every checkpoint
        # with a multi-get of its changed keys, here segments of hundreds of kB each
        if next(iter(table.keys()), None) is not None:
            self._load()

    def __len__(self) -> int:
        return len(self.index)

    # -- keys ---------------------------------------------------------------------------
    def keys(self, batch: pa.RecordBatch) -> list[Any]:
        """The index key of every row (bare value for a one-column key, else tuples)."""
        return row_keys(batch, self.key_cols, self.key_fns)

    def int_keys(self, batch: pa.RecordBatch) -> np.ndarray | None:
        """The keys of `batch` as one int64 array, when the index holds them as ints (one
        integer or temporal key column, `key_index.IntIndex`) and none is NULL; else
        None. The same values `keys` gives, without a Python object per row: `lookup`,
        `has_any` and `append` take the array as it is."""
        if not isinstance(self.index, IntIndex) or len(self.key_cols) != 1:
            return None
        a = batch.column(self.key_cols[0])
        t = a.type
        if a.null_count or t == pa.uint64() or pa.types.is_interval(t):
            return None
        if pa.types.is_temporal(t):
            a = a.view(pa.int32() if t.bit_width == 32 else pa.int64())
        elif not pa.types.is_integer(t):
            return None
        return np.asarray(a.to_numpy(zero_copy_only=False), np.int64)

    def _keys_fast(self, batch: pa.RecordBatch) -> list[Any] | np.ndarray:
        """`int_keys` where it applies (no Python object per row), else `keys`."""
        arr = self.int_keys(batch)
        return self.keys(batch) if arr is None else arr

    def key_of(self, values: Row) -> Any:
        """The index key of one row's key column values (Python values)."""
        arrays = [
            array_of([v], self.schema.field(i).type)
            for v, i in zip(values, self.key_cols, strict=True)
        ]
        cols = [fn(a)[0] for fn, a in zip(self.key_fns, arrays, strict=True)]
        return cols[0] if len(cols) == 1 else tuple(cols)

    def lookup(self, keys: list[Any] | np.ndarray) -> np.ndarray:
        """Locations of `keys` (-1 where not stored)."""
        return self.index.lookup(keys)

    def has_any(self, keys: Any) -> bool:
        """Is any of `keys` (an iterable of index keys) stored?"""
        return self.index.has_any(keys)

    def row(self, key: Any) -> Row | None:
        """The stored row of one index key as Python values, or None."""
        loc = self.index.get(key)
        if loc is None:
            return None
        batch = self.segments[loc >> SHIFT].batch
        r = loc & ROW_BITS
        return tuple(c[r].as_py() for c in batch.columns)

    @property
    def segment_count(self) -> int:
        return len(self.segments)

    def segment_ids(self) -> set[int]:
        return set(self.segments)

    def segment_rows(self, sid: int) -> int:
        """Rows (live and dead) of segment `sid`."""
        return int(self.segments[sid].batch.num_rows)

    def pin(self) -> SegmentSnapshot:
        """The live rows as they are now, immutable (see the module docstring)."""
        snap = self._pinned
        if snap is None:
            parts = tuple((s.batch, s.mask, s.live) for s in self.segments.values() if s.live)
            snap = self._pinned = SegmentSnapshot(self.schema, parts, len(self.index))
        return snap

    def pin_without(self, locs: np.ndarray) -> SegmentSnapshot:
        """The live rows except those at `locs` (a preview of deletes; nothing changes)."""
        masks: dict[int, np.ndarray] = {}
        for sid, _, rows in by_segment(locs):
            seg = self.segments[sid]
            m = np.ones(seg.batch.num_rows, bool) if seg.mask is None else seg.mask.copy()
            m[rows] = False
            masks[sid] = m
        parts = []
        for sid, s in self.segments.items():
            cut = masks.get(sid)
            live = s.live if cut is None else int(cut.sum())
            if live:
                parts.append((s.batch, s.mask if cut is None else cut, live))
        return SegmentSnapshot(self.schema, tuple(parts), sum(p[2] for p in parts))

    # -- reads --------------------------------------------------------------------------
    def batch_of(self, sid: int) -> pa.RecordBatch:
        return self.segments[sid].batch

    def gather(self, locs: np.ndarray) -> pa.RecordBatch:
        """The rows at `locs`, in that order (dead rows too until `finish`)."""
        if not len(locs):
            return pa.RecordBatch.from_pylist([], schema=self.schema)
        return gather(locs, self.batch_of)

    def live_batches(self) -> Iterator[tuple[int, pa.RecordBatch, np.ndarray]]:
        # (do not write the store while consuming this)
        """Per segment with live rows: (sid, its live rows, their row numbers)."""
        for sid, seg in self.segments.items():
            if seg.live:
                yield sid, seg.live_batch(), seg.live_rows()

    # -- writes -------------------------------------------------------------------------
    def append(self, batch: pa.RecordBatch, keys: list[Any] | np.ndarray) -> np.ndarray:
        """Store rows with distinct, unstored `keys` as new segment(s); their locations."""
        n = batch.num_rows
        out: list[np.ndarray] = []
        self._pinned = None
        step = MAX_SEGMENT_ROWS
        if n > SMALL_SEGMENT_ROWS and batch.nbytes > SEGMENT_BYTES:
            step = max(SMALL_SEGMENT_ROWS, min(step, n * SEGMENT_BYTES // batch.nbytes))
        if n > step:  # even pieces: no small tail segment (nor a tail of index updates)
            pieces = math.ceil(n / step)
            step = math.ceil(n / pieces)
        for start in range(0, n, step):
            part = batch.slice(start, step) if n > step else batch
            sid = self._table.new_sid()
            rows = part.num_rows
            self.segments[sid] = Segment(self._table.write(sid, part), None, rows)
            if rows < SMALL_SEGMENT_ROWS:
                self._small.add(sid)
            base = sid << SHIFT
            part_keys = keys if rows == n else keys[start : start + rows]
            self.index.update(part_keys, range(base, base + rows))
            out.append(np.arange(base, base + rows, dtype=np.int64))
        return np.concatenate(out) if len(out) > 1 else (out[0] if out else EMPTY)

    def overwrite(self, locs: np.ndarray, rows: pa.RecordBatch) -> None:
        """Replace the live rows at `locs` by `rows` (in that order, the same keys).

        Each segment touched gets a new batch with the rows in the same positions (copy on
        write: pinned snapshots keep the old one), so the index and the live masks stay
        as they are and the segment is written again under its own id. An update used to
        kill the old row and append the new one: with most groups of a view changing in an
        epoch, every segment thinned below half live and was compacted, so the whole view
        was moved and re-indexed each epoch. A segment whose values grew past
        `GROWN_BYTES` is split by the next `finish`."""
        if not len(locs):
            return
        self._pinned = None
        for sid, at, rws in by_segment(locs):
            seg = self.segments[sid]
            sub = rows if at is None else rows.take(pa.array(at))
            n = seg.batch.num_rows
            merged = replace_rows(seg.batch, rws, sub)
            seg.batch = self._table.write(sid, merged)
            if merged.nbytes > GROWN_BYTES and n > SMALL_SEGMENT_ROWS:
                self._grown.add(sid)

    def kill(self, locs: np.ndarray, gone: list[Any] | None = None) -> set[int]:
        """Mark rows dead and drop the keys `gone` from the index; the segments touched."""
        touched: set[int] = set()
        if len(locs):
            self._pinned = None
        for sid, _, rows in by_segment(locs):
            seg = self.segments[sid]
            # a new array, never an in-place change: pinned snapshots hold the old one
            mask = np.ones(seg.batch.num_rows, bool) if seg.mask is None else seg.mask.copy()
            mask[rows] = False
            seg.mask = mask
            seg.live -= len(rows)
            touched.add(sid)
        if gone:
            self.index.pop_many(gone)
        return touched

    def finish(self, touched: set[int]) -> tuple[np.ndarray, np.ndarray]:
        """Compact what the step made sparse, persist changed masks; (old, new) moved locs."""
        segs = self.segments
        for sid in [sid for sid in touched if segs[sid].live == 0]:
            self._drop(sid)
        rewrite = [
            sid
            for sid in touched
            if sid in segs and segs[sid].live < MIN_LIVE_FRACTION * segs[sid].batch.num_rows
        ]
        if len(self._small) > MAX_SMALL_SEGMENTS:
            rewrite = list(dict.fromkeys([*rewrite, *sorted(self._small)]))
        if self._grown:
            rewrite = list(dict.fromkeys([*rewrite, *sorted(self._grown & segs.keys())]))
            self._grown.clear()
        moved = (EMPTY, EMPTY)
        if rewrite:
            moved = self._rewrite(rewrite)
        for sid in touched:
            seg = segs.get(sid)
            if seg is not None and seg.mask is not None:
                self._table.put_mask(sid, seg.mask)
        return moved

    def _rewrite(self, sids: list[int]) -> tuple[np.ndarray, np.ndarray]:
        live = [s for s in sids if self.segments[s].live]
        parts = [self.segments[s].live_batch() for s in live]
        old = [(s << SHIFT) | self.segments[s].live_rows() for s in live]
        for sid in sids:
            self._drop(sid)
        if not parts:
            return EMPTY, EMPTY
        merged = pa.concat_batches(parts) if len(parts) > 1 else parts[0]
        new = self.append(merged, self._keys_fast(merged))
        return np.concatenate(old), new

    def _drop(self, sid: int) -> None:
        self._pinned = None
        seg = self.segments.pop(sid)
        self._small.discard(sid)
        self._grown.discard(sid)
        self._table.drop(sid, (MASK,) if seg.mask is not None else ())

    def _load(self) -> None:
        """Rebuild segments, masks and the index from the (already loaded) state table."""
        batches, aux = self._table.load()
        masks = aux.get(MASK, {})
        for sid, batch in batches.items():
            mask: np.ndarray | None = None
            live = batch.num_rows
            if sid in masks:
                mask = unpack_mask(masks[sid])
                live = int(mask.sum())
            seg = Segment(batch, mask, live)
            self.segments[sid] = seg
            if batch.num_rows < SMALL_SEGMENT_ROWS:
                self._small.add(sid)
            keys = self.keys(seg.live_batch())
            self.index.update(keys, ((sid << SHIFT) | seg.live_rows()).tolist())
