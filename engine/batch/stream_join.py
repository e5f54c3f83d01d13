"""Joins of ad-hoc queries, streamed in bounded chunks.

The right input is built whole (the build side, charged to the query's memory budget);
the left input arrives as a stream of chunks and is joined piece by piece, each piece cut
so that its output holds at most about `CHUNK_ROWS` pairs:

* cross joins and joins without equality keys (nested loop): a piece of `n` left rows is
  paired with right slices of `CHUNK_ROWS // n` rows (one left row against slices of the
  right side when that side alone is larger than a chunk);
* equi-joins: the right side's key multiplicities are counted once; each left chunk's
  rows are matched against those counts (one vectorised join) and the chunk is cut where
  the running sum of matches crosses a chunk, then each piece is joined for real.

So `SELECT count(*) FROM a, b, c` over three 3,000-row tables is a loop over 64k-row
chunks of its 27e9 pairs, stoppable by cancel and `statement_timeout` between chunks,
instead of one allocation of the product. Left, semi and anti joins finish each left row
inside its piece; right and full joins remember which right rows matched and emit the
others once the left stream ended.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import cancel as cancellation
from engine.expr import EvalContext
from engine.expr.ops import float_key as join_key
from engine.plan.logical import Join
from engine.types import arrow_schema

CHUNK_ROWS = 65_536
SUPER_ROWS = 1 << 20  # left rows per hash probe of an equi-join
PAIRS_PER_JOIN = 1 << 21  # matching pairs one probe may produce before the input is cut


def stream_join(
    p: Join, left_stream: Iterator[pa.Table], right: pa.Table, ctx: EvalContext
) -> Iterator[pa.Table]:
    """The join's output as tables of about `CHUNK_ROWS` rows (at least one, maybe empty)."""
    schema = arrow_schema(p.schema)
    pair_schema = arrow_schema(list(p.left.schema) + list(p.right.schema))
    nl = len(p.left.schema)
    # one chunk per column: `take` on a many-chunk column concatenates it on every call
    right = right.rename_columns([f"r{i}" for i in range(right.num_columns)]).combine_chunks()
    keyed = p.kind != "cross" and bool(p.left_keys)
    pairs: Callable[[pa.Table], Iterator[tuple[pa.Table, np.ndarray, np.ndarray]]]
    if keyed:
        pairs = _EquiPairs(p, right).pieces
    else:
        pairs = _cross_pieces(right.num_rows)
    right_hit = np.zeros(right.num_rows, dtype=bool) if p.kind in ("right", "full") else None
    yielded = False
    # equi-joins join super-chunks of the left side: one hash build of the right side per
    # million left rows, not per chunk
    chunks = _regroup(left_stream, SUPER_ROWS) if keyed else left_stream
    for chunk in chunks:
        chunk = chunk.rename_columns([f"l{i}" for i in range(chunk.num_columns)])
        for piece, li, ri in pairs(chunk):
            cancellation.check()
            if p.condition is not None and len(li):
                keep = np.concatenate(
                    [
                        _condition(
                            p,
                            pair_schema,
                            piece,
                            right,
                            li[s : s + CHUNK_ROWS],
                            ri[s : s + CHUNK_ROWS],
                            ctx,
                        )
                        for s in range(0, len(li), CHUNK_ROWS)
                    ]
                )
                li, ri = li[keep], ri[keep]
            if right_hit is not None:
                right_hit[ri] = True
            for out in _output(p, schema, piece, right, li, ri):
                yielded = True
                yield out
    if right_hit is not None:
        lonely = np.flatnonzero(~right_hit)
        for s in range(0, len(lonely), CHUNK_ROWS):
            part = right.take(pa.array(lonely[s : s + CHUNK_ROWS]))
            cols = [pa.nulls(part.num_rows, schema.field(j).type) for j in range(nl)]
            yielded = True
            yield pa.Table.from_arrays(cols + part.columns, schema=schema)
    if not yielded:
        yield schema.empty_table()


