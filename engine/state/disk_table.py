"""DiskStateTable: a state table whose rows live in RocksDB, with a bounded cache in memory.

Why: `StateTable` keeps every row in a Python dict (hundreds of bytes per row), so state
is bounded by RAM. This backend makes RocksDB the source of truth: memory holds only the
current epoch's writes (the overlay) and a bounded cache of hot committed rows; RocksDB's
block cache and memtables (sized by `engine.state.budget`) hold the rest of the working
set. It answers the same interface as `StateTable` (the contract
`tests/unit/state/test_state_contract.py` runs over both), so an operator moves onto it
by asking its allocator for a disk table.

Key layout (one contiguous range per table, ordered):

    table id (4 bytes BE) | 0x00 vnode (2 bytes BE) | memcmp.encode_key(key)

`vnode = crc32(encode_key(key[:dist_len])) mod 256` (RisingWave's 256 virtual nodes, so
vnode ranges can later move between workers); `dist_len` is how many leading key columns
form the distribution key (0: every row in vnode 0, one ordered range). The leading 0x00
keeps the range apart from the older log and keyed layouts of `StateTable`, whose bytes
after the table id start 0x01, 0x02 or 0x28 (`load` converts those, see below). Values are
`codec.encode_value` bytes.

Lifecycle:
1. created with its id, the open `StateStore` and a `HotCache` budget; `load(store)` (at
   recovery) drops the overlay and the cache: nothing is read eagerly. A range still in
   an older layout is read once into the overlay and rewritten at the next checkpoint;
2. per epoch, reads look at the overlay, then the cache, then RocksDB (one multi-get
   per `get_many`); writes go to the overlay only, so a failed epoch is rolled back by
   dropping the table object (the runtime rebuilds every table from the store);
3. `write_dirty(batch)` encodes the overlay into the checkpoint's WriteBatch and moves
   the rows into the cache; the batch is the commit;
4. `drop(batch)` deletes the table's range.

Scans (`scan`) merge RocksDB range iterators, one per vnode the range can touch (all 256
unless the prefix covers the distribution key or `dist_len` is 0), with the overlay's
rows in the range; they are lazy but consistent with the call (a RocksDB snapshot plus a
copy of the overlay's part of the range), so a caller may write while consuming.
`snapshot(epoch)` pins a RocksDB snapshot plus a copy of the overlay.

Costs: a point read that misses the overlay and the cache is a RocksDB lookup (batched by
`get_many`); the first `len()` counts the range (O(rows), keys only) and from then on
each checkpoint of the table costs one more multi-get of its changed keys (the dashboard
shows every table's row count); `clear()` is one range delete at the checkpoint.
"""

from __future__ import annotations

import heapq
import weakref
import zlib
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Iterator
from itertools import chain, compress, dropwhile, islice, repeat, takewhile
from operator import is_not, itemgetter
from typing import TYPE_CHECKING, Any, Protocol, cast

import numpy as np

from engine.state import codec, memcmp
from engine.state.table import StateTable
from engine.state.written_keys import WrittenKeys

if TYPE_CHECKING:
    from engine.state.store import StateStore, WriteBatchLike

Key = tuple[Any, ...]
Value = tuple[Any, ...]

VNODES = 256
CACHE_MAX_VALUE = 1024
"""Values larger than this (encoded bytes) are not cached: RocksDB's block cache holds
them (segment blobs of relations are megabytes)."""
_TOMB = object()
_LEGACY_START = b"\x01"  # first byte after the table id of StateTable's layouts
COLUMN_RUNS = b"\xff"
"""First byte after the table id of the keys an attached `ColumnOverlay` writes for
itself (blobs of many rows; never rows of the tuple interface, never a legacy layout)."""
_HEAD = 6  # table id (4) + 0x00 + vnode byte: the bytes before the encoded key
_INT_BYTES = 11  # memcmp bytes of an int within float64's exact range


def vnode_of(dist_bytes: bytes) -> int:
    """The vnode of a row from the encoded bytes of its distribution key."""
    return zlib.crc32(dist_bytes) & (VNODES - 1)


def _crc_table() -> np.ndarray:
    t = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        t = np.where(t & 1, (t >> np.uint32(1)) ^ np.uint32(0xEDB88320), t >> np.uint32(1))
    return t.astype(np.uint32)


_CRC = _crc_table()


def crc32_rows(mat: np.ndarray) -> np.ndarray:
    """`zlib.crc32` of each row of an (n, w) uint8 matrix, a numpy step per byte column
    (`vnode_of` of many encoded keys at once)."""
    crc = np.full(len(mat), 0xFFFFFFFF, np.uint32)
    for j in range(mat.shape[1]):
        crc = _CRC[(crc ^ mat[:, j]) & np.uint32(0xFF)] ^ (crc >> np.uint32(8))
    return crc ^ np.uint32(0xFFFFFFFF)


def _seek_last_under(it: Any, full: bytes) -> None:
    """Put RocksDB iterator `it` on the last key starting with `full` (or wherever
    `seek_for_prev` lands below them when there is none: the caller checks the prefix)."""
    succ = memcmp.successor(full)
    if succ is None:
        it.seek_to_last()
        return
    it.seek_for_prev(succ)
    if it.valid() and it.key() >= succ:
        it.prev()


