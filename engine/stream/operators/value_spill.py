"""Bounded memory for an aggregation's value state: min/max multisets and DISTINCT counts.

Why: min/max over an input that can retract keep every counted value of a group (a
multiset: deleting the current extreme needs the next one), and a DISTINCT aggregate every
value's count. `HashAggOp` keeps them in a resident value table, `(*group, value) ->
(count,)` in `StateTable`'s log layout, and for min/max a per-group index `{value: count}`:
a Python entry or two per (group, value) pair, which is what made such views grow with
their input while everything else in state lives in RocksDB under the memory budget
(`engine.state.budget`).

What this does: a `ValueSpill` gives one value table a share of the budget, in pairs (its
spill table's share of the operator caches, `DiskStateTable.cache_rows`, at
`pair_bytes` a pair). When a step leaves more resident pairs than that, the groups touched
longest ago (a tick per step) move, whole, to the spill table, a disk table with one row
per group: group key -> `(blob,)`, the group's values and counts packed in one bytes value
(`pack`). A step about to update groups first reads the spilled ones among them (one
multi-get for the chunk's groups not resident). While the resident pairs are under half
the share it puts their pairs back into the value table and the index ("re-hydration");
past that it updates them in place: each becomes a dict `{value: count}` for the step
(`transient`, also in the min/max index, so the per-value logic sees the whole
multiset), written back as its blob at the step's end (`settle`). A chunk whose spilled
groups would pass twice the share is applied in parts split by group
(`HashAggOp._apply_by_group`). A step whose groups are resident costs what it did: the
only additions are a tick per touched group and a length test.

Persistence: an eviction deletes the group's pairs in the value table and puts its blob;
a re-hydration does the reverse; an in-place update rewrites the blob. Both tables
write into the same checkpoint batch, so at every committed point each group's values
are in exactly one of the two tables. A restart loads the value table (the groups
resident at the checkpoint, bounded by the budget then) and leaves the spill table in
RocksDB. Plans of views created before spill tables existed
declare none: their value state stays wholly resident, as it was.

Costs: a spilled group costs one RocksDB read, a C-level unpack into a dict and a pack
back each time a step touches it (its blob is rewritten at the checkpoint). Measured with
1M rows in 100k groups and a chunk touching every group: about 2x the resident CPU at
`--state-cache-mb 256`. A global aggregate (one group) is never split: its whole
multiset is in memory while a step updates it.

Lifecycle: made by `HashAggOp` for each value table whose plan declares a spill table and
whose spill table is a disk table (a store-backed runtime); `start` at the operator's
first step (the tables are loaded by then, the index built); per step `hydrate` before the
value table is read, `touched` after, `settle` and `fit` once the step's writes are
done (`pending`/`forget` around the parts of a split chunk).
"""

from __future__ import annotations

import marshal
import pickle
from datetime import date, datetime, time
from decimal import Decimal
from itertools import repeat
from types import NoneType
from typing import Any

from engine.state import codec
from engine.state.disk_table import DiskStateTable
from engine.state.table import StateTable

Key = tuple[Any, ...]

MINMAX_PAIR_BYTES = 320
"""Planning figure of a resident min/max pair: the value table's entry (key tuple, count
tuple, dict slot) and the index's."""
DISTINCT_PAIR_BYTES = 240
"""Planning figure of a resident DISTINCT pair (the value table's entry only)."""
LOW_WATER = 0.75
"""An eviction frees pairs down to this fraction of the share, so the next one waits
for a quarter of the share of new pairs (each pass over the resident state is paid for
by that many inserts)."""

_LISTS = b"m"  # marshal of (values, counts) follows: plain values only
_PLAIN = frozenset({NoneType, bool, int, float, str, bytes})
_ROWS = b"r"  # codec.encode_rows of (value, count) tuples follows
_PICKLED = b"p"  # pickle of (values, counts) follows
_EXACT = frozenset({NoneType, bool, int, float, str, bytes, Decimal, date, datetime, time})
"""Value types `codec.encode_rows` gives back equal (and of the same type); others (numpy
datetime64 of dates beyond year 9999, tuples of list columns, intervals) are pickled, so a
value comes back as the object a later delete of it will look for."""


def pack(values: list[Any], counts: list[int]) -> bytes:
    """One group's values and their counts as one bytes value (see `unpack`)."""
    types = set(map(type, values))
    if types <= _PLAIN:  # two lists in one C-level marshal call
        return _LISTS + marshal.dumps((values, counts), 2)
    if types <= _EXACT:
        return _ROWS + codec.encode_rows(list(zip(values, counts, strict=True)))
    return _PICKLED + pickle.dumps((values, counts), 5)


