"""TopNOp: incremental `ORDER BY ... LIMIT n OFFSET m`, overall or per group, over an input
that can retract; its rows live in RocksDB in window order, a few per group in memory.

Two SQL shapes plan to this operator:

* `SELECT ... ORDER BY o LIMIT n OFFSET m` (no group keys): the view holds the rows at
  positions m+1 .. m+n of the whole input in `o` order;
* `SELECT ... FROM (SELECT ..., row_number() OVER (PARTITION BY g ORDER BY o) AS rn ...)
  WHERE rn <= n` (group keys g, offset 0): the first n rows of every group, optionally
  with `rn` itself as an extra bigint output column (`with_rank_column`).

(An input that never retracts plans to `AppendOnlyTopNOp` instead, which keeps only each
group's first `offset + limit` rows.)

Order is total and deterministic: rows that tie on the ORDER BY columns are ordered by
their stream key ascending (NULLS LAST), so a view, an ad-hoc run and a restarted run
pick the same rows. The output is a changelog of "the current window": a row entering
the window is `+`, a row leaving it is `-`. With the rank column, a row that stays in the
window but moves gets a `U-`/`U+` pair (old rank, new rank), and so does a row whose
non-order columns were updated in place. A window "element" is (group, sort key): a row
whose order values change leaves as `-` and enters as `+`.

State (RisingWave's managed top-N cache over an ordered state table):

* every row lives in the state table `rows` (a disk table in a server: RocksDB is the
  source of truth), keyed in window order:

      (*group key, sort key bytes) -> (*row, count)

  The sort key (`sort_keys`) is one bytes value whose byte order is the window order: per
  ORDER BY column a NULL-placement byte and the column's memcomparable encoding
  (`engine.state.memcmp`), its bytes inverted for DESC, then the stream key columns the
  same way (ascending, NULLS LAST). So a group's first rows are the first entries of its
  key range, read with one range scan, and rows identical in every column (no stream
  key) share one entry whose `count` says how many there are;
* in memory only, per group a *cache*: at most `K = 2 * (offset + limit)` of the group's
  first rows, in a `GroupCache` (topn_cache.py): one polars frame (group id `__g`, sort
  key `__sk`, `__n`, and `__loc`, the row's position in the operator's row arena, an
  Arrow copy of the cached rows) in which each group's rows are a contiguous range. A
  group is *incomplete* when the store may hold rows beyond its cache; an incomplete
  group's cache always holds at least `offset + limit` copies (else it is refilled from
  a range scan), so the window is always read from the cache alone. Groups are loaded
  on first touch (after a restart nothing is rebuilt) and the least recently touched are
  evicted when the cached rows exceed the table's share of the state budget
  (`DiskStateTable.cache_rows`); group ids are renumbered then.

Per step, vectorised (polars/numpy/Arrow; Python per changed row only to build keys and
value tuples):

1. consolidate the delta; each row gets its group id and sort key; one polars group-by
   gives, per store key, the net weight and the row carrying its new values;
2. the groups the delta touches that are not cached are loaded (one batched range scan
   over their key ranges, `scan_prefixes`), one multi-get reads the old values of the
   changed keys, and one batched put/delete writes the new ones;
3. changed keys whose old row was cached are "killed", their new rows "added"; those
   that sort after their incomplete group's cache end are skipped (they live only in the
   store); the affected groups' old cache + added rows are sorted, killed rows dropped,
   trimmed to `K` copies, and incomplete groups left with fewer than `offset + limit`
   copies are refilled from the store with one batched range scan;
4. the old and new windows of the affected groups are expanded to copies with their
   positions and diffed with one outer join on (element, copy number); the output rows
   are gathered from the arena.

Cost per epoch: O(delta + cache rows of affected groups) vectorised, one multi-get and
one batched write, plus one range scan per group loaded or refilled.
"""

from __future__ import annotations

import logging
from itertools import compress, repeat
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from engine.chunk import Op, StreamChunk
from engine.errors import InternalError, not_supported
from engine.state import codec, memcmp
from engine.state.table import StateTable
from engine.stream.operator import Operator
from engine.stream.operators.base import StateAllocator
from engine.stream.operators.frames import batch_from_rows, consolidate
from engine.stream.operators.keyed_segments import KeyedSegments
from engine.stream.operators.segments import META_KEY, conform, key_fn, row_keys, rows_equal
from engine.stream.operators.topn_cache import GroupCache
from engine.types import BIGINT, Field, SqlType, TypeKind, arrow_schema

