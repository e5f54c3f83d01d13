"""ColumnarGroups: aggregation group states kept as columns, keyed by integer-like group keys.

Why: `HashAggOp`'s tuple path keeps a Python tuple per group (key and state) in the disk
table's overlay and cache and encodes each with marshal; at 100k groups per epoch that
per-group Python is most of a GROUP BY's cost. Here the states of one aggregation are
numpy columns (one per slot, `engine.state.fixed_rows` layouts), the hot cache is those
columns plus a sorted key array (`searchsorted` lookups), and the store is read and
written a batch at a time: memcomparable keys encoded per column
(`memcmp.encode_int_column`), one RocksDB multi-get for the groups the cache misses,
values decoded and encoded with one numpy view per slot.

Backends (picked from the table the allocator hands out):

* a `DiskStateTable` (running server): the cache is attached to it as its
  `ColumnOverlay`: changed rows stay in the columns until the checkpoint's
  `write_columns`, then the cache is trimmed to its share of the operator-cache budget
  (least recently used rows go; they are in RocksDB). Any access through the table's
  tuple interface first takes the changed rows back as tuples (`spill`) and empties the
  cache, so the two views never disagree;
* any other `StateTable` (tests, one-shot runs): rows are read with `get_many` and the
  changed ones written back with `put_many`/`delete_many` at the end of every step
  (`end_step`), nothing is cached across steps.

Keys: one or more columns, each an integer (`"i"`) or a naive timestamp (`"t"`, its int64
microseconds), held as an (n, K) int64 matrix with a NULL mask. One key column is looked
up by its value; several by a 64-bit hash of the row (`_codes`), each hit verified
against the stored key, and the rare key whose hash collides with another's kept in a
small dict (`_extra`). Store keys are the memcomparable bytes of the key tuple, encoded
column by column, identical to the tuple path's.

Rows: a group is present while `alive`; a deleted group stays in the cache as a dead
row until its delete is written, so a later step of the epoch does not read the stale
committed row back. Rows read in the older marshal form (or from the tuple overlay) are
converted once and written back in the fixed-width form when they change.

Runs (disk backend): a key per changed group made a checkpoint of 60k changed groups
cost 60k RocksDB puts (and their per-key Python), most of a big GROUP BY's CPU. A
checkpoint of at least `RUN_MIN` changed rows writes them instead as one run: blobs of
about a checkpoint piece each (keys, NULL flags, alive flags, fixed-width rows, numpy
bytes) under `DiskStateTable.column_runs` (table id + 0xFF, after the row range). A row
whose committed state is in a run (`_inrun`) is pinned in the cache, so a miss reads the
row range alone; a dead row there stays as a tombstone. Past `MAX_RUNS` runs the next
checkpoint replaces them with one run of every row they hold; once they hold more than
half the cache share, those rows are written a key each and the runs range-deleted. After
a reset (recovery) the runs are read back into the cache (`_ensure_runs`, the newest state
of a key winning, with one multi-get telling which keys the row range holds too, for
`shadow_rows`, the count `len` adds). `spill` hands the runs' rows to the tuple overlay
as well and the next checkpoint deletes the runs.

Lifecycle: built by `HashAggOp` with its groups table; `fetch` then `store` once per
step; the table drives `write_columns` / `spill` / `reset` (see `ColumnOverlay`).
"""

from __future__ import annotations

import struct
from collections import deque
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa

from engine.errors import InternalError
from engine.state import codec, memcmp
from engine.state.checkpoint import PIECE_BYTES
from engine.state.disk_table import DiskStateTable, crc32_rows
from engine.state.fixed_rows import FixedLayout
from engine.state.store import WriteBatchLike
from engine.state.table import StateTable
from engine.stream.operators.key_index import argsort_ints, search

Cols = list[np.ndarray]
Valids = list[np.ndarray | None]
_VNODE_AT = 5
"""Where a disk table's store key holds its vnode byte (table id, 0x00, vnode)."""
_ROW_OVERHEAD = 96
"""Cache bytes per row besides the slot data: key, index entries, flags, stamp, and the
row's store key (a bytes object, kept so a checkpoint does not encode it again)."""


