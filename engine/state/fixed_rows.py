"""Fixed-width binary value rows: state rows encoded and decoded a column batch at a time.

Why: an aggregation keeps one state row per group (row count and each aggregate's slots).
Encoding those rows with `codec.encode_value` (marshal) and decoding them back costs
Python work per group; a row whose slots all have a fixed width can instead be written
and read for a whole batch of groups with numpy (one buffer, one view per slot), which
is what the columnar aggregation path (`engine.stream.operators.agg_columns`) does.

Format of one row (self-describing, so `codec.decode_value` reads it without knowing the
table's layout):

    0x02 | n (1 byte) | n slot codes (ASCII) | the slots, in order

The first byte tells these rows apart from `codec`'s marshal forms (0x28 plain, 0x01
extended). Slot codes and their bytes (little-endian):

* `q` int64 (8 bytes), `d` float64 (8 bytes), `o` int128 (16 bytes, two's complement:
  exact integer sums; as a column, `uint64` pairs laid out like Arrow's decimal128);
* `Q` / `D`: nullable int64 / float64, a validity byte (0 NULL, 1 valid) then 8 bytes.

Columns (what `FixedLayout.encode` takes and `decode` returns): one numpy array per slot
(`int64`, `float64`, or `uint64` of shape (n, 2) for `o`) plus, for nullable slots, a
bool validity array (None for the others).
"""

from __future__ import annotations

from typing import Any

import numpy as np

TAG = 0x02
_WIDTH = {"q": 8, "d": 8, "o": 16, "Q": 9, "D": 9}
_DTYPE = {"q": "<i8", "d": "<f8", "o": "<u8", "Q": "<i8", "D": "<f8"}
NULLABLE = frozenset("QD")


class FixedLayout:
    """The row layout of one table: its slot codes, header and width (module docstring)."""

    __slots__ = ("codes", "header", "offsets", "width")

    def __init__(self, codes: str) -> None:
        if not codes or len(codes) > 255 or any(c not in _WIDTH for c in codes):
            raise ValueError(f"bad fixed row layout {codes!r}")
        self.codes = codes
        self.header = bytes([TAG, len(codes)]) + codes.encode("ascii")
        offs = []
        pos = len(self.header)
        for c in codes:
            offs.append(pos)
            pos += _WIDTH[c]
        self.offsets = offs
        self.width = pos

    def empty(self, n: int) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
        """Zeroed columns of `n` rows (nullable slots all NULL)."""
        cols = [np.zeros((n, 2) if c == "o" else n, _DTYPE[c]) for c in self.codes]
        valids = [np.zeros(n, bool) if c in NULLABLE else None for c in self.codes]
        return cols, valids

    def encode(self, cols: list[np.ndarray], valids: list[np.ndarray | None]) -> list[bytes]:
        """One bytes row per index of the columns."""
        rows: list[bytes] = self._rows(cols, valids).view(f"V{self.width}").ravel().tolist()
        return rows

    def encode_joined(self, cols: list[np.ndarray], valids: list[np.ndarray | None]) -> bytes:
        """`b"".join(self.encode(cols, valids))` without a bytes object per row."""
        return self._rows(cols, valids).tobytes()

    def _rows(self, cols: list[np.ndarray], valids: list[np.ndarray | None]) -> np.ndarray:
        """The encoded rows as one (rows, width) byte matrix."""
        n = len(cols[0]) if cols else 0
        buf = np.empty((n, self.width), np.uint8)
        h = len(self.header)
        buf[:, :h] = np.frombuffer(self.header, np.uint8)
        for c, off, col, val in zip(self.codes, self.offsets, cols, valids, strict=True):
            if c in NULLABLE:
                assert val is not None
                buf[:, off] = val
                off += 1
                data = np.where(val, col, 0).astype(_DTYPE[c])
            else:
                data = np.ascontiguousarray(col, dtype=_DTYPE[c])
            w = 16 if c == "o" else 8
            buf[:, off : off + w] = data.view(np.uint8).reshape(n, w)
        return buf

    def matches(self, raw: bytes) -> bool:
        return len(raw) == self.width and raw.startswith(self.header)

    def decode(self, raws: list[bytes]) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
        """Columns of `raws`, every one of which must be a row of this layout."""
        n = len(raws)
        buf = np.frombuffer(b"".join(raws), np.uint8).reshape(n, self.width)
        cols: list[np.ndarray] = []
        valids: list[np.ndarray | None] = []
        for c, off in zip(self.codes, self.offsets, strict=True):
            if c in NULLABLE:
                valids.append(buf[:, off] != 0)
                off += 1
            else:
                valids.append(None)
            w = 16 if c == "o" else 8
            col = np.ascontiguousarray(buf[:, off : off + w]).view(_DTYPE[c])
            cols.append(col.reshape(n, 2) if c == "o" else col.reshape(n))
        return cols, valids

    def to_rows(
        self, cols: list[np.ndarray], valids: list[np.ndarray | None]
    ) -> list[tuple[Any, ...]]:
        """The Python tuples of the columns (ints, floats, None): `codec`'s value form."""
        pys = [
            _py_column(c, col, val) for c, col, val in zip(self.codes, cols, valids, strict=True)
        ]
        return list(zip(*pys, strict=True)) if pys else []

    def from_rows(
        self, rows: list[tuple[Any, ...]]
    ) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
        """Columns of Python tuples (the inverse of `to_rows`)."""
        cols, valids = self.empty(len(rows))
        for j, c in enumerate(self.codes):
            vals = [r[j] for r in rows]
            val = valids[j]
            if val is not None:
                val[:] = [v is not None for v in vals]
                vals = [0 if v is None else v for v in vals]
            if c == "o":
                cols[j][:] = int128_from_ints(vals)
            else:
                cols[j][:] = vals
        return cols, valids


