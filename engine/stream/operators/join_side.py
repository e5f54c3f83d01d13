"""JoinSide: one hash-join input's stored rows, columnar, probed by join-key id.

Why: a join's state holds every row of both inputs; keeping one Python tuple and a dict
entry per row (and one store key per row) made the join spend its time building objects,
updating dicts and collecting garbage. A `JoinSide` keeps rows the way
`ColumnarMaterializeOp` does (shared machinery in `segments.py`):

* rows live in immutable Arrow segments addressed by `segment_id << 32 | row`; beside each
  segment numpy arrays: `count` (multiplicity; > 1 only for duplicate rows when the side
  has no stream key; 0 = dead row), `degree` (only for a preserved side of a join with a
  residual condition: the other side's matching rows with multiplicity), `jk` (the row's
  join-key id) and `perm`/`sjk` (rows sorted by join-key id, for probing);
* join-key ids come from `JoinKeyIds`, ONE dict over the distinct join-key values shared by
  both sides, so `jk` arrays of the two sides are comparable and `tot[jk]` (the live count
  of this side's rows under a key) is one numpy array: without a residual condition it
  is the degree of every row of the other side under that key; ids no stored row holds
  are forgotten once they are most of them (`JoinKeyIds.compact`, order-preserving);
* a probe takes the probing delta's distinct key ids and per segment runs `searchsorted`
  over `sjk`, expanding the hits with `repeat` arithmetic: no per-row Python;
* an identity index (dict: ident key -> row id; ident = the stream key, or all columns
  when there is none) finds rows for deletes and duplicate inserts; row ids are per-run
  numbers and a numpy array maps them to locations, so moving rows (merges) costs array
  writes, not dict updates (ids are renumbered when more than half are dead);
* segments are merged size-tiered (`FANOUT` segments of one size tier become one), and a
  segment whose live fraction drops below `MIN_LIVE_FRACTION` is rewritten, so a probe
  visits O(log n) segments and dead rows stay bounded.

Persistence (one `StateTable` per side, through `SegmentTable`): `(sid,)` -> Arrow IPC
bytes (written once), `("mask", sid)` -> packed live bitmap, `("count", sid)` ->
`(positions, counts)` of live rows with count > 1, `("degree", sid)` -> the int64 degree
array, `("meta",)` -> `(FORMAT_VERSION, next sid)`. Only segments touched in a step get
their mask/count/degree values rewritten (`flush`). Join-key ids, row ids, `perm`, `tot` and
the identity index are rebuilt by `load` (ids are per run, never stored).

Lifecycle: constructed by `HashJoinOp` over its allocated table; `load` once before the
first step (the runtime has loaded the table by then); per step `probe`/degree updates,
then `apply` of the side's own delta, then `flush`; `HashJoinOp` then lets
`JoinKeyIds.compact` run (no probe result is held across steps).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress, repeat
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from engine.errors import InternalError
from engine.state.table import StateTable
from engine.stream.operators.frames import INDEX, col_name, polars_frame
from engine.stream.operators.segments import (
    MASK,
    NAN,
    SHIFT,
    SegmentTable,
    by_segment,
    gather,
    key_fn,
    row_keys,
    rows_equal,
    unpack_mask,
)
from engine.types import Field, arrow_schema

FORMAT_VERSION = 2
"""Version 1 was one store key per row: `(*join key, *ident) -> (*row, count)`."""
BASE_ROWS = 4096
"""Segments with fewer live rows form tier 0; each further tier is `FANOUT` times larger."""
FANOUT = 4
MAX_SEGMENT_ROWS = 1 << 20
"""Merged segments are split at this size; segments this large are not merged further."""
MIN_LIVE_FRACTION = 0.5
RENUMBER_SLACK = 1 << 16
"""Row ids are renumbered once more than twice the live rows plus this many were handed out."""
KEY_SLACK = 1 << 16
"""Join-key ids are compacted once more than twice the live keys plus this many exist."""
"""Row ids are renumbered once more than twice the live rows plus this many were handed out."""
COUNT = "count"
DEGREE = "degree"
_AUX = (MASK, COUNT, DEGREE)


class JoinKeyIds:
    """Dense ids for distinct join-key values, shared by both sides of one join.

    Keys are Python values (bare for one key column, tuples otherwise) with NaN as the one
    `NAN` object; Python equality makes 1 == 1.0 and equal decimals of different scale
    the same key, as SQL equality does. Only distinct values of a batch become Python
    objects.
    """

    def __init__(self) -> None:
        self.ids: dict[Any, int] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def assign(self, batch: pa.RecordBatch, cols: list[int]) -> np.ndarray:
        """The key id of every row (rows must have no NULL key); new values get new ids."""
        n = batch.num_rows
        if n == 0:
            return np.empty(0, np.int64)
        if not cols:
            distinct: list[Any] = [()]
            inverse = np.zeros(n, np.int64)
        elif len(cols) == 1 and _plain_numeric(batch.column(cols[0]).type):
            arr = batch.column(cols[0]).to_numpy(zero_copy_only=False)
            uniq, inverse = np.unique(arr, return_inverse=True)
            distinct = uniq.tolist()
            if arr.dtype.kind == "f":
                distinct = [NAN if v != v else v for v in distinct]
        else:
            frame = polars_frame(batch, cols, index=True)
            names = list(dict.fromkeys(col_name(k) for k in cols))
            uk = frame.df.group_by(names, maintain_order=True).agg(
                pl.col(INDEX), pl.col(INDEX).first().alias("__f")
            )
            first = batch.take(pa.array(uk.get_column("__f").to_numpy()))
            vals = [_values(first.column(k)) for k in cols]
            distinct = vals[0] if len(vals) == 1 else list(zip(*vals))
            ex = uk.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("__g"), INDEX).explode(
                INDEX
            )
            inverse = np.empty(n, np.int64)
            inverse[ex.get_column(INDEX).to_numpy()] = ex.get_column("__g").to_numpy()
        ids = self.ids
        uid = np.fromiter(map(ids.get, distinct, repeat(-1)), np.int64, len(distinct))
        new = np.flatnonzero(uid < 0)  # values seen for the first time
        if len(new):
            fresh = list(map(distinct.__getitem__, new.tolist()))
            base = len(ids)
            add = dict(zip(fresh, range(base, base + len(fresh))))
            if len(add) == len(fresh):  # pairwise distinct (the usual case): in bulk
                ids.update(add)
                uid[new] = np.arange(base, base + len(fresh), dtype=np.int64)
            else:  # values equal in Python though apart in the batch (0.0 and -0.0)
                for i, v in zip(new.tolist(), fresh, strict=True):
                    uid[i] = ids.setdefault(v, len(ids))
        return uid[inverse]

    def compact(self, sides: list[JoinSide]) -> None:
        """Forget key values no stored row (live or dead) holds any more, renumbering ids.

        Keys come and go (interval joins clean by watermark; updates move rows between
        keys), so without this the dict and the per-key arrays would only grow. New ids
        keep the old order, so every segment's `sjk` stays sorted. Runs between steps,
        only once most ids are unused (amortised O(1) per key).
        """
        n = len(self.ids)
        live = sum(np.count_nonzero(s.tot[:n]) for s in sides)
        if n <= 2 * live + KEY_SLACK:
            return
        used = np.zeros(n, bool)
        for side in sides:
            side.mark_used_keys(used)
        new_of_old = np.cumsum(used) - 1
        new_of_old[~used] = -1
        old = np.fromiter(self.ids.values(), np.int64, n)
        keep = used[old]
        self.ids = dict(
            zip(compress(self.ids.keys(), keep.tolist()), new_of_old[old[keep]].tolist())
        )
        for side in sides:
            side.remap_keys(new_of_old, used)


@dataclass(slots=True)
class JoinSegment:
    """One immutable batch of a side's rows with its mutable per-row arrays."""

    batch: pa.RecordBatch
    count: np.ndarray  # int64 multiplicity, 0 = dead
    degree: np.ndarray | None  # int64, only with a residual condition on a preserved side
    jk: np.ndarray  # int64 join-key id per row
    perm: np.ndarray  # rows ordered by jk
    sjk: np.ndarray  # jk[perm]
    rid: np.ndarray  # int64 row id per row (-1: dead when loaded)
    live: int