class ColumnOverlay(Protocol):
    """A columnar cache attached to a disk table (`DiskStateTable.attach_columns`) that
    holds some of the table's rows, and the epoch's changes to them, in columns instead
    of the tuple overlay (the columnar aggregation path). The table asks it:"""

    @property
    def dirty_count(self) -> int:
        """Rows changed since the last checkpoint."""
        ...

    def len_delta(self) -> int:
        """Rows its pending changes add to the table (negative: remove)."""
        ...

    def write_columns(self, batch: WriteBatchLike) -> int:
        """Put/delete the changed rows into the checkpoint batch (after the tuple
        overlay's); they are then clean. Returns how many were written."""
        ...

    def spill(self) -> tuple[list[Key], list[Value | None]]:
        """The changed rows as tuples (None: deleted), handed to the tuple overlay; the
        cache then forgets every row (so reads through the tuple interface and writes
        through it stay the only truth until it fetches rows again)."""
        ...

    def reset(self) -> None:
        """Forget every row and change (the store is the truth again: load, clear, drop)."""
        ...

    def shadow_rows(self) -> int:
        """Committed rows it keeps outside the row range (`COLUMN_RUNS` blobs) that the
        row range does not count: live rows there minus the row-range rows they
        replace. `len` adds it to its count of the row range."""
        ...