def _py_column(c: str, col: np.ndarray, val: np.ndarray | None) -> list[Any]:
    if c == "o":
        return ints_from_int128(col)
    out: list[Any] = col.tolist()
    if val is not None:
        out = [v if ok else None for v, ok in zip(out, val.tolist(), strict=True)]
    return out


def int128_from_ints(vals: list[int]) -> np.ndarray:
    """(n, 2) uint64 two's complement pairs of Python ints (|v| < 2**127)."""
    out = np.empty((len(vals), 2), np.uint64)
    mask = (1 << 64) - 1
    for i, v in enumerate(vals):
        u = v & ((1 << 128) - 1)
        out[i, 0] = u & mask
        out[i, 1] = u >> 64
    return out


def int128_from_int64(v: np.ndarray) -> np.ndarray:
    """(n, 2) uint64 pairs of an int64 array (sign-extended)."""
    v = np.asarray(v, np.int64)
    out = np.empty((v.size, 2), np.uint64)
    out[:, 0] = v.view(np.uint64)
    out[:, 1] = (v >> 63).view(np.uint64)
    return out


def int128_add(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a + b of (n, 2) uint64 pairs (wrapping at 2**128; sums stay far below)."""
    out = np.empty_like(a)
    lo = a[:, 0] + b[:, 0]
    out[:, 0] = lo
    out[:, 1] = a[:, 1] + b[:, 1] + (lo < a[:, 0])
    return out


def int128_fits_int64(a: np.ndarray) -> np.ndarray:
    """Which values of (n, 2) pairs fit an int64."""
    fits: np.ndarray = a[:, 1] == (a[:, 0].view(np.int64) >> 63).view(np.uint64)
    return fits


def ints_from_int128(a: np.ndarray) -> list[int]:
    """Python ints of (n, 2) pairs."""
    fits = int128_fits_int64(a)
    if bool(fits.all()):
        return a[:, 0].view(np.int64).tolist()  # type: ignore[no-any-return]
    out = []
    for lo, hi in a.tolist():
        u = lo | (hi << 64)
        out.append(u - (1 << 128) if hi >> 63 else u)
    return out


def decode_row(data: bytes) -> tuple[Any, ...]:
    """The Python tuple of one row (any layout): `codec.decode_value` of a 0x02 row."""
    n = data[1]
    layout = FixedLayout(data[2 : 2 + n].decode("ascii"))
    if len(data) != layout.width:
        raise ValueError("truncated fixed-width row")
    cols, valids = layout.decode([data])
    return layout.to_rows(cols, valids)[0]