def _regroup(parts: Iterator[pa.Table], rows: int) -> Iterator[pa.Table]:
    """The stream re-cut into tables of about `rows` rows (zero-copy concatenation)."""
    held: list[pa.Table] = []
    n = 0
    for t in parts:
        if t.num_rows == 0:
            continue
        held.append(t)
        n += t.num_rows
        if n >= rows:
            yield pa.concat_tables(held) if len(held) > 1 else held[0]
            held, n = [], 0
    if held:
        yield pa.concat_tables(held) if len(held) > 1 else held[0]


def _condition(
    p: Join,
    pair_schema: pa.Schema,
    piece: pa.Table,
    right: pa.Table,
    li: np.ndarray,
    ri: np.ndarray,
    ctx: EvalContext,
) -> np.ndarray:
    """The residual condition over one window of pairs: which pairs it keeps."""
    both = _hcat(piece.take(pa.array(li)), right.take(pa.array(ri)))
    both = pa.Table.from_arrays(both.columns, schema=pair_schema)
    mask = p.condition.eval(both.combine_chunks().to_batches()[0], ctx)
    return np.asarray(pc.fill_null(mask, False), dtype=bool)


def _output(
    p: Join, schema: pa.Schema, piece: pa.Table, right: pa.Table, li: np.ndarray, ri: np.ndarray
) -> Iterator[pa.Table]:
    """One piece's output rows in chunks: pairs, plus unmatched left rows for left/full
    joins; the piece's left rows that have (semi) or lack (anti) a pair."""
    if p.kind in ("semi", "anti"):
        hit = np.zeros(piece.num_rows, dtype=bool)
        hit[li] = True
        out = piece.filter(pa.array(hit if p.kind == "semi" else ~hit))
        yield pa.Table.from_arrays(out.columns, schema=schema)
        return
    if p.kind in ("left", "full"):
        hit = np.zeros(piece.num_rows, dtype=bool)
        hit[li] = True
        lonely = np.flatnonzero(~hit)
        if len(lonely):
            li = np.concatenate([li, lonely])
            ri = np.concatenate([ri, np.full(len(lonely), -1, dtype=np.int64)])
    for s in range(0, len(li), CHUNK_ROWS):
        lt = pa.array(li[s : s + CHUNK_ROWS], pa.int64())
        rw = ri[s : s + CHUNK_ROWS]
        rt = pa.array(rw, pa.int64(), mask=rw < 0)  # -1: no right row (NULL-padded)
        joined = _hcat(piece.take(lt), right.take(rt))
        if not joined.num_columns:
            yield pa.table({"_": pa.nulls(len(lt))}).select([])
        else:
            yield pa.Table.from_arrays(joined.columns, schema=schema)


