"""Shared machinery for operators that keep rows as immutable Arrow segments.

Why: per-row Python tuples and one store key per row make big state slow to build, to
checkpoint and to collect garbage over. `ColumnarMaterializeOp` (a relation's rows by pk)
and the hash join's `JoinSide` (each join input's rows) instead keep rows in immutable
Arrow record batches ("segments") addressed by a location `segment_id << 32 | row`, with
numpy arrays beside them for what changes (live masks, counts, degrees), and a dict over
equality-preserving Python keys only where a row must be found by value.

This module holds what both need:

* `SegmentTable`: persistence of segments in ONE `StateTable` with few, large values:
  `(sid,)` -> `(Arrow IPC stream bytes,)` written when the segment is created (and when
  its owner replaces its rows),
  `(kind, sid)` -> owner-defined tuple for mutable per-segment arrays (`"mask"` is the
  packed live bitmap), `("meta",)` -> `(format version, next segment id)`. After writing a
  segment the batch is re-read zero-copy from the stored bytes, so the segment's memory is
  the state table's value itself. `load` parses the (already loaded) table back.
* location helpers: `by_segment` groups locations by segment, `gather` reads rows at
  locations in order;
* `key_fn`: how a column becomes hashable, equality-preserving Python values cheaply
  (temporal columns by their integer storage, decimals/intervals by their bytes, lists as
  tuples, every float NaN as the one `NAN` object so keys holding NaN find each other);
* `rows_equal`: per-row equality of two batches (NULL equals NULL).

Lifecycle of a `SegmentTable`: constructed over the owner's state table; the owner calls
`load()` once after the runtime loaded the table, then `write`/`put_aux`/`drop` as segments
come and go; the runtime commits the table at each checkpoint.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InternalError
from engine.state.table import StateTable

SHIFT = 32
ROW_BITS = (1 << SHIFT) - 1
META_KEY = ("meta",)
MASK = "mask"

NAN = float("nan")
"""The one NaN object used in keys.

NaN != NaN, but dict lookups compare tuple elements (and keys) by identity first, so keys
holding this one object find each other (PostgreSQL treats NaN as equal to NaN in keys)."""


class SegmentTable:
    """A state table holding Arrow segments and per-segment arrays; see the module docstring."""

    def __init__(self, table: StateTable, schema: pa.Schema, version: int, what: str) -> None:
        table.prefer_keyed()  # few large values updated in place (engine.state.table)
        self.table = table
        self.schema = schema
        self.version = version
        self.what = what  # owner name for error messages
        self.next_sid = 0

    def new_sid(self) -> int:
        sid = self.next_sid
        self.next_sid += 1
        self.table.put(META_KEY, (self.version, self.next_sid))
        return sid

    def write(self, sid: int, batch: pa.RecordBatch) -> pa.RecordBatch:
        """Put the segment's IPC bytes; return the batch re-read zero-copy from them."""
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, self.schema) as w:
            w.write_batch(batch)
        data = sink.getvalue().to_pybytes()
        self.table.put((sid,), (data,))
        return read_segment(data)

    def put_aux(self, kind: str, sid: int, value: tuple[Any, ...] | None) -> None:
        """Store (or with None remove) a per-segment value such as its live mask."""
        if value is None:
            self.table.delete((kind, sid))
        else:
            self.table.put((kind, sid), value)

    def put_mask(self, sid: int, mask: np.ndarray | None) -> None:
        """The segment's live bitmap; None (every row live) removes it."""
        if mask is None:
            self.put_aux(MASK, sid, None)
        else:
            self.put_aux(MASK, sid, (len(mask), np.packbits(mask).tobytes()))

    def drop(self, sid: int, kinds: tuple[str, ...] = (MASK,)) -> None:
        self.table.delete((sid,))
        for kind in kinds:
            self.table.delete((kind, sid))

    def load(self) -> tuple[dict[int, pa.RecordBatch], dict[str, dict[int, tuple[Any, ...]]]]:
        """Segments by id (ascending) and per-kind per-segment values from the table."""
        blobs: dict[int, bytes] = {}
        aux: dict[str, dict[int, tuple[Any, ...]]] = {}
        for key, value in self.table.items():
            if key == META_KEY:
                if value[0] != self.version:
                    raise InternalError(
                        f"{self.what}: unsupported segment format",
                        detail=f"Format {value[0]!r} in {self.table!r}, expected {self.version}.",
                    )
                self.next_sid = max(self.next_sid, int(value[1]))
            elif len(key) == 2 and isinstance(key[0], str):
                aux.setdefault(key[0], {})[key[1]] = value
            elif len(key) == 1 and isinstance(key[0], int) and isinstance(value[0], bytes):
                blobs[key[0]] = value[0]
            else:
                raise InternalError(
                    f"{self.what}: unsupported segment format",
                    detail=f"Unexpected key {key!r} in {self.table!r}.",
                )
        segs = {sid: read_segment(blobs[sid]) for sid in sorted(blobs)}
        if segs:
            self.next_sid = max(self.next_sid, max(segs) + 1)
        return segs, aux


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """`batch` with `schema`'s names and types (columns cast where the type differs)."""
    if batch.schema.equals(schema):
        return batch
    cols = [
        c if c.type == f.type else c.cast(f.type)
        for c, f in zip(batch.columns, schema, strict=True)
    ]
    return pa.RecordBatch.from_arrays(cols, schema=schema)


