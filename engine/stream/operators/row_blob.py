"""RowBlobs: a group of rows as one compact bytes value, cheap to turn back into Arrow.

Why: operators whose state lives in RocksDB (`engine.state.disk_table`) and is read by a
group key (a hash join's rows under one join key) want ONE store value per group: a probe
of a chunk's distinct keys is then one multi-get, and Python touches each group, never
each row. Arrow IPC costs hundreds of bytes of metadata per message, too much for the
common group of one or two rows; per-row tuples cost a Python object per value.

Encoding of one group: `marshal.dumps((n, columns, extra), 2)` where `columns` holds one
Python list per column in the column's *storage* form (temporal values as their integer
storage, decimals and intervals as their 16 bytes, plain values as themselves; any other
type, e.g. arrays, as one `codec.encode_value` blob of the group's values) and `extra` is
a tuple of owner-defined int lists (counts, degrees; None where every entry is the
default). Decoding many groups extends one list per column (C-level `list.extend`) and
builds each Arrow column with one `pa.array` call and a zero-copy `view`.

Groups appended to one another (`join`) form a *framed* blob: a 0x00 byte, then per
group its 4-byte little-endian length and its marshal record (a marshal record starts
with a type code, never 0x00). Appending rows to a stored group therefore copies bytes
and never decodes it; decoding reads the frames in order. A single group stays a bare
record.

A row of a schema whose columns are all integers or floats (temporal values by their
integer storage), encoded with no extras (count 1, default degree), is instead one
fixed-width row of `engine.state.fixed_rows` (first byte 0x02, every column a nullable
int64 or float64 slot), a group of a few such rows a framed blob of them: an event
stream's chunk of (mostly fresh) join keys is then encoded with numpy a column at a time
instead of a marshal call and a list per value, and blobs made only of such rows decode a
batch at a time. Frames may mix both kinds of record.

Lifecycle: stateless apart from the schema; one `RowBlobs` per operator side.
"""

from __future__ import annotations

import marshal
import struct
from collections.abc import Sequence
from itertools import repeat
from typing import Any

import numpy as np
import pyarrow as pa

from engine.state import codec
from engine.state.fixed_rows import TAG as _FIXED_TAG
from engine.state.fixed_rows import FixedLayout

_VERSION = 2
_B16 = pa.binary(16)
_FRAMED = b"\x00"  # first byte of a framed blob (a marshal record never starts so)
_LEN = struct.Struct("<I")
_SINGLES_MIN = 16
"""From this many groups, one-row groups are encoded apart (`_encode_singles`)."""
_FIXED_GROUP_MAX = 8
"""Groups of fixed-width rows (module docstring) are framed rows up to this many rows
(larger groups are one marshal record, read without a frame per row)."""


def _fixed_code(t: pa.DataType, plan: tuple[pa.DataType | None, bool]) -> str | None:
    """The `fixed_rows` slot code of a column a one-row group may store fixed-width
    (nullable int64 or float64), or None."""
    view, _ = plan
    st = t if view is None else view
    if pa.types.is_integer(st) and not pa.types.is_uint64(st):
        return "Q"
    if pa.types.is_floating(st) and not pa.types.is_float16(st):
        return "D"
    return None


def _plan(t: pa.DataType) -> tuple[pa.DataType | None, bool]:
    """(storage type to view through or None, stored as one codec blob)."""
    if (
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
    ):
        return None, False
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        return pa.int32(), False
    if pa.types.is_temporal(t) and not pa.types.is_interval(t):
        return pa.int64(), False
    if pa.types.is_decimal128(t) or pa.types.is_interval(t):
        return _B16, False
    return None, True