class HotCache:
    """The operator-cache share of the state memory budget, split over the live disk
    tables: each table keeps at most `cap_entries / live tables` cached rows (at least
    `MIN_PER_TABLE`), dropping its oldest when full. `entry_bytes` is the planning
    figure per cached row (a small tuple key and value in CPython)."""

    MIN_PER_TABLE = 1024

    def __init__(self, budget_bytes: int, entry_bytes: int = 240) -> None:
        self.entry_bytes = entry_bytes
        self.cap_entries = max(budget_bytes // entry_bytes, self.MIN_PER_TABLE)
        self._tables: weakref.WeakSet[DiskStateTable] = weakref.WeakSet()

    def register(self, t: DiskStateTable) -> None:
        self._tables.add(t)

    def per_table(self) -> int:
        return max(self.cap_entries // max(len(self._tables), 1), self.MIN_PER_TABLE)


class DiskStateTable:
    """RocksDB-first keyed state; see the module docstring."""

    def __init__(
        self,
        table_id: int,
        name: str,
        store: StateStore,
        *,
        dist_len: int = 0,
        cache: HotCache | None = None,
    ) -> None:
        self.table_id = table_id
        self.name = name
        self._store = store
        self.dist_len = dist_len
        self._hot = cache if cache is not None else HotCache(0)
        self._hot.register(self)
        self._prefix = codec.table_prefix(table_id)
        self._end = codec.table_prefix(table_id + 1)
        self._vn = [self._prefix + b"\x00" + bytes([v]) for v in range(VNODES)]
        self._vn_end = [*self._vn[1:], self._prefix + b"\x01"]
        self._overlay: dict[Key, Any] = {}
        self._tombs = False  # the overlay may hold deletes (_TOMB): set by every delete
        self._cache: dict[Key, Value] = {}
        self._pins: weakref.WeakSet[DiskTableSnapshot] = weakref.WeakSet()
        self._cleared = False  # the committed range is deleted at the next checkpoint
        self._legacy = False  # the range holds an older layout: delete it at the checkpoint
        # committed rows, once someone asked for `len` (then kept up to date at each
        # checkpoint with one multi-get of the changed keys); None: not counted
        self._count: int | None = None
        self._columns: ColumnOverlay | None = None
        self.int_keys = False
        """Set by an owner whose keys are tuples of Python ints only (never bools, floats,
        None): checkpoints then read each key column into numpy without a type scan."""
        self._track = False  # the owner asked for `track_absent`
        self._written: WrittenKeys | None = None

    def track_absent(self) -> None:
        """Opt in to skipping the RocksDB read of keys the table certainly does not hold
        (`engine.state.written_keys`): from a load that finds no row of the table in the
        store on, every key a checkpoint writes is recorded, and `get_many` reads only
        the misses that may be among them. For owners that write the table only through
        puts and deletes (no columnar overlay)."""
        self._track = True
        self._written = self._fresh_filter()

    @property
    def skips_absent(self) -> bool:
        """Whether `get_many` skips the reads of keys the table certainly lacks now."""
        return self._written is not None

    def _fresh_filter(self) -> WrittenKeys | None:
        """A filter when this table may use one and the store holds none of its rows."""
        if not self._track or self._columns is not None or self._legacy:
            return None
        if self._overlay or self._cleared:
            return None
        if self._store.last_key_in(self._prefix, self._end) is not None:
            return None
        return WrittenKeys()

    # -- columnar cache ----------------------------------------------------------------
    def attach_columns(self, columns: ColumnOverlay) -> None:
        """Let `columns` keep rows of this table in columns (see `ColumnOverlay`): every
        access through the tuple interface first moves its changed rows into the overlay
        (`_spill`), and each checkpoint writes its changes after the overlay's."""
        self._columns = columns
        self._written = None  # it writes rows the filter would not see

    def _spill(self) -> None:
        c = self._columns
        if c is None:
            return
        if c.shadow_rows():  # the count includes them; the overlay is about to as well
            self._count = None
        keys, vals = c.spill()
        if keys:
            self._tombs = True
            self._overlay.update(
                (k, _TOMB if v is None else v) for k, v in zip(keys, vals, strict=True)
            )

    def encoded_full_keys(self, eks: list[bytes]) -> list[bytes]:
        """Store keys of rows by their `memcmp.encode_key` bytes; only for keys whose
        length is the distribution key's (or any key when `dist_len` is 0)."""
        if self.dist_len == 0:
            p = self._vn[0]
            return [p + e for e in eks]
        vn, crc = self._vn, zlib.crc32
        return [vn[crc(e) & 255] + e for e in eks]

    def committed_raw(self, fulls: list[bytes]) -> list[bytes | None]:
        """RocksDB's value bytes of store keys (one multi-get; all None once cleared)."""
        if self._cleared:
            return [None] * len(fulls)
        return self._store.multi_get(fulls)

    def overlay_lookup(self, keys: list[Key]) -> dict[int, Value | None]:
        """Index -> overlay value (None: deleted) of the `keys` the overlay holds."""
        ov = self._overlay
        if not ov:
            return {}
        out: dict[int, Value | None] = {}
        for i, k in enumerate(keys):
            v = ov.get(k)  # overlay values are tuples or _TOMB, never None
            if v is not None:
                out[i] = None if v is _TOMB else v
        return out

    def cache_rows(self, row_bytes: int) -> int:
        """How many rows of `row_bytes` each an attached columnar cache may hold: this
        table's share of the operator-cache budget."""
        return self._hot.per_table() * self._hot.entry_bytes // max(row_bytes, 1)

    def column_runs(self) -> tuple[bytes, bytes]:
        """[begin, end) of the keys an attached `ColumnOverlay` keeps for itself."""
        return self._prefix + COLUMN_RUNS, self._end

    def committed_runs(self) -> list[tuple[bytes, bytes]]:
        """RocksDB's (key, value) pairs of `column_runs` in key order (none once cleared)."""
        if self._cleared:
            return []
        return list(self._store.scan_range(*self.column_runs()))

    def committed_empty(self) -> bool:
        """Whether RocksDB holds no row of this table (one seek; a columnar cache that
        saw the table empty and kept every row since needs no store reads)."""
        end = self._prefix + _LEGACY_START
        return self._store.last_key_in(self._prefix + b"\x00", end) is None

    @property
    def has_overlay(self) -> bool:
        """Whether the tuple overlay holds changes of this epoch."""
        return bool(self._overlay)

    @property
    def cleared(self) -> bool:
        return self._cleared

    # -- layout ------------------------------------------------------------------------
    def _vnode_prefix(self, ek: bytes, key: Key) -> bytes:
        d = self.dist_len
        if d == 0:
            return self._vn[0]
        dist = ek if len(key) == d else memcmp.encode_key(key[:d])
        return self._vn[vnode_of(dist)]

    def _full(self, key: Key) -> bytes:
        ek = memcmp.encode_key(key)
        return self._vnode_prefix(ek, key) + ek

    def _full_many(self, keys: list[Key]) -> list[bytes]:
        """Store keys of `keys`, in their order."""
        fulls, order = self._store_keys(keys, False)
        if order is None:
            return fulls
        out = np.empty(len(keys), object)
        out[np.array(order, np.int64)] = fulls
        return out.tolist()

    def _store_keys(self, keys: list[Key], sort: bool) -> tuple[list[bytes], list[int] | None]:
        """Store keys of `keys` in bulk: in their order (order None), or in another order
        with the position in `keys` of each (`sort`: each run of keys of one width in key
        order, the order a checkpoint writes them in).

        Keys of one width whose columns are all ints within float64's exact range (join
        and group keys) are encoded as one byte matrix, vnodes included, with numpy
        steps per column (`_int_matrix`); the others element by element."""
        n = len(keys)
        if n < 64:
            fulls = [self._full(k) for k in keys]
            if not sort or n < 2:
                return fulls, None
            perm = sorted(range(n), key=fulls.__getitem__)
            return [fulls[i] for i in perm], perm
        ws = np.fromiter(map(len, keys), np.int64, n)
        widths = np.unique(ws).tolist()
        if len(widths) == 1:
            groups: list[tuple[list[Key], list[int] | None]] = [(keys, None)]
        else:
            groups = []
            for w in widths:
                idx = np.flatnonzero(ws == w).tolist()
                groups.append((list(map(keys.__getitem__, idx)), idx))
        out_f: list[bytes] = []
        out_o: list[int] = []
        for ks, pos in groups:
            fulls, order = self._width_keys(ks, sort)
            if len(groups) == 1:
                return fulls, order
            out_f.extend(fulls)
            assert pos is not None
            out_o.extend(pos if order is None else map(pos.__getitem__, order))
        return out_f, out_o

    def _width_keys(self, keys: list[Key], sort: bool) -> tuple[list[bytes], list[int] | None]:
        """`_store_keys` of keys of one width."""
        m = self._int_matrix(keys)
        if m is not None:
            full, cols = m
            w = full.shape[1]
            if not sort:
                return full.view(f"V{w}").ravel().tolist(), None
            # bytes order: vnode, then each column's value (the encoding keeps int order)
            order = np.lexsort([*reversed(cols), full[:, _HEAD - 1]])
            return full[order].view(f"V{w}").ravel().tolist(), order.tolist()
        eks = memcmp.encode_keys(keys)
        d = self.dist_len
        if d == 0:
            p = self._vn[0]
            fulls = [p + e for e in eks]
        else:
            vn, crc = self._vn, zlib.crc32
            w = len(keys[0]) if keys else 0
            if w <= d:
                fulls = [vn[crc(e) & 255] + e for e in eks]
            else:
                dist = memcmp.encode_keys([k[:d] for k in keys])
                fulls = [vn[crc(p) & 255] + e for p, e in zip(dist, eks, strict=True)]
        if not sort:
            return fulls, None
        # numpy sorts the bytes as zero-padded strings: keys that differ only in trailing
        # zero bytes may swap, which only costs locality (the keys are distinct)
        order = np.argsort(np.array(fulls)).tolist()
        return list(map(fulls.__getitem__, order)), order

    def _int_matrix(self, keys: list[Key]) -> tuple[np.ndarray, list[np.ndarray]] | None:
        """The store keys of `keys` (one width, at least one column) as the rows of a
        uint8 matrix, and the key columns, when every column holds only ints within
        float64's exact range (their encodings are then 11 bytes each); else None."""
        w = len(keys[0]) if keys else 0
        if not w:
            return None
        cols: list[np.ndarray] = []
        mats: list[np.ndarray] = []
        n = len(keys)
        for j in range(w):
            it = chain.from_iterable(keys) if w == 1 else map(itemgetter(j), keys)
            try:
                if self.int_keys:  # numpy would also take floats and strings: trusted
                    a = np.fromiter(it, np.int64, n)
                else:
                    col = list(it)
                    if set(map(type, col)) != {int}:
                        return None
                    a = np.array(col, np.int64)
            except (OverflowError, TypeError, ValueError):
                return None
            mat, odd = memcmp.encode_int_matrix(a, np.zeros(len(a), bool))
            if odd.any():
                return None
            cols.append(a)
            mats.append(mat)
        ek = np.concatenate(mats, axis=1) if w > 1 else mats[0]
        full = np.empty((len(keys), _HEAD + ek.shape[1]), np.uint8)
        full[:, :_HEAD] = np.frombuffer(self._vn[0], np.uint8)
        full[:, _HEAD:] = ek
        d = self.dist_len
        if d:  # the distribution key's bytes are the first d columns' (or the whole key)
            dist = ek if w <= d else ek[:, : _INT_BYTES * d]
            full[:, _HEAD - 1] = (crc32_rows(dist) & np.uint32(VNODES - 1)).astype(np.uint8)
        return full, cols

    def _decode_key(self, full: bytes) -> Key:
        return memcmp.decode_key(full[_HEAD:])

    # -- reads -------------------------------------------------------------------------
    def get(self, key: Key) -> Value | None:
        return self.get_many([key])[0]

    def get_many(self, keys: Iterable[Key]) -> list[Value | None]:
        """Multi-get: overlay, then cache, then one RocksDB multi-get for the rest."""
        keys = keys if isinstance(keys, list) else list(keys)
        self._spill()
        overlay, cache = self._overlay, self._cache
        if not overlay and not cache and not self._cleared:
            return self._fetch(keys)
        out: list[Any] = [overlay.get(k, _TOMB) if overlay else _TOMB for k in keys]
        miss: list[int] = []
        for i, v in enumerate(out):
            if v is _TOMB:
                k = keys[i]
                if k in overlay or self._cleared:
                    out[i] = None
                else:
                    c = cache.get(k)
                    if c is None:
                        miss.append(i)
                    out[i] = c
        if miss:
            for i, v in zip(miss, self._fetch([keys[i] for i in miss]), strict=True):
                out[i] = v
        return out

    def _fetch(self, keys: list[Key]) -> list[Value | None]:
        """Committed values from RocksDB (the cache is filled with the rows found)."""
        if not keys:
            return []
        fulls = self._full_many(keys)
        w = self._written
        if w is None:
            raws = self._store.multi_get(fulls)
        else:  # only the keys the table may hold are read
            maybe = np.flatnonzero(w.may_hold(fulls)).tolist()
            raws = [None] * len(fulls)
            if maybe:
                got = self._store.multi_get([fulls[i] for i in maybe])
                for i, r in zip(maybe, got, strict=True):
                    raws[i] = r
        dec = codec.decode_value
        vals = [None if r is None else dec(r) for r in raws]
        self._remember(keys, vals, [0 if r is None else len(r) for r in raws])
        return vals

    def _remember(
        self, keys: list[Key], vals: list[Any], sizes: list[int], absent: bool = True
    ) -> None:
        """Cache committed rows (not absent ones, nor values over `CACHE_MAX_VALUE`
        bytes: the cache is counted in rows). A row not cached now loses any value the
        cache held for it: a committed row that grew past the limit would otherwise be
        read back as its older, smaller value in every later epoch. More rows than the
        table's share at once (a checkpoint of a large epoch) replace the whole cache with
        the last three quarters of a share of them: the older rows and the earlier ones of
        the list would be evicted right away, so they are never copied in. `absent`:
        `vals` may hold None (keys RocksDB lacks): the rows of a multi-get of cache misses,
        which the cache holds no value for, so none is dropped."""
        cache = self._cache
        cap = self._hot.per_table()
        keep = cap - cap // 4
        if cap > 0 and len(keys) > keep:
            cache.clear()
            keys, vals, sizes = keys[-keep:], vals[-keep:], sizes[-keep:]
        big = CACHE_MAX_VALUE
        ok = np.fromiter(sizes, np.int64, len(sizes)) <= big
        if absent and None in vals:
            ok &= np.fromiter(map(is_not, vals, repeat(None)), bool, len(vals))
        out = np.flatnonzero(~ok).tolist()
        if out and cache and not absent:
            for i in out:
                cache.pop(keys[i], None)
        if cap <= 0:
            return
        pairs = zip(keys, vals, strict=True)
        cache.update(compress(pairs, ok.tolist()) if out else pairs)
        self._evict(cap)

    def _evict(self, cap: int) -> None:
        """Over `cap` cached rows: drop the oldest (insertion order), down to three
        quarters of it."""
        cache = self._cache
        over = len(cache) - cap
        if over > 0:
            for k in list(islice(cache, over + cap // 4)):
                del cache[k]

    def __contains__(self, key: Key) -> bool:
        return self.get(key) is not None

    def __len__(self) -> int:
        """Rows now. The first call counts the committed range (O(rows), keys only);
        later calls cost one multi-get of the overlay's keys."""
        if self._count is None:
            self._count = 0 if self._cleared else self._count_committed()
            if self._columns is not None and not self._cleared:
                self._count += self._columns.shadow_rows()
        base = 0 if self._cleared else self._count
        if self._columns is not None:
            base += self._columns.len_delta()
        if not self._overlay:
            return base
        keys = list(self._overlay)
        had = [False] * len(keys) if self._cleared else self._exists(keys)
        live = [v is not _TOMB for v in self._overlay.values()]
        return base + sum(lv - h for lv, h in zip(live, had, strict=True))

    def _exists(self, keys: list[Key]) -> list[bool]:
        """Which of `keys` RocksDB holds (committed rows)."""
        return [r is not None for r in self._store.multi_get(self._full_many(keys))]

    def _count_committed(self) -> int:
        db = self._store.db
        n = 0
        vnodes = [0] if self.dist_len == 0 else range(VNODES)
        for v in vnodes:
            stop: bytes = self._vn_end[v]
            for k in db.keys(from_key=self._vn[v]):
                if cast(bytes, k) >= stop:
                    break
                n += 1
        return n

    def items(self) -> Iterator[tuple[Key, Value]]:
        """Every entry, in key order within each vnode (do not write while iterating)."""
        return self.scan()

    def keys(self) -> Iterable[Key]:
        return (k for k, _ in self.scan())

    def values(self) -> Iterable[Value]:
        return (v for _, v in self.scan())

    def to_dict(self) -> dict[Key, Value]:
        return dict(self.scan())

    def scan(
        self,
        prefix: Key = (),
        *,
        start: Key | None = None,
        end: Key | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> Iterator[tuple[Key, Value]]:
        """As `StateTable.scan`: the entries with `prefix` in `[start, end)`, in key order
        (descending with `reverse`), at most `limit`; consistent with the call."""
        self._spill()
        lo, hi, vnodes = self._range(prefix, start, end)
        if limit is not None and limit <= 0 or (lo is not None and hi is not None and lo >= hi):
            return iter(())
        it = self._merged(self._overlay, not self._cleared, lo, hi, vnodes, reverse)
        return islice(it, limit) if limit is not None else it

    def scan_prefixes(
        self,
        prefixes: list[Key],
        limit: int | None = None,
        *,
        keys: bool = True,
        reverse: bool = False,
    ) -> list[list[tuple[Key | None, Value]]]:
        """As `StateTable.scan_prefixes`: per prefix its first `limit` entries in key
        order, or its last ones in descending order with `reverse` (a group's maximum)
        (`keys=False`: the keys are not decoded, None in their place). Only the overlay's
        rows under the prefixes are encoded, sorted once for all of them, and one RocksDB
        iterator seeks from prefix to prefix (a `scan` per prefix would encode the whole
        overlay and open an iterator each time)."""
        self._spill()
        if limit is not None and limit <= 0:
            return [[] for _ in prefixes]
        d = self.dist_len
        pend: list[tuple[bytes, Key, Any]] = []
        if self._overlay:
            ov = self._overlay_under(prefixes)
            fulls = self._full_many([k for k, _ in ov])
            pend = sorted(
                ((f, k, v) for f, (k, v) in zip(fulls, ov, strict=True)), key=lambda t: t[0]
            )
        pkeys = [t[0] for t in pend]
        it = None if self._cleared else self._store.db.iter()
        dec_k, dec_v = memcmp.decode_key, codec.decode_value
        out: list[list[tuple[Key | None, Value]]] = []
        eps = memcmp.encode_keys(prefixes)
        for p, ep in zip(prefixes, eps, strict=True):
            if d and len(p) < d:  # the range spans every vnode
                rows_p = self.scan(p, limit=limit, reverse=reverse)
                out.append([(k if keys else None, v) for k, v in rows_p])
                continue
            vnode = 0 if d == 0 else vnode_of(ep if len(p) == d else memcmp.encode_key(p[:d]))
            full = self._vn[vnode] + ep
            i = bisect_left(pkeys, full)
            mine: dict[bytes, tuple[Key, Any]] = {}
            while i < len(pend) and pend[i][0].startswith(full):
                f, k, v = pend[i]
                mine[f] = (k, v)
                i += 1
            want = None if limit is None else limit + len(mine)  # the overlay may shadow
            got: list[tuple[bytes, Any]] = []
            if it is not None:
                if reverse:
                    _seek_last_under(it, full)
                else:
                    it.seek(full)
                while it.valid() and (want is None or len(got) < want):
                    f = it.key()
                    if not f.startswith(full):
                        break
                    got.append((f, it.value()))
                    if reverse:
                        it.prev()
                    else:
                        it.next()
            rows: list[tuple[Key | None, Value]] = []
            if mine:
                merged = dict(got)
                merged.update(mine)
                for f in sorted(merged, reverse=reverse):
                    e = merged[f]
                    if type(e) is tuple and f in mine:
                        k, v = e
                        if v is _TOMB:
                            continue
                        rows.append((k if keys else None, v))
                    else:
                        rows.append((dec_k(f[_HEAD:]) if keys else None, dec_v(e)))
                    if limit is not None and len(rows) >= limit:
                        break
            else:
                for f, raw in got:
                    rows.append((dec_k(f[_HEAD:]) if keys else None, dec_v(raw)))
            out.append(rows)
        return out

    def _overlay_under(self, prefixes: list[Key]) -> list[tuple[Key, Any]]:
        """The overlay's (key, value-or-tomb) pairs whose key starts with one of
        `prefixes`, found by tuple slicing (encoding every overlay key costs 10x more)."""
        ov = self._overlay
        lens = {len(p) for p in prefixes}
        if lens == {0}:
            return list(ov.items())
        want = set(prefixes)
        if len(lens) == 1:
            n = lens.pop()
            return [(k, v) for k, v in ov.items() if k[:n] in want]
        return [(k, v) for k, v in ov.items() if any(k[:n] in want for n in lens)]

    def _iter(self, lo: bytes | None, hi: bytes | None, reverse: bool) -> Iterator[Any]:
        self._spill()
        return self._merged(self._overlay, not self._cleared, lo, hi, None, reverse)

    def _range(
        self, prefix: Key, start: Key | None, end: Key | None
    ) -> tuple[bytes | None, bytes | None, list[int] | None]:
        """Byte bounds (after the vnode) of a scan and the vnodes it touches (None: all)."""
        lows: list[bytes] = []
        highs: list[bytes] = []
        if prefix:
            p = memcmp.encode_key(prefix)
            lows.append(p)
            succ = memcmp.successor(p)
            if succ is not None:
                highs.append(succ)
        if start is not None:
            lows.append(memcmp.encode_key(start))
        if end is not None:
            highs.append(memcmp.encode_key(end))
        vnodes: list[int] | None = None
        d = self.dist_len
        if d == 0:
            vnodes = [0]
        elif len(prefix) >= d:
            vnodes = [vnode_of(memcmp.encode_key(prefix[:d]))]
        return (max(lows) if lows else None), (min(highs) if highs else None), vnodes

    def _merged(
        self,
        overlay: dict[Key, Any],
        committed: bool,
        lo: bytes | None,
        hi: bytes | None,
        vnodes: list[int] | None,
        reverse: bool,
        undo: dict[Key, Any] | None = None,
    ) -> Iterator[tuple[Key, Value]]:
        """The committed entries of the range (if `committed`) merged with `overlay`'s
        (which win). With `undo` (a snapshot's), the committed range is read first, then
        `undo` overrides it: the writer fills `undo` before it changes RocksDB."""
        if vnodes is None:
            vnodes = [0] if self.dist_len == 0 else list(range(VNODES))
        rows: Iterator[tuple[bytes, bytes]] | None = None
        if committed:
            rows = self._committed(vnodes, lo, hi, reverse)
            if undo is not None:
                rows = iter(list(rows))  # read RocksDB before looking at the undo log
                overlay = {**undo, **overlay}
        pend = self._pending(overlay, lo, hi, vnodes, reverse)
        return self._merge_gen(rows, pend, reverse)

    def _pending(
        self,
        overlay: dict[Key, Any],
        lo: bytes | None,
        hi: bytes | None,
        vnodes: list[int],
        reverse: bool,
    ) -> list[tuple[bytes, Key, Any]]:
        """The overlay's part of the range, as sorted (encoded key, key, value-or-tomb)."""
        pend: list[tuple[bytes, Key, Any]] = []
        if overlay:
            ov = list(overlay.items())
            fulls = self._full_many([k for k, _ in ov])
            vset = set(vnodes)
            for f, (k, v) in zip(fulls, ov, strict=True):
                e = f[_HEAD:]
                if f[_HEAD - 1] in vset and (lo is None or e >= lo) and (hi is None or e < hi):
                    pend.append((e, k, v))
            pend.sort(key=lambda t: t[0], reverse=reverse)
        return pend

    def _committed(
        self, vnodes: list[int], lo: bytes | None, hi: bytes | None, reverse: bool
    ) -> Iterator[tuple[bytes, bytes]]:
        """RocksDB's entries of the range over `vnodes`, merged in key order."""
        db = self._store.db
        streams = [self._vnode_items(db, v, lo, hi, reverse) for v in vnodes]
        if len(streams) == 1:
            return streams[0]
        return heapq.merge(*streams, key=lambda kv: kv[0], reverse=reverse)

    def _merge_gen(
        self,
        db_it: Iterator[tuple[bytes, bytes]] | None,
        pend: list[tuple[bytes, Key, Any]],
        reverse: bool,
    ) -> Iterator[tuple[Key, Value]]:
        if db_it is None:
            db_it = iter(())
        dec_k, dec_v = memcmp.decode_key, codec.decode_value
        pi, pn = 0, len(pend)
        for e, raw in db_it:
            while pi < pn and ((pend[pi][0] < e) if not reverse else (pend[pi][0] > e)):
                _, k, v = pend[pi]
                pi += 1
                if v is not _TOMB:
                    yield k, v
            if pi < pn and pend[pi][0] == e:
                _, k, v = pend[pi]
                pi += 1
                if v is not _TOMB:
                    yield k, v
                continue
            yield dec_k(e), dec_v(raw)
        while pi < pn:
            _, k, v = pend[pi]
            pi += 1
            if v is not _TOMB:
                yield k, v

    def _vnode_items(
        self, db_src: Any, vnode: int, lo: bytes | None, hi: bytes | None, reverse: bool
    ) -> Iterator[tuple[bytes, bytes]]:
        """(key bytes after the vnode, value bytes) of one vnode's part of the range."""
        p = self._vn[vnode]
        begin = p + (lo or b"")
        stop = p + hi if hi is not None else self._vn_end[vnode]
        # bounds by hand: rocksdict's lower bound does not end reverse iterations
        if reverse:
            items = db_src.items(backwards=True, from_key=stop)
            rows = takewhile(lambda kv: kv[0] >= begin, dropwhile(lambda kv: kv[0] >= stop, items))
        else:
            items = db_src.items(from_key=begin)
            rows = takewhile(lambda kv: kv[0] < stop, items)
        try:
            for k, v in rows:
                yield k[_HEAD:], v
        finally:
            del items

    # -- snapshots ---------------------------------------------------------------------
    def snapshot(self, epoch: int = -1) -> DiskTableSnapshot:
        """A read-only image as of now: a copy of the overlay plus an undo log of the
        committed rows the next checkpoints change (see `DiskTableSnapshot`)."""
        self._spill()
        snap = DiskTableSnapshot(self, epoch)
        self._pins.add(snap)
        return snap

    def _preserve(self, keys: list[Key] | None) -> None:
        """Before a checkpoint changes `keys` in RocksDB (None: the whole range), record
        their committed values in every live snapshot's undo log."""
        pins = [p for p in self._pins if p._live]
        if not pins:
            return
        if keys is None:
            old = dict(self._merged({}, True, None, None, None, False))
            keys = list(old)
            vals: list[Any] = list(old.values())
        else:
            raws = self._store.multi_get(self._full_many(keys)) if keys else []
            vals = [None if r is None else codec.decode_value(r) for r in raws]
        for p in pins:
            p._preserve(keys, vals)

    # -- writes ------------------------------------------------------------------------
    def put(self, key: Key, value: Value) -> None:
        self._spill()
        self._overlay[key] = value

    def delete(self, key: Key) -> None:
        self._spill()
        self._tombs = True
        self._overlay[key] = _TOMB

    def put_many(self, keys: Iterable[Key], values: Iterable[Value]) -> None:
        """Batched put: `keys[i]` -> `values[i]` (a later duplicate key wins)."""
        self._spill()
        self._overlay.update(zip(keys, values, strict=True))

    def delete_many(self, keys: Iterable[Key]) -> None:
        """Batched delete; absent keys are ignored."""
        self._spill()
        self._tombs = True
        self._overlay.update(dict.fromkeys(keys, _TOMB))

    def clear(self) -> None:
        if self._columns is not None:
            self._columns.reset()
        self._overlay.clear()
        self._cache.clear()
        self._cleared = True
        self._written = None

    def prefer_keyed(self) -> None:
        """StateTable's layout hint; this backend always stores one record per key."""

    @property
    def keyed(self) -> bool:
        return True

    @property
    def converting(self) -> bool:
        """The store still holds this table in `StateTable`'s older layout: the overlay
        holds those rows until the next checkpoint rewrites them (an operator whose own
        value format changed with the move converts them first)."""
        return self._legacy

    # -- persistence -------------------------------------------------------------------
    @property
    def dirty_count(self) -> int:
        cols = 0 if self._columns is None else self._columns.dirty_count
        return len(self._overlay) + self._cleared + cols

    def write_dirty(self, batch: WriteBatchLike) -> int:
        """Write the epoch's changes into the checkpoint batch; the rows move to the cache."""
        if self._pins:  # snapshots need the committed values of every changed row
            self._spill()
        n = len(self._overlay)
        if self._count is not None:  # counted: keep the count right through this commit
            self._count = len(self)
        if self._pins:
            self._preserve(None if self._cleared else list(self._overlay))
        if self._cleared:
            batch.delete_range(self._prefix + b"\x00", self._end)
            self._cleared = False
        if self._legacy:
            batch.delete_range(self._prefix + _LEGACY_START, self._prefix + COLUMN_RUNS)
            self._legacy = False
        if n:
            self._write_overlay(batch)
        if self._columns is not None and self._columns.dirty_count:
            n += self._columns.write_columns(batch)
            self._cache.clear()  # rows written in columns may be cached as tuples
        return n

    def _write_overlay(self, batch: WriteBatchLike) -> None:
        """The overlay's puts and deletes into `batch`, in key order per key width:
        RocksDB inserts a batch into its memtable in the batch's order, and random keys
        cost about 10x more there (2 us vs 0.2 us an entry measured at 500k entries)
        than sorted ones. The written rows move to the cache."""
        ov = self._overlay
        keys = list(ov)
        vals = list(ov.values())
        dead: list[Key] = []
        if self._tombs:
            live_k: list[Key] = []
            live_v: list[Value] = []
            for k, v in zip(keys, vals, strict=True):
                if v is _TOMB:
                    dead.append(k)
                else:
                    live_k.append(k)
                    live_v.append(v)
            keys, vals = live_k, live_v
            if dead:
                delete = batch.delete
                deque(map(delete, self._store_keys(dead, True)[0]), maxlen=0)
        vbs = codec.encode_values(vals)
        sizes = list(map(len, vbs))
        fulls, order = self._store_keys(keys, True)
        if self._written is not None:
            self._written.add(fulls)
            if self._written.nbytes > self._hot.per_table() * self._hot.entry_bytes:
                self._written = None  # past the table's share of the cache budget
        put_many = getattr(batch, "put_many", None)
        in_order = vbs if order is None else list(map(vbs.__getitem__, order))
        if put_many is not None:  # the puts at C speed (a checkpoint's `EpochChanges`)
            put_many(fulls, in_order)
        else:
            deque(map(batch.put, fulls, in_order), maxlen=0)
        self._overlay = {}
        self._tombs = False
        cache = self._cache
        cap = self._hot.per_table()
        if not dead and 0 < len(ov) <= cap - cap // 4 and max(sizes) <= CACHE_MAX_VALUE:
            # every written row is cached (`_remember`'s common case): the overlay dict
            # itself becomes the cache, or is merged into it with its stored hashes
            if cache:
                cache.update(ov)
            else:
                self._cache = ov
            self._evict(cap)
            return
        for k in dead:
            cache.pop(k, None)
        self._remember(keys, vals, sizes, absent=False)

    def load(self, store: StateStore) -> None:
        """Start from what the store holds (recovery): forget the overlay and the cache.
        A range written in `StateTable`'s layouts is read into the overlay once and
        rewritten in this layout (and the old records deleted) at the next checkpoint."""
        self._store = store
        if self._columns is not None:
            self._columns.reset()
        self._overlay = {}
        self._cache = {}
        self._cleared = False
        self._legacy = False
        self._count = None
        if store.last_key_in(self._prefix + _LEGACY_START, self._prefix + COLUMN_RUNS) is None:
            self._written = self._fresh_filter()
            return
        self._written = None
        old = StateTable(self.table_id, self.name)
        old.load(store)
        self._overlay = dict(old.items())
        self._legacy = True

    def drop(self, batch: WriteBatchLike) -> None:
        """Delete every key of this table (the overlay now, the store with the batch)."""
        if self._pins:
            self._preserve(None)
        if self._columns is not None:
            self._columns.reset()
        self._overlay = {}
        self._cache = {}
        self._cleared = False
        self._count = 0
        batch.delete_range(self._prefix, self._end)

    def __repr__(self) -> str:
        return f"DiskStateTable({self.table_id}, {self.name!r})"


class DiskTableSnapshot:
    """A read-only image of a `DiskStateTable` at the moment `snapshot` was called.

    It keeps a copy of the table's overlay then and an undo log: before a checkpoint
    writes rows to RocksDB the table records their committed values here (RocksDB's own
    snapshots are not usable for iteration through rocksdict). Reads look at the frozen
    overlay, then the undo log, then RocksDB; reads of RocksDB happen before the undo
    log is consulted, so a reader on another thread never sees a newer row. Release it
    (or drop it) to stop the copy-on-write cost.
    """

    def __init__(self, table: DiskStateTable, epoch: int) -> None:
        self.epoch = epoch
        self.name = table.name
        self._table = table
        self._overlay = dict(table._overlay)
        self._committed = not table._cleared
        self._undo: dict[Key, Any] = {}
        self._live = True

    def _preserve(self, keys: list[Key], vals: list[Any]) -> None:
        undo = self._undo
        for k, v in zip(keys, vals, strict=True):
            if k not in undo:
                undo[k] = _TOMB if v is None else v

    def get(self, key: Key) -> Value | None:
        return self.get_many([key])[0]

    def get_many(self, keys: Iterable[Key]) -> list[Value | None]:
        keys = list(keys)
        if not self._live:
            return [None] * len(keys)
        t = self._table
        db: list[Any] = [None] * len(keys)
        if self._committed and keys:
            dec = codec.decode_value
            db = [None if r is None else dec(r) for r in t._store.multi_get(t._full_many(keys))]
        undo, ov = dict(self._undo), self._overlay
        out: list[Value | None] = []
        for k, v in zip(keys, db, strict=True):
            if k in ov:
                v = ov[k]
            elif k in undo:
                v = undo[k]
            out.append(None if v is _TOMB else v)
        return out

    def __contains__(self, key: Key) -> bool:
        return self.get(key) is not None

    def __len__(self) -> int:
        return sum(1 for _ in self.scan())

    def items(self) -> Iterator[tuple[Key, Value]]:
        return self.scan()

    def to_dict(self) -> dict[Key, Value]:
        return dict(self.scan())

    def scan(
        self,
        prefix: Key = (),
        *,
        start: Key | None = None,
        end: Key | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> Iterator[tuple[Key, Value]]:
        t = self._table
        lo, hi, vnodes = t._range(prefix, start, end)
        empty = limit is not None and limit <= 0 or (lo is not None and hi is not None and lo >= hi)
        if empty or not self._live:
            return iter(())
        it = t._merged(self._overlay, self._committed, lo, hi, vnodes, reverse, self._undo)
        return islice(it, limit) if limit is not None else it

    def release(self) -> None:
        self._live = False
        self._overlay = {}
        self._undo = {}
        self._table._pins.discard(self)

    def __repr__(self) -> str:
        return f"DiskTableSnapshot({self.name!r}, epoch={self.epoch})"


class DiskTables:
    """What allocators need to hand out disk tables: the open store and the operator
    cache budget (one per database; the runtime owns it)."""

    def __init__(self, store: StateStore, cache: HotCache) -> None:
        self.store = store
        self.cache = cache

    def table(self, table_id: int, name: str, dist_len: int) -> DiskStateTable:
        """The table `table_id`, starting from what the store holds."""
        t = DiskStateTable(table_id, name, self.store, dist_len=dist_len, cache=self.cache)
        t.load(self.store)
        return t
