"""HashJoinOp: incremental equi-join (inner, left, right, full outer, semi, anti).

Per epoch the operator receives one consolidated delta per input, dL and dR, and keeps
the integrated inputs L and R (as of the previous epoch) in state. The output delta is
the bilinear rule

    d(L join R) = dL join R  +  (L + dL) join dR

computed in that order: dL is probed against R, then dL is applied to L, then dR is
probed against the updated L, then dR is applied to R. Every pair is therefore counted
exactly once, and a pair whose two rows both change in one epoch is emitted by the
second probe only (its `+` from the first probe and `-` from the second cancel, or
not, exactly as the integrated relations demand). When both inputs changed, the output
is consolidated by full row so such cancelling pairs do not reach downstream.

Each input's rows are kept by a side store with one interface (probe by join-key id,
read rows / counts / degrees at locations, set degrees, apply the side's delta):

* `KeyedJoinSide` (engine/stream/operators/keyed_join_side.py) when the runtime hands out
  RocksDB-first tables: one value per join key (its rows, counts, degrees and live
  count) in a `DiskStateTable`, read for the keys of both deltas with one multi-get per
  side per step; join-key ids are then per step (a fresh `JoinKeyIds`);
* `JoinSide` (engine/stream/operators/join_side.py) otherwise (ad-hoc runs, tests with a
  local allocator): resident columnar Arrow segments with per-row count / join-key id
  (and degree) arrays, probed with `searchsorted`, ids kept across steps.

How one probe works (vectorised; Python touches only distinct keys):

1. the delta is consolidated by full row (net Z-set weight; only when it contains
   deletes), rows with a NULL in any join key are set aside (they never match);
2. the remaining rows get their join-key id (`JoinKeyIds`: one dict over distinct key
   values shared by both sides) and the delta's distinct ids;
3. the other side returns, per distinct id, the locations of its live rows under it;
   (delta row, stored row) pairs are expanded with numpy `repeat` arithmetic and
   materialised with Arrow `take`;
4. the residual `condition` (non-equality part of ON) is evaluated once over the pair
   batch and drops pairs where it is not true;
5. degrees (see below) change, and only rows whose degree crosses zero produce
   NULL-padded (or semi/anti) output.

Outer joins and degrees. A row of a preserved side (left for left/full/semi/anti, right
for right/full) has a *degree*: the number of other-side rows (with multiplicity) it
currently matches. A preserved row with degree 0 is in the output NULL-padded (anti:
as itself; semi: not at all). When a change to the other side moves its degree 0 -> >0
its padded row is retracted, and >0 -> 0 emits it again; pair output is emitted
regardless of degrees. Without a residual condition every row under one join key has
the same degree, the other side's live count under that key (`JoinSide.tot`, one numpy
array by key id), so crossings are found per key. With a condition degrees are per row
(a persisted array beside the segment) and updated with `bincount` over the pairs.
Rows with a NULL join key are never stored: on a preserved side their delta goes
straight to the output NULL-padded (anti: as is), elsewhere it is dropped.

State: one table per input, `left` / `right`, in the layout of the side store above.

Append-only joins (`append_only`, planned for an inner equi-join whose inputs both never
retract, as RisingWave plans them from the APPEND ONLY property): the sides are
insert-only (same layout; a delete never reaches them: an input that retracts is an
internal error, not a silent wrong answer), and nothing is consolidated: with only
inserts, no pair can be emitted by both probes, so the output of a step is the pairs
as inserts. Its output is append-only, so downstream aggregations can use their
append-only paths.

Semi and anti joins output only the left columns: a left row appears once per copy while
its degree is > 0 (semi, `EXISTS`/`IN`) or == 0 (anti, `NOT EXISTS`). NULL-aware
`NOT IN` semantics are not implemented here (the planner must add the NULL checks).

Lifecycle: constructed at build time; the runtime loads the state tables, and the first
`step` (or `stored_rows`) rebuilds both sides from them; per epoch `step`, then the
runtime commits the tables.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.chunk import Op, StreamChunk
from engine.errors import DatatypeMismatch, InternalError
from engine.state.disk_table import DiskStateTable
from engine.state.table import StateTable
from engine.stream.operator import Operator
from engine.stream.operators.base import Expr, StateAllocator
from engine.stream.operators.frames import net_rows
from engine.stream.operators.join_side import JoinKeyIds, JoinSide
from engine.stream.operators.keyed_join_side import KeyedJoinSide
from engine.stream.operators.segments import NAN, conform, rows_equal
from engine.types import Field, TypeKind, arrow_schema

JOIN_KINDS = ("inner", "left", "right", "full", "semi", "anti")

Side = JoinSide | KeyedJoinSide
"""A side's store: resident segments, or keyed by join key in a disk table."""
Piece = tuple[pa.RecordBatch, np.ndarray, np.ndarray]
"""Output rows, their weights and their join-key ids (-1: NULL key)."""

