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
3. per epoch: operators call `get`/`put`/`delete` (or the `*_many` forms);
4. at the checkpoint: `write_dirty(batch)` encodes dirty keys, then the batch commits;
5. `drop(batch)` deletes the whole table's key range (DROP ... of its owner).

Reads see the epoch's own writes. Keys and values are tuples of the Python values
documented in `engine.types`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from engine.state import codec

if TYPE_CHECKING:
    from engine.state.store import StateStore, WriteBatchLike

Key = tuple[Any, ...]
Value = tuple[Any, ...]

_TOMBSTONE = object()


class StateTable:
    """Keyed state with epoch-batched persistence; see the module docstring."""

    __slots__ = ("table_id", "name", "_data", "_dirty", "_prefix")

    def __init__(self, table_id: int, name: str = "") -> None:
        self.table_id = table_id
        self.name = name
        self._data: dict[Key, Value] = {}
        self._dirty: set[Key] = set()
        self._prefix = codec.table_prefix(table_id)

    # -- reads -------------------------------------------------------------------------
    def get(self, key: Key) -> Value | None:
        return self._data.get(key)

    def __contains__(self, key: Key) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)

    def items(self) -> Iterator[tuple[Key, Value]]:
        return iter(self._data.items())

    def values(self) -> Iterable[Value]:
        return self._data.values()

    def keys(self) -> Iterable[Key]:
        return self._data.keys()

    @property
    def data(self) -> dict[Key, Value]:
        """The live mapping. Read-only for callers: writes must go through put/delete."""
        return self._data

    # -- writes ------------------------------------------------------------------------
    def put(self, key: Key, value: Value) -> None:
        self._data[key] = value
        self._dirty.add(key)

    def delete(self, key: Key) -> None:
        if self._data.pop(key, _TOMBSTONE) is not _TOMBSTONE:
            self._dirty.add(key)

    def put_many(self, keys: Iterable[Key], values: Iterable[Value]) -> None:
        pairs = dict(zip(keys, values, strict=True))
        self._data.update(pairs)
        self._dirty.update(pairs.keys())

    def delete_many(self, keys: Iterable[Key]) -> None:
        data = self._data
        dirty = self._dirty
        for k in keys:
            if data.pop(k, _TOMBSTONE) is not _TOMBSTONE:
                dirty.add(k)

    def clear(self) -> None:
        self._dirty.update(self._data.keys())
        self._data.clear()

    # -- persistence -------------------------------------------------------------------
    @property
    def dirty_count(self) -> int:
        return len(self._dirty)

    def write_dirty(self, batch: WriteBatchLike) -> int:
        """Encode every key changed since the last call into `batch`; returns the count."""
        n = len(self._dirty)
        if not n:
            return 0
        prefix = self._prefix
        data = self._data
        keys = list(self._dirty)
        get = data.get
        vals = [get(k, _TOMBSTONE) for k in keys]
        kbs = codec.encode_keys(keys)
        if _TOMBSTONE in vals:
            put, delete = batch.put, batch.delete
            for kb, v in zip(kbs, vals, strict=True):
                if v is _TOMBSTONE:
                    delete(prefix + kb)
                else:
                    put(prefix + kb, codec.encode_value(v))
        else:
            put = batch.put
            for kb, vb in zip(kbs, codec.encode_values(vals), strict=True):
                put(prefix + kb, vb)
        self._dirty.clear()
        return n

    def load(self, store: StateStore) -> None:
        """Fill the dict from the store (recovery). Clears anything in memory first."""
        self._data.clear()
        self._dirty.clear()
        dec_k = codec.decode_key
        dec_v = codec.decode_value
        plen = len(self._prefix)
        for kb, vb in store.scan_prefix(self._prefix):
            self._data[dec_k(kb[plen:])] = dec_v(vb)

    def drop(self, batch: WriteBatchLike) -> None:
        """Delete every key of this table (in memory now, in the store with the batch)."""
        self._data.clear()
        self._dirty.clear()
        batch.delete_range(self._prefix, codec.table_prefix(self.table_id + 1))

    def __repr__(self) -> str:
        return f"StateTable({self.table_id}, {self.name!r}, rows={len(self._data)})"
