"""Vectorised window-function evaluation over one Arrow table (all of its partitions).

One kernel serves ad-hoc queries (`engine.batch`, over the whole input) and materialized
views (`OverWindowOp`, over the rows of the partitions an epoch touched), so a view and
its query run ad hoc compute the same values.

Steps, all numpy/Arrow kernels (no per-row Python):

1. sort by (partition keys, ORDER BY keys, tie-break columns ASC NULLS LAST); PARTITION BY
   treats NULLs as equal;
2. flag partition starts and peer-group starts (rows equal on partition + ORDER BY keys)
   on the sorted rows; from them every row's partition start/end and peer start/end;
3. per call: ranking functions from these positions; lag/lead by shifted `take` inside
   the partition; frame functions from each row's frame [s, e] (ROWS, RANGE and GROUPS
   bounds; offsets of the value-based modes in `window_frames`) — count/sum/avg by
   per-partition prefix sums, min/max by a
   cumulative scan, a whole-partition reduction or a sparse table over value ranks,
   first/last/nth_value by `take`.

The result is the sorted input with one column per call appended.
"""

from __future__ import annotations

import decimal
from collections.abc import Sequence
from decimal import Decimal
from typing import Any, Protocol

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import NumericValueOutOfRange, WindowingError, not_supported
from engine.numeric import FLOAT4_MAX, array_of, finite_only, special_codes, special_sum
from engine.sort_keys import sortable
from engine.stream.operators.window_frames import groups_bound, range_bound
from engine.types import Field, SqlType, TypeKind

OrderSpec = tuple[int, bool, bool]  # (column, desc, nulls_first)

_NUMERIC_Q = Decimal(1).scaleb(-10)
_CTX = decimal.Context(prec=80, Emax=999999, Emin=-999999)


class CallLike(Protocol):
    kind: str
    args: tuple[int, ...]
    type: SqlType
    offset: int

    @property
    def frame(self) -> Any: ...


def sort_indices(t: pa.Table, fields: Sequence[Field], keys: Sequence[OrderSpec]) -> pa.Array:
    """Stable indices ordering `t` by `keys`, each with its own NULL placement."""
    cols: dict[str, Any] = {}
    sort_keys: list[tuple[str, str]] = []
    for i, (c, desc, nulls_first) in enumerate(keys):
        col = t.column(c)
        cols[f"n{i}"] = pc.is_null(col)
        sort_keys.append((f"n{i}", "descending" if nulls_first else "ascending"))
        cols[f"v{i}"] = sortable(col)
        sort_keys.append((f"v{i}", "descending" if desc else "ascending"))
    if not sort_keys or t.num_rows <= 1:
        return pa.array(np.arange(t.num_rows, dtype=np.int64))
    return pc.sort_indices(pa.table(cols), sort_keys=sort_keys)


