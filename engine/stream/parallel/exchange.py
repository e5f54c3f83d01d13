"""The exchange: each row's vnode from its distribution key, and chunks split by actor.

The vnode is the one the state layout uses (`engine.state.disk_table.vnode_of`):
`crc32(memcmp.encode_key(key)) mod 256` of the row's key columns as Python values. Here
it is computed column-wise: each key column's memcomparable bytes are built as an Arrow
binary array with numpy/Arrow kernels (integers, floats, booleans, strings, bytes,
dates, timestamps, times, NULLs), the columns are joined per row, and a table-driven
CRC-32 runs over all rows at once, one numpy step per byte position. A column of another
type (decimals, intervals, lists, integers beyond 2^53) takes `memcmp.encode_keys` and
`zlib.crc32` per row: correct, slower, and rare for keys. A single integer column whose
values come from a range at most half as wide as the chunk is long looks its vnodes up
in a table of that range (`_dense_vnodes`), kept for the next chunk.

Vnodes map to actors by contiguous ranges (`actor_of`): actor i of p owns vnodes
[ceil(256 i / p), ceil(256 (i+1) / p)), so a rescale moves whole ranges.
"""

from __future__ import annotations

import zlib
from datetime import datetime

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.chunk import StreamChunk
from engine.state import memcmp

VNODES = 256
_SAFE_INT = 1 << 53
_LB = pa.large_binary()
_NULL = pa.scalar(b"\x01", _LB)
_ESC = pa.scalar(b"\x00\x01", _LB)
_EMPTY = pa.scalar(b"", _LB)
_EPOCH_US = (datetime(1970, 1, 1) - datetime(1, 1, 1)).days * 86_400_000_000
_DATE_ORDINAL = 719_163  # date(1970, 1, 1).toordinal()


def _crc_table() -> np.ndarray:
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> 1) ^ np.uint32(0xEDB88320), t >> 1).astype(np.uint32)
    return t


_TABLE = _crc_table()


def crc32_binary(arr: pa.Array) -> np.ndarray:
    """zlib.crc32 of every value of a binary array (no NULLs), vectorized over rows."""
    arr = arr.cast(_LB) if arr.type != _LB else arr
    n = len(arr)
    crc = np.full(n, 0xFFFFFFFF, dtype=np.uint32)
    if n == 0:
        return crc
    bufs = arr.buffers()
    off = np.frombuffer(bufs[1], dtype=np.int64)[arr.offset : arr.offset + n + 1]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.empty(0, np.uint8)
    lens = np.diff(off)
    table = _TABLE
    if n and (lens == lens[0]).all():  # fixed width: a matrix, one column per byte
        w = int(lens[0])
        m = data[off[0] : off[0] + n * w].reshape(n, w)
        for j in range(w):
            crc = table[(crc ^ m[:, j]) & 0xFF] ^ (crc >> 8)
        return crc ^ np.uint32(0xFFFFFFFF)
    order = np.argsort(-lens, kind="stable")
    slen = lens[order]
    starts = off[:-1][order]
    neg = -slen
    c = crc.copy()
    for j in range(int(slen[0])):
        k = int(np.searchsorted(neg, -j, side="left"))  # rows longer than j
        b = data[starts[:k] + j]
        c[:k] = table[(c[:k] ^ b) & 0xFF] ^ (c[:k] >> 8)
    out = np.empty(n, dtype=np.uint32)
    out[order] = c ^ np.uint32(0xFFFFFFFF)
    return out


def _fixed(rows: np.ndarray) -> pa.Array:
    """An (n, w) uint8 matrix as a binary array of n w-byte values."""
    n, w = rows.shape
    buf = pa.py_buffer(np.ascontiguousarray(rows).tobytes())
    offsets = pa.py_buffer((np.arange(n + 1, dtype=np.int64) * w).tobytes())
    return pa.LargeBinaryArray.from_buffers(_LB, n, [None, offsets, buf])


def _f64_bytes(x: np.ndarray) -> np.ndarray:
    """memcmp._f64 of float64 values: (n, 8) bytes, sign-flipped IEEE big-endian."""
    u = (x.astype(np.float64) + 0.0).view(np.uint64)  # + 0.0: -0.0 encodes as 0.0
    neg = (u & np.uint64(1 << 63)) != 0
    u = np.where(neg, ~u, u | np.uint64(1 << 63)).astype(">u8")
    return u.view(np.uint8).reshape(-1, 8)