RUN_MIN = 256
"""A checkpoint with at least this many changed groups writes them as one run (a few
blobs) instead of a key per group (module docstring)."""
MAX_RUNS = 8
"""Past this many runs, the next checkpoint writes one run of every row the runs hold."""
RUN_BYTES = PIECE_BYTES
"""Largest run blob: a run is cut into chunks of about a checkpoint piece, so writing
one holds the interpreter lock no longer than any other piece."""
_RUN_HEAD = struct.Struct(">4sIII")  # magic, rows, key columns, row width
_RUN_MAGIC = b"GRN1"
_RUN_ID = struct.Struct(">QI")  # run id, chunk number


class ColumnarGroups:
    """The group states of one aggregation in columns (module docstring)."""

    def __init__(
        self, table: StateTable | DiskStateTable, layout: FixedLayout, kinds: str = "i"
    ) -> None:
        self.layout = layout
        self.kinds = kinds
        self._k = len(kinds)
        self._table = table
        self._disk = table if isinstance(table, DiskStateTable) else None
        if self._disk is not None:
            self._disk.attach_columns(self)
        # Whether the cache holds every row the table has (None: not known yet, asked
        # of the store at the next fetch). True once the table was seen with nothing
        # committed and nothing in its tuple overlay, until a live row is evicted or the
        # tuple interface takes the rows (`spill`): then a key the cache misses is
        # absent, and a fresh aggregation's new groups cost no store reads.
        self._complete: bool | None = None
        # runs (module docstring): loaded from the store at the first use after a reset;
        # how many are committed, the next id, and whether the next checkpoint deletes them
        self._runs_loaded = False
        self._run_count = 0
        self._next_run = 0
        self._drop_runs = False
        self._reset()

    # -- storage -----------------------------------------------------------------------
    def _reset(self) -> None:
        self._n = 0
        self._keys = np.empty((0, self._k), np.int64)
        self._knull = np.empty((0, self._k), bool)
        self._cols, self._valids = self.layout.empty(0)
        self._alive = np.empty(0, bool)
        self._dirty = np.empty(0, bool)
        self._stamp = np.empty(0, np.int64)
        self._full = np.empty(0, object)  # store key bytes of each row (disk backend)
        self._inrun = np.empty(0, bool)  # the row's committed state is in a run
        self._perkey = np.empty(0, bool)  # the row range holds a row of this key
        self._calive = np.empty(0, bool)  # alive as committed (by the last checkpoint)
        self._sk = np.empty(0, np.int64)  # sorted codes (one column: its non-NULL values)
        self._sp = np.empty(0, np.int64)  # their rows
        self._null_row = -1  # one column: the row of the NULL key
        self._extra: dict[tuple[Any, ...], int] = {}  # keys whose code collides -> row
        self._clock = 0
        self._len_delta = 0
        self._dirty_n = 0

    def _grow(self, need: int) -> None:
        cap = len(self._keys)
        if need <= cap:
            return
        new = max(need, cap * 2, 1024)

        def ext(a: np.ndarray) -> np.ndarray:
            out = np.zeros((new, *a.shape[1:]), a.dtype)
            out[: self._n] = a[: self._n]
            return out

        self._keys, self._knull = ext(self._keys), ext(self._knull)
        self._alive, self._dirty, self._stamp = ext(self._alive), ext(self._dirty), ext(self._stamp)
        self._full = ext(self._full)
        self._inrun, self._perkey, self._calive = (
            ext(self._inrun), ext(self._perkey), ext(self._calive))  # fmt: skip
        self._cols = [ext(c) for c in self._cols]
        self._valids = [None if v is None else ext(v) for v in self._valids]

    def _codes(self, keys: np.ndarray, knull: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(code, indexed) per key row: one column: its value, indexed where not NULL;
        several: a 64-bit hash of values and NULL flags (every row indexed)."""
        if self._k == 1:
            return keys[:, 0], ~knull[:, 0]
        with np.errstate(over="ignore"):
            h = np.full(len(keys), 0x9E3779B97F4A7C15, np.uint64)
            for j in range(self._k):
                x = keys[:, j].view(np.uint64) ^ (knull[:, j].astype(np.uint64) << np.uint64(63))
                h = (h ^ x) * np.uint64(0xBF58476D1CE4E5B9)
                h ^= h >> np.uint64(31)
                h *= np.uint64(0x94D049BB133111EB)
                h ^= h >> np.uint64(29)
        return h.view(np.int64), np.ones(len(keys), bool)

    @staticmethod
    def _tuple_key(keys: np.ndarray, knull: np.ndarray, i: int) -> tuple[Any, ...]:
        return (*keys[i].tolist(), *knull[i].tolist())

    def _append(self, keys: np.ndarray, knull: np.ndarray, cols: Cols, valids: Valids,
                alive: np.ndarray, fulls: np.ndarray | None = None,
                flags: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
                ) -> np.ndarray:  # fmt: skip
        """Add rows (keys not in the cache yet, `fulls` their store keys, computed here
        when not given; `flags` their (inrun, perkey, calive), by default those of rows
        as committed in the row range); their row numbers."""
        m = len(keys)
        start = self._n
        self._grow(start + m)
        sl = slice(start, start + m)
        self._keys[sl], self._knull[sl], self._alive[sl] = keys, knull, alive
        if flags is None:
            self._inrun[sl], self._perkey[sl], self._calive[sl] = False, alive, alive
        else:
            self._inrun[sl], self._perkey[sl], self._calive[sl] = flags
        if self._disk is not None:
            self._full[sl] = self._full_keys(keys, knull) if fulls is None else fulls
        self._dirty[sl] = False
        for dst, src in zip(self._cols, cols, strict=True):
            dst[sl] = src
        for vd, vs in zip(self._valids, valids, strict=True):
            if vd is not None:
                vd[sl] = vs
        self._n = start + m
        rows = np.arange(start, start + m, dtype=np.int64)
        codes, nn = self._codes(keys, knull)
        if nn.any():
            k, r = codes[nn], rows[nn]
            order = argsort_ints(k)
            k, r = k[order], r[order]
            at = np.searchsorted(self._sk, k)
            clash = np.zeros(len(k), bool)  # a code taken already (several columns only)
            if self._k > 1:
                ok = at < self._sk.size
                clash[ok] = self._sk[at[ok]] == k[ok]
                clash[1:] |= k[1:] == k[:-1]
                for i in np.flatnonzero(clash).tolist():
                    j = int(r[i]) - start
                    self._extra[self._tuple_key(keys, knull, j)] = int(r[i])
            keep = ~clash
            self._sk = np.insert(self._sk, at[keep], k[keep])
            self._sp = np.insert(self._sp, at[keep], r[keep])
        if self._k == 1 and knull[:, 0].any():
            self._null_row = int(rows[knull[:, 0]][0])
        return rows

    def _find(self, keys: np.ndarray, knull: np.ndarray) -> np.ndarray:
        """Row of each key in the cache, -1 where absent."""
        m = len(keys)
        pos = np.full(m, -1, np.int64)
        if self._sk.size:
            codes, nn = self._codes(keys, knull)
            at = search(self._sk, codes)
            ok = at < self._sk.size
            hit = np.zeros(m, bool)
            hit[ok] = self._sk[at[ok]] == codes[ok]
            hit &= nn
            cand = self._sp[at[hit]]
            if self._k > 1:  # a hash hit is a match only if the stored key is equal
                same = (self._keys[cand] == keys[hit]).all(axis=1)
                same &= (self._knull[cand] == knull[hit]).all(axis=1)
                idx = np.flatnonzero(hit)
                hit[idx[~same]] = False
                cand = cand[same]
            pos[hit] = cand
        if self._k == 1 and self._null_row >= 0:
            pos[knull[:, 0]] = self._null_row
        if self._extra:
            for i in np.flatnonzero(pos < 0).tolist():
                pos[i] = self._extra.get(self._tuple_key(keys, knull, i), -1)
        return pos

    # -- one step ------------------------------------------------------------------------
    def fetch(self, keys: np.ndarray, knull: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows, existed) of distinct group keys ((n, K) int64 values, NULLs as 0, and
        their NULL mask; one column may come as 1-d arrays): their cache rows (groups the
        cache misses are read from the store; absent ones start as zeroed, not alive)."""
        keys = np.asarray(keys, np.int64).reshape(len(keys), -1)
        knull = np.asarray(knull, bool).reshape(len(knull), -1)
        self._clock += 1
        self._ensure_runs()
        pos = self._find(keys, knull)
        miss = np.flatnonzero(pos < 0)
        if miss.size:
            mk, mn = keys[miss], knull[miss]
            fulls = None if self._disk is None else self._full_keys(mk, mn)
            if self._all_cached():
                cols, valids = self.layout.empty(miss.size)
                found = np.zeros(miss.size, bool)
            else:
                cols, valids, found = self._load(mk, mn, fulls)
            pos[miss] = self._append(mk, mn, cols, valids, found, fulls)
        self._stamp[pos] = self._clock
        return pos, self._alive[pos].copy()

    def gather(self, pos: np.ndarray) -> tuple[Cols, Valids]:
        cols = [c[pos] for c in self._cols]
        valids = [None if v is None else v[pos] for v in self._valids]
        return cols, valids

    def store(self, pos: np.ndarray, cols: Cols, valids: Valids, alive: np.ndarray) -> None:
        """New states of rows `pos` (`alive` False: the group is deleted)."""
        if not pos.size:
            return
        was = self._alive[pos]
        self._len_delta += int(np.count_nonzero(alive & ~was)) - int(np.count_nonzero(was & ~alive))
        for dst, src in zip(self._cols, cols, strict=True):
            dst[pos] = src
        for vd, vs in zip(self._valids, valids, strict=True):
            if vd is not None:
                vd[pos] = vs
        self._alive[pos] = alive
        self._dirty_n += int(np.count_nonzero(~self._dirty[pos]))
        self._dirty[pos] = True

    def end_step(self) -> None:
        """Resident backend: write the changed rows into the table, forget the rest."""
        if self._disk is not None:
            return
        keys, vals = self._changed_rows()
        live = [(k, v) for k, v in zip(keys, vals, strict=True) if v is not None]
        self._table.put_many([k for k, _ in live], [v for _, v in live])
        self._table.delete_many([k for k, v in zip(keys, vals, strict=True) if v is None])
        self._reset()

    # -- store reads ---------------------------------------------------------------------
    def _all_cached(self) -> bool:
        """Does the cache hold every row of the table (see `_complete`)?"""
        disk = self._disk
        if disk is None:
            return False
        if self._complete is None:
            self._complete = not disk.has_overlay and not disk.cleared and disk.committed_empty()
        return self._complete

    def _key_tuples(self, keys: np.ndarray, knull: np.ndarray) -> list[tuple[Any, ...]]:
        """The tuple path's keys (ints, naive datetimes, None) of key rows."""
        cols: list[list[Any]] = []
        for j, kind in enumerate(self.kinds):
            if kind == "t":
                arr = pa.array(keys[:, j], pa.timestamp("us"), mask=knull[:, j])
                cols.append(arr.to_pylist())
            else:
                vals: list[Any] = keys[:, j].tolist()
                nulls = knull[:, j].tolist()
                cols.append([None if n else v for v, n in zip(vals, nulls, strict=True)])
        return list(zip(*cols, strict=True)) if cols[0] else []

    def _encoded(self, keys: np.ndarray, knull: np.ndarray) -> list[bytes]:
        """`memcmp.encode_key` of each key row, column by column."""
        parts = [
            (memcmp.encode_timestamp_column if kind == "t" else memcmp.encode_int_column)(
                keys[:, j], knull[:, j]
            )
            for j, kind in enumerate(self.kinds)
        ]
        out = parts[0]
        for p in parts[1:]:
            out = list(map(bytes.__add__, out, p))
        return out

    def _full_keys(self, keys: np.ndarray, knull: np.ndarray) -> np.ndarray:
        """The disk table's store keys of key rows (an object array of bytes): table
        prefix, 0x00, vnode (crc32 of the encoded key, as `DiskStateTable` computes it),
        encoded key. Built as one byte matrix with numpy steps per key column; the rare
        rows whose encoding has another length (NULL keys, ints past 2**53) one by one."""
        disk = self._disk
        assert disk is not None
        m = len(keys)
        out = np.empty(m, object)
        if not m:
            return out
        mats, odd = [], np.zeros(m, bool)
        for j, kind in enumerate(self.kinds):
            enc = memcmp.encode_timestamp_matrix if kind == "t" else memcmp.encode_int_matrix
            mat, o = enc(keys[:, j], knull[:, j])
            mats.append(mat)
            odd |= o
        ek = np.concatenate(mats, axis=1) if len(mats) > 1 else mats[0]
        head = np.frombuffer(codec.table_prefix(disk.table_id) + b"\x00\x00", np.uint8)
        full = np.empty((m, head.size + ek.shape[1]), np.uint8)
        full[:, : head.size] = head
        full[:, head.size :] = ek
        if disk.dist_len:
            full[:, _VNODE_AT] = (crc32_rows(ek) & np.uint32(0xFF)).astype(np.uint8)
        out[:] = full.view(f"V{full.shape[1]}").ravel().tolist()
        at = np.flatnonzero(odd)
        if at.size:
            eks = self._encoded(keys[at], knull[at])
            for i, f in zip(at.tolist(), disk.encoded_full_keys(eks), strict=True):
                out[i] = f
        return out

    def _load(
        self, keys: np.ndarray, knull: np.ndarray, fulls: np.ndarray | None
    ) -> tuple[Cols, Valids, np.ndarray]:
        """Committed (or overlay) states of keys the cache misses (`fulls`: their store
        keys, disk backend); `found` per key."""
        lay = self.layout
        m = len(keys)
        disk = self._disk
        rows: dict[int, tuple[Any, ...] | None] = {}
        if disk is None:
            got = self._table.get_many(self._key_tuples(keys, knull))
            raws: list[Any] = [None] * m
            rows = dict(enumerate(got))
        else:
            assert fulls is not None
            raws = disk.committed_raw(fulls.tolist())
            if disk.has_overlay:  # rows the tuple interface wrote this epoch win
                rows = dict(disk.overlay_lookup(self._key_tuples(keys, knull)))
        cols, valids = lay.empty(m)
        found = np.zeros(m, bool)
        fixed = [i for i, r in enumerate(raws) if r is not None and i not in rows]
        ok = [i for i in fixed if lay.matches(raws[i])]
        if ok:
            idx = np.asarray(ok, np.int64)
            dc, dv = lay.decode([raws[i] for i in ok])
            for c, d in zip(cols, dc, strict=True):
                c[idx] = d
            for v, dd in zip(valids, dv, strict=True):
                if v is not None and dd is not None:
                    v[idx] = dd
            found[idx] = True
        if len(ok) < len(fixed):  # rows in the older marshal form
            for i in set(fixed) - set(ok):
                rows[i] = codec.decode_value(raws[i])
        slow = [(i, r) for i, r in rows.items() if r is not None]
        if slow:
            idx = np.asarray([i for i, _ in slow], np.int64)
            sc, sv = lay.from_rows([r for _, r in slow])
            for c, d in zip(cols, sc, strict=True):
                c[idx] = d
            for v, sd in zip(valids, sv, strict=True):
                if v is not None and sd is not None:
                    v[idx] = sd
            found[idx] = True
        return cols, valids, found

    # -- ColumnOverlay (the disk table's side) ---------------------------------------------
    @property
    def dirty_count(self) -> int:
        return self._dirty_n + self._drop_runs

    def len_delta(self) -> int:
        return self._len_delta

    def _changed_rows(
        self, with_runs: bool = False
    ) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...] | None]]:
        n = self._n
        d = np.flatnonzero(self._dirty[:n] | self._inrun[:n] if with_runs else self._dirty[:n])
        keys = self._key_tuples(self._keys[d], self._knull[d])
        cols, valids = self.gather(d)
        states = self.layout.to_rows(cols, valids)
        alive = self._alive[d].tolist()
        return keys, [s if a else None for s, a in zip(states, alive, strict=True)]

    def write_columns(self, batch: WriteBatchLike) -> int:
        disk = self._disk
        assert disk is not None
        self._ensure_runs()
        lo, hi = disk.column_runs()
        if self._drop_runs:  # the tuple interface took the runs' rows (`spill`)
            batch.delete_range(lo, hi)
            self._drop_runs = False
        n = self._n
        d = np.flatnonzero(self._dirty[:n])
        if not d.size:
            return 0
        limit = disk.cache_rows(self.layout.width + _ROW_OVERHEAD) // 2
        if not self._run_count and not RUN_MIN <= d.size <= limit:
            self._write_rows(batch, d)
        else:
            held = np.flatnonzero(self._inrun[:n] | self._dirty[:n])
            if held.size > limit:  # the runs grew past their share of the cache
                self._write_rows(batch, held)
                batch.delete_range(lo, hi)
                self._inrun[held] = False
                self._run_count = 0
            elif self._run_count >= MAX_RUNS:
                batch.delete_range(lo, hi)
                self._put_run(batch, held)
                self._run_count = 1
            else:
                self._put_run(batch, d)
                self._run_count += 1
        self._dirty[d] = False
        self._dirty_n = 0
        self._len_delta = 0
        self._trim(disk.cache_rows(self.layout.width + _ROW_OVERHEAD))
        return int(d.size)

    def _write_rows(self, batch: WriteBatchLike, d: np.ndarray) -> None:
        """Rows `d` as a key each in the row range (puts, and deletes of dead rows)."""
        keys, knull = self._keys[d], self._knull[d]
        fulls = self._full[d]
        # RocksDB inserts a batch's keys into its memtable one at a time; in key order each
        # insert starts where the last one ended (measured 5-10x cheaper than the random
        # order the vnode prefix gives). The keys are distinct: the order changes nothing
        # else, so sorting by the vnode byte then the key values (the memcomparable
        # encoding's order up to where NULLs go) is as good as sorting the bytes, and
        # numeric sorts cost a fraction of a sort of byte strings.
        vnode = np.frombuffer(bytes(map(itemgetter(_VNODE_AT), fulls.tolist())), np.uint8)
        cols = [keys[:, j] for j in range(self._k - 1, -1, -1)]
        nulls = [knull[:, j] for j in range(self._k - 1, -1, -1)]
        order = np.lexsort([x for pair in zip(cols, nulls, strict=True) for x in pair] + [vnode])
        alive = self._alive[d][order]
        live, dead = order[alive], order[~alive]
        cols, valids = self.gather(d[live])
        live_keys = fulls[live].tolist()
        put_many = getattr(batch, "put_many", None)  # the checkpoint's `EpochChanges`
        if put_many is not None:
            put_many(live_keys, self.layout.encode(cols, valids))
        else:
            deque(map(batch.put, live_keys, self.layout.encode(cols, valids)), 0)
        deque(map(batch.delete, fulls[dead].tolist()), 0)
        self._perkey[d] = self._alive[d]
        self._calive[d] = self._alive[d]

    # -- runs ----------------------------------------------------------------------------
    def _put_run(self, batch: WriteBatchLike, rows: np.ndarray) -> None:
        """Rows `rows` (live and dead) as one run: blobs of at most about `RUN_BYTES`."""
        disk = self._disk
        assert disk is not None
        lo, _ = disk.column_runs()
        run = self._next_run
        self._next_run += 1
        lay, k = self.layout, self._k
        per = max(RUN_BYTES // (9 * k + 1 + lay.width), 1)
        for c, at in enumerate(range(0, rows.size, per)):
            r = rows[at : at + per]
            cols, valids = self.gather(r)
            blob = b"".join(
                [
                    _RUN_HEAD.pack(_RUN_MAGIC, r.size, k, lay.width),
                    np.ascontiguousarray(self._keys[r]).tobytes(),
                    np.ascontiguousarray(self._knull[r]).tobytes(),
                    self._alive[r].tobytes(),
                    lay.encode_joined(cols, valids),
                ]
            )
            batch.put(lo + _RUN_ID.pack(run, c), blob)
        self._inrun[rows] = True
        self._calive[rows] = self._alive[rows]

    def _ensure_runs(self) -> None:
        """After a reset: read the committed runs into the cache (their rows stay there
        until written in the row range), newest state of each key winning."""
        disk = self._disk
        if self._runs_loaded or disk is None:
            return
        self._runs_loaded = True
        self._run_count = 0
        pairs = disk.committed_runs()
        if not pairs:
            return
        lay, k = self.layout, self._k
        keys_l, null_l, alive_l, raw_l = [], [], [], []
        runs = set()
        for key, blob in pairs:  # key order: run id, then chunk
            run, _ = _RUN_ID.unpack(key[len(key) - _RUN_ID.size :])
            runs.add(run)
            magic, m, kk, width = _RUN_HEAD.unpack_from(blob)
            if magic != _RUN_MAGIC or kk != k or width != lay.width:
                raise InternalError(
                    "aggregation group run of another layout",
                    detail=f"Run {run} of table {disk.table_id}: {magic!r}, {kk} keys, "
                    f"rows of {width} bytes (expected {k} keys, {lay.width} bytes).",
                )
            at = _RUN_HEAD.size
            keys_l.append(np.frombuffer(blob, np.int64, m * k, at).reshape(m, k))
            at += 8 * m * k
            null_l.append(np.frombuffer(blob, np.bool_, m * k, at).reshape(m, k))
            at += m * k
            alive_l.append(np.frombuffer(blob, np.bool_, m, at))
            at += m
            raw_l.append(np.frombuffer(blob, np.uint8, m * lay.width, at))
        self._run_count = len(runs)
        self._next_run = max(self._next_run, max(runs) + 1)
        keys, knull = np.concatenate(keys_l), np.concatenate(null_l)
        alive = np.concatenate(alive_l)
        raw = np.concatenate(raw_l).reshape(-1, lay.width)
        # the last occurrence of each key (later runs are newer)
        ident = np.concatenate([keys, knull.astype(np.int64)], axis=1)[::-1]
        _, first = np.unique(ident, axis=0, return_index=True)
        last = np.sort(len(keys) - 1 - first)
        keys, knull, alive, raw = keys[last], knull[last], alive[last], raw[last]
        cols, valids = lay.decode(raw.view(f"V{lay.width}").ravel().tolist())
        fulls = self._full_keys(keys, knull)
        perkey = np.fromiter(
            (r is not None for r in disk.committed_raw(fulls.tolist())), bool, len(keys)
        )
        inrun = np.ones(len(keys), bool)
        self._append(keys, knull, cols, valids, alive.copy(), fulls, (inrun, perkey, alive))

    def shadow_rows(self) -> int:
        self._ensure_runs()
        n = self._n
        inrun = self._inrun[:n]
        run_alive = int(np.count_nonzero(inrun & self._calive[:n]))
        return run_alive - int(np.count_nonzero(inrun & self._perkey[:n]))

    def _trim(self, cap: int) -> None:
        """Drop dead rows and, past `cap` rows, the least recently used down to 3/4 of it."""
        n = self._n
        pinned = self._inrun[:n]  # rows in runs stay (a miss reads only the row range)
        keep = self._alive[:n] | pinned
        live = int(np.count_nonzero(keep))
        if live > cap:
            stamps = self._stamp[:n]
            target = max(cap * 3 // 4 - int(np.count_nonzero(pinned)), 0)
            idx = np.flatnonzero(keep & ~pinned)
            newest = idx[np.argsort(stamps[idx], kind="stable")[-target:]] if target else idx[:0]
            keep = pinned.copy()
            keep[newest] = True
            self._complete = False  # live rows leave the cache: misses read the store
        elif live == n:
            return
        rows = np.flatnonzero(keep)
        keys, knull = self._keys[rows], self._knull[rows]
        cols, valids = self.gather(rows)
        alive = self._alive[rows]
        stamps = self._stamp[rows]
        fulls = self._full[rows] if self._disk is not None else None
        flags = (self._inrun[rows], self._perkey[rows], self._calive[rows])
        clock = self._clock
        self._reset()
        self._clock = clock
        self._append(keys, knull, cols, valids, alive, fulls, flags)
        self._stamp[: rows.size] = stamps

    def spill(self) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...] | None]]:
        self._ensure_runs()
        runs = bool(self._run_count)
        keys, vals = self._changed_rows(runs) if self._dirty_n or runs else ([], [])
        # the runs' rows go to the tuple overlay too (written in the row range at the next
        # checkpoint, which deletes the runs)
        self._drop_runs = self._drop_runs or runs
        self._run_count = 0
        self._complete = False  # the rows move to the tuple overlay and cache
        clock = self._clock
        self._reset()
        self._clock = clock
        return keys, vals

    def reset(self) -> None:
        self._complete = None
        self._runs_loaded = False
        self._run_count = 0
        self._drop_runs = False
        self._reset()
