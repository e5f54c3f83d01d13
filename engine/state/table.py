"""StateTable: an operator's (or relation's) keyed state, resident in memory, durable in RocksDB.

Every stateful thing in the dataflow (a base table's rows, a materialized view's rows, an
aggregation's per-group accumulators, a min/max multiset) is a `StateTable`: a mapping
from a key tuple to a value tuple. The whole mapping lives in a Python dict (the cache is
fully resident for now); every change is also recorded as dirty, and at each checkpoint
the runtime calls `write_dirty(batch)` on every table so all changes of the epoch land in
one atomic RocksDB WriteBatch together with the catalog and source offsets.

Lifecycle:
1. created with a table id unique in the database (`StateTableCatalog.id`);
2. `load(store)` on recovery fills the dict from the store's prefix scan;
3. per epoch: operators read and write through the interface below, per chunk;
4. at the checkpoint: `write_dirty(batch)` encodes dirty keys, then the batch commits;
   right after a commit, `snapshot(epoch)` pins that committed image for readers;
5. `drop(batch)` deletes the whole table's key range (DROP ... of its owner).

The interface operators use (the contract `tests/unit/state/test_state_contract.py` checks
over the in-memory table and over tables persisted to and reloaded from RocksDB, so
the state-store work can put RocksDB underneath without touching operators):

* per-chunk reads and writes: `get_many(keys)` (multi-get, None where absent),
  `put_many(keys, values)`, `delete_many(keys)`; `get`/`put`/`delete` for single keys;
  `len`, `in`;
* ordered range scans: `scan(prefix, start=, end=, reverse=, limit=)` yields
  `(key, value)` in key order (`engine.state.order`) for keys starting with `prefix`
  within `[start, end)`, descending with `reverse`, at most `limit`;
  `scan_prefixes(prefixes, limit)` is the first `limit` entries of many prefixes at once;
  `items()` is the whole table in no particular order (rebuilding per-run indexes);
* `snapshot(epoch)`: a read-only `TableSnapshot` of the table as it is now (call it at a
  committed point); later writes do not change it, and it may be read from another
  thread while the barrier thread writes the table (see `TableSnapshot`).

Nothing outside this module touches the mapping itself. Reads see the epoch's own
writes. Keys and values are tuples of the Python values documented in `engine.types`.

Cost model of the in-memory implementation: point reads and writes are dict operations.
The first `scan` builds an ordered index of the keys (a sorted list by `key_order`),
kept up to date by later writes of new keys and deletes (O(log n) each), so only tables
that are scanned pay for order. A live snapshot makes each first write of a key after
it record the key's old value once (copy-on-write); with no snapshot alive writes pay
one attribute test.

Two store layouts (one per table at any time; `load` reads either):

* log (the default): each checkpoint writes the table's dirty entries as ONE record,
  `prefix + 0x02 + seq (8 bytes BE)` -> `marshal((keys, values, deleted keys))` with each
  list an `codec.encode_rows` blob, so an epoch's thousands of changed rows cost a few
  C-level marshal calls and one RocksDB put instead of one encode and one put per row
  (the per-row form was most of the checkpoint's CPU). `load` replays the records in seq
  order. The store then holds dead entries (overwritten or deleted keys); when they
  outnumber the live ones (and `COMPACT_MIN`), the checkpoint rewrites the table: a
  delete_range of its prefix, then the live rows in records of `CHUNK_ROWS`. Each rewrite
  follows at least as many logged changes as it writes, so it at most doubles the bytes.
* keyed: one record per key, `prefix + codec.encode_key(key)` -> `codec.encode_value`.
  For tables with few, large values rewritten in place (the columnar materialization's
  Arrow segments and masks, see `prefer_keyed`), where rewriting the table would copy
  megabytes to drop a few dead masks. A table also switches when its logged values
  average more than `BIG_VALUE` bytes, and stays keyed when loaded from keyed records
  (stores written before the log layout existed).
A switch of layout rewrites the whole table (delete_range, then the new form) in the same
checkpoint batch, so the range never mixes the two.
"""