log = logging.getLogger(__name__)

OrderSpec = tuple[int, bool, bool]  # (column, desc, nulls_first)
Key = tuple[Any, ...]

FORMAT_VERSION = 2
"""Layout of `rows`: 2 is the ordered one above; 1 (columnar segments, `KeyedSegments`)
and the older per-row layout are converted when the operator first steps."""
CACHE_FACTOR = 2
"""Each group caches its first `CACHE_FACTOR * (offset + limit)` rows."""
COUNT = "__n"
ROW_BYTES = 96
"""Planning figure for one cached row beyond its columns (frame entry, arena slot)."""
_UNBOUNDED = 1 << 62
_NS_DAY = 86_400_000_000_000
_G, _SK, _N, _LOC, _C, _R = "__g", "__sk", COUNT, "__loc", "__c", "__r"
_INVERT = bytes(255 - i for i in range(256))
_ARENA_SLACK = 1 << 16


def sortable(arr: pa.Array, t: SqlType, what: str) -> list[pa.Array]:
    """One column as arrays polars sorts and compares in SQL order (NaN above numbers)."""
    k = t.kind
    if k is TypeKind.INTERVAL:  # PostgreSQL compares intervals as 30-day months
        days: list[int | None] = []
        rest: list[int | None] = []
        for v in arr.to_pylist():
            if v is None:
                days.append(None)
                rest.append(None)
            else:
                d, r = divmod(v.nanoseconds, _NS_DAY)
                days.append(v.months * 30 + v.days + d)
                rest.append(r)
        return [pa.array(days, pa.int64()), pa.array(rest, pa.int64())]
    if k is TypeKind.LIST:
        if what == "order":
            raise not_supported(
                f"ORDER BY a value of type {t.display} in a streaming top-N",
                hint="Order by a scalar column or expression instead.",
            )
        # an ident needs no SQL order, only a deterministic one
        vals = [None if v is None else codec.encode_key((_freeze(v),)) for v in arr.to_pylist()]
        return [pa.array(vals, pa.binary())]
    if pa.types.is_nested(arr.type) or pa.types.is_null(arr.type):
        raise not_supported(
            f"ORDER BY a value of type {t.display} in a streaming top-N",
            hint="Order by a scalar column or expression instead.",
        )
    return [arr]


def sortable_width(t: SqlType) -> int:
    return 2 if t.kind is TypeKind.INTERVAL else 1


def _freeze(v: Any) -> Any:
    return tuple(_freeze(x) for x in v) if isinstance(v, list) else v


def encode_sort_column(arr: pa.Array, desc: bool, nulls_first: bool) -> list[bytes]:
    """Per value, bytes whose order is the column's window order (self-delimiting, so
    columns concatenate): a NULL-placement byte, then for non-NULLs the memcomparable
    encoding, inverted for DESC (inverting a prefix-free code reverses its order)."""
    t = arr.type
    if pa.types.is_boolean(t):
        arr = arr.cast(pa.int8())
    elif pa.types.is_temporal(t) and not pa.types.is_interval(t):
        arr = arr.view(pa.int32() if t.bit_width == 32 else pa.int64())
    vals = arr.to_pylist()
    lead, null = (b"\x01", b"\x00") if nulls_first else (b"\x00", b"\x01")
    if not arr.null_count:
        encs = memcmp.encode_keys([(v,) for v in vals])
        if desc:
            return [lead + e.translate(_INVERT) for e in encs]
        return [lead + e for e in encs]
    nonnull = [v for v in vals if v is not None]
    encs = memcmp.encode_keys([(v,) for v in nonnull])
    if desc:
        encs = [e.translate(_INVERT) for e in encs]
    it = iter(encs)
    return [null if v is None else lead + next(it) for v in vals]