def unpack_mask(value: tuple[Any, ...]) -> np.ndarray:
    n, bits = value
    return np.unpackbits(np.frombuffer(bits, np.uint8), count=n).astype(bool)


def read_segment(data: bytes) -> pa.RecordBatch:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_next_batch()


def by_segment(locs: np.ndarray) -> Iterator[tuple[int, np.ndarray | None, np.ndarray]]:
    """Group locations by segment: (sid, positions in `locs` or None for all, rows)."""
    if not len(locs):
        return
    sids = locs >> SHIFT
    rows = locs & ROW_BITS
    lo, hi = int(sids.min()), int(sids.max())
    if lo == hi:
        yield lo, None, rows
        return
    # segment ids span little: as 16-bit offsets numpy's stable sort is a radix sort
    # (0.5 ms for 63k locations instead of 2 ms for int64's merge sort)
    keys = (sids - lo).astype(np.uint16) if hi - lo < 1 << 16 else sids
    order = np.argsort(keys, kind="stable")
    s = sids[order]
    cuts = np.flatnonzero(s[1:] != s[:-1]) + 1
    starts = [0, *cuts.tolist()]
    ends = [*cuts.tolist(), len(s)]
    for a, b in zip(starts, ends, strict=True):
        pos = order[a:b]
        yield int(s[a]), pos, rows[pos]


def gather(locs: np.ndarray, batch_of: Callable[[int], pa.RecordBatch]) -> pa.RecordBatch:
    """The rows at `locs`, in that order (`locs` must not be empty)."""
    pieces: list[pa.RecordBatch] = []
    orders: list[np.ndarray] = []
    for sid, pos, rows in by_segment(locs):
        taken = batch_of(sid).take(pa.array(rows))
        if pos is None:
            return taken
        pieces.append(taken)
        orders.append(pos)
    cat = pa.concat_batches(pieces)
    inv = np.empty(len(locs), np.int64)
    inv[np.concatenate(orders)] = np.arange(len(locs), dtype=np.int64)
    return cat.take(pa.array(inv))


_UINT_OF_WIDTH = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _fixed_width(t: pa.DataType) -> int:
    """Byte width of a column type whose values are one fixed-width buffer, else 0."""
    if pa.types.is_boolean(t) or pa.types.is_dictionary(t) or pa.types.is_nested(t):
        return 0
    try:
        bits = t.bit_width
    except ValueError:  # variable width (strings, binary)
        return 0
    return bits // 8 if bits % 8 == 0 and bits // 8 in (1, 2, 4, 8, 16) else 0


def _values(a: pa.Array, width: int) -> np.ndarray:
    """The value buffer of fixed-width `a` as one numpy element per row (a read-only view)."""
    n = len(a)
    raw = np.frombuffer(a.buffers()[1], np.uint8, (a.offset + n) * width)[a.offset * width :]
    if width == 16:
        return raw.view(np.uint64).reshape(n, 2)
    return raw.view(_UINT_OF_WIDTH[width])


