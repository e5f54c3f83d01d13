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

How one probe works (vectorised; Python touches only distinct keys and matched rows):

1. the delta is consolidated by full row (net Z-set weight; only when it contains
   deletes), rows with a NULL in any join key are set aside (they never match);
2. one polars group-by gives each remaining row the id of its distinct join key;
3. the other side's in-memory index is probed once per distinct key; the matched state
   rows are turned into one Arrow batch and the (delta row, matched row) pairs are
   expanded with numpy `repeat` arithmetic, then materialised with Arrow `take`;
4. the residual `condition` (non-equality part of ON) is evaluated once over the pair
   batch and drops pairs where it is not true;
5. degrees (see below) are updated with `bincount`, and only rows whose degree crosses
   zero produce NULL-padded (or semi/anti) output.

Outer joins and degrees. A row of a preserved side (left for left/full/semi/anti, right
for right/full) has a *degree*: the number of other-side rows (with multiplicity) it
currently matches. A preserved row with degree 0 is in the output NULL-padded (anti:
as itself; semi: not at all). When a change to the other side moves its degree 0 -> >0
its padded row is retracted, and >0 -> 0 emits it again; pair output is emitted
regardless of degrees. Rows with a NULL join key are never stored: on a preserved side
their delta goes straight to the output NULL-padded (anti: as is), elsewhere it is
dropped.

State layout (table names passed to the allocator):

* `left` / `right`: `(*join_key, *ident) -> (*row, count)`. `ident` is the side's stream
  key columns, or every column when the stream key is empty (then `count` > 1 records
  duplicate rows; with a stream key it is 1).