__all__ = ["JOIN_KINDS", "NAN", "HashJoinOp"]


@dataclass(slots=True)
class _Delta:
    """One side's epoch delta, consolidated; rows with NULL join keys flagged."""

    batch: pa.RecordBatch
    w: np.ndarray  # int64 net weight per row
    valid: np.ndarray  # bool: no NULL in the join key
    jk: np.ndarray  # int64 join-key id per valid row (in `valid` order)
    jkf: np.ndarray  # int64 join-key id per row, -1 where the key has a NULL
    ujk: np.ndarray  # the delta's distinct key ids
    gid: np.ndarray  # per valid row: position of its key id in `ujk`


@dataclass(slots=True)
class _Matches:
    """Pairs of (delta row, stored entry of the other side) that satisfy the join.

    Entries are the other side's live rows under the delta's keys, grouped by key.
    """

    d: np.ndarray  # delta row per pair
    e: np.ndarray  # matched entry per pair
    locs: np.ndarray  # location of each entry
    egid: np.ndarray  # position in the delta's `ujk` of each entry's key
    counts: np.ndarray  # multiplicity of each entry
    other: pa.RecordBatch | None  # entries' rows (built on demand)


class HashJoinOp(Operator):
    """Incremental `left JOIN right ON left_keys = right_keys [AND condition]`.

    Output schema: left fields then right fields (semi/anti: left fields only). Stream
    key: the left identity columns then the right ones shifted by `len(left_schema)`
    (semi/anti: the left ones), where a side's identity is its stream key or, when that
    is empty, all of its columns. Input 0 is the left side, input 1 the right side.
    See the module docstring for the algorithm and the state layout.
    """

    def __init__(
        self,
        left_schema: list[Field],
        right_schema: list[Field],
        kind: str,
        left_keys: list[int],
        right_keys: list[int],
        condition: Expr | None,
        ctx: Any,
        alloc: StateAllocator,
        left_stream_key: list[int],
        right_stream_key: list[int],
        append_only: bool = False,
    ) -> None:
        """`append_only`: both inputs never retract (an inner join; see the module
        docstring)."""
        if kind not in JOIN_KINDS:
            raise ValueError(f"unknown join kind {kind!r}")
        if len(left_keys) != len(right_keys):
            raise ValueError("HashJoinOp needs as many left keys as right keys")
        if condition is not None and condition.type.kind not in (
            TypeKind.BOOLEAN,
            TypeKind.UNKNOWN,
        ):
            raise DatatypeMismatch(
                f"argument of JOIN/ON must be type boolean, not type {condition.type.display}"
            )
        if append_only and kind != "inner":
            raise ValueError("only an inner join can be append-only")
        self.kind = kind
        self.append_only = append_only
        self.condition = condition
        self.ctx = ctx
        self.left_schema = list(left_schema)
        self.right_schema = list(right_schema)
        self._semi_anti = kind in ("semi", "anti")
        self._pairs_out = not self._semi_anti
        self._l_pres = kind in ("left", "full", "semi", "anti")
        self._r_pres = kind in ("right", "full")
        l_ident = list(left_stream_key) or list(range(len(left_schema)))
        r_ident = list(right_stream_key) or list(range(len(right_schema)))
        with_deg = condition is not None
        self._jkids = JoinKeyIds()
        lt, rt = alloc.table("left", disk=True), alloc.table("right", disk=True)
        # RocksDB-first tables when the runtime has a store (rows keyed by join key,
        # bounded memory), else the resident columnar segments (ad-hoc runs, tests)
        self._keyed = isinstance(lt, DiskStateTable) and isinstance(rt, DiskStateTable)
        side_cls = KeyedJoinSide if self._keyed else JoinSide
        self._left: Side = side_cls(
            "left",
            self.left_schema,
            list(left_keys),
            l_ident,
            lt,
            self._l_pres and with_deg,
            "",
        )
        self._right: Side = side_cls(
            "right",
            self.right_schema,
            list(right_keys),
            r_ident,
            rt,
            self._r_pres and with_deg,
            "",
        )
        self._left.what = self._right.what = self.explain()
        if self._keyed and all(
            pa.types.is_integer(f.type)
            for sch, ks in ((self._left.schema, left_keys), (self._right.schema, right_keys))
            for f in (sch.field(k) for k in ks)
        ):  # every join key value (`JoinKeyIds`, shared) and fragment id is a Python int
            for t in (lt, rt):
                assert isinstance(t, DiskStateTable)
                t.int_keys = True
        nl = len(left_schema)
        if self._semi_anti:
            self.schema = list(left_schema)
            self.stream_key = l_ident
        else:
            self.schema = self.left_schema + self.right_schema
            self.stream_key = l_ident + [nl + i for i in r_ident]
        self._out_schema = arrow_schema(self.schema)
        self._pair_schema = arrow_schema(self.left_schema + self.right_schema)
        self._loaded = False

    # -- protocol ---------------------------------------------------------------------
    def state_tables(self) -> list[StateTable]:
        return [self._left.table, self._right.table]

    def explain(self) -> str:
        nl = len(self.left_schema)
        eq = ", ".join(
            f"${a} = ${b + nl}" for a, b in zip(self._left.keys, self._right.keys, strict=True)
        )
        cond = "" if self.condition is None else f", condition: {self.condition}"
        ao = " [append_only]" if self.append_only else ""
        return f"StreamHashJoin{ao} {{ type: {self.kind}, predicate: [{eq}]{cond} }}"

    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        self._load()
        cl, cr = (list(inputs) + [None, None])[:2]
        pieces: list[Piece] = []
        if self._keyed:
            self._jkids = JoinKeyIds()  # key ids are per step: state is keyed by value
        dl = self._delta(self._left, cl)
        dr = self._delta(self._right, cr)
        if self._keyed:
            self._prefetch(dl, dr)
        # key ids changed on both sides: only output under them can be emitted twice
        # (never in an append-only join: without deletes no pair is emitted twice)
        both = (
            None
            if dl is None or dr is None or self.append_only
            else _id_set(dl.ujk, dr.ujk, len(self._jkids), both=True)
        )
        if dl is not None:
            deg = self._probe_and_emit(dl, self._left, self._right, pieces, dr, both)
            self._apply(self._left, dl, deg)
        if dr is not None:
            deg = self._probe_and_emit(dr, self._right, self._left, pieces, dl, both)
            self._apply(self._right, dr, deg)
        self._left.flush()
        self._right.flush()
        if not self._keyed:
            self._jkids.compact([self._left, self._right])  # type: ignore[list-item]
        return self._output(pieces, both)

    def _prefetch(self, dl: _Delta | None, dr: _Delta | None) -> None:
        """Keyed sides: read both sides' rows under the keys of both deltas (one
        multi-get per side)."""
        ujks = [d.ujk for d in (dl, dr) if d is not None]
        if not ujks:
            return
        ujk = ujks[0] if len(ujks) == 1 else _id_set(ujks[0], ujks[1], len(self._jkids), False)
        for side in (self._left, self._right):
            assert isinstance(side, KeyedJoinSide)
            side.prefetch(self._jkids, ujk)

    def stored_rows(self, side: int, batch: pa.RecordBatch) -> np.ndarray:
        """Per row of `batch` (input `side`'s schema): is exactly this row in the state?"""
        self._load()
        s = self._left if side == 0 else self._right
        return s.stored(conform(batch, s.schema))

    def side_rows(self, side: int) -> int:
        """Distinct rows stored for input `side` (tests and diagnostics)."""
        self._load()
        return len(self._left if side == 0 else self._right)

    def _load(self) -> None:
        if self._loaded:
            return
        self._left.load(self._jkids)
        self._right.load(self._jkids)
        self._grow()
        self._loaded = True

    def _grow(self) -> None:
        n = len(self._jkids)
        self._left.grow(n)
        self._right.grow(n)

    # -- delta preparation ------------------------------------------------------------
    def _delta(self, side: Side, chunk: StreamChunk | None) -> _Delta | None:
        if chunk is None or len(chunk) == 0:
            return None
        batch = conform(chunk.data, side.schema)
        w = chunk.weights().astype(np.int64)
        if (w < 0).any():
            if self.append_only:
                raise InternalError(
                    "an append-only join input retracted a row",
                    detail=f"The {side.name} input of {self.explain()} sent a delete.",
                )
            batch, w = _net_delta(batch, w, side.ident)
            if not batch.num_rows:
                return None
        n = batch.num_rows
        valid = np.ones(n, dtype=bool)
        for k in side.keys:
            col = batch.column(k)
            if col.null_count:
                valid &= ~pc.is_null(col).to_numpy(zero_copy_only=False)
        sub = batch if valid.all() else batch.filter(pa.array(valid))
        jk = self._jkids.assign(sub, side.keys)
        self._grow()
        ujk, gid = _unique_ids(jk, len(self._jkids))
        jkf = jk if len(jk) == n else np.full(n, -1, np.int64)
        if len(jk) != n:
            jkf[valid] = jk
        return _Delta(batch, w, valid, jk, jkf, ujk, gid)

    # -- probing ----------------------------------------------------------------------
    def _match(self, delta: _Delta, probe: Side, build: Side) -> _Matches:
        """Pairs of delta rows and `build` entries with equal keys and a true condition."""
        egid, locs = build.probe(delta.ujk)
        lens = np.bincount(egid, minlength=len(delta.ujk))
        starts = np.cumsum(lens) - lens
        rows = np.flatnonzero(delta.valid)
        g = delta.gid
        cnt = lens[g]
        total = int(cnt.sum())
        d = np.repeat(rows, cnt)
        off = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        e = np.repeat(starts[g], cnt) + off
        m = _Matches(d, e, locs, egid, build.counts_at(locs), None)
        if self.condition is not None and total:
            mask = self.condition.eval(self._pair_batch(delta, probe, m), self.ctx)
            if isinstance(mask, pa.ChunkedArray):
                mask = mask.combine_chunks()
            keep = pc.fill_null(mask.cast(pa.bool_()), False).to_numpy(zero_copy_only=False)
            m.d = d[keep]
            m.e = e[keep]
        return m

    def _other(self, m: _Matches, build: Side) -> pa.RecordBatch:
        if m.other is None:
            m.other = build.rows_at(m.locs)
        return m.other

    def _pair_batch(self, delta: _Delta, probe: Side, m: _Matches) -> pa.RecordBatch:
        """The matched pairs as rows of left ++ right."""
        build = self._right if probe is self._left else self._left
        mine = delta.batch.take(pa.array(m.d)).columns
        theirs = self._other(m, build).take(pa.array(m.e)).columns
        cols = [*mine, *theirs] if probe is self._left else [*theirs, *mine]
        return pa.RecordBatch.from_arrays(cols, schema=self._pair_schema)

    def _probe_and_emit(
        self,
        delta: _Delta,
        probe: Side,
        build: Side,
        pieces: list[Piece],
        build_delta: _Delta | None,
        both: np.ndarray | None,
    ) -> np.ndarray:
        """Emit this delta's output against `build`; returns the delta rows' degrees.

        `build_delta` is `build`'s own delta this epoch: a pair can be emitted again (and
        cancel) by the other probe only when its `build` row is in it.
        """
        m = self._match(delta, probe, build)
        n = delta.batch.num_rows
        is_left = probe is self._left
        if self._pairs_out and len(m.d):
            pw = delta.w[m.d] * m.counts[m.e]
            pjk = delta.jkf[m.d]
            if build_delta is not None and both is not None:
                pjk = self._maybe_again(pjk, m, build, build_delta, both)
            pieces.append((self._pair_batch(delta, probe, m), pw, pjk))
        # degrees of the delta's own rows (preserved side)
        deg = np.zeros(n, dtype=np.int64)
        if self._preserved(probe):
            if self.condition is None:
                deg[delta.valid] = build.tot[delta.jk]
            elif len(m.d):
                deg = np.bincount(m.d, weights=m.counts[m.e], minlength=n).astype(np.int64)
            show = deg > 0 if self.kind == "semi" else deg == 0
            idx = np.flatnonzero(show)
            if idx.size:
                pieces.append(
                    (self._alone(delta.batch, idx, is_left), delta.w[idx], delta.jkf[idx])
                )
        # degree changes of the matched rows of the other side
        if self._preserved(build) and len(m.locs):
            if self.condition is None:
                up, down = self._key_crossings(m, probe, delta)
            else:
                up, down = self._row_crossings(m, build, delta)
            if up.size or down.size:
                if self.kind == "semi":  # a left row is in the output while its degree is > 0
                    up, down = down, up
                idx = np.concatenate([up, down])
                w = np.concatenate([-m.counts[up], m.counts[down]])
                alone = self._alone(self._other(m, build), idx, not is_left)
                pieces.append((alone, w, delta.ujk[m.egid[idx]]))
        return deg

    def _maybe_again(
        self,
        pjk: np.ndarray,
        m: _Matches,
        build: Side,
        build_delta: _Delta,
        both: np.ndarray,
    ) -> np.ndarray:
        """Pair key ids, -1 for pairs that cannot be emitted by the other probe too.

        Such a pair needs a key in `both` and its `build` row in `build_delta` (checked by
        identity when that is one integer column).
        """
        sel = np.flatnonzero(np.isin(pjk, both))
        out = np.full(len(pjk), -1, np.int64)
        if not len(sel):
            return out
        out[sel] = pjk[sel]
        if len(build.ident) != 1:
            return out
        c = build.ident[0]
        mine = self._other(m, build).column(c)
        theirs = build_delta.batch.column(c)
        if mine.null_count or theirs.null_count or not pa.types.is_integer(mine.type):
            return out
        vals = mine.to_numpy(zero_copy_only=False)[m.e[sel]]
        again = np.isin(vals, theirs.to_numpy(zero_copy_only=False))
        out[sel[~again]] = -1
        return out

    def _preserved(self, side: Side) -> bool:
        return self._l_pres if side is self._left else self._r_pres

    def _key_crossings(
        self, m: _Matches, probe: Side, delta: _Delta
    ) -> tuple[np.ndarray, np.ndarray]:
        """Entries whose key's degree (the probe side's count under it) crosses zero."""
        dk = np.bincount(delta.gid, weights=delta.w[delta.valid], minlength=len(delta.ujk))
        old = probe.tot[delta.ujk]
        new = old + dk.astype(np.int64)
        if (new < 0).any():
            probe._negative("was deleted but never inserted")
        up_k = (old == 0) & (new > 0)
        down_k = (old > 0) & (new == 0)
        return np.flatnonzero(up_k[m.egid]), np.flatnonzero(down_k[m.egid])

    def _row_crossings(
        self, m: _Matches, build: Side, delta: _Delta
    ) -> tuple[np.ndarray, np.ndarray]:
        """Entries whose own degree crosses zero (per-row degrees, residual condition)."""
        if not len(m.d):
            return np.empty(0, np.int64), np.empty(0, np.int64)
        dd = np.bincount(m.e, weights=delta.w[m.d], minlength=len(m.locs)).astype(np.int64)
        changed = np.flatnonzero(dd)
        if not changed.size:
            return changed, changed
        olds = build.degrees_at(m.locs[changed])
        news = olds + dd[changed]
        if (news < 0).any():
            raise InternalError(
                "join row degree became negative",
                detail=f"A {build.name} row of {self.explain()} lost more matches than it had.",
            )
        build.set_degrees(m.locs[changed], news)
        return changed[(olds == 0) & (news > 0)], changed[(olds > 0) & (news == 0)]

    def _alone(self, batch: pa.RecordBatch, idx: np.ndarray, is_left: bool) -> pa.RecordBatch:
        """Rows `idx` of one side NULL-padded to the output schema (semi/anti: as is)."""
        cols = batch.take(pa.array(idx)).columns
        if self._semi_anti:
            return pa.RecordBatch.from_arrays(list(cols), schema=self._out_schema)
        n = len(idx)
        other = self.right_schema if is_left else self.left_schema
        pads = [pa.nulls(n, type=f.type.arrow) for f in other]
        full = [*cols, *pads] if is_left else [*pads, *cols]
        return pa.RecordBatch.from_arrays(full, schema=self._out_schema)

    # -- state ------------------------------------------------------------------------
    def _apply(self, side: Side, delta: _Delta, deg: np.ndarray) -> None:
        """Apply the delta's rows (non-NULL keys only) to `side`."""
        if not len(delta.jk):
            return
        valid = delta.valid
        batch, w = delta.batch, delta.w
        if not valid.all():
            batch, w, deg = batch.filter(pa.array(valid)), w[valid], deg[valid]
        if isinstance(side, KeyedJoinSide):
            side.apply(batch, w, delta.jk, deg, delta.ujk)
        else:
            side.apply(batch, w, delta.jk, deg)

    # -- output -----------------------------------------------------------------------
    def _output(self, pieces: list[Piece], both: np.ndarray | None) -> StreamChunk | None:
        """The pieces as one chunk, deletes first.

        `both`: the join-key ids changed on both sides this epoch (None: one side did not
        change). Only output rows under those keys can come from both probes and cancel
        (a pair needs its left row in dL and its right row in dR; a padded or semi/anti
        row emitted by both probes is one row under one key), so only they are
        consolidated; pair rows known not to recur carry key id -1 (`_maybe_again`).
        """
        pieces = [p for p in pieces if p[0].num_rows]
        if not pieces:
            return None
        if len(pieces) == 1:
            batch, w, jk = pieces[0]
        else:
            table = pa.Table.from_batches([p[0] for p in pieces], schema=self._out_schema)
            batch = table.combine_chunks().to_batches()[0]
            w = np.concatenate([p[1] for p in pieces])
            jk = np.concatenate([p[2] for p in pieces])
        if both is not None and len(both):
            batch, w = _net(batch, w, np.isin(jk, both))
            if not batch.num_rows:
                return None
        neg = np.flatnonzero(w < 0)
        if not neg.size and (w == 1).all():
            ops = np.full(batch.num_rows, Op.INSERT, dtype=np.int8)
            return StreamChunk(pa.array(ops), batch)
        pos = np.flatnonzero(w > 0)
        idx = np.concatenate([np.repeat(neg, -w[neg]), np.repeat(pos, w[pos])])
        nd = int(-w[neg].sum())
        ops = np.full(idx.size, Op.INSERT, dtype=np.int8)
        ops[:nd] = Op.DELETE
        return StreamChunk(pa.array(ops), batch.take(pa.array(idx)))