def explain_top_n(op: Any, name: str) -> str:
    """EXPLAIN line of a top-N operator (`TopNOp`, `AppendOnlyTopNOp`): order, limit,
    offset, group key and rank column, as RisingWave prints them."""

    def one(c: int, d: bool, nf: bool) -> str:
        return f"${c} {'DESC' if d else 'ASC'}{' NULLS FIRST' if nf else ' NULLS LAST'}"

    order = ", ".join(one(*o) for o in op.order_by)
    extra = ""
    if op.group_keys:
        extra = ", group_key: [" + ", ".join(f"${g}" for g in op.group_keys) + "]"
    if op.with_rank_column:
        extra += ", output_rank"
    return f"{name} {{ order: [{order}], limit: {op.limit}, offset: {op.offset}{extra} }}"


class RowArena:
    """Arrow copies of the rows the cache points at (`__loc` = position here): rows are
    appended as they enter the cache and the arena is rebuilt from the live positions
    once garbage dominates (`compact`). Old versions stay readable until then, so a step
    can still output the rows it removes."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self._batches: list[pa.RecordBatch] = []
        self._table: pa.Table | None = None
        self.size = 0

    def add(self, batch: pa.RecordBatch) -> np.ndarray:
        n = batch.num_rows
        locs = np.arange(self.size, self.size + n, dtype=np.int64)
        if n:
            self._batches.append(batch)
            self._table = None
            self.size += n
        return locs

    def gather(self, locs: np.ndarray) -> pa.RecordBatch:
        if not len(locs):
            return _empty(self.schema)
        if self._table is None:
            self._table = pa.Table.from_batches(self._batches, self.schema)
            if len(self._batches) > 1:
                self._table = self._table.combine_chunks()
                self._batches = self._table.to_batches()
        t = self._table.take(pa.array(locs))
        return pa.RecordBatch.from_arrays(
            [c.combine_chunks() for c in t.columns], schema=self.schema
        )

    def compact(self, live: np.ndarray) -> np.ndarray:
        """Keep only the rows at `live` (ascending, distinct); their new positions."""
        kept = self.gather(live)
        self._batches = [kept] if kept.num_rows else []
        self._table = None
        self.size = kept.num_rows
        return np.arange(self.size, dtype=np.int64)


def _empty(schema: pa.Schema) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([], schema=schema)


class TopNOp(Operator):
    """Incremental top-N, overall or per group; see the module docstring.

    Output schema: the input fields, plus a bigint rank column (1-based row_number in
    the group) when `with_rank_column`. Stream key: the input stream key, or when that
    is empty every input column (and the rank column, if output). `cache_rows` caps the
    cached rows (default: the state table's share of the state budget; unbounded over a
    resident table).
    """

    def __init__(
        self,
        input_schema: list[Field],
        order_by: list[OrderSpec],
        limit: int | None,
        offset: int,
        group_keys: list[int],
        alloc: StateAllocator,
        stream_key: list[int],
        with_rank_column: bool = False,
        rank_name: str = "rn",
        cache_rows: int | None = None,
    ) -> None:
        if limit is not None and limit < 0 or offset < 0:
            raise ValueError("TopNOp needs a non-negative limit and offset")
        self.input_schema = list(input_schema)
        self.order_by = [(int(c), bool(d), bool(nf)) for c, d, nf in order_by]
        self.limit = limit
        self.offset = offset
        self.group_keys = list(group_keys)
        self.with_rank_column = with_rank_column
        n = len(input_schema)
        self._keyed = bool(stream_key)
        self._ident = list(stream_key) or list(range(n))
        self.schema = list(input_schema)
        if with_rank_column:
            self.schema.append(Field(rank_name, BIGINT))
        if stream_key:
            self.stream_key = list(stream_key)
        else:
            self.stream_key = list(range(len(self.schema)))
        self._hi = _UNBOUNDED if limit is None else offset + limit
        self._cap = _UNBOUNDED if limit is None else CACHE_FACTOR * self._hi
        self._elem = [_G, _SK]
        self._in_schema = arrow_schema(self.input_schema)
        self._rows = alloc.table("rows", disk=True)
        self._gid: dict[Any, int] = {}  # group key -> group id `__g`
        self._gkeys: list[Key] = [] if self.group_keys else [()]  # group id -> key prefix
        self._gkey_fns = [key_fn(self._in_schema.field(c).type) for c in self.group_keys]
        self._cache = GroupCache(_frame_of(np.empty(0, np.int64), [], np.empty(0, np.int64)))
        self._arena = RowArena(self._in_schema)
        self._cache_rows = cache_rows
        self._steps = 0
        self._converted = False
        self.sort_keys(_empty(self._in_schema))  # refuses unorderable ORDER BY types now
        self._convert()  # before any checkpoint could write an older layout's rows back
        self._converted = False  # and again at the first step, in case of a later `load`

    def state_tables(self) -> list[StateTable]:
        return [self._rows]

    def explain(self) -> str:
        return explain_top_n(self, "StreamGroupTopN" if self.group_keys else "StreamTopN")

    @property
    def _ngroups(self) -> int:
        return len(self._gkeys)

    # -- keys ---------------------------------------------------------------------------
    def sort_keys(self, rows: pa.RecordBatch) -> list[bytes]:
        """The sort key bytes of every row (window order within a group)."""
        types = self.input_schema
        parts: list[list[bytes]] = []
        for c, desc, nf in self.order_by:
            for a in sortable(rows.column(c), types[c].type, "order"):
                parts.append(encode_sort_column(a, desc, nf))
        for c in self._ident:
            for a in sortable(rows.column(c), types[c].type, "ident"):
                parts.append(encode_sort_column(a, False, False))
        if len(parts) == 1:
            return parts[0]
        return list(map(b"".join, zip(*parts, strict=True)))

    def _gids(self, rows: pa.RecordBatch) -> np.ndarray:
        """Group ids of `rows`, new groups numbered as they come."""
        if not self.group_keys:
            return np.zeros(rows.num_rows, np.int64)
        keys = row_keys(rows, self.group_keys, self._gkey_fns)
        n = len(keys)
        ids = np.fromiter(map(self._gid.get, keys, repeat(-1)), np.int64, n)
        miss = ids < 0
        if miss.any():
            new = list(dict.fromkeys(compress(keys, miss)))
            base = len(self._gkeys)
            self._gid.update(zip(new, range(base, base + len(new))))
            if len(self.group_keys) == 1:
                self._gkeys.extend((k,) for k in new)
            else:
                self._gkeys.extend(new)
            self._cache.grow(len(self._gkeys))
            ids[miss] = list(map(self._gid.__getitem__, compress(keys, miss)))
        return ids

    def _store_keys(self, gids: np.ndarray, sks: list[bytes]) -> list[Key]:
        gk = self._gkeys
        if not self.group_keys:
            return [(s,) for s in sks]
        return [(*gk[g], s) for g, s in zip(gids.tolist(), sks, strict=True)]

    # -- frames -------------------------------------------------------------------------
    def _sort(self, df: pl.DataFrame) -> pl.DataFrame:
        return df.sort(self._elem)

    def _trim(self, df: pl.DataFrame) -> pl.DataFrame:
        """Keep a sorted frame's first `K` copies per group; trimmed groups are incomplete."""
        g = df.get_column(_G).to_numpy()
        n = df.get_column(_N).to_numpy()
        cut = _group_cumsum(g, n) - n >= self._cap
        if cut.any():
            self._cache.incomplete[np.unique(g[cut])] = True
            df = df.filter(pl.Series(~cut))
        return df

    # -- step ---------------------------------------------------------------------------
    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        chunk = inputs[0]
        if chunk is None or len(chunk) == 0:
            return None
        if not self._converted:
            self._convert()
        batch, w = consolidate(chunk)
        if batch.num_rows == 0:
            return None
        batch = conform(batch, self._in_schema)
        self._steps += 1
        gids = self._gids(batch)
        sks = self.sort_keys(batch)
        d = pl.DataFrame(
            [
                pl.Series(_G, gids, pl.Int64),
                pl.Series(_SK, sks, pl.Binary),
                pl.Series("__w", w.astype(np.int64), pl.Int64),
                pl.Series("__i", np.arange(len(sks)), pl.Int64),
            ]
        )
        per_key = d.group_by(_G, _SK, maintain_order=True).agg(
            pl.col("__w").sum(),
            pl.col("__i").filter(pl.col("__w") > 0).last().alias("__p"),
            pl.col("__w").filter(pl.col("__w") < 0).sum().alias("__neg"),
        )
        ug = per_key.get_column(_G).to_numpy()
        touched = np.unique(ug)
        self._cache.used[touched] = self._steps
        if self._hi:
            self._ensure_loaded(touched)
        killed, added = self._apply_store(batch, per_key, ug)
        out = self._update_cache(killed, added) if self._hi else None
        self._housekeep()
        return out

    def _apply_store(
        self, batch: pa.RecordBatch, per_key: pl.DataFrame, ug: np.ndarray
    ) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Write the delta to the state table (one multi-get, one batched put/delete).

        Returns the killed keys (`__g`, `__sk`: changed keys that were stored) and the
        added rows (cache-shaped frame of the changed keys' new rows, in the arena)."""
        usk = per_key.get_column(_SK).to_list()
        dw = per_key.get_column("__w").to_numpy()
        pos_s = per_key.get_column("__p")
        has_pos = pos_s.is_not_null().to_numpy()
        pos = pos_s.fill_null(0).to_numpy()
        keys = self._store_keys(ug, usk)
        olds: list[Any]
        if self._keyed:
            # the sort key holds the stream key, so a stored key holds one row and an
            # inserted key with a new stream key is not stored yet: only the keys the
            # delta deletes are read (to check they are stored)
            dels = np.flatnonzero(per_key.get_column("__neg").to_numpy() < 0)
            old_n = np.zeros(len(keys), np.int64)
            if len(dels):
                found = self._rows.get_many([keys[i] for i in dels.tolist()])
                old_n[dels] = [0 if o is None else o[-1] for o in found]
            olds = []
        else:
            olds = self._rows.get_many(keys)
            old_n = np.fromiter((0 if o is None else o[-1] for o in olds), np.int64, len(olds))
        new_n = old_n + dw
        if (new_n < 0).any():
            raise InternalError(
                "top-n state row count became negative",
                detail=f"A row of {self.explain()} was deleted but never inserted.",
            )
        changed = (dw != 0) | has_pos
        was = changed & (old_n > 0)
        alive = changed & (new_n > 0)
        from_delta = alive & has_pos
        from_old = alive & ~has_pos
        ix_delta = np.flatnonzero(from_delta)
        ix_old = np.flatnonzero(from_old)
        parts: list[pa.RecordBatch] = []
        if len(ix_delta):
            parts.append(batch.take(pa.array(pos[ix_delta])))
        if len(ix_old):
            old_rows = [olds[i][:-1] for i in ix_old.tolist()]  # type: ignore[index]
            parts.append(conform(batch_from_rows(self.input_schema, old_rows), self._in_schema))
        sel = np.concatenate([ix_delta, ix_old])
        if parts:
            rows = pa.concat_batches(parts) if len(parts) > 1 else parts[0]
            counts = new_n[sel]
            cols = [c.to_pylist() for c in rows.columns]
            values = list(zip(*cols, counts.tolist(), strict=True))
            self._rows.put_many([keys[i] for i in sel.tolist()], values)
        else:
            rows = _empty(self._in_schema)
            counts = np.empty(0, np.int64)
        gone = np.flatnonzero(changed & (new_n == 0))
        if len(gone):
            self._rows.delete_many([keys[i] for i in gone.tolist()])
        killed = per_key.filter(pl.Series(was)).select(_G, _SK)
        locs = self._arena.add(rows)
        sk_sel = [usk[i] for i in sel.tolist()]
        added = _frame_of(ug[sel], sk_sel, counts, locs)
        return killed, added

    def _ensure_loaded(self, gids: np.ndarray) -> None:
        """Load the cache of groups `gids` not cached yet (from the state before this step)."""
        need = gids[~self._cache.loaded[gids]]
        if not len(need):
            return
        part = self._load_groups(need)
        self._cache.put(need, part, part.get_column(_G).to_numpy())
        self._cache.loaded[need] = True

    def _update_cache(self, killed: pl.DataFrame, add: pl.DataFrame) -> StreamChunk | None:
        cache = self._cache
        add = self._below_ends(add)
        killed = self._below_ends(killed)
        affected = np.unique(
            np.concatenate([add.get_column(_G).to_numpy(), killed.get_column(_G).to_numpy()])
        )
        if not len(affected):
            return None
        old_part = cache.part(affected)
        marks = killed.with_columns(pl.lit(True).alias("__d"))
        old_m = old_part.join(marks, on=[_G, _SK], how="left", maintain_order="left")
        # merge: old rows (flagged, killed ones too: they mark the old cache end) + new rows
        m = pl.concat(
            [
                old_m.select(
                    *old_part.columns,
                    pl.lit(1, pl.Int8).alias("__o"),
                    pl.col("__d").fill_null(False),
                ),
                add.with_columns(pl.lit(0, pl.Int8).alias("__o"), pl.lit(False).alias("__d")),
            ]
        )
        m = self._sort(m)
        g = m.get_column(_G).to_numpy()
        is_old = m.get_column("__o").to_numpy() == 1
        inc = cache.incomplete[g]
        after = _group_cumsum(g[::-1], is_old[::-1].astype(np.int64))[::-1]
        keep = np.where(is_old, ~m.get_column("__d").to_numpy(), ~inc | (after > 0))
        new_part = self._trim(m.filter(pl.Series(keep)).drop("__o", "__d"))
        new_part = self._refill(new_part, affected)
        cache.put(affected, new_part, new_part.get_column(_G).to_numpy())
        return self._diff(old_part, new_part)

    def _below_ends(self, df: pl.DataFrame) -> pl.DataFrame:
        """Drop rows that sort after their incomplete group's cache end.

        Added rows there cannot enter the window before the group is refilled (which
        reads the store), and killed rows there were not cached; skipping them keeps
        their groups out of this step's merge. One join with the ends decides.
        """
        if not df.height:
            return df
        gids = np.unique(df.get_column(_G).to_numpy())
        gids = gids[self._cache.incomplete[gids]]
        if not len(gids):
            return df
        ends = self._cache.ends(gids).select(_G, pl.col(_SK).alias("__e"))
        j = df.select(_G, _SK).join(ends, on=_G, how="left", maintain_order="left")
        drop = j.select((pl.col(_SK) > pl.col("__e")).fill_null(False)).to_series()
        if not drop.any():
            return df
        return df.filter(~drop)

    def _refill(self, part: pl.DataFrame, affected: np.ndarray) -> pl.DataFrame:
        """Refill incomplete groups of `part` left with fewer than `offset + limit` copies."""
        cand = affected[self._cache.incomplete[affected]]
        if not len(cand):
            return part
        g = part.get_column(_G).to_numpy()
        n = part.get_column(_N).to_numpy()
        copies = np.zeros(len(cand), np.int64)
        at = np.searchsorted(cand, g)
        hit = (at < len(cand)) & (cand[np.minimum(at, len(cand) - 1)] == g)
        np.add.at(copies, at[hit], n[hit])
        need = cand[copies < self._hi]
        if not len(need):
            return part
        fresh = self._load_groups(need)
        kept = part.filter(~pl.col(_G).is_in(pl.Series(need).implode()))
        return self._sort(pl.concat([kept, fresh]))

    def _load_groups(self, gids: np.ndarray) -> pl.DataFrame:
        """The first `K` stored rows of groups `gids` (ascending), sorted: one batched
        range scan of their key ranges; their rows enter the arena."""
        limit = None if self._cap >= _UNBOUNDED else int(self._cap)
        prefixes = [self._gkeys[g] for g in gids.tolist()]
        got = self._rows.scan_prefixes(prefixes, limit, keys=False)
        self._cache.incomplete[gids] = False
        sizes = np.fromiter(map(len, got), np.int64, len(got))
        if limit is not None:
            self._cache.incomplete[gids[sizes >= limit]] = True
        entries = [kv for rows in got for kv in rows]
        if not entries:
            return self._cache.frame.clear()
        values = [v for _, v in entries]
        rows = conform(
            batch_from_rows(self.input_schema, [v[:-1] for v in values]), self._in_schema
        )
        counts = np.fromiter((v[-1] for v in values), np.int64, len(values))
        sks = self.sort_keys(rows)  # cheaper than decoding the stored keys
        locs = self._arena.add(rows)
        frame = _frame_of(np.repeat(gids, sizes), sks, counts, locs)
        return self._trim(frame)

    # -- output -------------------------------------------------------------------------
    def _window(self, part: pl.DataFrame) -> pl.DataFrame:
        """The window copies of a cache part: element, copy number `__c`, rank `__r`, loc."""
        n = part.get_column(_N).to_numpy()
        end = _group_cumsum(part.get_column(_G).to_numpy(), n)
        lo = np.maximum(end - n, self.offset)
        cnt = np.clip(np.minimum(end, self._hi) - lo, 0, None)
        rep = np.repeat(np.arange(len(cnt)), cnt)
        within = np.arange(len(rep)) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        out = part.select(*self._elem, _LOC)[rep]
        return out.with_columns(
            pl.Series(_C, within, pl.Int64), pl.Series(_R, lo[rep] + within + 1, pl.Int64)
        )

    def _diff(self, old_part: pl.DataFrame, new_part: pl.DataFrame) -> StreamChunk | None:
        ow, nw = self._window(old_part), self._window(new_part)
        if not ow.height and not nw.height:
            return None
        j = ow.join(nw, on=[*self._elem, _C], how="full", nulls_equal=True, suffix="_new")
        lo = j.get_column(_LOC).fill_null(-1).to_numpy()
        ln = j.get_column(_LOC + "_new").fill_null(-1).to_numpy()
        ro = j.get_column(_R).fill_null(0).to_numpy()
        rn = j.get_column(_R + "_new").fill_null(0).to_numpy()
        both = (lo >= 0) & (ln >= 0)
        upd = both & (ro != rn) if self.with_rank_column else np.zeros(len(lo), bool)
        moved = both & (lo != ln)
        if self._keyed and moved.any():
            a = self._arena.gather(lo[moved])
            b = self._arena.gather(ln[moved])
            upd[moved] |= ~rows_equal(a, b, nan_equal=True)
        dels = np.flatnonzero(ln < 0)
        inss = np.flatnonzero(lo < 0)
        ups = np.flatnonzero(upd)
        if not len(dels) and not len(inss) and not len(ups):
            return None
        locs = np.concatenate([lo[dels], np.stack([lo[ups], ln[ups]], 1).ravel(), ln[inss]])
        ranks = np.concatenate([ro[dels], np.stack([ro[ups], rn[ups]], 1).ravel(), rn[inss]])
        ops = np.concatenate(
            [
                np.full(len(dels), Op.DELETE, np.int8),
                np.tile(np.array([Op.UPDATE_DELETE, Op.UPDATE_INSERT], np.int8), len(ups)),
                np.full(len(inss), Op.INSERT, np.int8),
            ]
        )
        rows = self._arena.gather(locs)
        if self.with_rank_column:
            rows = rows.append_column(self.schema[-1].name, pa.array(ranks, pa.int64()))
        data = pa.RecordBatch.from_arrays(rows.columns, schema=arrow_schema(self.schema))
        return StreamChunk(pa.array(ops), data)

    # -- memory -------------------------------------------------------------------------
    def cached_rows(self) -> int:
        """Rows the cache holds now (tests and the memory budget)."""
        return int(self._cache.length[: self._ngroups].sum())

    def _row_cap(self) -> int | None:
        if self._cache_rows is not None:
            return self._cache_rows
        share = getattr(self._rows, "cache_rows", None)
        if share is None:
            return None
        return int(share(ROW_BYTES + 8 * len(self.input_schema)))

    def _housekeep(self) -> None:
        """After a step: evict the least recently touched groups when the cache is over
        its cap (renumbering the rest), and compact the arena once garbage dominates."""
        cap = self._row_cap()
        if cap is not None and self.group_keys and self.cached_rows() > cap:
            self._evict(max(cap // 2, 1))
        cache = self._cache
        live = cache.frame.height - cache.garbage
        if self._arena.size > 2 * live + _ARENA_SLACK:
            cache.compact()
            loc = cache.frame.get_column(_LOC).to_numpy()
            uniq, inv = np.unique(loc, return_inverse=True)
            new = self._arena.compact(uniq)
            cache.frame = cache.frame.with_columns(pl.Series(_LOC, new[inv], pl.Int64))

    def _evict(self, target: int) -> None:
        """Keep the most recently touched groups holding at most `target` cached rows."""
        cache = self._cache
        ng = self._ngroups
        used = cache.used[:ng]
        lens = cache.length[:ng]
        order = np.argsort(-used, kind="stable")  # most recent first
        keep_sorted = np.cumsum(lens[order]) <= target
        keep = np.zeros(ng, bool)
        keep[order[keep_sorted]] = True
        keep &= cache.loaded[:ng]
        kept = np.flatnonzero(keep)
        new_id = np.full(ng, -1, np.int64)
        new_id[kept] = np.arange(len(kept))
        part = cache.part(kept)
        part = part.with_columns(pl.Series(_G, new_id[part.get_column(_G).to_numpy()], pl.Int64))
        fresh = GroupCache(part.clear())
        fresh.grow(len(kept))
        fresh.put(np.arange(len(kept)), part, part.get_column(_G).to_numpy())
        fresh.incomplete[: len(kept)] = cache.incomplete[kept]
        fresh.loaded[: len(kept)] = True
        fresh.used[: len(kept)] = cache.used[kept]
        self._cache = fresh
        gkeys = self._gkeys
        self._gkeys = [gkeys[g] for g in kept.tolist()]
        ids = new_id.tolist()
        self._gid = {k: ids[v] for k, v in self._gid.items() if ids[v] >= 0}
        log.debug("%s: evicted %d of %d cached groups", self.explain(), ng - len(kept), ng)

    # -- older state layouts ------------------------------------------------------------
    def _convert(self) -> None:
        """Rewrite a `rows` table of an older layout (columnar segments with a `("meta",)`
        key, or per-row `ident -> (*row, count)`) in the ordered layout. A disk table
        reads such a range into its overlay (`converting`) until the next checkpoint
        rewrites it, so this runs at construction (before any checkpoint) and again at
        the first step; rows already in the ordered layout (keys ending in the sort key
        bytes) are left alone."""
        self._converted = True
        t = self._rows
        legacy = bool(getattr(t, "converting", False))
        if not legacy and not (isinstance(t, StateTable) and META_KEY in t):
            return
        items = dict(t.items())
        if not items or all(type(k[-1]) is bytes for k in items):
            return
        old = StateTable(0, "legacy top-n rows")
        old.put_many(items.keys(), items.values())
        row_schema = self._in_schema.append(pa.field(COUNT, pa.int64(), nullable=False))
        if META_KEY in old:
            segs = KeyedSegments(old, row_schema, self._ident, 1, "top-n")
            batches = [rows for _, rows, _ in segs.live_batches()]
            if not batches:
                t.clear()
                return
            b = pa.concat_batches(batches)
            counts = b.column(COUNT).to_numpy()
            rows = b.drop_columns([COUNT])
        else:
            values = list(old.values())
            rows = batch_from_rows(self.input_schema, [v[:-1] for v in values])
            counts = np.fromiter((v[-1] for v in values), np.int64, len(values))
        rows = conform(rows, self._in_schema)
        t.clear()
        keys = self._store_keys(self._gids(rows), self.sort_keys(rows))
        cols = [c.to_pylist() for c in rows.columns]
        t.put_many(keys, list(zip(*cols, counts.tolist(), strict=True)))
        log.info("%s: converted %d stored rows to the ordered layout", self.explain(), len(keys))


def _frame_of(
    gids: np.ndarray, sks: list[bytes], counts: np.ndarray, locs: np.ndarray | None = None
) -> pl.DataFrame:
    """A cache-shaped frame: group id, sort key, count, arena position."""
    return pl.DataFrame(
        [
            pl.Series(_G, gids, pl.Int64),
            pl.Series(_SK, sks, pl.Binary),
            pl.Series(_N, counts, pl.Int64),
            pl.Series(_LOC, np.empty(0, np.int64) if locs is None else locs, pl.Int64),
        ]
    )


def _group_cumsum(g: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Inclusive running sum of `v` within runs of equal `g` (groups are contiguous)."""
    total = np.cumsum(v)
    if not len(g):
        return total
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    before = total[starts] - v[starts]
    return total - np.repeat(before, np.diff(np.r_[starts, len(g)]))