from __future__ import annotations

import marshal
import weakref
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import TYPE_CHECKING, Any

from sortedcontainers import SortedKeyList

from engine.state import codec
from engine.state.order import key_order

if TYPE_CHECKING:
    from engine.state.store import StateStore, WriteBatchLike

Key = tuple[Any, ...]
Value = tuple[Any, ...]

_TOMBSTONE = object()
_LOG = 0x02
"""First byte after the table prefix of a log record (encoded keys start 0x01 or 0x28)."""
COMPACT_MIN = 65_536
"""Dead entries tolerated in the store regardless of the table's size."""
CHUNK_ROWS = 65_536
"""Rows per record when the log layout rewrites a table."""
BIG_VALUE = 2048
"""Mean encoded value size (bytes) from which a log-layout table switches to keyed."""


class StateTable:
    """Keyed state with epoch-batched persistence; see the module docstring."""

    __slots__ = (
        "table_id",
        "name",
        "_data",
        "_dirty",
        "_prefix",
        "_keyed",
        "_relayout",
        "_seq",
        "_records",
        "_order",
        "_pins",
        "_watch",
    )

    def __init__(self, table_id: int, name: str = "") -> None:
        self.table_id = table_id
        self.name = name
        self._data: dict[Key, Value] = {}
        # changed keys -> their new value (or _TOMBSTONE): the checkpoint needs no lookups
        self._dirty: dict[Key, Any] = {}
        self._prefix = codec.table_prefix(table_id)
        self._keyed = False  # store layout: one record per key (else: log records)
        self._relayout = False  # the store holds the other layout: rewrite at next write
        self._seq = 0  # next log record number
        self._records = 0  # entries the store holds for this table (live and dead)
        self._order: SortedKeyList | None = None  # keys in key order, once scanned
        self._pins: weakref.WeakSet[TableSnapshot] = weakref.WeakSet()
        self._watch = False  # an order index or a live snapshot wants to see writes

    def prefer_keyed(self) -> None:
        """Use the keyed layout (few large values updated in place); call before writing."""
        if not self._keyed:
            self._keyed = True
            self._relayout = self._records > 0

    @property
    def keyed(self) -> bool:
        return self._keyed

    # -- reads -------------------------------------------------------------------------
    def get(self, key: Key) -> Value | None:
        return self._data.get(key)

    def get_many(self, keys: Iterable[Key]) -> list[Value | None]:
        """Multi-get: the value of every key in order, None where the key is absent."""
        return list(map(self._data.get, keys))

    def __contains__(self, key: Key) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def items(self) -> Iterator[tuple[Key, Value]]:
        """Every entry, in no particular order (do not write the table while iterating)."""
        return iter(self._data.items())

    def values(self) -> Iterable[Value]:
        """Every value, in no particular order (do not write the table while iterating)."""
        return self._data.values()

    def keys(self) -> Iterable[Key]:
        """Every key, in no particular order (do not write the table while iterating)."""
        return self._data.keys()

    def scan(
        self,
        prefix: Key = (),
        *,
        start: Key | None = None,
        end: Key | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> Iterator[tuple[Key, Value]]:
        """Entries whose key starts with `prefix` and lies in `[start, end)`, in key order
        (descending with `reverse`), at most `limit` of them.

        `start`/`end` bound the whole key (None: unbounded) in `engine.state.order`'s
        order, where a key sorts after its own prefixes: `end=(t,)` stops before every
        key whose first element is `t`. The entries are those of the table at the call:
        the caller may write the table while consuming them. `limit=1` is the first (or,
        with `reverse`, the last) entry of a range: a group's minimum or maximum.
        """
        order = self._ordered()
        i, j = _slice(order.bisect_key_left, len(order), prefix, start, end, reverse, limit)
        data = self._data
        keys = order[i:j] if i < j else []
        return iter([(k, data[k]) for k in (reversed(keys) if reverse else keys)])

    def scan_prefixes(
        self,
        prefixes: list[Key],
        limit: int | None = None,
        *,
        keys: bool = True,
        reverse: bool = False,
    ) -> list[list[tuple[Key | None, Value]]]:
        """For each prefix, the first `limit` entries (all when None) whose key starts
        with it, in key order (descending with `reverse`): a batch of per-group range
        reads (a top-N refilling the first rows of many groups at once, the aggregation
        finding the new minimum or maximum of groups whose extreme was deleted).
        `keys=False`: the caller needs only the values (a disk table then skips decoding
        keys; None in their place)."""
        scans = [self.scan(p, limit=limit, reverse=reverse) for p in prefixes]
        if not keys:
            return [[(None, v) for _, v in rows] for rows in scans]
        return [list(rows) for rows in scans]

    def to_dict(self) -> dict[Key, Value]:
        """A copy of the whole mapping (tests and debugging)."""
        return dict(self._data)

    def snapshot(self, epoch: int = -1) -> TableSnapshot:
        """A read-only image of the table as it is now, tagged with `epoch`; see
        `TableSnapshot`. Take it at a committed point (the runtime does, under its lock,
        right after a checkpoint); it stays valid while the table changes."""
        snap = TableSnapshot(self._data, epoch, self.name)
        self._pins.add(snap)
        self._watch = True
        return snap

    def _ordered(self) -> SortedKeyList:
        if self._order is None:
            self._order = SortedKeyList(self._data, key=key_order)
            self._watch = True
        return self._order

    def _before_write(self, keys: Iterable[Key], deleting: bool) -> None:
        """Keep the order index and live snapshots right; `keys` are about to change."""
        data = self._data
        pins = list(self._pins)
        if not pins and self._order is None:
            self._watch = False
            return
        keys = list(keys)
        for snap in pins:
            snap._preserve(keys)
        order = self._order
        if order is not None:
            if deleting:
                for k in dict.fromkeys(keys):
                    if k in data:
                        order.remove(k)
            else:
                new = [k for k in dict.fromkeys(keys) if k not in data]
                if new:
                    order.update(new)

    # -- writes ------------------------------------------------------------------------
    def put(self, key: Key, value: Value) -> None:
        if self._watch:
            self._before_write((key,), False)
        self._data[key] = value
        self._dirty[key] = value

    def delete(self, key: Key) -> None:
        if self._watch:
            self._before_write((key,), True)
        if self._data.pop(key, _TOMBSTONE) is not _TOMBSTONE:
            self._dirty[key] = _TOMBSTONE

    def put_many(self, keys: Iterable[Key], values: Iterable[Value]) -> None:
        """Batched put: `keys[i]` -> `values[i]` (a later duplicate key wins)."""
        pairs = dict(zip(keys, values, strict=True))
        if self._watch:
            self._before_write(pairs, False)
        self._data.update(pairs)
        self._dirty.update(pairs)

    def delete_many(self, keys: Iterable[Key]) -> None:
        """Batched delete; absent keys are ignored."""
        if self._watch:
            keys = list(keys)
            self._before_write(keys, True)
        data = self._data
        dirty = self._dirty
        for k in keys:
            if data.pop(k, _TOMBSTONE) is not _TOMBSTONE:
                dirty[k] = _TOMBSTONE

    def clear(self) -> None:
        if self._watch:
            self._before_write(self._data, True)
        self._dirty.update(dict.fromkeys(self._data, _TOMBSTONE))
        self._data.clear()

    # -- persistence -------------------------------------------------------------------
    @property
    def dirty_count(self) -> int:
        return len(self._dirty)

    def write_dirty(self, batch: WriteBatchLike) -> int:
        """Write every key changed since the last call into `batch` (in this table's
        layout, see the module docstring); returns the number of changed keys."""
        n = len(self._dirty)
        if not n:
            return 0
        if self._relayout:
            self._rewrite(batch)
            return n
        if self._keyed:
            return self._write_keyed(batch)
        data = self._data
        keys = list(self._dirty)
        vals = list(self._dirty.values())
        dels: list[Key] = []
        if _TOMBSTONE in vals:
            live = [(k, v) for k, v in zip(keys, vals, strict=True) if v is not _TOMBSTONE]
            dels = [k for k, v in zip(keys, vals, strict=True) if v is _TOMBSTONE]
            keys = [k for k, _ in live]
            vals = [v for _, v in live]
        if self._records + n - len(data) > max(len(data), COMPACT_MIN):
            self._rewrite(batch)  # more dead entries than live ones
            return n
        vb = codec.encode_rows(vals)
        if vals and len(vb) > BIG_VALUE * len(vals):
            self._keyed = True
            self._rewrite(batch)
            return n
        batch.put(self._log_key(), _log_record(codec.encode_rows(keys), vb, dels))
        self._records += n
        self._dirty.clear()
        return n

    def _log_key(self) -> bytes:
        self._seq += 1
        return self._prefix + bytes((_LOG,)) + (self._seq - 1).to_bytes(8, "big")

    def _rewrite(self, batch: WriteBatchLike) -> None:
        """Replace the table's whole store range by its live rows in the current layout."""
        batch.delete_range(self._prefix, codec.table_prefix(self.table_id + 1))
        self._relayout = False
        if self._keyed:
            self._dirty = dict(self._data)
            self._write_keyed(batch)
            self._records = 0
            return
        items = list(self._data.items())
        for i in range(0, len(items), CHUNK_ROWS):
            part = items[i : i + CHUNK_ROWS]
            kb = codec.encode_rows([k for k, _ in part])
            vb = codec.encode_rows([v for _, v in part])
            batch.put(self._log_key(), _log_record(kb, vb, []))
        self._records = len(items)
        self._dirty.clear()

    def _write_keyed(self, batch: WriteBatchLike) -> int:
        n = len(self._dirty)
        if not n:
            return 0
        prefix = self._prefix
        keys = list(self._dirty)
        vals = list(self._dirty.values())
        kbs = codec.encode_keys(keys)
        if _TOMBSTONE in vals:
            delete = batch.delete
            live_k: list[bytes] = []
            live_v: list[Value] = []
            for kb, v in zip(kbs, vals, strict=True):
                if v is _TOMBSTONE:
                    delete(prefix + kb)
                else:
                    live_k.append(kb)
                    live_v.append(v)
            put = batch.put
            for kb, vb in zip(live_k, codec.encode_values(live_v), strict=True):
                put(prefix + kb, vb)
        else:
            put = batch.put
            for kb, vb in zip(kbs, codec.encode_values(vals), strict=True):
                put(prefix + kb, vb)
        self._dirty.clear()
        return n

    def load(self, store: StateStore) -> None:
        """Fill the dict from the store (recovery). Clears anything in memory first."""
        self._detach()
        self._data.clear()
        self._dirty.clear()
        self._records = 0
        self._seq = 0
        self._relayout = False
        data = self._data
        dec_k = codec.decode_key
        dec_v = codec.decode_value
        plen = len(self._prefix)
        logs = keyed = 0
        rows_k: list[Key] = []  # keyed records, their NaNs made one object in bulk
        rows_v: list[Value] = []
        for kb, vb in store.scan_prefix(self._prefix):
            if kb[plen] == _LOG:
                if rows_k:
                    data.update(zip(_same_nan(rows_k), rows_v, strict=True))
                    rows_k, rows_v = [], []
                logs += 1
                self._seq = int.from_bytes(kb[plen + 1 :], "big") + 1
                ks, vs, ds = _read_log_record(vb)
                data.update(zip(ks, vs, strict=True))
                for k in ds:
                    data.pop(k, None)
                self._records += len(ks) + len(ds)
            else:
                keyed += 1
                rows_k.append(dec_k(kb[plen:]))
                rows_v.append(dec_v(vb))
        if rows_k:
            data.update(zip(_same_nan(rows_k), rows_v, strict=True))
        if keyed:
            self._keyed = True
            self._relayout = logs > 0  # cannot happen unless a batch was torn; heal it
        elif logs and self._keyed:
            self._relayout = True  # prefer_keyed() before load: convert at the next write

    def drop(self, batch: WriteBatchLike) -> None:
        """Delete every key of this table (in memory now, in the store with the batch)."""
        self._detach()
        self._data.clear()
        self._dirty.clear()
        self._records = 0
        self._relayout = False
        batch.delete_range(self._prefix, codec.table_prefix(self.table_id + 1))

    def _detach(self) -> None:
        """Before the mapping is replaced wholesale: it becomes a new dict, so live
        snapshots keep the old one, which nothing changes any more; the order index is
        rebuilt on the next scan."""
        self._data = {}
        self._pins = weakref.WeakSet()
        self._order = None
        self._watch = False

    def __repr__(self) -> str:
        return f"StateTable({self.table_id}, {self.name!r}, rows={len(self._data)})"


_ABSENT = object()
_TOP = ((99,),)
"""Appended to a prefix's order: above the order of every key extending the prefix."""


def _slice(
    bisect: Any,
    n: int,
    prefix: Key,
    start: Key | None,
    end: Key | None,
    reverse: bool,
    limit: int | None,
) -> tuple[int, int]:
    """Positions `[i, j)` in a key-ordered sequence of `n` keys that a scan returns."""
    lo, hi = _bounds(prefix, start, end)
    i = bisect(lo) if lo is not None else 0
    j = bisect(hi) if hi is not None else n
    if limit is not None and j - i > limit:
        if reverse:
            i = j - max(limit, 0)
        else:
            j = i + max(limit, 0)
    return i, j


def _bounds(prefix: Key, start: Key | None, end: Key | None) -> tuple[Any, Any]:
    """The half-open range `[lo, hi)` of key orders a scan covers (None: unbounded)."""
    lows = [key_order(prefix)] if prefix else []
    highs = [key_order(prefix) + _TOP] if prefix else []
    if start is not None:
        lows.append(key_order(start))
    if end is not None:
        highs.append(key_order(end))
    return (max(lows) if lows else None), (min(highs) if highs else None)


class TableSnapshot:
    """A read-only image of a `StateTable` at the moment `StateTable.snapshot` was called.

    Copy-on-write: the snapshot shares the table's live mapping and keeps `_undo`, the
    old value (or absence) of every key written since it was taken; the table records a
    key there before the first change of that key. Readers may run on another thread
    than the writer without a lock (each step is one dict operation under the
    interpreter lock): a read looks at the live mapping first and then at `_undo`, and a
    writer fills `_undo` before changing the mapping, so a reader never sees a value
    newer than the snapshot. Release it (`release()`, or drop the last reference) to
    stop the copy-on-write cost.

    Scans copy the live mapping once (O(table size)); point reads cost two dict lookups.
    The RocksDB-backed store is meant to answer the same calls from a RocksDB snapshot.
    """

    __slots__ = ("epoch", "name", "_live", "_undo", "_len", "__weakref__")

    def __init__(self, live: dict[Key, Value], epoch: int, name: str) -> None:
        self.epoch = epoch
        self.name = name
        self._live: dict[Key, Value] | None = live
        self._undo: dict[Key, Any] = {}
        self._len = len(live)

    def _preserve(self, keys: list[Key]) -> None:
        """Writer side: remember the current values of `keys` not yet remembered."""
        live = self._live
        if live is None:
            return
        undo = self._undo
        for k in keys:
            if k not in undo:
                undo[k] = live.get(k, _ABSENT)

    def _image(self) -> dict[Key, Value]:
        live = self._live
        if live is None:
            return {}
        out = dict(live)  # one C-level copy: atomic with respect to the writer
        for k, v in list(self._undo.items()):
            if v is _ABSENT:
                out.pop(k, None)
            else:
                out[k] = v
        return out

    # -- the read interface of `StateTable` ---------------------------------------------
    def get(self, key: Key) -> Value | None:
        live = self._live
        v = live.get(key, _ABSENT) if live is not None else _ABSENT
        u = self._undo.get(key, _TOMBSTONE)
        if u is not _TOMBSTONE:
            v = u
        return None if v is _ABSENT else v  # type: ignore[return-value]

    def get_many(self, keys: Iterable[Key]) -> list[Value | None]:
        return [self.get(k) for k in keys]

    def __contains__(self, key: Key) -> bool:
        return self.get(key) is not None

    def __len__(self) -> int:
        return self._len

    def items(self) -> Iterator[tuple[Key, Value]]:
        return iter(self._image().items())

    def scan(
        self,
        prefix: Key = (),
        *,
        start: Key | None = None,
        end: Key | None = None,
        reverse: bool = False,
        limit: int | None = None,
    ) -> Iterator[tuple[Key, Value]]:
        """As `StateTable.scan`, over the snapshot's image (sorted per call)."""
        image = self._image()
        keys = sorted(image, key=key_order)
        orders = [key_order(k) for k in keys]
        i, j = _slice(
            lambda o: bisect_left(orders, o), len(keys), prefix, start, end, reverse, limit
        )
        part = keys[i:j] if i < j else []
        return iter([(k, image[k]) for k in (reversed(part) if reverse else part)])

    def to_dict(self) -> dict[Key, Value]:
        return self._image()

    def release(self) -> None:
        """Stop following the table; the snapshot is unusable afterwards."""
        self._live = None
        self._undo = {}
        self._len = 0

    def __repr__(self) -> str:
        return f"TableSnapshot({self.name!r}, epoch={self.epoch}, rows={self._len})"


def _log_record(keys: bytes, values: bytes, deleted: list[Key]) -> bytes:
    return marshal.dumps((keys, values, codec.encode_rows(deleted)), 2)


def _read_log_record(raw: bytes) -> tuple[list[Key], list[Value], list[Key]]:
    kb, vb, db = marshal.loads(raw)
    return _same_nan(codec.decode_rows(kb)), codec.decode_rows(vb), _same_nan(codec.decode_rows(db))


_NAN = codec.NAN  # the one NaN of loaded keys, also the operators' (see codec.NAN)
_CONTAINERS = frozenset({tuple, list})
_NAN_HOLDERS = frozenset({float, tuple, list})


def _same_nan(keys: list[Key]) -> list[Key]:
    """Keys with every NaN replaced by one NaN object (`codec.NAN`): NaN != NaN, but
    dict lookups compare by identity first, so a later record's delete (or overwrite) of
    a NaN key finds the key an earlier record put, and an operator's lookup with its
    value keys (which hold the same object) finds the loaded row."""
    types = set(map(type, chain.from_iterable(keys)))
    if not types & _NAN_HOLDERS:
        return keys
    if not types & _CONTAINERS and not any(v != v for v in chain.from_iterable(keys)):
        return keys
    return [_fix_nan(k) if _has_nan(k) else k for k in keys]


def _has_nan(v: Any) -> bool:
    if type(v) is float:
        return v != v
    if type(v) in (tuple, list):
        return any(_has_nan(x) for x in v)
    return False


def _fix_nan(v: Any) -> Any:
    if type(v) is float:
        return _NAN if v != v else v
    if type(v) is tuple:
        return tuple(_fix_nan(x) for x in v)
    if type(v) is list:
        return [_fix_nan(x) for x in v]
    return v