class JoinSide:
    """One join input's rows; see the module docstring."""

    def __init__(
        self,
        name: str,
        fields: list[Field],
        keys: list[int],
        ident: list[int],
        table: StateTable,
        with_degree: bool,
        what: str,
    ) -> None:
        self.name = name
        self.keys = keys
        self.ident = ident
        self.table = table
        self.with_degree = with_degree
        self.what = what
        self.schema = arrow_schema(fields)
        self.store = SegmentTable(table, self.schema, FORMAT_VERSION, f"hash join {name}")
        self.segs: dict[int, JoinSegment] = {}
        self.index: dict[Any, int] = {}  # ident key -> row id
        self._loc = np.empty(0, np.int64)  # row id -> location
        self._next_rid = 0
        self.tot = np.zeros(0, np.int64)
        self._ident_fns = [key_fn(self.schema.field(i).type) for i in ident]
        self._dirty: set[int] = set()

    def __len__(self) -> int:
        return len(self.index)

    # -- reads ----------------------------------------------------------------------------
    def grow(self, n_keys: int) -> None:
        """Make `tot` cover `n_keys` join-key ids (capacity doubles: many small steps that
        each add a few keys, as a backfill's slices, do not copy the array every time)."""
        if len(self.tot) < n_keys:
            grown = np.zeros(max(n_keys, 2 * len(self.tot)), np.int64)
            grown[: len(self.tot)] = self.tot
            self.tot = grown

    def mark_used_keys(self, used: np.ndarray) -> None:
        """Set `used[id]` for every join-key id a stored row (live or dead) holds."""
        for seg in self.segs.values():
            used[seg.jk] = True

    def remap_keys(self, new_of_old: np.ndarray, used: np.ndarray) -> None:
        """Apply a join-key id compaction (see `JoinKeyIds.compact`)."""
        for seg in self.segs.values():
            seg.jk = new_of_old[seg.jk]
            seg.sjk = new_of_old[seg.sjk]
        self.tot = self.tot[: len(used)][used]

    def probe(self, ujk: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Live rows under the key ids `ujk`: (position in `ujk`, location), grouped by key."""
        keys: list[np.ndarray] = []
        locs: list[np.ndarray] = []
        nu = len(ujk)
        for sid, seg in self.segs.items():
            lo = np.searchsorted(seg.sjk, ujk, "left")
            c = np.searchsorted(seg.sjk, ujk, "right") - lo
            total = int(c.sum())
            if not total:
                continue
            which = np.repeat(np.arange(nu, dtype=np.int64), c)
            off = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(c) - c, c)
            rows = seg.perm[np.repeat(lo, c) + off]
            if seg.live < seg.batch.num_rows:
                alive = seg.count[rows] > 0
                which, rows = which[alive], rows[alive]
            keys.append(which)
            locs.append(rows | (sid << SHIFT))
        if not keys:
            return np.empty(0, np.int64), np.empty(0, np.int64)
        k = np.concatenate(keys)
        loc = np.concatenate(locs)
        if len(keys) > 1:
            order = np.argsort(k, kind="stable")
            k, loc = k[order], loc[order]
        return k, loc

    def rows_at(self, locs: np.ndarray) -> pa.RecordBatch:
        if not len(locs):
            return pa.RecordBatch.from_pylist([], schema=self.schema)
        return gather(locs, self._batch_of)

    def counts_at(self, locs: np.ndarray) -> np.ndarray:
        return self._read(locs, "count")

    def degrees_at(self, locs: np.ndarray) -> np.ndarray:
        return self._read(locs, "degree")

    def set_degrees(self, locs: np.ndarray, values: np.ndarray) -> None:
        for sid, pos, rows in by_segment(locs):
            seg = self.segs[sid]
            assert seg.degree is not None
            seg.degree[rows] = values if pos is None else values[pos]
            self._dirty.add(sid)

    def stored(self, batch: pa.RecordBatch) -> np.ndarray:
        """Per row of `batch` (this side's schema): is exactly this row stored?"""
        n = batch.num_rows
        if not n or not self.index:
            return np.zeros(n, bool)
        locs = self._locate(self.ident_keys(batch))
        found = locs >= 0
        out = np.zeros(n, bool)
        if found.any():
            fi = np.flatnonzero(found)
            out[fi] = rows_equal(self.rows_at(locs[fi]), batch.take(pa.array(fi)), nan_equal=True)
        return out

    def ident_keys(self, batch: pa.RecordBatch) -> list[Any]:
        return row_keys(batch, self.ident, self._ident_fns)

    # -- writes ---------------------------------------------------------------------------
    def apply(
        self, batch: pa.RecordBatch, w: np.ndarray, jk: np.ndarray, deg: np.ndarray | None
    ) -> None:
        """Add the rows of `batch` (no NULL join keys) with net weights `w` to the side.

        Deletes first, then inserts: an insert whose identity is stored adds to that row's
        count, others become one new segment. `deg` is each row's degree (with_degree).
        """
        keys = self.ident_keys(batch)
        neg = w < 0
        touched: set[int] = set()
        if neg.any():
            di = np.flatnonzero(neg)
            dkeys = keys if len(di) == len(keys) else [keys[i] for i in di.tolist()]
            locs = self._locate(dkeys)
            if (locs < 0).any():
                self._negative("was deleted but never inserted")
            after = self._add_counts(locs, w[di], touched)
            if (after < 0).any():
                self._negative("was deleted too often")
            gone = after == 0
            if gone.any():
                pop = self.index.pop
                for k in compress(dkeys, gone.tolist()):
                    pop(k, None)
            np.add.at(self.tot, jk[di], w[di])
        pi = np.flatnonzero(~neg)
        if len(pi):
            pkeys = keys if len(pi) == len(keys) else [keys[i] for i in pi.tolist()]
            locs = self._locate(pkeys)
            exists = locs >= 0
            if exists.any():
                self._add_counts(locs[exists], w[pi[exists]], touched)
            if not exists.all():
                ni = pi[~exists]
                nkeys = (
                    pkeys if len(ni) == len(pkeys) else list(compress(pkeys, (~exists).tolist()))
                )
                nw = w[ni]
                first = dict(zip(reversed(nkeys), range(len(nkeys) - 1, -1, -1)))
                if len(first) < len(nkeys):  # one identity inserted twice in this delta
                    grp = np.fromiter(map(first.__getitem__, nkeys), np.int64, len(nkeys))
                    nw = np.bincount(grp, weights=nw, minlength=len(nkeys)).astype(np.int64)
                    sel = np.sort(np.fromiter(first.values(), np.int64, len(first)))
                    ni, nw = ni[sel], nw[sel]
                    nkeys = [nkeys[i] for i in sel.tolist()]
                sub = batch if len(ni) == batch.num_rows else batch.take(pa.array(ni))
                d = deg[ni] if deg is not None and self.with_degree else None
                self._append(sub, nw.astype(np.int64), d, jk[ni], self._index_new(nkeys))
            np.add.at(self.tot, jk[pi], w[pi])
        self._maintain(touched)

    def flush(self) -> None:
        """Persist mask, counts and degrees of the segments changed since the last flush."""
        for sid in self._dirty:
            seg = self.segs.get(sid)
            if seg is None:
                continue
            n = seg.batch.num_rows
            self.store.put_mask(sid, None if seg.live == n else seg.count > 0)
            multi = np.flatnonzero(seg.count > 1)
            self.store.put_aux(
                COUNT,
                sid,
                (multi.astype(np.int32).tobytes(), seg.count[multi].tobytes())
                if len(multi)
                else None,
            )
            if seg.degree is not None:
                self.store.put_aux(DEGREE, sid, (seg.degree.tobytes(),))
        self._dirty.clear()

    def load(self, jkids: JoinKeyIds) -> None:
        """Rebuild segments, counts, degrees, key ids and the identity index from the table."""
        if not len(self.table):
            return
        batches, aux = self.store.load()
        masks, counts, degrees = (aux.get(k, {}) for k in _AUX)
        for sid, batch in batches.items():
            n = batch.num_rows
            count = np.ones(n, np.int64)
            if sid in masks:
                count[~unpack_mask(masks[sid])] = 0
            if sid in counts:
                pos, vals = counts[sid]
                count[np.frombuffer(pos, np.int32)] = np.frombuffer(vals, np.int64)
            degree = None
            if self.with_degree:
                degree = (
                    np.frombuffer(degrees[sid][0], np.int64).copy()
                    if sid in degrees
                    else np.zeros(n, np.int64)
                )
            live = np.flatnonzero(count > 0)
            keys = self.ident_keys(batch if len(live) == n else batch.take(pa.array(live)))
            rid = np.full(n, -1, np.int64)
            rid[live] = self._index_new(keys)
            self._loc[rid[live]] = live | (sid << SHIFT)
            self._add_segment(sid, batch, count, degree, jkids.assign(batch, self.keys), rid)
        self.grow(len(jkids))
        for seg in self.segs.values():
            self.tot += np.bincount(seg.jk, weights=seg.count, minlength=len(self.tot)).astype(
                np.int64
            )

    # -- internals ------------------------------------------------------------------------
    def _batch_of(self, sid: int) -> pa.RecordBatch:
        return self.segs[sid].batch

    def _read(self, locs: np.ndarray, attr: str) -> np.ndarray:
        out = np.empty(len(locs), np.int64)
        for sid, pos, rows in by_segment(locs):
            vals = getattr(self.segs[sid], attr)[rows]
            if pos is None:
                return vals  # type: ignore[no-any-return]
            out[pos] = vals
        return out

    def _locate(self, keys: list[Any]) -> np.ndarray:
        """Locations of the rows with identities `keys` (-1: not stored)."""
        rid = np.fromiter(map(self.index.get, keys, repeat(-1)), np.int64, len(keys))
        found = rid >= 0
        if found.all():
            return self._loc[rid]  # type: ignore[no-any-return]
        out = np.full(len(keys), -1, np.int64)
        out[found] = self._loc[rid[found]]
        return out

    def _index_new(self, keys: list[Any]) -> np.ndarray:
        """Give rows with new identities `keys` fresh row ids; returns them."""
        n = len(keys)
        r0 = self._next_rid
        self._next_rid += n
        if len(self._loc) < self._next_rid:
            grown = np.full(max(2 * len(self._loc), self._next_rid, 1024), -1, np.int64)
            grown[: len(self._loc)] = self._loc
            self._loc = grown
        self.index.update(zip(keys, range(r0, r0 + n)))
        return np.arange(r0, r0 + n, dtype=np.int64)

    def _renumber(self) -> None:
        """Compact row ids to 0..live-1 (once most ids belong to dead rows)."""
        n = len(self.index)
        old = np.fromiter(self.index.values(), np.int64, n)
        new_of_old = np.full(self._next_rid, -1, np.int64)
        new_of_old[old] = np.arange(n, dtype=np.int64)
        self.index = dict(zip(self.index.keys(), range(n)))
        for seg in self.segs.values():
            seg.rid = np.where(seg.rid >= 0, new_of_old[np.maximum(seg.rid, 0)], -1)
        loc = np.full(max(n, 1024), -1, np.int64)
        loc[:n] = self._loc[old]
        self._loc = loc
        self._next_rid = n

    def _add_counts(self, locs: np.ndarray, w: np.ndarray, touched: set[int]) -> np.ndarray:
        """Add `w` to the counts at `locs`; returns the counts after, per location."""
        after = np.empty(len(locs), np.int64)
        for sid, pos, rows in by_segment(locs):
            seg = self.segs[sid]
            distinct = np.unique(rows)
            before = int(np.count_nonzero(seg.count[distinct]))
            np.add.at(seg.count, rows, w if pos is None else w[pos])
            seg.live += int(np.count_nonzero(seg.count[distinct] > 0)) - before
            if pos is None:
                after = seg.count[rows]
            else:
                after[pos] = seg.count[rows]
            touched.add(sid)
            self._dirty.add(sid)
        return after

    def _append(
        self,
        batch: pa.RecordBatch,
        count: np.ndarray,
        degree: np.ndarray | None,
        jk: np.ndarray,
        rid: np.ndarray,
    ) -> None:
        """Store live rows with row ids `rid` as new segment(s) and point the ids there."""
        n = batch.num_rows
        for start in range(0, n, MAX_SEGMENT_ROWS):
            end = min(n, start + MAX_SEGMENT_ROWS)
            part = batch if end - start == n else batch.slice(start, end - start)
            sid = self.store.new_sid()
            stored = self.store.write(sid, part)
            d = None
            if self.with_degree:
                d = np.zeros(end - start, np.int64) if degree is None else degree[start:end].copy()
            r = rid[start:end]
            self._add_segment(sid, stored, count[start:end].copy(), d, jk[start:end], r)
            self._dirty.add(sid)
            self._loc[r] = np.arange(end - start, dtype=np.int64) | (sid << SHIFT)

    def _add_segment(
        self,
        sid: int,
        batch: pa.RecordBatch,
        count: np.ndarray,
        degree: np.ndarray | None,
        jk: np.ndarray,
        rid: np.ndarray,
    ) -> None:
        perm = np.argsort(jk)
        live = int(np.count_nonzero(count > 0))
        self.segs[sid] = JoinSegment(batch, count, degree, jk, perm, jk[perm], rid, live)

    def _maintain(self, touched: set[int]) -> None:
        """Drop empty segments, rewrite sparse ones, merge full size tiers."""
        segs = self.segs
        if self._next_rid > 2 * len(self.index) + RENUMBER_SLACK:
            self._renumber()
        for sid in [s for s in touched if segs[s].live == 0]:
            self._drop(sid)
        rewrite = [
            s
            for s in touched
            if s in segs and segs[s].live < MIN_LIVE_FRACTION * segs[s].batch.num_rows
        ]
        while True:
            tiers: dict[int, list[int]] = {}
            for sid, seg in segs.items():
                if seg.live < MAX_SEGMENT_ROWS // 2 and sid not in rewrite:
                    tiers.setdefault(_tier(seg.live), []).append(sid)
            for group in tiers.values():
                if len(group) >= FANOUT:
                    rewrite += group
            if not rewrite:
                return
            self._merge(rewrite)
            rewrite = []

    def _merge(self, sids: list[int]) -> None:
        segs = [self.segs[s] for s in sids]
        parts, counts, degrees, jks, rids = [], [], [], [], []
        for seg in segs:
            if seg.live == seg.batch.num_rows:
                parts.append(seg.batch)
                counts.append(seg.count)
                degrees.append(seg.degree)
                jks.append(seg.jk)
                rids.append(seg.rid)
            elif seg.live:
                alive = seg.count > 0
                parts.append(seg.batch.filter(pa.array(alive)))
                counts.append(seg.count[alive])
                degrees.append(None if seg.degree is None else seg.degree[alive])
                jks.append(seg.jk[alive])
                rids.append(seg.rid[alive])
        for sid in sids:
            self._drop(sid)
        if not parts:
            return
        merged = pa.concat_batches(parts) if len(parts) > 1 else parts[0]
        degree = None
        if self.with_degree:
            degree = np.concatenate([d for d in degrees if d is not None])
        self._append(
            merged, np.concatenate(counts), degree, np.concatenate(jks), np.concatenate(rids)
        )

    def _drop(self, sid: int) -> None:
        self.segs.pop(sid)
        self._dirty.discard(sid)
        self.store.drop(sid, _AUX)

    def _negative(self, what: str) -> None:
        raise InternalError(
            "join state row count became negative",
            detail=f"A {self.name} row of {self.what} {what}.",
        )


def _tier(live: int) -> int:
    """Size tier: 0 below `BASE_ROWS`, then one more per factor `FANOUT` (= 4)."""
    return max(0, (live.bit_length() - BASE_ROWS.bit_length() + 2) // 2)


def _plain_numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def _values(col: pa.Array) -> list[Any]:
    """Python values of distinct join keys: lists as tuples, NaN as `NAN`."""
    values = col.to_pylist()
    t = col.type
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [None if v is None else _tuple(v) for v in values]
    if pa.types.is_floating(t):
        return [NAN if v != v else v for v in values]
    return values


def _tuple(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_tuple(x) for x in v)
    return NAN if isinstance(v, float) and v != v else v