def replace_rows(batch: pa.RecordBatch, rows: np.ndarray, new: pa.RecordBatch) -> pa.RecordBatch:
    """`batch` with its rows `rows` (distinct) replaced by the rows of `new`, in order.

    Fixed-width columns are copied and assigned with numpy (one copy of the column, no
    Arrow concat and take); other columns (strings, booleans, nested) are taken from the
    two columns concatenated."""
    n = batch.num_rows
    cols: list[pa.Array] = []
    idx: pa.Array | None = None
    for col, sub in zip(batch.columns, new.columns, strict=True):
        t = col.type
        width = _fixed_width(t)
        if not width or not n or not len(sub):
            if idx is None:
                at = np.arange(n, dtype=np.int64)
                at[rows] = np.arange(n, n + len(rows), dtype=np.int64)
                idx = pa.array(at)
            cols.append(pa.concat_arrays([col, sub]).take(idx))
            continue
        vals = _values(col, width).copy()
        vals[rows] = _values(sub, width)
        bitmap = None
        nulls = 0
        if col.null_count or sub.null_count:
            valid = col.is_valid().to_numpy(zero_copy_only=False).copy()
            valid[rows] = sub.is_valid().to_numpy(zero_copy_only=False)
            nulls = n - int(np.count_nonzero(valid))
            bitmap = pa.py_buffer(np.packbits(valid, bitorder="little")) if nulls else None
        cols.append(pa.Array.from_buffers(t, n, [bitmap, pa.py_buffer(vals)], null_count=nulls))
    return pa.RecordBatch.from_arrays(cols, schema=batch.schema)


# -- keys -------------------------------------------------------------------------------
def key_fn(t: pa.DataType) -> Callable[[pa.Array], list[Any]]:
    """How one column becomes hashable, equality-preserving Python values."""
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return lambda a: [_freeze(v) for v in a.to_pylist()]
    if pa.types.is_decimal(t) or pa.types.is_interval(t):
        return lambda a: a.view(pa.binary(t.byte_width)).to_pylist()
    if pa.types.is_temporal(t):
        width = pa.int32() if t.bit_width == 32 else pa.int64()
        return lambda a: numeric_keys(a.view(width))
    if pa.types.is_floating(t):
        return _float_keys
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return numeric_keys
    return lambda a: a.to_pylist()


def row_keys(
    batch: pa.RecordBatch, cols: list[int], fns: list[Callable[..., list[Any]]]
) -> list[Any]:
    """Per row the key of columns `cols`: a bare value for one column, else tuples."""
    vals = [fn(batch.column(i)) for fn, i in zip(fns, cols, strict=True)]
    if len(vals) == 1:
        return vals[0]
    if not vals:
        return [()] * batch.num_rows
    return list(zip(*vals))


def numeric_keys(a: pa.Array) -> list[Any]:
    if a.null_count:
        return a.to_pylist()  # type: ignore[no-any-return]
    return a.to_numpy(zero_copy_only=False).tolist()  # type: ignore[no-any-return]


def _float_keys(a: pa.Array) -> list[Any]:
    values = numeric_keys(a)
    if len(a) and pc.any(pc.is_nan(a)).as_py():
        return [NAN if v != v else v for v in values]
    return values


def _freeze(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, float) and v != v:
        return NAN
    return v


def rows_equal(a: pa.RecordBatch, b: pa.RecordBatch, nan_equal: bool = False) -> np.ndarray:
    """Per row: are all columns equal (NULL equals NULL; NaN equals NaN iff `nan_equal`)?"""
    n = a.num_rows
    eq = np.ones(n, bool)
    for ca, cb in zip(a.columns, b.columns, strict=True):
        t = ca.type
        if pa.types.is_null(t):
            continue
        if pa.types.is_interval(t):
            ca, cb = ca.view(pa.binary(16)), cb.view(pa.binary(16))
        elif pa.types.is_nested(t):
            same = map(operator.eq, ca.to_pylist(), cb.to_pylist())
            eq &= np.fromiter(same, bool, n)
            continue
        e = pc.equal(ca, cb)
        if nan_equal and pa.types.is_floating(t):
            e = pc.or_(e, pc.and_(pc.is_nan(ca), pc.is_nan(cb)))
        if ca.null_count or cb.null_count:
            na, nb = pc.is_null(ca), pc.is_null(cb)
            e = pc.if_else(pc.or_(na, nb), pc.and_(na, nb), e)
        eq &= e.to_numpy(zero_copy_only=False)
    return eq