def unpack(blob: bytes) -> tuple[list[Any], list[int]]:
    """The values and counts of a `pack` blob; every float NaN is `codec.NAN` (the one
    NaN object of value keys: a NaN of its own would find no entry in a dict)."""
    if blob[:1] == _LISTS:
        values, counts = marshal.loads(blob[1:])
    elif blob[:1] == _ROWS:
        rows = codec.decode_rows(blob[1:])
        values = [r[0] for r in rows]
        counts = [r[1] for r in rows]
    elif blob[:1] == _PICKLED:
        values, counts = pickle.loads(blob[1:])
    else:
        raise ValueError(f"not a spilled value blob (tag {blob[:1]!r})")
    if float in set(map(type, values)):
        nan = codec.NAN
        values = [nan if type(v) is float and v != v else v for v in values]
    return values, counts


def _empty(table: DiskStateTable) -> bool:
    return not table.has_overlay and table.committed_empty()


class ValueSpill:
    """One value table's budget and spill table; see the module docstring."""

    def __init__(
        self, table: StateTable, spill: DiskStateTable, n_keys: int, pair_bytes: int
    ) -> None:
        self.table = table
        self.spill = spill
        self._nk = n_keys
        self._pair_bytes = pair_bytes
        self._index: dict[Key, dict[Any, int]] | None = None
        self._ticks: dict[Key, int] = {}
        self._tick = 0
        # DISTINCT tables (no index): the groups with resident pairs, once some spilled
        self._resident: set[Key] | None = None
        self._spilled = False
        # blobs read by `pending` for the parts of a split chunk (consumed by `hydrate`)
        self._fetched: dict[Key, bytes] = {}
        self.transient: dict[Key, dict[Any, int]] = {}
        """Spilled groups the current step updates in place (value -> count), past the
        room to re-hydrate them; also in the index (min/max) until `settle`."""
        self.updated = 0
        """Spilled groups updated in place so far (statistics and tests)."""
        self._bytes_per_pair = 16.0  # packed bytes a pair, as the last eviction measured
        self.evicted = 0
        """Groups moved to the spill table so far (statistics and tests)."""
        self.hydrated = 0
        """Groups read back from it so far."""

    def start(self, index: dict[Key, dict[Any, int]] | None) -> None:
        """At the first step: `index` is the min/max index of the value table (None for
        a DISTINCT table)."""
        self._index = index
        self._spilled = not _empty(self.spill)
        if self._spilled and index is None:
            nk = self._nk
            self._resident = {k[:nk] for k in self.table.keys()}  # noqa: SIM118

    def cap(self) -> int:
        """Resident pairs allowed: the spill table's share of the operator caches."""
        return self.spill.cache_rows(self._pair_bytes)

    @property
    def spilled(self) -> bool:
        """Whether the spill table may hold groups."""
        return self._spilled

    # -- per step ------------------------------------------------------------------------
    def pending(self, groups: list[Key]) -> dict[Key, int]:
        """The spilled groups among `groups` and about how many pairs each would bring
        back (from its blob's size): the operator splits a chunk whose spilled groups
        would not fit the share. Their blobs are kept for `hydrate` until `forget`."""
        if not self._spilled:
            return {}
        res: Any = self._index if self._index is not None else self._resident
        out = [g for g in groups if g not in res]
        if not out:
            return {}
        per = self._bytes_per_pair
        fetched = self._fetched
        sizes: dict[Key, int] = {}
        for g, v in zip(out, self.spill.get_many(out), strict=True):
            if v is not None:
                fetched[g] = v[0]
                sizes[g] = int(len(v[0]) / per) + 1
        return sizes

    def forget(self) -> None:
        """After the parts of a split chunk: drop the blobs `pending` kept."""
        self._fetched = {}

    def hydrate(self, groups: list[Key]) -> None:
        """Before a step updates `groups` (distinct keys): the spilled ones among them
        come back into the value table (and the index) while there is room, the others
        become `transient` dicts updated in place."""
        if not self._spilled:
            return
        idx = self._index
        res: Any = idx if idx is not None else self._resident
        out = [g for g in groups if g not in res]
        if not out:
            return
        fetched = self._fetched
        if fetched:  # read for this chunk's parts (still current: no part touched them)
            found = [(g, fetched.pop(g)) for g in out if g in fetched]
            done = {g for g, _ in found}
            out = [g for g in out if g not in done]
        else:
            found = []
        if out:
            got = self.spill.get_many(out)
            found += [(g, v[0]) for g, v in zip(out, got, strict=True) if v is not None]
        if not found:
            return
        room = self.cap() // 2 - len(self.table)  # re-hydrate while under half the share
        tr = self.transient
        back: list[tuple[Key, bytes]] = []
        for g, blob in found:
            if room > 0:
                back.append((g, blob))
                room -= int(len(blob) / self._bytes_per_pair) + 1
                continue
            vals, cnts = unpack(blob)  # updated in place, written back by `settle`
            d = dict(zip(vals, cnts, strict=True))
            tr[g] = d
            if idx is not None:
                idx[g] = d
        found = back
        if not found:
            return
        keys: list[Key] = []
        counts: list[int] = []
        for g, blob in found:
            vals, cnts = unpack(blob)
            keys += [g + (v,) for v in vals]
            counts += cnts
            if idx is not None:
                idx[g] = dict(zip(vals, cnts, strict=True))
            else:
                res.add(g)
        self.table.put_many(keys, [(c,) for c in counts])
        self.spill.delete_many([g for g, _ in found])
        self.hydrated += len(found)

    def touched(self, groups: list[Key]) -> None:
        """After a step updated `groups`: they are the most recently used."""
        if self.transient:
            tr = self.transient
            groups = [g for g in groups if g not in tr]
        self._tick += 1
        self._ticks.update(zip(groups, repeat(self._tick)))
        if self._resident is not None:
            self._resident.update(groups)

    def settle(self) -> None:
        """After a step's writes: the spilled groups it updated in place are written
        back as blobs (deleted when empty) and leave the index."""
        tr = self.transient
        if not tr:
            return
        idx = self._index
        put_k: list[Key] = []
        put_v: list[tuple[bytes]] = []
        gone: list[Key] = []
        for g, d in tr.items():
            if idx is not None and idx.get(g) is d:
                del idx[g]
            if d:
                put_k.append(g)
                put_v.append((pack(list(d), list(d.values())),))
            else:
                gone.append(g)
        self.spill.put_many(put_k, put_v)
        self.spill.delete_many(gone)
        self.updated += len(tr)
        self.transient = {}

    def fit(self) -> None:
        """After a step's writes: evict the least recently touched groups while the
        resident pairs pass the share (down to `LOW_WATER` of it)."""
        n = len(self.table)
        cap = self.cap()
        if n > cap:
            self._evict(n - int(cap * LOW_WATER))

    def _evict(self, need: int) -> None:
        idx = self._index
        nk = self._nk
        pairs: dict[Key, list[tuple[Any, int]]] = {}
        if idx is not None:
            sizes = {g: len(d) for g, d in idx.items()}
        else:  # one pass over the resident pairs, grouped (no per-group index to ask)
            for k, (c,) in self.table.items():
                g = k[:nk]
                lst = pairs.get(g)
                if lst is None:
                    pairs[g] = [(k[nk], c)]
                else:
                    lst.append((k[nk], c))
            sizes = {g: len(p) for g, p in pairs.items()}
        ticks = self._ticks
        order = sorted(sizes, key=lambda g: ticks.get(g, 0))  # least recent first
        chosen: list[Key] = []
        freed = 0
        for g in order:
            if freed >= need:
                break
            chosen.append(g)
            freed += sizes[g]
        dead: list[Key] = []
        blobs: list[tuple[bytes]] = []
        for g in chosen:
            if idx is not None:
                d = idx.pop(g)
                vals, cnts = list(d), list(d.values())
            else:
                vals = [v for v, _ in pairs[g]]
                cnts = [c for _, c in pairs[g]]
            dead += [g + (v,) for v in vals]
            blobs.append((pack(vals, cnts),))
        if dead:
            self._bytes_per_pair = max(sum(len(b[0]) for b in blobs) / len(dead), 1.0)
        self.table.delete_many(dead)
        self.spill.put_many(chosen, blobs)
        live: Any = idx if idx is not None else pairs
        gone = set(chosen)
        self._ticks = {g: t for g, t in ticks.items() if g in live and g not in gone}
        if idx is None:
            self._resident = set(pairs) - gone
        self._spilled = True
        self.evicted += len(chosen)
