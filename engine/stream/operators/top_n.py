"""TopNOp: incremental `ORDER BY ... LIMIT n OFFSET m`, overall or per group.

Two SQL shapes plan to this operator:

* `SELECT ... ORDER BY o LIMIT n OFFSET m` (no group keys): the view holds the rows at
  positions m+1 .. m+n of the whole input in `o` order;
* `SELECT ... FROM (SELECT ..., row_number() OVER (PARTITION BY g ORDER BY o) AS rn ...)
  WHERE rn <= n` (group keys g, offset 0): the first n rows of every group, optionally
  with `rn` itself as an extra bigint output column (`with_rank_column`).

Order is total and deterministic: rows that tie on the ORDER BY columns are ordered by
their stream key ascending (NULLS LAST), so a view, an ad-hoc run and a restarted run
pick the same rows. The output is a changelog of "the current window": a row entering
the window is `+`, a row leaving it is `-`. With the rank column, a row that stays in the
window but moves gets a `U-`/`U+` pair (old rank, new rank), and so does a row whose
non-order columns were updated in place. A window "element" is (group, order values,
ident): a row whose order values change leaves as `-` and enters as `+`.

State (why: rows that can never be in a window need no Python objects):

* every row lives columnar in a `KeyedSegments` store (keyed_segments.py):
  Arrow segments of `(*row, __n)` with live masks, indexed by `ident` (the stream key,
  or every column when the stream key is empty; `__n` then counts identical rows, which
  occupy `__n` consecutive positions). It is persisted as few large values in the state
  table `rows` (format version in its `("meta",)` key; a table in the older per-row
  format is converted on load);
* in memory only, per group a *cache*: the group's first `K = 2 * (offset + limit)` rows
  in window order, kept in a `GroupCache` (topn_cache.py): one polars frame (columns:
  group id `__g`, the order and ident columns in a sortable form `k*`/`i*`, `__n` and
  the store location `__loc`) in which each group's rows are a contiguous range, so a
  step reads and replaces only the affected groups' rows. A group is *incomplete* when
  the store holds rows beyond its cache; an incomplete group's cache always holds at
  least `offset + limit` rows (else it is refilled), so the window is always read from
  the cache alone. Group values map to ids through a dict over their key values, and
  each segment has an array of its rows' group ids, so a refill selects the rows of
  the groups it needs with one numpy lookup per segment. The cache, the group ids and
  the incomplete flags are rebuilt from the store on the first step (restart).

Per step, all vectorised (polars/numpy/Arrow; per-row work only as C-level dict lookups):

1. consolidate the delta (net Z-set weight per full row); update the store: an
   insert-only delta of new idents is appended as it is; otherwise old rows of touched
   idents are killed and their net rows (summed `__n`) appended;
2. map the appended and killed rows to group ids and drop those that sort after their
   incomplete group's cache end (one join with the cache ends and a lexicographic
   comparison in window order): such appended rows live only in the store, such killed
   rows were not cached. The affected groups are those of the remaining rows. For those
   groups: old cache rows + appended rows are
   sorted, killed rows dropped, appended rows that sort after an incomplete group's old
   cache end dropped (they stay only in the store), the cache trimmed to `K` copies
   (trimming marks the group incomplete); incomplete groups left with fewer than
   `offset + limit` copies are refilled from the store (one vectorised pass over the
   segments for all of them, then sort and trim);
3. the old and new windows of the affected groups are expanded to copies with their
   positions and diffed with one outer join on (element, copy number); the output rows
   are gathered from the store (killed rows are still readable until `finish`).

Cost per epoch: O(delta + cache rows of affected groups) vectorised, plus one
O(stored rows) pass in epochs where some group needs a refill; inserted rows that
sort after their group's full cache cost only the columnar append and one vectorised
comparison with the cache end. Fixed overhead: some 25 polars calls per step (~5 ms).
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
from engine.state import codec
from engine.state.table import StateTable
from engine.stream.operator import Operator
from engine.stream.operators.base import StateAllocator
from engine.stream.operators.frames import batch_from_rows, consolidate
from engine.stream.operators.keyed_segments import KeyedSegments
from engine.stream.operators.segments import (
    META_KEY,
    SHIFT,
    by_segment,
    conform,
    key_fn,
    row_keys,
    rows_equal,
)
from engine.stream.operators.topn_cache import GroupCache
from engine.types import BIGINT, Field, SqlType, TypeKind, arrow_schema

log = logging.getLogger(__name__)

OrderSpec = tuple[int, bool, bool]  # (column, desc, nulls_first)

FORMAT_VERSION = 1
CACHE_FACTOR = 2
"""Each group caches its first `CACHE_FACTOR * (offset + limit)` rows."""
COUNT = "__n"
_UNBOUNDED = 1 << 62
_NS_DAY = 86_400_000_000_000
_G, _N, _LOC, _C, _R = "__g", COUNT, "__loc", "__c", "__r"


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


class TopNOp(Operator):
    """Incremental top-N, overall or per group; see the module docstring.

    Output schema: the input fields, plus a bigint rank column (1-based row_number in
    the group) when `with_rank_column`. Stream key: the input stream key, or when that
    is empty every input column (and the rank column, if output).
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
        # sortable column names and their sort flags
        self._kcols = self._names("k", [c for c, _, _ in self.order_by])
        self._icols = self._names("i", self._ident)
        self._desc = [False] + [d for c, d, _ in self.order_by for _ in range(self._w(c))]
        self._desc += [False] * len(self._icols)
        self._nulls_last = [False]
        self._nulls_last += [not nf for c, _, nf in self.order_by for _ in range(self._w(c))]
        self._nulls_last += [True] * len(self._icols)
        self._elem = [_G, *self._kcols, *self._icols]
        self._in_schema = arrow_schema(self.input_schema)
        self._row_schema = self._in_schema.append(pa.field(COUNT, pa.int64(), nullable=False))
        self._rows = alloc.table("rows")
        self._gid: dict[Any, int] = {}  # group key -> group id `__g`
        self._seg_gids: dict[int, np.ndarray] = {}  # segment id -> its rows' group ids
        self._gkey_fns = [key_fn(self._in_schema.field(c).type) for c in self.group_keys]
        self._ngroups = 0 if self.group_keys else 1
        empty = pa.RecordBatch.from_pylist([], schema=self._row_schema)
        self._cache = GroupCache(self._frame(empty, np.empty(0, np.int64)))
        self._store: KeyedSegments | None = None  # built on the first step (after `load`)

    @property
    def _st(self) -> KeyedSegments:
        assert self._store is not None
        return self._store

    def _open(self) -> KeyedSegments:
        """Build the store from the (possibly just loaded) table; rebuild the cache."""
        migrated = self._old_format_rows()
        store = self._store = KeyedSegments(
            self._rows, self._row_schema, self._ident, FORMAT_VERSION, "top-n"
        )
        if migrated is not None and migrated.num_rows:
            store.append(migrated, store.keys(migrated))
        if len(store):
            part = self._load_groups(None)
            self._cache.put(np.arange(self._ngroups), part, part.get_column(_G).to_numpy())
            log.debug("%s: rebuilt the cache of %d groups", self.explain(), self._ngroups)
        return store

    def _w(self, c: int) -> int:
        return sortable_width(self.input_schema[c].type)

    def _names(self, prefix: str, cols: list[int]) -> list[str]:
        return [f"{prefix}{j}_{p}" for j, c in enumerate(cols) for p in range(self._w(c))]

    def state_tables(self) -> list[StateTable]:
        return [self._rows]

    def explain(self) -> str:
        return explain_top_n(self, "StreamGroupTopN" if self.group_keys else "StreamTopN")

    # -- frames -------------------------------------------------------------------------
    def _frame(self, rows: pa.RecordBatch, locs: np.ndarray) -> pl.DataFrame:
        """Cache-shaped frame of stored rows `(*row, __n)` at `locs` (group ids assigned)."""
        order = [c for c, _, _ in self.order_by]
        df = pl.concat(
            [
                self._sortable(rows, order, self._kcols, "order"),
                self._sortable(rows, self._ident, self._icols, "ident"),
                pl.DataFrame([pl.Series(_N, rows.column(COUNT)), pl.Series(_LOC, locs)]),
            ],
            how="horizontal",
        )
        if self.group_keys:
            gids = self._gids(rows)
        else:
            gids = np.zeros(rows.num_rows, np.int64)
        return df.with_columns(pl.Series(_G, gids, pl.Int64)).select(
            _G, *self._kcols, *self._icols, _N, _LOC
        )

    def _sortable(
        self, rows: pa.RecordBatch, cols: list[int], names: list[str], what: str
    ) -> pl.DataFrame:
        types = self.input_schema
        arrays = [a for c in cols for a in sortable(rows.column(c), types[c].type, what)]
        df = pl.from_arrow(pa.Table.from_arrays(arrays, names=names))
        assert isinstance(df, pl.DataFrame)
        return df

    def _gids(self, rows: pa.RecordBatch) -> np.ndarray:
        """Group ids of `rows`, new groups numbered as they come."""
        keys = row_keys(rows, self.group_keys, self._gkey_fns)
        n = len(keys)
        ids = np.fromiter(map(self._gid.get, keys, repeat(-1)), np.int64, n)
        miss = ids < 0
        if miss.any():
            new = dict.fromkeys(compress(keys, miss))
            base = self._ngroups
            self._ngroups += len(new)
            self._gid.update(zip(new, range(base, self._ngroups)))
            self._cache.grow(self._ngroups)
            ids[miss] = list(map(self._gid.__getitem__, compress(keys, miss)))
        return ids

    def _sort(self, df: pl.DataFrame) -> pl.DataFrame:
        return df.sort(self._elem, descending=self._desc, nulls_last=self._nulls_last)

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
        batch, w = consolidate(chunk)
        if batch.num_rows == 0:
            return None
        batch = conform(batch, self._in_schema)
        store = self._store or self._open()
        killed, killed_rows, added_locs, added, touched = self._apply_store(store, batch, w)
        out = None
        if self._hi:
            add = self._frame(added, added_locs)
            self._note_gids(added_locs, add.get_column(_G).to_numpy())
            out = self._update_cache(killed, killed_rows, add)
        old, new = store.finish(touched)
        self._cache.remap(old, new)
        if self._seg_gids:
            self._note_gids(new, self._gids_at(old))
            for sid in self._seg_gids.keys() - store.segment_ids():
                del self._seg_gids[sid]
        return out

    def _note_gids(self, locs: np.ndarray, gids: np.ndarray) -> None:
        """Remember the group ids of stored rows (refills find a group's rows by them)."""
        if not self.group_keys:
            return
        for sid, pos, rows in by_segment(locs):
            arr = self._seg_gids.get(sid)
            if arr is None:
                n = self._st.segment_rows(sid)
                arr = self._seg_gids[sid] = np.full(n, -1, np.int64)
            arr[rows] = gids if pos is None else gids[pos]

    def _gids_at(self, locs: np.ndarray) -> np.ndarray:
        out = np.empty(len(locs), np.int64)
        for sid, pos, rows in by_segment(locs):
            got = self._seg_gids[sid][rows]
            if pos is None:
                return got
            out[pos] = got
        return out

    def _apply_store(
        self, store: KeyedSegments, batch: pa.RecordBatch, w: np.ndarray
    ) -> tuple[np.ndarray, pa.RecordBatch, np.ndarray, pa.RecordBatch, set[int]]:
        """Apply the delta to the store.

        Returns the killed locations and rows, the appended locations and rows, and the
        segments touched.
        """
        n = batch.num_rows
        keys = store.keys(batch)
        if (w > 0).all():
            first = dict(zip(keys, range(n)))
            if len(first) == n and not store.has_any(first):
                rows = _with_count(batch, pa.array(w, pa.int64()))
                none = pa.RecordBatch.from_pylist([], schema=self._row_schema)
                return np.empty(0, np.int64), none, store.append(rows, keys), rows, set()
        uniq = list(dict.fromkeys(keys))
        pos = dict(zip(uniq, range(len(uniq))))
        codes = np.fromiter(map(pos.__getitem__, keys), np.int64, n)
        nu = len(uniq)
        old = store.lookup(uniq)
        has_old = old >= 0
        old_n = np.zeros(nu, np.int64)
        old_rows = store.gather(old[has_old])
        if len(old_rows):
            old_n[has_old] = old_rows.column(COUNT).to_numpy()
        total = old_n + np.bincount(codes, weights=w, minlength=nu).astype(np.int64)
        if (total < 0).any():
            raise InternalError(
                "top-n state row count became negative",
                detail=f"A row of {self.explain()} was deleted but never inserted.",
            )
        last = np.full(nu, -1, np.int64)
        ins = np.flatnonzero(w > 0)
        np.maximum.at(last, codes[ins], ins)
        alive = total > 0
        from_delta = alive & (last >= 0)
        from_old = alive[has_old] & (last[has_old] < 0)
        parts = []
        if from_delta.any():
            parts.append(batch.take(pa.array(last[from_delta])))
        if from_old.any():
            parts.append(old_rows.filter(pa.array(from_old)).drop_columns([COUNT]))
        sel = np.concatenate([np.flatnonzero(from_delta), np.flatnonzero(has_old)[from_old]])
        gone = list(map(uniq.__getitem__, np.flatnonzero(has_old & ~alive).tolist()))
        touched = store.kill(old[has_old], gone)
        if not parts:
            empty = pa.RecordBatch.from_pylist([], schema=self._row_schema)
            return old[has_old], old_rows, np.empty(0, np.int64), empty, touched
        rows = pa.concat_batches(parts) if len(parts) > 1 else parts[0]
        rows = _with_count(rows, pa.array(total[sel], pa.int64()))
        new_keys = list(map(uniq.__getitem__, sel.tolist()))
        return old[has_old], old_rows, store.append(rows, new_keys), rows, touched

    def _update_cache(
        self, killed: np.ndarray, killed_rows: pa.RecordBatch, add: pl.DataFrame
    ) -> StreamChunk | None:
        cache = self._cache
        add = self._below_ends(add)
        parts = [add.get_column(_G).to_numpy()]
        if len(killed):  # killed rows after their group's cache end were not cached
            cached = self._below_ends(self._frame(killed_rows, killed))
            parts.append(cached.get_column(_G).to_numpy())
        affected = np.unique(np.concatenate(parts))
        if not len(affected):
            return None
        old_part = cache.part(affected)
        kill_s = pl.Series(killed, dtype=pl.Int64).implode()
        # merge: old rows (flagged, killed ones too: they mark the old cache end) + new rows
        m = pl.concat(
            [
                old_part.with_columns(
                    pl.lit(1, pl.Int8).alias("__o"),
                    pl.col(_LOC).is_in(kill_s).alias("__d"),
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

    def _below_ends(self, add: pl.DataFrame) -> pl.DataFrame:
        """Drop rows that sort after their incomplete group's cache end.

        Appended rows there cannot enter the window before the group is refilled (which
        reads the store), and killed rows there were not cached; skipping them keeps
        their groups out of this step's merge. One join with the ends and a
        lexicographic comparison in window order decide.
        """
        if not add.height:
            return add
        gids = np.unique(add.get_column(_G).to_numpy())
        gids = gids[self._cache.incomplete[gids]]
        if not len(gids):
            return add
        cols = [*self._kcols, *self._icols]
        ends = self._cache.ends(gids).select(
            _G, *[pl.col(c).alias(c + "_e") for c in cols], pl.lit(True).alias("__e")
        )
        j = add.select(_G, *cols).join(ends, on=_G, how="left", maintain_order="left")
        after = pl.lit(False)
        flags = zip(cols, self._desc[1:], self._nulls_last[1:], strict=True)
        for c, desc, nulls_last in reversed(list(flags)):
            a, e = pl.col(c), pl.col(c + "_e")
            beyond = (a < e) if desc else (a > e)
            col_after = (
                pl.when(a.is_null() & e.is_not_null())
                .then(pl.lit(nulls_last))
                .when(a.is_not_null() & e.is_null())
                .then(pl.lit(not nulls_last))
                .otherwise(beyond.fill_null(False))
            )
            after = col_after | (a.eq_missing(e) & after)
        drop = j.select((pl.col("__e").fill_null(False) & after).alias("d")).to_series()
        if not drop.any():
            return add
        return add.filter(~drop)

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

    def _load_groups(self, gids: np.ndarray | None) -> pl.DataFrame:
        """The first `K` stored rows of groups `gids` (all groups when None), sorted."""
        frames: list[pl.DataFrame] = []
        want = None
        if gids is not None and self.group_keys:
            want = np.zeros(self._ngroups, bool)
            want[gids] = True
        for sid, rows, nums in self._st.live_batches():
            locs = (sid << SHIFT) | nums
            if want is not None:
                idx = np.flatnonzero(want[self._seg_gids[sid][nums]])
                if not len(idx):
                    continue
                rows = rows.take(pa.array(idx))
                locs = locs[idx]
            frame = self._frame(rows, locs)
            if want is None:
                self._note_gids(locs, frame.get_column(_G).to_numpy())
            frames.append(frame)
        if gids is not None:
            self._cache.incomplete[gids] = False
        if not frames:
            return self._cache.frame.clear()
        return self._trim(self._sort(pl.concat(frames)))

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
            a = self._st.gather(lo[moved]).drop_columns([COUNT])
            b = self._st.gather(ln[moved]).drop_columns([COUNT])
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
        rows = self._st.gather(locs).drop_columns([COUNT])
        if self.with_rank_column:
            rows = rows.append_column(self.schema[-1].name, pa.array(ranks, pa.int64()))
        data = pa.RecordBatch.from_arrays(rows.columns, schema=arrow_schema(self.schema))
        return StreamChunk(pa.array(ops), data)

    # -- old state format ---------------------------------------------------------------
    def _old_format_rows(self) -> pa.RecordBatch | None:
        """Rows of a `rows` table in the per-row format (`key -> (*row, count)`), cleared.

        That format had no `("meta",)` key; its rows are re-stored as segments.
        """
        if not len(self._rows) or META_KEY in self._rows:
            return None
        values = list(self._rows.values())
        self._rows.clear()
        b = batch_from_rows(self.input_schema, [v[:-1] for v in values])
        return _with_count(b, pa.array([v[-1] for v in values], pa.int64()))


def _group_cumsum(g: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Inclusive running sum of `v` within runs of equal `g` (groups are contiguous)."""
    total = np.cumsum(v)
    if not len(g):
        return total
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    before = total[starts] - v[starts]
    return total - np.repeat(before, np.diff(np.r_[starts, len(g)]))


def _with_count(batch: pa.RecordBatch, n: pa.Array) -> pa.RecordBatch:
    return batch.append_column(pa.field(COUNT, pa.int64(), nullable=False), n)