def _cross_pieces(
    nr: int,
) -> Callable[[pa.Table], Iterator[tuple[pa.Table, np.ndarray, np.ndarray]]]:
    """Every (left, right) pair, as pieces of at most CHUNK_ROWS pairs."""
    step = max(1, CHUNK_ROWS // max(nr, 1))
    rstep = min(max(nr, 1), CHUNK_ROWS)

    def pieces(chunk: pa.Table) -> Iterator[tuple[pa.Table, np.ndarray, np.ndarray]]:
        n = chunk.num_rows
        if nr == 0 or n == 0:
            yield chunk.slice(0, n), np.zeros(0, np.int64), np.zeros(0, np.int64)
            return
        for s in range(0, n, step):
            piece = chunk.slice(s, step)
            k = piece.num_rows
            for r0 in range(0, nr, rstep):
                r1 = min(nr, r0 + rstep)
                li = np.repeat(np.arange(k, dtype=np.int64), r1 - r0)
                ri = np.tile(np.arange(r0, r1, dtype=np.int64), k)
                yield piece, li, ri

    return pieces


class _EquiPairs:
    """Matching pairs on the equality keys (NULL keys never match)."""

    def __init__(self, p: Join, right: pa.Table) -> None:
        self.p = p
        self.lk = [f"lk{j}" for j in range(len(p.left_keys))]
        self.rk = [f"rk{j}" for j in range(len(p.right_keys))]
        ri_col = pa.array(np.arange(right.num_rows), pa.int64())
        ridx = pa.table(
            [*(join_key(right.column(i)) for i in p.right_keys), ri_col],
            names=[*self.rk, "__ri"],
        )
        self.ridx = ridx.filter(_all_valid(ridx, self.rk))
        # how many right rows carry each key: cuts left chunks before joining. One numeric
        # key: a numpy sort (tens of ms per million rows); otherwise a hash aggregation
        self.sorted: np.ndarray | None = None
        self.counts: pa.Table | None = None
        key = self.ridx.column(self.rk[0]) if len(self.rk) == 1 else None
        if key is not None and _sortable(key.type):
            x = np.sort(key.to_numpy())
            self.sorted = x
            cuts = np.flatnonzero(x[1:] != x[:-1])
            runs = np.diff(np.concatenate([[-1], cuts, [len(x) - 1]])) if len(x) else x[:0]
            self.max_mult = int(runs.max()) if len(runs) else 0
        else:
            aggs: list[tuple[Any, ...]] = [([], "count_all")]
            self.counts = self.ridx.group_by(self.rk, use_threads=False).aggregate(aggs)
            top = pc.max(self.counts.column("count_all")).as_py() if self.counts.num_rows else 0
            self.max_mult = int(top or 0)

    def _keys(self, chunk: pa.Table) -> pa.Table:
        li = pa.array(np.arange(chunk.num_rows), pa.int64())
        keys = [join_key(chunk.column(i)) for i in self.p.left_keys]
        t = pa.table([*keys, li], names=[*self.lk, "__li"])
        return t.filter(_all_valid(t, self.lk))

    def _join(self, lidx: pa.Table) -> tuple[np.ndarray, np.ndarray]:
        m = lidx.join(
            self.ridx,
            keys=self.lk,
            right_keys=self.rk,
            join_type="inner",
            coalesce_keys=False,
            use_threads=False,
        )
        li = np.asarray(m.column("__li").to_numpy(), dtype=np.int64)
        ri = np.asarray(m.column("__ri").to_numpy(), dtype=np.int64)
        return li, ri

    def pieces(self, chunk: pa.Table) -> Iterator[tuple[pa.Table, np.ndarray, np.ndarray]]:
        n = chunk.num_rows
        if n * max(self.max_mult, 1) <= PAIRS_PER_JOIN:
            li, ri = self._join(self._keys(chunk))
            yield chunk, li, ri
            return
        # matches per left row, then cut where the running sum crosses a chunk
        lidx = self._keys(chunk)
        per_row = np.zeros(n, dtype=np.int64)
        if self.sorted is not None:
            lk = lidx.column(self.lk[0]).to_numpy()
            hits = np.searchsorted(self.sorted, lk, "right") - np.searchsorted(self.sorted, lk)
            per_row[lidx.column("__li").to_numpy()] = hits
        else:
            assert self.counts is not None
            m = lidx.join(
                self.counts,
                keys=self.lk,
                right_keys=self.rk,
                join_type="inner",
                coalesce_keys=False,
                use_threads=False,
            )
            per_row[m.column("__li").to_numpy()] = m.column("count_all").to_numpy()
        total = np.cumsum(per_row)
        marks = np.arange(PAIRS_PER_JOIN, int(total[-1]) + 1, PAIRS_PER_JOIN)
        bounds = np.searchsorted(total, marks)
        starts = np.unique(np.concatenate([[0], bounds + 1]))
        starts = starts[starts < n]
        ends = np.append(starts[1:], n)
        for s, e in zip(starts.tolist(), ends.tolist(), strict=True):
            piece = chunk.slice(s, e - s)
            li, ri = self._join(self._keys(piece))
            yield piece, li, ri


def _sortable(t: pa.DataType) -> bool:
    """Keys numpy sorts like the join compares them (numbers, dates, timestamps)."""
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
    )


def _all_valid(t: pa.Table, cols: list[str]) -> pa.Array:
    mask = None
    for c in cols:
        v = pc.is_valid(t.column(c))
        mask = v if mask is None else pc.and_(mask, v)
    return mask


def _hcat(a: pa.Table, b: pa.Table) -> pa.Table:
    return pa.Table.from_arrays(a.columns + b.columns, names=a.column_names + b.column_names)
