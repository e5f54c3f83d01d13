"""Key indexes of `KeyedSegments`: stored key -> row location, a dict or compact numpy arrays.

Why: a relation's rows live in Arrow segments (a few bytes per value), but the index from
each stored key to its row was a Python dict: about 100-150 bytes per row (the entry, a
key int and a location int), the biggest per-row cost of tables and views once the
aggregation state moved to RocksDB. `IntIndex` keeps integer keys (integer and temporal
key columns, by their integer storage) in two sorted numpy arrays, 16 bytes per row,
answering a chunk's lookups with one `searchsorted`; recent changes sit in a small dict
that is merged into the arrays once it holds a 16th of the base; chunk-sized updates go
straight into the arrays (a sorted insert). Keys that are not ints (NULL) stay in the dict.
`DictIndex` is the dict, for every other key shape.

Both answer: `get(key)` (location or None), `lookup(keys)` (locations, -1 where absent),
`has_any(keys)`, `update(keys, locs)` (new or moved keys), `pop_many(keys)` (stored keys
only), `len`.

Lifecycle: owned by one `KeyedSegments` (`make_index` picks the kind from the key
columns' types); rebuilt from the segments on load; never persisted.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from itertools import compress, repeat
from typing import Any

import numpy as np
import pyarrow as pa

_ABSENT = -2  # "not in the delta" (a location is >= 0, a deleted base key is -1)
MERGE_MIN = 65_536
"""The delta is merged into the sorted base once it holds this many keys (and a 16th of
the base)."""
DIRECT_MIN = 4096
"""Updates of at least this many int keys go straight into the sorted arrays (one
`np.insert`, O(base) bytes moved) instead of through the delta."""
SORTED_SEARCH_MIN = 2048
"""`search` sorts unordered queries of at least this many keys before searching."""


def search(base: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """`np.searchsorted(base, queries)` for a sorted `base`, faster for many unordered
    queries: they are sorted first, so the binary searches walk the base in order. With
    random queries every search misses the CPU caches; 63k random keys into a 100k-key
    base took 7 ms, sorted first 2.4 ms (a chunk's group keys come in hash order)."""
    n = queries.size
    if n < SORTED_SEARCH_MIN or base.size < SORTED_SEARCH_MIN or _ascending(queries):
        return np.searchsorted(base, queries)
    order = argsort_ints(queries)
    out = np.empty(n, np.int64)
    out[order] = np.searchsorted(base, queries[order])
    return out


def argsort_ints(arr: np.ndarray) -> np.ndarray:
    """`np.argsort(arr, kind="stable")` of int64 values: when they span less than 2**32,
    as two stable 16-bit sorts (numpy runs those as radix sorts), half the time of
    numpy's int64 sort (63k keys: 1.5 ms instead of 3.2)."""
    if arr.size < 2:
        return np.zeros(arr.size, np.int64)
    lo, hi = int(arr.min()), int(arr.max())
    if hi - lo >= 1 << 32:
        return np.argsort(arr, kind="stable")
    d = (arr - lo).astype(np.uint32)
    low = np.argsort(d.astype(np.uint16), kind="stable")
    if hi - lo < 1 << 16:
        return low
    return low[np.argsort((d[low] >> 16).astype(np.uint16), kind="stable")]


class DictIndex:
    """Any hashable keys, in a dict."""

    __slots__ = ("_d",)

    def __init__(self) -> None:
        self._d: dict[Any, int] = {}

    def __len__(self) -> int:
        return len(self._d)

    def get(self, key: Any) -> int | None:
        return self._d.get(key)

    def lookup(self, keys: list[Any] | np.ndarray) -> np.ndarray:
        return np.fromiter(map(self._d.get, keys, repeat(-1)), np.int64, len(keys))

    def has_any(self, keys: Iterable[Any]) -> bool:
        return not self._d.keys().isdisjoint(keys)

    def update(self, keys: Iterable[Any], locs: Iterable[int]) -> None:
        self._d.update(zip(keys, locs))

    def pop_many(self, keys: Iterable[Any]) -> None:
        deque(map(self._d.pop, keys), maxlen=0)


class IntIndex:
    """Integer keys in sorted numpy arrays plus a dict of recent changes (module docstring)."""

    __slots__ = ("_bk", "_bl", "_delta", "_n", "_kbuf", "_lbuf")

    def __init__(self) -> None:
        self._bk = np.empty(0, np.int64)  # sorted keys
        self._bl = np.empty(0, np.int64)  # their locations; -1 once deleted
        # when `_bk`/`_bl` are the first rows of these (spare room at the end, see `_append`)
        self._kbuf: np.ndarray | None = None
        self._lbuf: np.ndarray | None = None
        self._delta: dict[Any, int] = {}  # key -> location, or -1: deleted from the base
        self._n = 0

    def __len__(self) -> int:
        return self._n

    def _base(self, arr: np.ndarray) -> np.ndarray:
        bk = self._bk
        if not bk.size:
            return np.full(arr.size, -1, np.int64)
        pos = search(bk, arr)
        np.minimum(pos, bk.size - 1, out=pos)
        return np.where(bk[pos] == arr, self._bl[pos], -1)

    def get(self, key: Any) -> int | None:
        loc = self.lookup([key])[0]
        return None if loc < 0 else int(loc)

    def lookup(self, keys: list[Any] | np.ndarray) -> np.ndarray:
        if isinstance(keys, np.ndarray):
            return self.lookup_array(keys)
        n = len(keys)
        nulls = None
        try:
            arr = np.fromiter(keys, np.int64, n)
        except (TypeError, OverflowError):  # NULL keys (kept in the delta)
            try:
                a = pa.array(keys, pa.int64())
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                return np.fromiter(map(self._one, keys), np.int64, n)
            nulls = a.is_null().to_numpy(zero_copy_only=False)
            arr = a.fill_null(0).to_numpy(zero_copy_only=False)
        out = self._base(arr)
        if nulls is not None:
            out[nulls] = -1
        if self._delta:
            dv = np.fromiter(map(self._delta.get, keys, repeat(_ABSENT)), np.int64, n)
            out = np.where(dv != _ABSENT, dv, out)
        return out

    def lookup_array(self, arr: np.ndarray) -> np.ndarray:
        """`lookup` of int64 keys given as an array: numpy calls only, no Python object
        per key (a chunk's keys never hold the interpreter for a long C call)."""
        out = self._base(arr)
        if self._delta:
            dk, dl, _ = _delta_arrays(self._delta)  # NULL keys are not in `arr`
            if dk.size:
                order = np.argsort(dk)
                dk, dl = dk[order], dl[order]
                pos = np.minimum(search(dk, arr), dk.size - 1)
                hit = dk[pos] == arr
                out = np.where(hit, dl[pos], out)
        return out

    def _one(self, key: Any) -> int:
        v = self._delta.get(key, _ABSENT)
        if v != _ABSENT:
            return v
        if not _fits(key):
            return -1
        return int(self._base(np.array([key], np.int64))[0])

    def has_any(self, keys: Iterable[Any]) -> bool:
        ks = keys if isinstance(keys, (list, np.ndarray)) else list(keys)
        return bool(len(ks)) and bool((self.lookup(ks) >= 0).any())

    def update(self, keys: Iterable[Any], locs: Iterable[int]) -> None:
        if isinstance(keys, np.ndarray):  # distinct int64 keys (`KeyedSegments.int_keys`)
            if len(keys) >= DIRECT_MIN:
                if isinstance(locs, range):
                    la = np.arange(locs.start, locs.stop, locs.step, dtype=np.int64)
                else:
                    la = np.fromiter(locs, np.int64, len(keys))
                self._insert(keys, la)
                return
            keys = keys.tolist()
        ks = keys if isinstance(keys, list) else list(keys)
        ls = locs if isinstance(locs, list) else list(locs)
        if not ks:
            return
        if len(ks) >= DIRECT_MIN:
            try:
                arr = np.fromiter(ks, np.int64, len(ks))
            except (TypeError, OverflowError):
                arr = None
            if arr is not None:
                self._insert(arr, np.fromiter(ls, np.int64, len(ls)))
                return
        self._n += int((self.lookup(ks) < 0).sum())
        self._delta.update(zip(ks, ls))
        if len(self._delta) >= max(MERGE_MIN, self._bk.size // 16):
            self._merge()

    def _insert(self, arr: np.ndarray, locs: np.ndarray) -> None:
        """A big batch of distinct int keys straight into the sorted arrays."""
        if self._delta and self._above_all(arr):
            # ascending ids past every stored key: the delta need not be folded first
            # (that sorts the whole index: O(n log n) per COPY into a big table)
            self._n += int(arr.size)
            self._append(arr, locs)
            return
        if self._delta:
            self._merge()  # the batch's keys may be in the delta: fold it first
        if not _ascending(arr):  # sorted first: the searches below walk the base in order
            order = argsort_ints(arr)
            arr, locs = arr[order], locs[order]
        bk, bl = self._bk, self._bl
        if bk.size:
            pos = np.searchsorted(bk, arr)
            np.minimum(pos, bk.size - 1, out=pos)
            hit = bk[pos] == arr
            self._n += int(arr.size - (hit & (bl[pos] >= 0)).sum())
            bl[pos[hit]] = locs[hit]  # moved or re-added keys
            new = ~hit
            arr, locs = arr[new], locs[new]
        else:
            self._n += int(arr.size)
        if arr.size:
            self._place(bk, bl, arr, locs)

    def _above_all(self, arr: np.ndarray) -> bool:
        """`arr` is strictly ascending and above every key of the base and the delta."""
        if not arr.size or not _ascending(arr):
            return False
        first = int(arr[0])
        if self._bk.size and first <= self._bk[-1]:
            return False
        return all(first > k for k in self._delta if _fits(k))

    def _append(self, arr: np.ndarray, locs: np.ndarray) -> None:
        """Sorted keys above every stored key (ascending ids: `_row_id`, serials) go into
        spare room at the end of the arrays: O(new keys), where an insert copies the
        whole index (40 ms and fresh pages for 5M keys, all of it holding the GIL)."""
        n, m = self._bk.size, arr.size
        kb, lb = self._kbuf, self._lbuf
        if kb is None or lb is None or n + m > kb.size:
            cap = max(n + m + (n + m) // 4, 1 << 16)
            kb, lb = np.empty(cap, np.int64), np.empty(cap, np.int64)
            kb[:n], lb[:n] = self._bk, self._bl
            self._kbuf, self._lbuf = kb, lb
        kb[n : n + m], lb[n : n + m] = arr, locs
        self._bk, self._bl = kb[: n + m], lb[: n + m]

    def pop_many(self, keys: Iterable[Any]) -> None:
        ks = keys if isinstance(keys, list) else list(keys)
        if not ks:
            return
        present = self.lookup(ks) >= 0
        self._n -= int(present.sum())
        self._delta.update(zip((k for k, p in zip(ks, present.tolist()) if p), repeat(-1)))

    def _merge(self) -> None:
        """Fold the delta's int keys into the sorted arrays (NULL keys stay in the delta).

        Only the delta is sorted; its keys find their places in the base by one
        `searchsorted`: stored keys get their new location in place, new keys go in by one
        `np.insert` (or the in-place append when above every stored key), and the base is
        compacted only when the delta deleted some of its keys. A sort of base + delta was
        O(n log n) CPU per merge (half a second for 8M keys on a shared 2-core machine)."""
        delta = self._delta
        dk, dl, rest = _delta_arrays(delta)
        if not dk.size:
            return
        order = np.argsort(dk)  # distinct keys (a dict's)
        dk, dl = dk[order], dl[order]
        bk, bl = self._bk, self._bl
        if bk.size:
            pos = np.searchsorted(bk, dk)
            hit = pos < bk.size
            hit[hit] = bk[pos[hit]] == dk[hit]
        else:
            pos, hit = np.zeros(dk.size, np.int64), np.zeros(dk.size, bool)
        if hit.any():
            moved = dl[hit]
            bl[pos[hit]] = moved
            if (moved < 0).any():  # deleted stored keys: compact the base
                keep = bl >= 0
                bk, bl = bk[keep], bl[keep]
                self._kbuf = self._lbuf = None
            fresh = ~hit
            dk, dl = dk[fresh], dl[fresh]
        added = dl >= 0  # a key added and deleted since the last merge is in neither
        dk, dl = dk[added], dl[added]
        self._bk, self._bl = bk, bl
        self._delta = rest
        if dk.size:
            self._place(bk, bl, dk, dl)

    def _place(self, bk: np.ndarray, bl: np.ndarray, keys: np.ndarray, locs: np.ndarray) -> None:
        """Put sorted fresh `keys` (none of them in `bk`) into the base: appended when they
        all sort after it, else inserted at their sorted places."""
        if not bk.size or keys[0] > bk[-1]:
            self._append(keys, locs)
            return
        at = np.searchsorted(bk, keys)
        self._bk = np.insert(bk, at, keys)
        self._bl = np.insert(bl, at, locs)
        self._kbuf = self._lbuf = None


PIECE = 16_384
"""Keys converted from Python ints to numpy by one C call: a call holds the interpreter
lock for its whole length (about 20 ns a key), so a big delta is converted in pieces and
other threads may run between two."""


def _delta_arrays(delta: dict[Any, int]) -> tuple[np.ndarray, np.ndarray, dict[Any, int]]:
    """The delta's int64 keys and their locations (dict order), and the entries whose keys
    are not int64 (NULL), which stay in the delta."""
    keys, locs = list(delta), list(delta.values())
    try:
        return _pieces(keys), _pieces(locs), {}
    except (TypeError, OverflowError):  # NULL keys (or ints beyond int64)
        fits = [_fits(k) for k in keys]
        rest = {k: v for k, v, f in zip(keys, locs, fits) if not f}
        return _pieces(list(compress(keys, fits))), _pieces(list(compress(locs, fits))), rest


def _pieces(values: list[Any]) -> np.ndarray:
    """`values` (Python ints) as int64, converted `PIECE` at a time (see `PIECE`)."""
    n = len(values)
    if n <= PIECE:
        return np.fromiter(values, np.int64, n)
    return np.concatenate(
        [
            np.fromiter(values[i : i + PIECE], np.int64, min(PIECE, n - i))
            for i in range(0, n, PIECE)
        ]
    )


def _ascending(arr: np.ndarray) -> bool:
    """Strictly increasing (ids in insertion order): no sort needed, no duplicates."""
    return bool(arr.size < 2 or (arr[1:] > arr[:-1]).all())


def _fits(k: Any) -> bool:
    return type(k) is int and -(1 << 63) <= k < (1 << 63)


def make_index(types: list[pa.DataType]) -> DictIndex | IntIndex:
    """The index for key columns of `types`: `IntIndex` for one integer or temporal column
    (its keys are Python ints, see `segments.key_fn`), else `DictIndex`."""
    if len(types) == 1:
        t = types[0]
        temporal = pa.types.is_temporal(t) and not pa.types.is_interval(t)  # intervals: bytes
        if (pa.types.is_integer(t) and t != pa.uint64()) or temporal:
            return IntIndex()
    return DictIndex()