* `left_degree` / `right_degree`, only for a preserved side of a join *with* a residual
  condition: same key -> `(degree,)`. Without a condition every row of one join key has
  the same degree (the other side's total count under that key), so degrees are not
  stored but recomputed when the index is rebuilt after a restart.

The per-run index `join_key -> {ident -> [value, degree]}` (value is the tuple stored in
the rows table) is rebuilt from the tables on the first step after construction (the
runtime loads the tables before stepping).

Semi and anti joins output only the left columns: a left row appears once per copy while
its degree is > 0 (semi, `EXISTS`/`IN`) or == 0 (anti, `NOT EXISTS`). NULL-aware
`NOT IN` semantics are not implemented here (the planner must add the NULL checks).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from engine.chunk import Op, StreamChunk
from engine.errors import DatatypeMismatch, InternalError
from engine.state.table import StateTable
from engine.stream.operator import Operator
from engine.stream.operators.base import Expr, StateAllocator
from engine.stream.operators.frames import INDEX, WEIGHT, col_name, polars_frame
from engine.types import Field, TypeKind, arrow_schema

log = logging.getLogger(__name__)

JOIN_KINDS = ("inner", "left", "right", "full", "semi", "anti")

Key = tuple[Any, ...]
Entry = list[Any]  # [value tuple (*row, count), degree]


@dataclass(slots=True)
class _Side:
    """Config and per-run index of one join input."""

    name: str
    fields: list[Field]
    keys: list[int]
    ident: list[int]  # columns identifying a row: the stream key, or every column
    rows: StateTable
    degrees: StateTable | None  # persisted degrees (preserved side with a condition)
    preserved: bool
    index: dict[Key, dict[Key, Entry]] = field(default_factory=dict)

    @property
    def key_names(self) -> list[str]:
        return [col_name(k) for k in self.keys]


@dataclass(slots=True)
class _Delta:
    """One side's epoch delta, consolidated; rows with NULL join keys flagged."""

    batch: pa.RecordBatch
    w: np.ndarray  # int64 net weight per row
    valid: np.ndarray  # bool: no NULL in the join key
    gid: np.ndarray  # int64 distinct-join-key id per row (-1 where not valid)
    jks: list[Key]  # the distinct join keys, by id


@dataclass(slots=True)
class _Matches:
    """Pairs of (delta row, matched entry of the other side) that satisfy the join."""

    d: np.ndarray  # delta row per pair
    e: np.ndarray  # matched entry per pair
    entries: list[Entry]
    egid: np.ndarray  # distinct-key id of each entry
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
    ) -> None:
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
        self.kind = kind
        self.condition = condition
        self.ctx = ctx
        self.left_schema = list(left_schema)
        self.right_schema = list(right_schema)
        self._semi_anti = kind in ("semi", "anti")
        self._pairs_out = not self._semi_anti
        l_pres = kind in ("left", "full", "semi", "anti")
        r_pres = kind in ("right", "full")
        l_ident = list(left_stream_key) or list(range(len(left_schema)))
        r_ident = list(right_stream_key) or list(range(len(right_schema)))
        with_deg = condition is not None
        self._left = _Side(
            "left",
            self.left_schema,
            list(left_keys),
            l_ident,
            alloc.table("left"),
            alloc.table("left_degree") if l_pres and with_deg else None,
            l_pres,
        )
        self._right = _Side(
            "right",
            self.right_schema,
            list(right_keys),
            r_ident,
            alloc.table("right"),
            alloc.table("right_degree") if r_pres and with_deg else None,
            r_pres,
        )
        nl = len(left_schema)
        if self._semi_anti:
            self.schema = list(left_schema)
            self.stream_key = l_ident
        else:
            self.schema = self.left_schema + self.right_schema
            self.stream_key = l_ident + [nl + i for i in r_ident]
        self._out_schema = arrow_schema(self.schema)
        self._pair_schema = arrow_schema(self.left_schema + self.right_schema)
        self._indexed = False

    # -- protocol ---------------------------------------------------------------------
    def state_tables(self) -> list[StateTable]:
        out = [self._left.rows, self._right.rows]
        out += [s.degrees for s in (self._left, self._right) if s.degrees is not None]
        return out

    def explain(self) -> str:
        nl = len(self.left_schema)
        eq = ", ".join(
            f"${a} = ${b + nl}" for a, b in zip(self._left.keys, self._right.keys, strict=True)
        )
        cond = "" if self.condition is None else f", condition: {self.condition}"
        return f"StreamHashJoin {{ type: {self.kind}, predicate: [{eq}]{cond} }}"

    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        if not self._indexed:
            self._build_index()
        cl, cr = (list(inputs) + [None, None])[:2]
        pieces: list[tuple[pa.RecordBatch, np.ndarray]] = []
        dl = self._delta(self._left, cl)
        dr = self._delta(self._right, cr)
        if dl is not None:
            deg = self._probe_and_emit(dl, self._left, self._right, pieces)
            self._apply(self._left, dl, deg)
        if dr is not None:
            deg = self._probe_and_emit(dr, self._right, self._left, pieces)
            self._apply(self._right, dr, deg)
        return self._output(pieces, consolidate=dl is not None and dr is not None)

    # -- delta preparation ------------------------------------------------------------
    def _delta(self, side: _Side, chunk: StreamChunk | None) -> _Delta | None:
        if chunk is None or len(chunk) == 0:
            return None
        batch = chunk.data
        w = chunk.weights().astype(np.int64)
        if (w < 0).any():
            allc = list(range(batch.num_columns))
            frame = polars_frame(batch, allc, weights=w, index=True)
            net = (
                frame.df.group_by([col_name(i) for i in allc])
                .agg(pl.col(WEIGHT).sum(), pl.col(INDEX).first())
                .filter(pl.col(WEIGHT) != 0)
                .sort(INDEX)
            )
            if net.height == 0:
                return None
            batch = batch.take(pa.array(net.get_column(INDEX).to_numpy()))
            w = net.get_column(WEIGHT).to_numpy().astype(np.int64)
        n = batch.num_rows
        valid = np.ones(n, dtype=bool)
        for k in side.keys:
            col = batch.column(k)
            if col.null_count:
                valid &= ~pc.is_null(col).to_numpy(zero_copy_only=False)
        gid = np.full(n, -1, dtype=np.int64)
        jks: list[Key] = []
        if valid.any():
            frame = polars_frame(batch, side.keys, index=True)
            df = frame.df if valid.all() else frame.df.filter(pl.Series(valid))
            uk = df.group_by(list(dict.fromkeys(side.key_names)), maintain_order=True).agg(
                pl.col(INDEX), pl.col(INDEX).first().alias("__f")
            )
            first = batch.take(pa.array(uk.get_column("__f").to_numpy()))
            jks = _tuples([hashable_values(first.column(k)) for k in side.keys], uk.height)
            ex = uk.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("__g"), INDEX).explode(
                INDEX
            )
            gid[ex.get_column(INDEX).to_numpy()] = ex.get_column("__g").to_numpy()
        return _Delta(batch, w, valid, gid, jks)

    # -- probing ----------------------------------------------------------------------
    def _match(self, delta: _Delta, probe: _Side, build: _Side) -> _Matches:
        """Pairs of delta rows and `build` entries with equal keys and a true condition."""
        index = build.index
        entries: list[Entry] = []
        lens_l: list[int] = []
        for jk in delta.jks:
            bucket = index.get(jk)
            if bucket:
                lens_l.append(len(bucket))
                entries.extend(bucket.values())
            else:
                lens_l.append(0)
        lens = np.asarray(lens_l, dtype=np.int64)
        starts = np.cumsum(lens) - lens
        rows = np.flatnonzero(delta.valid)
        g = delta.gid[rows]
        cnt = lens[g]
        total = int(cnt.sum())
        d = np.repeat(rows, cnt)
        off = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        e = np.repeat(starts[g], cnt) + off
        egid = np.repeat(np.arange(len(lens), dtype=np.int64), lens)
        counts = np.fromiter((en[0][-1] for en in entries), dtype=np.int64, count=len(entries))
        m = _Matches(d, e, entries, egid, counts, None)
        if self.condition is not None and total:
            mask = self.condition.eval(self._pair_batch(delta, probe, m), self.ctx)
            if isinstance(mask, pa.ChunkedArray):
                mask = mask.combine_chunks()
            keep = pc.fill_null(mask.cast(pa.bool_()), False).to_numpy(zero_copy_only=False)
            m.d = d[keep]
            m.e = e[keep]
        return m

    def _other(self, m: _Matches, build: _Side) -> pa.RecordBatch:
        if m.other is None:
            m.other = _rows_batch(build.fields, [en[0] for en in m.entries])
        return m.other

    def _pair_batch(self, delta: _Delta, probe: _Side, m: _Matches) -> pa.RecordBatch:
        """The matched pairs as rows of left ++ right."""
        build = self._right if probe is self._left else self._left
        mine = delta.batch.take(pa.array(m.d)).columns
        theirs = self._other(m, build).take(pa.array(m.e)).columns
        cols = [*mine, *theirs] if probe is self._left else [*theirs, *mine]
        return pa.RecordBatch.from_arrays(cols, schema=self._pair_schema)

    def _probe_and_emit(
        self,
        delta: _Delta,
        probe: _Side,
        build: _Side,
        pieces: list[tuple[pa.RecordBatch, np.ndarray]],
    ) -> np.ndarray:
        """Emit this delta's output against `build`; returns the delta rows' degrees."""
        m = self._match(delta, probe, build)
        n = delta.batch.num_rows
        is_left = probe is self._left
        if self._pairs_out and len(m.d):
            pw = delta.w[m.d] * m.counts[m.e]
            pieces.append((self._pair_batch(delta, probe, m), pw))
        # degrees of the delta's own rows (preserved side)
        deg = np.zeros(n, dtype=np.int64)
        if probe.preserved:
            if len(m.d):
                deg = np.bincount(m.d, weights=m.counts[m.e], minlength=n).astype(np.int64)
            show = deg > 0 if self.kind == "semi" else deg == 0
            idx = np.flatnonzero(show)
            if idx.size:
                pieces.append((self._alone(delta.batch, idx, is_left), delta.w[idx]))
        # degree changes of the matched rows of the other side
        if build.preserved and len(m.d):
            self._update_degrees(m, build, delta, pieces)
        return deg

    def _update_degrees(
        self,
        m: _Matches,
        build: _Side,
        delta: _Delta,
        pieces: list[tuple[pa.RecordBatch, np.ndarray]],
    ) -> None:
        dd = np.bincount(m.e, weights=delta.w[m.d], minlength=len(m.entries)).astype(np.int64)
        changed = np.flatnonzero(dd)
        if not changed.size:
            return
        entries = m.entries
        olds = np.fromiter(
            (entries[i][1] for i in changed.tolist()), dtype=np.int64, count=changed.size
        )
        news = olds + dd[changed]
        if (news < 0).any():
            raise InternalError(
                "join row degree became negative",
                detail=f"A {build.name} row of {self.explain()} lost more matches than it had.",
            )
        for i, v in zip(changed.tolist(), news.tolist(), strict=True):
            entries[i][1] = v
        if build.degrees is not None:
            ident = build.ident
            jks = [delta.jks[g] for g in m.egid[changed].tolist()]
            keys = [
                jk + tuple(entries[i][0][c] for c in ident)
                for jk, i in zip(jks, changed.tolist(), strict=True)
            ]
            build.degrees.put_many(keys, [(v,) for v in news.tolist()])
        up = changed[(olds == 0) & (news > 0)]
        down = changed[(olds > 0) & (news == 0)]
        if not (up.size or down.size):
            return
        if self.kind == "semi":  # a left row is in the output while its degree is > 0
            up, down = down, up
        idx = np.concatenate([up, down])
        w = np.concatenate([-m.counts[up], m.counts[down]])
        other = self._other(m, build)
        pieces.append((self._alone(other, idx, build is self._left), w))

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
    def _apply(self, side: _Side, delta: _Delta, deg: np.ndarray) -> None:
        """Apply the delta's rows (non-NULL keys only) to `side`'s table and index."""
        valid = np.flatnonzero(delta.valid)
        if not valid.size:
            return
        sub = (
            delta.batch if valid.size == delta.batch.num_rows else delta.batch.take(pa.array(valid))
        )
        cols = [hashable_values(c) for c in sub.columns]
        n = len(valid)
        jks = _tuples([cols[k] for k in side.keys], n)
        ids = _tuples([cols[i] for i in side.ident], n)
        ws = delta.w[valid].tolist()
        ds = deg[valid].tolist()
        pos_mask = delta.w[valid] > 0
        if pos_mask.all():
            order = self._insert_new(side, cols, jks, ids, ws, ds)
            if not order:
                return
        else:
            # deletes first (general path), then the inserts in bulk; inserts whose
            # identity is still stored after the deletes go through the general path
            order = np.flatnonzero(~pos_mask).tolist()
            self._apply_rows(side, order, cols, jks, ids, ws, ds)
            posi = np.flatnonzero(pos_mask)
            if not posi.size:
                return
            sel = posi.tolist()
            rest = self._insert_new(
                side,
                [[c[i] for i in sel] for c in cols],
                [jks[i] for i in sel],
                [ids[i] for i in sel],
                [ws[i] for i in sel],
                [ds[i] for i in sel],
            )
            if not rest:
                return
            order = [sel[i] for i in rest]
        self._apply_rows(side, order, cols, jks, ids, ws, ds)

    def _apply_rows(
        self,
        side: _Side,
        order: list[int],
        cols: list[list[Any]],
        jks: list[Key],
        ids: list[Key],
        ws: list[int],
        ds: list[int],
    ) -> None:
        """The general per-row path of `_apply` for rows `order` (in that order)."""
        if not order:
            return
        if len(order) * 4 < len(jks):
            rows = [tuple(c[i] for c in cols) for i in order]
            rowmap = dict(zip(order, rows, strict=True))
        else:
            rowmap = dict(enumerate(_tuples(cols, len(jks))))
        index = side.index
        puts: dict[Key, tuple[Any, ...]] = {}
        dels: list[Key] = []
        new_deg: dict[Key, int] = {}
        for i in order:
            jk = jks[i]
            idt = ids[i]
            w = ws[i]
            bucket = index.get(jk)
            ent = None if bucket is None else bucket.get(idt)
            if ent is None:
                if w < 0:
                    raise InternalError(
                        "join state row count became negative",
                        detail=f"A {side.name} row of {self.explain()} was deleted but "
                        "never inserted.",
                    )
                value = rowmap[i] + (w,)
                if bucket is None:
                    bucket = index[jk] = {}
                bucket[idt] = [value, ds[i]]
                skey = jk + idt
                puts[skey] = value
                new_deg[skey] = ds[i]
                continue
            c = ent[0][-1] + w
            skey = jk + idt
            if c < 0:
                raise InternalError(
                    "join state row count became negative",
                    detail=f"A {side.name} row of {self.explain()} was deleted too often.",
                )
            if c == 0:
                del bucket[idt]  # type: ignore[union-attr]
                if not bucket:
                    del index[jk]
                dels.append(skey)
                puts.pop(skey, None)
                new_deg.pop(skey, None)
            else:
                value = rowmap[i] + (c,)
                ent[0] = value
                puts[skey] = value
        side.rows.delete_many(dels)
        side.rows.put_many(puts.keys(), puts.values())
        if side.degrees is not None:
            side.degrees.delete_many(dels)
            side.degrees.put_many(new_deg.keys(), [(d,) for d in new_deg.values()])

    def _insert_new(
        self,
        side: _Side,
        cols: list[list[Any]],
        jks: list[Key],
        ids: list[Key],
        ws: list[int],
        ds: list[int],
    ) -> list[int]:
        """Insert-only fast path: add every row whose identity is new, in bulk.

        Returns the positions of rows whose identity is already stored (duplicates of
        an existing row, or repeated within the delta), left for the general path.
        """
        index = side.index
        get = index.get
        values = list(zip(*cols, ws))
        ents = [[v, d] for v, d in zip(values, ds)]
        rest: list[int] = []
        for i, (jk, idt, en) in enumerate(zip(jks, ids, ents)):
            bucket = get(jk)
            if bucket is None:
                index[jk] = {idt: en}
            elif idt in bucket:
                rest.append(i)
            else:
                bucket[idt] = en
        skc = [cols[k] for k in side.keys] + [cols[c] for c in side.ident]
        skeys: list[Key] = _tuples(skc, len(values))
        if rest:
            drop = set(rest)
            keep = [j for j in range(len(values)) if j not in drop]
            skeys = [skeys[j] for j in keep]
            values = [values[j] for j in keep]
            ds = [ds[j] for j in keep]
        side.rows.put_many(skeys, values)
        if side.degrees is not None:
            side.degrees.put_many(skeys, [(d,) for d in ds])
        return rest

    def _build_index(self) -> None:
        """Rebuild both sides' indexes (and unstored degrees) from the state tables."""
        for side in (self._left, self._right):
            canonical_nan(side.rows)
            if side.degrees is not None:
                canonical_nan(side.degrees)
            nk = len(side.keys)
            index: dict[Key, dict[Key, Entry]] = {}
            deg_get = side.degrees.data.get if side.degrees is not None else None
            for k, v in side.rows.items():
                jk = k[:nk]
                bucket = index.get(jk)
                if bucket is None:
                    bucket = index[jk] = {}
                d = 0
                if deg_get is not None:
                    stored = deg_get(k)
                    d = 0 if stored is None else stored[0]
                bucket[k[nk:]] = [v, d]
            side.index = index
        for side, other in ((self._left, self._right), (self._right, self._left)):
            if side.preserved and side.degrees is None:
                for jk, bucket in side.index.items():
                    ob = other.index.get(jk)
                    total = sum(en[0][-1] for en in ob.values()) if ob else 0
                    for en in bucket.values():
                        en[1] = total
        self._indexed = True
        if len(self._left.rows) or len(self._right.rows):
            log.debug("%s: rebuilt join indexes", self.explain())

    # -- output -----------------------------------------------------------------------
    def _output(
        self, pieces: list[tuple[pa.RecordBatch, np.ndarray]], consolidate: bool
    ) -> StreamChunk | None:
        pieces = [(b, w) for b, w in pieces if b.num_rows]
        if not pieces:
            return None
        if len(pieces) == 1:
            batch, w = pieces[0]
        else:
            table = pa.Table.from_batches([b for b, _ in pieces], schema=self._out_schema)
            batch = table.combine_chunks().to_batches()[0]
            w = np.concatenate([w for _, w in pieces])
        if consolidate:
            allc = list(range(batch.num_columns))
            frame = polars_frame(batch, allc, weights=w, index=True)
            net = (
                frame.df.group_by([col_name(i) for i in allc])
                .agg(pl.col(WEIGHT).sum(), pl.col(INDEX).first())
                .filter(pl.col(WEIGHT) != 0)
                .sort(INDEX)
            )
            if net.height == 0:
                return None
            batch = batch.take(pa.array(net.get_column(INDEX).to_numpy()))
            w = net.get_column(WEIGHT).to_numpy().astype(np.int64)
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