def _tagged(tag: int, body: np.ndarray, tail: bytes = b"") -> pa.Array:
    n = body.shape[0]
    rows = np.empty((n, 1 + body.shape[1] + len(tail)), dtype=np.uint8)
    rows[:, 0] = tag
    rows[:, 1 : 1 + body.shape[1]] = body
    for i, b in enumerate(tail):
        rows[:, 1 + body.shape[1] + i] = b
    return _fixed(rows)


def _be(values: np.ndarray, dtype: str, width: int) -> np.ndarray:
    return values.astype(dtype).view(np.uint8).reshape(-1, width)


def encode_column(col: pa.Array) -> pa.Array | None:
    """The memcomparable bytes of each value of `col` (`memcmp.encode_element` of its
    Python value) as a large binary array, or None for a type encoded per row."""
    t = col.type
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if pa.types.is_dictionary(t):
        col = col.dictionary_decode()
        t = col.type
    n = len(col)
    valid = col.is_valid()
    if pa.types.is_null(t):
        return pa.array([b"\x01"] * n, _LB)
    if pa.types.is_integer(t):
        v = col.fill_null(0).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
        if pa.types.is_uint64(t) and n:
            raw = col.fill_null(0).to_numpy(zero_copy_only=False)
            if raw.max() > _SAFE_INT:
                return None
        if n and (v.min() < -_SAFE_INT or v.max() > _SAFE_INT):
            return None
        out = _tagged(3, _f64_bytes(v.astype(np.float64)), bytes([2, 1]))
    elif pa.types.is_floating(t):
        v = col.cast(pa.float64()).fill_null(0.0).to_numpy(zero_copy_only=False)
        out = _tagged(3, _f64_bytes(v), bytes([2, 2]))
        nan = np.isnan(v)
        if nan.any():
            out = pc.if_else(pa.array(nan), pa.scalar(b"\x04\x02", _LB), out)
    elif pa.types.is_boolean(t):
        v = col.fill_null(False).to_numpy(zero_copy_only=False).astype(np.uint8)
        out = _tagged(2, v.reshape(-1, 1))
    elif pa.types.is_string(t) or pa.types.is_large_string(t):
        b = col.cast(pa.large_string()).cast(_LB)
        esc = pc.replace_substring(b, b"\x00", b"\x00\xff")
        out = pc.binary_join_element_wise(pa.scalar(b"\x05", _LB), esc, _ESC, _EMPTY)
    elif pa.types.is_binary(t) or pa.types.is_large_binary(t):
        esc = pc.replace_substring(col.cast(_LB), b"\x00", b"\x00\xff")
        out = pc.binary_join_element_wise(pa.scalar(b"\x06", _LB), esc, _ESC, _EMPTY)
    elif pa.types.is_date32(t):
        days = col.cast(pa.int32()).fill_null(0).to_numpy(zero_copy_only=False)
        out = _tagged(7, _be(days.astype(np.int64) + _DATE_ORDINAL, ">u4", 4))
    elif pa.types.is_timestamp(t) and t.unit in ("s", "ms", "us"):
        us = col.cast(pa.timestamp("us", t.tz)).cast(pa.int64()).fill_null(0)
        v = us.to_numpy(zero_copy_only=False) + _EPOCH_US
        out = _tagged(9 if t.tz else 8, _be(v, ">u8", 8))
    elif pa.types.is_time(t) and t.unit in ("s", "ms", "us"):
        us = col.cast(pa.time64("us")).cast(pa.int64()).fill_null(0)
        out = _tagged(10, _be(us.to_numpy(zero_copy_only=False), ">u8", 8))
    else:
        return None
    if col.null_count:
        out = pc.if_else(valid, out, _NULL)
    return out


_TABLES16: dict[tuple[int, int], np.ndarray] = {}
_ZERO_CRC: dict[int, int] = {}