class RowBlobs:
    """Encode/decode groups of rows of one schema; see the module docstring."""

    def __init__(self, schema: pa.Schema, n_extra: int) -> None:
        self.schema = schema
        self.n_extra = n_extra
        self._plans = [_plan(f.type) for f in schema]
        codes = [_fixed_code(f.type, p) for f, p in zip(schema, self._plans, strict=True)]
        self._fixed: FixedLayout | None = None
        self._fixed_row: struct.Struct | None = None
        if codes and all(c is not None for c in codes):
            self._fixed = FixedLayout("".join(codes))  # type: ignore[arg-type]
            slots = "".join("Bq" if c == "Q" else "Bd" for c in codes)
            self._fixed_row = struct.Struct(f"<{len(self._fixed.header)}x{slots}")

    # -- encoding ------------------------------------------------------------------------
    def _columns(self, batch: pa.RecordBatch) -> list[list[Any]]:
        out: list[list[Any]] = []
        for col, (view, _) in zip(batch.columns, self._plans, strict=True):
            out.append((col if view is None else col.view(view)).to_pylist())
        return out

    def encode(
        self,
        batch: pa.RecordBatch,
        starts: Sequence[int],
        extras: Sequence[np.ndarray | None],
    ) -> list[bytes]:
        """One blob per group; group `i` is rows `starts[i]:starts[i+1]` of `batch` (the
        last runs to the end). `extras[j]` is an int array over the rows or None (omitted:
        every row takes the reader's default)."""
        n = batch.num_rows
        blobs_at = [i for i, (_, b) in enumerate(self._plans) if b]
        if self._fixed is not None and n and not any(e is not None for e in extras):
            bounds = [*starts, n]
            sizes = np.diff(np.array(bounds, np.int64))  # a group may be empty
            if (sizes == 1).all():
                return self._encode_fixed(batch)
            if int(sizes.max()) <= _FIXED_GROUP_MAX:
                rows = self._encode_fixed(batch)
                join = self.join
                return [join(rows[x:y]) for x, y in zip(bounds[:-1], bounds[1:], strict=True)]
        if len(starts) >= _SINGLES_MIN and not blobs_at:
            sizes = np.diff(np.array([*starts, n], np.int64))
            one = sizes == 1
            if one.all():
                return self._encode_singles(batch, extras)
            if one.sum() * 2 >= len(sizes):  # mostly one-row groups: those apart
                return self._encode_mixed(batch, starts, sizes, one, extras)
        cols = self._columns(batch)
        ext = [None if e is None else e.tolist() for e in extras]
        bounds = [*starts, batch.num_rows]
        dumps = marshal.dumps
        enc = codec.encode_value
        out: list[bytes] = []
        for a, b in zip(bounds[:-1], bounds[1:], strict=True):
            group = [c[a:b] for c in cols]
            for i in blobs_at:
                group[i] = enc(tuple(group[i]))  # type: ignore[call-overload]
            extra = tuple(None if e is None else e[a:b] for e in ext)
            out.append(dumps((b - a, group, extra), _VERSION))
        return out

    def _encode_singles(
        self, batch: pa.RecordBatch, extras: Sequence[np.ndarray | None]
    ) -> list[bytes]:
        """`encode` of one-row groups (no codec-blob column), every row its own group,
        with C-level iteration only. A schema of integer and float columns only, with no
        extras, gets fixed-width rows (`engine.state.fixed_rows`, first byte 0x02) built
        with numpy; the others the same marshal records as the general path."""
        if self._fixed is not None and not any(e is not None for e in extras):
            return self._encode_fixed(batch)
        wrap = [list(map(list, zip(c, strict=True))) for c in self._columns(batch)]
        groups = map(list, zip(*wrap, strict=True))
        if extras:
            ext = [
                repeat(None) if e is None else map(list, zip(e.tolist(), strict=True))
                for e in extras
            ]
            tails: Any = zip(*ext)
        else:
            tails = repeat(())
        recs = zip(repeat(1), groups, tails)
        return list(map(marshal.dumps, recs, repeat(_VERSION, batch.num_rows)))

    def _encode_fixed(self, batch: pa.RecordBatch) -> list[bytes]:
        """One fixed-width row per row of `batch` (every column integer or float)."""
        assert self._fixed is not None
        cols: list[np.ndarray] = []
        valids: list[np.ndarray | None] = []
        for col, (view, _), code in zip(batch.columns, self._plans, self._fixed.codes, strict=True):
            arr = col if view is None else col.view(view)
            valid = (
                np.ones(len(arr), bool)
                if arr.null_count == 0
                else arr.is_valid().to_numpy(zero_copy_only=False)
            )
            filled = arr.fill_null(0) if arr.null_count else arr
            dt = np.int64 if code == "Q" else np.float64
            cols.append(filled.to_numpy(zero_copy_only=False).astype(dt, copy=False))
            valids.append(valid)
        return self._fixed.encode(cols, valids)

    def _encode_mixed(
        self,
        batch: pa.RecordBatch,
        starts: Sequence[int],
        sizes: np.ndarray,
        one: np.ndarray,
        extras: Sequence[np.ndarray | None],
    ) -> list[bytes]:
        """`encode` of groups most of which have one row: those through
        `_encode_singles`, the others through the general path, in group order."""
        st = np.asarray(starts, np.int64)
        rows1 = st[one]
        multi = np.flatnonzero(~one)
        sm = sizes[multi]
        first = np.cumsum(sm) - sm  # each multi-row group's first row among them
        rows_m = np.repeat(st[multi] - first, sm) + np.arange(int(sm.sum()), dtype=np.int64)
        starts_m = first.tolist()
        ex1 = [None if e is None else e[rows1] for e in extras]
        exm = [None if e is None else e[rows_m] for e in extras]
        b1 = self._encode_singles(batch.take(pa.array(rows1)), ex1)
        bm = self.encode(batch.take(pa.array(rows_m)), starts_m, exm)
        out: list[bytes] = [b""] * len(sizes)
        for g, b in zip(np.flatnonzero(one).tolist(), b1, strict=True):
            out[g] = b
        for g, b in zip(multi.tolist(), bm, strict=True):
            out[g] = b
        return out

    @staticmethod
    def join(blobs: Sequence[bytes]) -> bytes:
        """One blob holding the rows of `blobs` in order, by copying bytes only: the
        result is framed (module docstring), so appending a group to a stored one costs
        its own bytes and a copy, never a decode."""
        if len(blobs) == 1:
            return blobs[0]
        out = [_FRAMED]
        for b in blobs:
            if b[:1] == _FRAMED:
                out.append(b[1:])
            else:
                out.append(_LEN.pack(len(b)))
                out.append(b)
        return b"".join(out)

    # -- decoding ------------------------------------------------------------------------
    def decode(
        self, blobs: Sequence[bytes], defaults: Sequence[int]
    ) -> tuple[pa.RecordBatch, np.ndarray, list[np.ndarray]]:
        """The rows of `blobs` concatenated, each group's row count, and each extra as
        one int64 array (`defaults[j]` where a group omitted it)."""
        if self._fixed is not None:
            got = self._decode_fixed(blobs, defaults)
            if got is not None:
                return got
        ncol = len(self._plans)
        acc: list[list[Any]] = [[] for _ in range(ncol)]
        fixed_row = self._fixed_row
        blob_cols = [i for i, (_, b) in enumerate(self._plans) if b]
        ext: list[list[int]] = [[] for _ in range(self.n_extra)]
        sizes = np.empty(len(blobs), np.int64)
        loads = marshal.loads
        dec = codec.decode_value
        for g, raw in enumerate(blobs):
            total = 0
            for rec in _records(raw):
                if rec[0] == _FIXED_TAG:  # one fixed-width row (`_encode_fixed`)
                    assert fixed_row is not None
                    f = fixed_row.unpack(rec)
                    for a, ok, v in zip(acc, f[0::2], f[1::2], strict=True):
                        a.append(v if ok else None)
                    for j in range(self.n_extra):
                        ext[j].append(defaults[j])
                    total += 1
                    continue
                n, group, extra = loads(rec)
                total += n
                for i in blob_cols:
                    group[i] = list(dec(group[i]))
                for a, c in zip(acc, group, strict=True):
                    a.extend(c)
                for j, e in enumerate(extra):
                    ext[j].extend(e if e is not None else [defaults[j]] * n)
            sizes[g] = total
        arrays = [
            self._array(vals, f.type, plan)
            for vals, f, plan in zip(acc, self.schema, self._plans, strict=True)
        ]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        return batch, sizes, [np.array(e, np.int64) for e in ext]

    def _decode_fixed(
        self, blobs: Sequence[bytes], defaults: Sequence[int]
    ) -> tuple[pa.RecordBatch, np.ndarray, list[np.ndarray]] | None:
        """`decode` when every record of `blobs` is a fixed-width row, with numpy a
        batch at a time; None when some record is not."""
        assert self._fixed is not None
        recs: list[bytes | memoryview] = []
        sizes = np.empty(len(blobs), np.int64)
        tag = _FIXED_TAG
        for g, raw in enumerate(blobs):
            if raw[:1] == _FRAMED:
                rs = _records(raw)
                if any(r[0] != tag for r in rs):
                    return None
                recs.extend(rs)
                sizes[g] = len(rs)
            elif raw[0] == tag:
                recs.append(raw)
                sizes[g] = 1
            else:
                return None
        cols, valids = self._fixed.decode([bytes(r) for r in recs])
        arrays = []
        for f, (view, _), col, valid in zip(self.schema, self._plans, cols, valids, strict=True):
            mask = None if valid is None or valid.all() else ~valid
            st = f.type if view is None else view
            arr = pa.array(col, mask=mask).cast(st)
            arrays.append(arr if view is None else arr.view(f.type))
        batch = pa.RecordBatch.from_arrays(arrays, schema=self.schema)
        n = len(recs)
        return batch, sizes, [np.full(n, d, np.int64) for d in defaults[: self.n_extra]]

    @staticmethod
    def _array(vals: list[Any], t: pa.DataType, plan: tuple[pa.DataType | None, bool]) -> pa.Array:
        view, _ = plan
        if view is None:
            return pa.array(vals, type=t)
        return pa.array(vals, type=view).view(t)


def _records(raw: bytes) -> Sequence[bytes | memoryview]:
    """The marshal records of a blob: itself, or the frames of a framed one."""
    if raw[:1] != _FRAMED:
        return (raw,)
    view = memoryview(raw)
    out: list[bytes | memoryview] = []
    at, end = 1, len(raw)
    unpack = _LEN.unpack_from
    while at < end:
        (n,) = unpack(raw, at)
        at += 4
        out.append(view[at : at + n])
        at += n
    return out


def group_starts(sorted_ids: np.ndarray) -> np.ndarray:
    """Start offsets of the runs of equal values in a sorted int array."""
    if not len(sorted_ids):
        return np.empty(0, np.int64)
    return np.flatnonzero(np.r_[True, sorted_ids[1:] != sorted_ids[:-1]])