def _changed(col: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Bool per row i >= 1: row i differs from row i - 1 (NULLs equal each other)."""
    a = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    if pa.types.is_list(a.type) or pa.types.is_interval(a.type):
        a = sortable(a)  # equal stand-ins <=> equal values (PostgreSQL's comparison)
    n = len(a)
    if n <= 1:
        return np.zeros(max(n - 1, 0), dtype=bool)
    if pa.types.is_floating(a.type):  # NaN equals NaN here (PostgreSQL float order)
        v = np.asarray(pc.fill_null(a, 0).to_numpy(zero_copy_only=False), dtype=np.float64)
        same = (v[1:] == v[:-1]) | (np.isnan(v[1:]) & np.isnan(v[:-1]))
        isnull = ~np.asarray(pc.is_valid(a))
        same = np.where(isnull[1:] | isnull[:-1], isnull[1:] & isnull[:-1], same)
        return ~same
    x, y = a.slice(1), a.slice(0, n - 1)
    if pa.types.is_interval(a.type) or pa.types.is_list(a.type):
        xs, ys = x.to_pylist(), y.to_pylist()
        return np.fromiter((p != q for p, q in zip(xs, ys, strict=True)), bool, n - 1)
    eq = np.asarray(pc.fill_null(pc.equal(x, y), False))
    nx = np.asarray(pc.is_null(x))
    ny = np.asarray(pc.is_null(y))
    return ~(eq | (nx & ny))


def _starts(flags: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """From per-row 'starts a new group' flags: (group start, group end) per row."""
    ids = np.cumsum(flags) - 1
    starts = np.flatnonzero(flags)
    ends = np.r_[starts[1:], n] - 1
    return starts[ids], ends[ids]


def compute_windows(
    t: pa.Table,
    fields: Sequence[Field],
    partition_by: Sequence[int],
    order_by: Sequence[OrderSpec],
    tiebreak: Sequence[int],
    calls: Sequence[CallLike],
) -> pa.Table:
    """`t` sorted by partition/order/tiebreak with one column per call appended."""
    n = t.num_rows
    out_fields = [pa.field(f"_w{i}", c.type.arrow) for i, c in enumerate(calls)]
    if n == 0:
        return pa.Table.from_arrays(
            list(t.columns) + [pa.array([], f.type) for f in out_fields],
            names=list(t.column_names) + [f.name for f in out_fields],
        )
    keys: list[OrderSpec] = [(p, False, False) for p in partition_by]
    keys += list(order_by)
    keys += [(c, False, False) for c in tiebreak]
    idx = sort_indices(t, fields, keys)
    s = t.take(idx).combine_chunks()
    new_part = np.zeros(n, dtype=bool)
    new_part[0] = True
    for p in partition_by:
        new_part[1:] |= _changed(s.column(p))
    new_peer = new_part.copy()
    for c, _, _ in order_by:
        new_peer[1:] |= _changed(s.column(c))
    pstart, pend = _starts(new_part, n)
    qstart, qend = _starts(new_peer, n)
    ctx = _Ctx(s, fields, n, new_part, new_peer, pstart, pend, qstart, qend)
    ctx.order_by = list(order_by)
    cols = [_call(ctx, c) for c in calls]
    cols = [
        a if a.type == f.type else a.cast(f.type) for a, f in zip(cols, out_fields, strict=True)
    ]
    return pa.Table.from_arrays(
        list(s.columns) + cols, names=list(s.column_names) + [f.name for f in out_fields]
    )


class _Ctx:
    __slots__ = (
        "s",
        "fields",
        "n",
        "new_part",
        "new_peer",
        "pstart",
        "pend",
        "qstart",
        "qend",
        "pos",
        "order_by",
    )

    def __init__(
        self,
        s: pa.Table,
        fields: Sequence[Field],
        n: int,
        new_part: np.ndarray,
        new_peer: np.ndarray,
        pstart: np.ndarray,
        pend: np.ndarray,
        qstart: np.ndarray,
        qend: np.ndarray,
    ) -> None:
        self.s = s
        self.fields = fields
        self.n = n
        self.new_part = new_part
        self.new_peer = new_peer
        self.pstart = pstart
        self.pend = pend
        self.qstart = qstart
        self.qend = qend
        self.pos = np.arange(n, dtype=np.int64)
        self.order_by: list[OrderSpec] = []


def _call(c: _Ctx, call: CallLike) -> pa.Array:
    k = call.kind
    pos, pstart = c.pos, c.pstart
    if k == "row_number":
        return pa.array(pos - pstart + 1, pa.int64())
    if k == "rank":
        return pa.array(c.qstart - pstart + 1, pa.int64())
    if k == "dense_rank":
        peer_id = np.cumsum(c.new_peer)
        return pa.array(peer_id - peer_id[pstart] + 1, pa.int64())
    if k == "percent_rank":
        size = c.pend - pstart + 1
        rank = c.qstart - pstart
        return pa.array(np.where(size > 1, rank / np.maximum(size - 1, 1), 0.0), pa.float64())
    if k == "cume_dist":
        size = c.pend - pstart + 1
        return pa.array((c.qend - pstart + 1) / size, pa.float64())
    if k == "ntile":
        buckets = call.offset
        size = c.pend - pstart + 1
        i = pos - pstart
        q, r = size // buckets, size % buckets
        # the first r buckets have q + 1 rows
        big = r * (q + 1)
        tile = np.where(i < big, i // np.maximum(q + 1, 1), r + (i - big) // np.maximum(q, 1))
        return pa.array(tile + 1, pa.int64())
    if k in ("lag", "lead"):
        val = c.s.column(call.args[0]).combine_chunks()
        off = call.offset if k == "lead" else -call.offset
        j = pos + off
        ok = (j >= pstart) & (j <= c.pend)
        taken = val.take(pa.array(np.where(ok, j, 0)))
        if len(call.args) > 1:
            default = c.s.column(call.args[1]).combine_chunks()
            if default.type != taken.type:
                default = default.cast(taken.type)
        else:
            default = pa.nulls(c.n, taken.type)
        return pc.if_else(pa.array(ok), taken, default)
    s, e = _frame(c, call.frame)
    nonempty = s <= e
    if k in ("first_value", "last_value", "nth_value"):
        val = c.s.column(call.args[0]).combine_chunks()
        if k == "first_value":
            j, ok = s, nonempty
        elif k == "last_value":
            j, ok = e, nonempty
        else:
            j = s + call.offset - 1
            ok = nonempty & (j <= e)
        taken = val.take(pa.array(np.clip(j, 0, c.n - 1)))
        return pc.if_else(pa.array(ok), taken, pa.nulls(c.n, taken.type))
    if k == "count_star":
        return pa.array(np.where(nonempty, e - s + 1, 0), pa.int64())
    val = c.s.column(call.args[0]).combine_chunks()
    valid = np.asarray(pc.is_valid(val))
    cnt = _range_sum(c, valid.astype(np.int64), s, e, nonempty)
    if k == "count":
        return pa.array(cnt, pa.int64())
    if k in ("sum", "avg"):
        return _sum_avg(c, call, val, cnt, s, e, nonempty)
    if k in ("min", "max"):
        return _extreme(c, call, val, valid, s, e, nonempty, k == "min")
    raise not_supported(f"window function {k}")


def _frame(c: _Ctx, frame: Any) -> tuple[np.ndarray, np.ndarray]:
    pos = c.pos

    def bound(b: tuple[str, int], is_start: bool) -> np.ndarray:
        kind, off = b
        if kind == "unbounded_preceding":
            return c.pstart
        if kind == "unbounded_following":
            return c.pend
        if kind == "current_row":
            if frame.mode == "rows":
                return pos
            return c.qstart if is_start else c.qend
        if frame.mode == "groups":
            return groups_bound(kind, off, is_start, c.new_peer, c.pstart, c.pend)
        if frame.mode == "range":
            if len(c.order_by) != 1:
                raise WindowingError(
                    "RANGE with offset PRECEDING/FOLLOWING requires exactly one ORDER BY column"
                )
            col, desc, _ = c.order_by[0]
            part_id = np.cumsum(c.new_part) - 1
            vals = c.s.column(col).combine_chunks()
            return range_bound(
                kind, off, is_start, vals, desc, part_id, c.pstart, c.pend, c.qstart, c.qend
            )
        return pos - off if kind == "preceding" else pos + off

    s = np.maximum(bound(frame.start, True), c.pstart)
    e = np.minimum(bound(frame.end, False), c.pend)
    return s, e


def _segmented_cumsum(c: _Ctx, v: np.ndarray) -> np.ndarray:
    """Inclusive prefix sums restarting at every partition start."""
    with decimal.localcontext(_CTX):  # exact decimals: object arrays, still one C loop
        cs = np.cumsum(v)
        zero: Any = Decimal(0) if v.dtype == object else 0
        base = np.where(c.pstart > 0, cs[np.maximum(c.pstart - 1, 0)], zero)
        return cs - base


def _float_prefix(c: _Ctx, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Compensated float prefix sums per partition: (running sum, running Neumaier
    compensation), restarted at each partition (an offset from a total of the partitions
    before would lose this one's values under a large one: 1e20 + 3 - 1e20 is 0)."""
    run = pl.col("v").cum_sum().over("p")
    prev = run.shift(1, fill_value=0.0).over("p")
    x = pl.col("v")
    err = pl.when(prev.abs() >= x.abs()).then((prev - run) + x).otherwise((x - run) + prev)
    df = pl.DataFrame({"v": v, "p": np.cumsum(c.new_part)}).with_columns(run.alias("hi"))
    df = df.with_columns(err.alias("e")).with_columns(pl.col("e").cum_sum().over("p").alias("lo"))
    return df.get_column("hi").to_numpy(), df.get_column("lo").to_numpy()


def _range_sum(
    c: _Ctx, v: np.ndarray, s: np.ndarray, e: np.ndarray, nonempty: np.ndarray
) -> np.ndarray:
    if v.dtype == np.float64:  # frame = end prefix - prefix before, both compensated
        hi, lo = _float_prefix(c, v)
        ie, ib = np.clip(e, 0, c.n - 1), np.clip(s - 1, 0, c.n - 1)
        before = s > c.pstart
        with np.errstate(invalid="ignore"):
            r = (hi[ie] - np.where(before, hi[ib], 0.0)) + (lo[ie] - np.where(before, lo[ib], 0.0))
        return np.where(nonempty, r, 0.0)
    cs = _segmented_cumsum(c, v)
    zero: Any = Decimal(0) if v.dtype == object else 0
    with decimal.localcontext(_CTX):
        ec = cs[np.clip(e, 0, c.n - 1)]
        before = np.where(s > c.pstart, cs[np.clip(s - 1, 0, c.n - 1)], zero)
        return np.where(nonempty, ec - before, zero)


def _sum_avg(
    c: _Ctx,
    call: CallLike,
    val: pa.Array,
    cnt: np.ndarray,
    s: np.ndarray,
    e: np.ndarray,
    nonempty: np.ndarray,
) -> pa.Array:
    t = call.type
    arg_kind = val.type
    exact = t.kind is TypeKind.NUMERIC or pa.types.is_decimal(arg_kind)
    if pa.types.is_interval(arg_kind):
        raise not_supported("sum/avg of intervals over a window")
    floats = pa.types.is_floating(arg_kind)
    if pa.types.is_decimal128(arg_kind):
        codes = special_codes(val)
    elif floats:  # the same codes for a float's NaN / Infinity / -Infinity
        f = pc.fill_null(val, 0.0).to_numpy(zero_copy_only=False).astype(np.float64)
        codes = np.where(np.isnan(f), 1, np.where(f == np.inf, 2, np.where(f == -np.inf, 3, 0)))
    else:
        codes = None
    if codes is not None and not codes.any():
        codes = None
    if codes is not None:  # NaN / Infinity / -Infinity: counted per frame, not summed
        counts = [_range_sum(c, (codes == k).astype(np.int64), s, e, nonempty) for k in (1, 2, 3)]
        if floats:
            val = pa.array(np.where(codes == 0, f, 0.0), mask=val.is_null().to_numpy(False))
        else:
            val = finite_only(val)
    if exact:
        vals = val.to_pylist()
        v = np.array([Decimal(0) if x is None else Decimal(x) for x in vals], dtype=object)
    elif pa.types.is_integer(arg_kind):
        v = np.asarray(pc.fill_null(val, 0).to_numpy(zero_copy_only=False), dtype=np.int64)
    else:
        v = np.asarray(pc.fill_null(val, 0).to_numpy(zero_copy_only=False), dtype=np.float64)
    tot = _range_sum(c, v, s, e, nonempty)
    has = cnt > 0
    if v.dtype == np.float64:
        # finite values past the double range (no NaN / infinity in the frame): PostgreSQL's
        # float8pl raises 22003, and so does a real sum past the float4 range
        plain = has if codes is None else has & ((counts[0] + counts[1] + counts[2]) == 0)
        if bool((plain & ~np.isfinite(tot)).any()):
            # a prefix sum passed the range, perhaps outside this frame: the frames again
            # from prefix sums of the values scaled by 2^-64 (exact above 2^-958), scaled back
            with np.errstate(over="ignore", invalid="ignore"):
                again = _range_sum(c, v * 2.0**-64, s, e, nonempty) * 2.0**64
            tot = np.where(plain & ~np.isfinite(tot), again, tot)
        big = ~np.isfinite(tot)
        if t.kind is TypeKind.REAL and call.kind == "sum":
            big |= np.abs(tot) > FLOAT4_MAX
        if bool((plain & big).any()):
            raise NumericValueOutOfRange("value out of range: overflow")
    if codes is not None and floats:  # as adding them up gives (PostgreSQL's float sum)
        nan, pinf, ninf = (k > 0 for k in counts)
        tot = np.where(pinf, np.inf, np.where(ninf, -np.inf, tot))
        tot = np.where(nan | (pinf & ninf), np.nan, tot)
    elif codes is not None:
        tot = np.array(
            [
                special_sum(x, *k)
                for x, *k in zip(tot.tolist(), *(n.tolist() for n in counts), strict=True)
            ],
            dtype=object,
        )
    if call.kind == "sum":
        if exact:
            out = [_q(x) if h else None for x, h in zip(tot.tolist(), has.tolist(), strict=True)]
            try:
                return array_of(out, t.arrow)
            except pa.ArrowInvalid:  # an exact sum past numeric's 28 integer digits
                raise NumericValueOutOfRange("numeric field overflow") from None
        return pa.array(tot, mask=~has).cast(t.arrow)
    if t.kind is TypeKind.NUMERIC:
        out = [
            None if not h else x if _special(x) else _q(_CTX.divide(Decimal(x), Decimal(int(k))))
            for x, k, h in zip(tot.tolist(), cnt.tolist(), has.tolist(), strict=True)
        ]
        return array_of(out, t.arrow)
    with np.errstate(divide="ignore", invalid="ignore"):
        avg = tot.astype(np.float64) / np.maximum(cnt, 1)
    return pa.array(avg, mask=~has).cast(t.arrow)


def _special(x: Any) -> bool:
    return isinstance(x, Decimal) and not x.is_finite()


def _q(x: Any) -> Decimal:
    if _special(x):  # NaN / Infinity (special_sum)
        return Decimal(x)
    return Decimal(x).quantize(_NUMERIC_Q, rounding=decimal.ROUND_HALF_UP, context=_CTX)


def _extreme(
    c: _Ctx,
    call: CallLike,
    val: pa.Array,
    valid: np.ndarray,
    s: np.ndarray,
    e: np.ndarray,
    nonempty: np.ndarray,
    is_min: bool,
) -> pa.Array:
    n = c.n
    # dense ranks of the values (NULLs excluded) make every orderable type an int problem
    if pa.types.is_interval(val.type):
        ranked_src = sortable(val)
    else:
        ranked_src = val
    codes = np.asarray(
        pc.rank(ranked_src, sort_keys="ascending", tiebreaker="dense"),
        dtype=np.int64,
    )
    big = n + 2
    key = np.where(valid, codes, big if is_min else -1)
    frame = call.frame
    whole = frame.start[0] == "unbounded_preceding" and frame.end[0] == "unbounded_following"
    cumul = frame.start[0] == "unbounded_preceding"
    if whole or cumul:
        df = pl.DataFrame({"k": key, "p": np.cumsum(c.new_part)})
        if whole:
            agg = (
                df.select((pl.col("k").min() if is_min else pl.col("k").max()).over("p"))
                .to_series()
                .to_numpy()
            )
            best = agg
        else:
            cum = (
                df.select((pl.col("k").cum_min() if is_min else pl.col("k").cum_max()).over("p"))
                .to_series()
                .to_numpy()
            )
            best = cum[np.clip(e, 0, n - 1)]
    else:
        best = _sparse_query(key, s, e, is_min)
    found = nonempty & (best != (big if is_min else -1))
    # map a code back to one row that holds it
    row_of = np.zeros(big + 1, dtype=np.int64)
    row_of[codes[valid]] = np.flatnonzero(valid)
    pick = row_of[np.clip(best, 0, big)]
    taken = val.take(pa.array(pick))
    return pc.if_else(pa.array(found), taken, pa.nulls(n, taken.type))


def _sparse_query(key: np.ndarray, s: np.ndarray, e: np.ndarray, is_min: bool) -> np.ndarray:
    """Range min/max of `key` over [s, e] per row (sparse table, O(n log n))."""
    n = len(key)
    f = np.minimum if is_min else np.maximum
    levels = [key]
    j = 1
    while (1 << j) <= n:
        prev = levels[-1]
        half = 1 << (j - 1)
        levels.append(f(prev[: n - (1 << j) + 1], prev[half : half + n - (1 << j) + 1]))
        j += 1
    length = np.maximum(e - s + 1, 1)
    lv = np.floor(np.log2(length)).astype(np.int64)
    out = np.empty(n, dtype=np.int64)
    ss = np.clip(s, 0, n - 1)
    for level in np.unique(lv):
        m = lv == level
        tab = levels[level]
        a = np.clip(ss[m], 0, len(tab) - 1)
        b = np.clip(np.clip(e[m], 0, n - 1) - (1 << level) + 1, 0, len(tab) - 1)
        out[m] = f(tab[a], tab[b])
    return out