def _id_set(a: np.ndarray, b: np.ndarray, n: int, both: bool) -> np.ndarray:
    """The sorted intersection (`both`) or union of two sorted distinct key-id arrays,
    ids below `n`: through a mask over the ids when they are dense (the keyed sides'
    per-step ids), else by sorting."""
    if n > 4 * (len(a) + len(b)) + 1024:
        return np.intersect1d(a, b, assume_unique=True) if both else np.union1d(a, b)
    mask = np.zeros(n, np.int8)
    mask[a] = 1
    if both:
        mask[b] += 1
        return np.flatnonzero(mask == 2)
    mask[b] = 1
    return np.flatnonzero(mask)


def _net_delta(
    batch: pa.RecordBatch, w: np.ndarray, ident: list[int]
) -> tuple[pa.RecordBatch, np.ndarray]:
    """A delta with deletes, consolidated where rows can cancel out.

    Only rows sharing an identity with a deleted row can cancel. With a one-column
    integer identity the common case, one `-1` and one `+1` row per identity (an update,
    or a delete and re-insert), is settled by comparing the two rows column-wise; other
    identities go through the general consolidation by full row.
    """
    col = batch.column(ident[0]) if len(ident) == 1 else None
    if col is None or col.null_count or not pa.types.is_integer(col.type):
        return net_rows(batch, w)
    vals = col.to_numpy(zero_copy_only=False)
    cand = np.flatnonzero(np.isin(vals, vals[w < 0]))
    order = cand[np.lexsort((w[cand], vals[cand]))]  # by identity, deletes first
    sv = vals[order]
    starts = np.flatnonzero(np.r_[True, sv[1:] != sv[:-1]])
    sizes = np.diff(np.r_[starts, len(sv)])
    a = order[starts[sizes == 2]]
    b = order[starts[sizes == 2] + 1]
    simple = (w[a] == -1) & (w[b] == 1)
    a, b = a[simple], b[simple]
    keep = np.ones(len(w), bool)
    if len(a):
        same = rows_equal(batch.take(pa.array(a)), batch.take(pa.array(b)), nan_equal=True)
        keep[a[same]] = False
        keep[b[same]] = False
    rest = np.zeros(len(w), bool)
    rest[cand] = True
    rest[a] = False
    rest[b] = False
    if rest.any():
        keep &= ~rest
        nb, nw = net_rows(batch.filter(pa.array(rest)), w[rest])
        return pa.concat_batches([batch.filter(pa.array(keep)), nb]), np.concatenate([w[keep], nw])
    if keep.all():
        return batch, w
    return batch.filter(pa.array(keep)), w[keep]


def _net(
    batch: pa.RecordBatch, w: np.ndarray, rows: np.ndarray | None
) -> tuple[pa.RecordBatch, np.ndarray]:
    """Consolidate the `rows` (bool mask; None = all) by full value; other rows stay."""
    if rows is None or rows.all():
        return net_rows(batch, w)
    if not rows.any():
        return batch, w
    nb, nw = net_rows(batch.filter(pa.array(rows)), w[rows])
    keep = ~rows
    return pa.concat_batches([batch.filter(pa.array(keep)), nb]), np.concatenate([w[keep], nw])


def _unique_ids(jk: np.ndarray, n_ids: int) -> tuple[np.ndarray, np.ndarray]:
    """`np.unique(jk, return_inverse=True)` of key ids below `n_ids`: by a presence mask
    when the ids are dense enough (per-step ids: no sort of the delta), else by sorting."""
    if n_ids <= 4 * len(jk) + 1024:
        present = np.zeros(n_ids, bool)
        present[jk] = True
        rank = np.cumsum(present, dtype=np.int64) - 1
        return np.flatnonzero(present).astype(np.int64, copy=False), rank[jk]
    ujk, gid = np.unique(jk, return_inverse=True)
    return ujk, gid.astype(np.int64).reshape(-1)