def _table16(w: int, pos: int) -> np.ndarray:
    """For w-byte messages: T[v] = crc(v's two bytes at pos, pos+1; zeros elsewhere) xor
    crc(w zeros). CRC-32 is affine in the message bits, so a message's crc is crc(zeros)
    xor the tables of its byte pairs."""
    t = _TABLES16.get((w, pos))
    if t is None:
        zero = zlib.crc32(bytes(w))
        t8 = []
        for j in (pos, pos + 1):
            row = np.empty(256, dtype=np.uint32)
            for b in range(256):
                msg = bytearray(w)
                msg[j] = b
                row[b] = zlib.crc32(msg) ^ zero
            t8.append(row)
        v = np.arange(1 << 16, dtype=np.uint32)
        t = t8[0][v >> 8] ^ t8[1][v & 0xFF]
        _TABLES16[(w, pos)] = t
        _ZERO_CRC[w] = zero
    return t


_LOW16: dict[tuple[int, int], np.ndarray] = {}
_BLOCK = 1 << 16
"""Rows per block of the integer path: its temporaries stay in the CPU's caches (one pass
over a 2M-row column at a time cost about three times as much per row in the server)."""


def _low16(w: int, pos: int) -> np.ndarray:
    """The low byte of `_table16(w, pos)`: a vnode is the crc's low 8 bits, and CRC-32 is
    affine, so those bits are the xor of the byte pairs' low bytes (64 KiB tables)."""
    t = _LOW16.get((w, pos))
    if t is None:
        t = (_table16(w, pos) & np.uint32(0xFF)).astype(np.uint8)
        _LOW16[(w, pos)] = t
    return t


def _int_vnodes(columns: list[pa.Array]) -> np.ndarray | None:
    """vnodes (uint8) of integer key columns without NULLs within +-2^53 straight from the
    values (each element is 0x03, 8 bytes of its sign-flipped float64, 0x02 0x01: 11
    bytes), or None when the columns do not qualify. Block by block (`_BLOCK` rows)."""
    vals: list[np.ndarray] = []
    for col in columns:
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        if not pa.types.is_integer(col.type) or col.null_count:
            return None
        v = col.to_numpy(zero_copy_only=False)
        if len(v) and (v.min() < -_SAFE_INT or v.max() > _SAFE_INT):
            return None
        vals.append(v)
    w = 11 * len(vals)
    const = bytearray(w)
    for c in range(len(vals)):
        const[11 * c] = 3
        const[11 * c + 9 : 11 * c + 11] = b"\x02\x01"
    n = len(vals[0])
    out = np.empty(n, dtype=np.uint8)
    zero = np.uint8(zlib.crc32(bytes(const)) & 0xFF)
    # per column: the 16-bit words of its sign-flipped float64, most significant first
    tables = [[_low16(w, 11 * c + 1 + 2 * k) for k in range(4)] for c in range(len(vals))]
    top = np.uint64(1 << 63)
    f = np.empty(min(n, _BLOCK), dtype=np.float64)
    x = np.empty(min(n, _BLOCK), dtype=np.uint64)
    acc = np.empty(min(n, _BLOCK), dtype=np.uint8)
    part = np.empty(min(n, _BLOCK), dtype=np.uint8)
    for start in range(0, n, _BLOCK):
        m = min(_BLOCK, n - start)
        a = acc[:m]
        a.fill(zero)
        for c, v in enumerate(vals):
            fb = f[:m]
            np.add(v[start : start + m], 0.0, out=fb, casting="unsafe")  # -0.0 -> 0.0
            u = fb.view(np.uint64)
            # sign-flip: negative -> ~u, else u | 2^63 (both are u xor a mask)
            xb = x[:m]
            np.right_shift(u, np.uint64(63), out=xb)
            np.negative(xb, out=xb)
            np.bitwise_or(xb, top, out=xb)
            np.bitwise_xor(u, xb, out=u)
            words = u.view(np.uint16).reshape(m, 4)  # little-endian: word 3 is the top
            for k in range(4):
                np.take(tables[c][k], words[:, 3 - k], out=part[:m])
                np.bitwise_xor(a, part[:m], out=a)
        out[start : start + m] = a
    return out


DENSE_SPAN = 1 << 22
"""The widest range of integers whose vnodes `_dense_vnodes` keeps as a table (4 MB)."""