NAN = float("nan")
"""The one NaN object used in state keys and rows.

NaN != NaN, but dict lookups compare tuple elements by identity first, so keys holding
this one object find each other (and PostgreSQL treats NaN as equal to NaN in keys)."""


def _is_nan(v: Any) -> bool:
    return type(v) is float and v != v


def hashable_values(col: pa.Array | pa.ChunkedArray) -> list[Any]:
    """Python values usable in state keys: SQL arrays as tuples, every NaN as `NAN`."""
    values = col.to_pylist()
    t = col.type
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [None if v is None else tuple(v) for v in values]
    if pa.types.is_floating(t) and pc.any(pc.is_nan(col)).as_py():
        return [NAN if _is_nan(v) else v for v in values]
    return values


def canonical_nan(table: StateTable) -> None:
    """After `load`: make decoded NaNs in keys and values the `NAN` object again.

    Only the in-memory objects change (the stored bytes already encode the same NaN,
    since every NaN written was `NAN`), so nothing is marked dirty.
    """
    data = table.data
    fix = [
        k
        for k, v in data.items()
        if any(_is_nan(x) and x is not NAN for x in k)
        or any(_is_nan(x) and x is not NAN for x in v)
    ]
    for k in fix:
        v = data.pop(k)
        k2 = tuple(NAN if _is_nan(x) else x for x in k)
        data[k2] = tuple(NAN if _is_nan(x) else x for x in v)


def _tuples(columns: list[list[Any]], n: int) -> list[Key]:
    if not columns:
        return [()] * n
    return list(zip(*columns, strict=True))


def _rows_batch(fields: list[Field], values: list[tuple[Any, ...]]) -> pa.RecordBatch:
    """State values `(*row, count)` as a batch of `fields` (the count is dropped)."""
    schema = arrow_schema(fields)
    if not values:
        return pa.RecordBatch.from_pylist([], schema=schema)
    cols = list(zip(*values, strict=True))
    arrays = [pa.array(cols[i], type=schema.field(i).type) for i in range(len(fields))]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