_dense: tuple[int, np.ndarray] | None = None  # (first value, vnodes of first...first+n-1)


def _dense_vnodes(columns: list[pa.Array]) -> np.ndarray | None:
    """vnodes of a single integer key column without NULLs whose values lie in a range at
    most half as wide as the column is long (ids, keys drawn from a dense domain: every
    value occurs twice on average), or None. Those are looked up in a table of the
    range's vnodes, made by `_int_vnodes` of the range itself and kept for the next
    chunk (one, module-wide: a stream's chunks mostly repeat the same range): one gather
    per row instead of about 40 ns of hashing. Same vnodes as `_int_vnodes` by making."""
    global _dense
    if len(columns) != 1:
        return None
    col = columns[0]
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    if not pa.types.is_integer(col.type) or col.null_count or len(col) < 1024:
        return None
    v = col.to_numpy(zero_copy_only=False)
    lo, hi = int(v.min()), int(v.max())
    if lo < -_SAFE_INT or hi > _SAFE_INT:
        return None
    cached = _dense
    if cached is None or lo < cached[0] or hi >= cached[0] + len(cached[1]):
        if hi - lo >= min(len(v) // 2, DENSE_SPAN):
            return None  # sparse: hashing the rows costs less than the range
        table = _int_vnodes([pa.array(np.arange(lo, hi + 1, dtype=np.int64))])
        assert table is not None  # integers within +-2^53
        cached = _dense = (lo, table)
    base, table = cached
    out: np.ndarray = table[v - base if base else v]
    return out


def vnodes(columns: list[pa.Array]) -> np.ndarray:
    """The vnode (0..255, int64) of every row of the key `columns`."""
    n = len(columns[0]) if columns else 0
    if not columns:
        return np.zeros(n, dtype=np.int64)
    fast = _dense_vnodes(columns)
    if fast is None:
        fast = _int_vnodes(columns)
    if fast is not None:
        return fast.astype(np.int64)
    enc = [encode_column(c) for c in columns]
    if any(e is None for e in enc):
        # a key type without a column encoder: the state layout's own function per row
        rows = list(zip(*(c.to_pylist() for c in columns), strict=True))
        return np.array(
            [zlib.crc32(b) & (VNODES - 1) for b in memcmp.encode_keys(rows)], dtype=np.int64
        ).reshape(-1)
    joined = enc[0] if len(enc) == 1 else pc.binary_join_element_wise(*enc, _EMPTY)
    return (crc32_binary(joined) & np.uint32(VNODES - 1)).astype(np.int64)


def actor_of(p: int) -> np.ndarray:
    """vnode -> actor index for `p` actors: contiguous, balanced vnode ranges."""
    return (np.arange(VNODES, dtype=np.int64) * p) // VNODES


def vnode_ranges(p: int) -> list[tuple[int, int]]:
    """Each actor's vnodes as [first, last] (what the system tables show)."""
    owner = actor_of(p)
    out: list[tuple[int, int]] = []
    for i in range(p):
        idx = np.nonzero(owner == i)[0]
        out.append((int(idx[0]), int(idx[-1])) if len(idx) else (0, -1))
    return out


def split(chunk: StreamChunk | None, keys: list[int], p: int) -> list[StreamChunk | None]:
    """`chunk`'s rows by actor of their key columns' vnode (rows keep their order within
    each part; an actor without rows gets None)."""
    if chunk is None or len(chunk) == 0:
        return [None] * p
    if p == 1:
        return [chunk]
    # uint8 owners: numpy's stable sort of bytes is a radix sort
    owner = actor_of(p).astype(np.uint8)[vnodes([chunk.data.column(i) for i in keys])]
    order = np.argsort(owner, kind="stable")
    counts = np.bincount(owner, minlength=p)
    if len(order) < 1 << 32:  # Arrow takes by 32-bit indices a third faster
        order = order.astype(np.uint32)
    idx = pa.array(order)
    taken = chunk.data.take(idx)
    ops = chunk.ops.take(idx)
    out: list[StreamChunk | None] = []
    start = 0
    for i in range(p):
        c = int(counts[i])
        out.append(StreamChunk(ops.slice(start, c), taken.slice(start, c)) if c else None)
        start += c
    return out
