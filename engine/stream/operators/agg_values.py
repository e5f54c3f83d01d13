"""ValueBlocks: an aggregation's per-group multisets of values, one packed block per group.

Why: min/max over an input that can retract must know a group's next best value when the
current extreme is deleted, and a DISTINCT aggregate must know when a value's last copy
leaves; both keep every counted value of a group with its multiplicity. Keeping those
multisets as Python dicts bounds state by RAM, and one RocksDB key per (group, value)
costs a store read and write per value. So a group's multiset is ONE row of a state table
(a disk table in a running server: RocksDB is the truth, a bounded cache of hot blocks in
memory, `engine.state.disk_table`):

    group key -> (v_1, ..., v_m, c_1, ..., c_m)

the group's distinct values and their counts, flat so that plain values (integers,
floats, strings) encode as one `marshal` call. Min/max blocks keep the values in SQL order
(the extremes are the first and the last value, no search); DISTINCT blocks in any order.

Per chunk (`apply`), the operator hands over its (group, value, weight change) triples
sorted by group, then by value (one polars sort: polars orders integers, strings, dates,
timestamps, floats with NaN last and numeric with its special values in SQL order), and
which groups are new (their group row did not exist: their block cannot exist either, so
it is written blind, without a read). The blocks of the other groups are read with one
multi-get, merged with their changes and written back (deleted when empty).

Integer arguments (`merge_packed`): the block is packed bytes (a width word, then the
values in order and their counts as integers of 1, 2, 4 or 8 bytes) that `HashAggOp`
keeps in an extra slot of the group's own row, so a chunk reads and writes each touched
group once; the old blocks and the changes of all of a chunk's groups are merged with
numpy at once (one `lexsort`, `add.reduceat`, each new block cut from one buffer), with
no Python per value.

Lifecycle: built by `HashAggOp` over its `minmax_<i>` / `distinct_<i>` tables. A table
still holding the older layout (one row `(*group, value) -> (count,)` per value, written
before data format 12) is converted into blocks on the operator's first step
(`convert_legacy`, or `legacy_counts` for blocks in the group row); the next checkpoint
rewrites it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from decimal import Decimal
from itertools import compress
from operator import itemgetter
from typing import Any

import numpy as np

from engine import civil
from engine.errors import InternalError
from engine.state.table import StateTable

Key = tuple[Any, ...]
PACKED = np.dtype("<i8")
"""Values and counts of packed blocks (integer arguments) while they are merged. Stored,
a block is little-endian integers of one width, the narrowest of 1, 2, 4 or 8 bytes that
holds its values and counts: a width word (0..3, so its first byte names the width),
then its values in order, then their counts."""


_NAN = float("nan")
"""The one float NaN of value keys: NaN equals nothing, so each NaN polars or a decoded
block hands out would be a value of its own in a dict of values (a deleted NaN not
finding the counted one); dicts compare by identity first, so one object finds itself."""


def one_nan(v: Any) -> Any:
    return _NAN if isinstance(v, float) and v != v else v


def float_order(v: Any) -> Any:
    return (v != v, v)  # NaN after every number, as SQL orders it


def decimal_order(v: Any) -> Any:
    return (2, 0) if v.is_nan() else (0, v)  # NaN after Infinity; never compared itself


def order_of(sample: Any, polars_float: bool) -> Callable[[Any], Any] | None:
    """The sort key that orders a column's Python values in SQL order (None: their own
    order), from the column's type (`polars_float`) or one of its values."""
    if polars_float:
        return float_order
    if isinstance(sample, Decimal):
        return decimal_order
    if isinstance(sample, date) or type(sample).__module__ == "numpy":
        return civil.order_key  # dates beyond 9999 / BC come as numpy datetime64
    return None


class ValueBlocks:
    """One aggregate's per-group value multisets; see the module docstring."""

    def __init__(self, table: StateTable, nk: int, ordered: bool, what: str) -> None:
        """`nk`: group key width; `ordered`: keep values in SQL order (min/max); `what`
        names the aggregate in errors."""
        self.table = table
        self.nk = nk
        self.ordered = ordered
        self.what = what
        self._checked = False

    def convert_legacy(self) -> None:
        """Group a table of the older (group, value) -> count layout into blocks (once,
        on the first step; a disk table flags such a range as `converting`)."""
        if self._checked:
            return
        self._checked = True
        t = self.table
        if not getattr(t, "converting", False):
            return
        nk = self.nk
        per: dict[Key, dict[Any, int]] = {}
        for k, v in list(t.items()):
            if len(k) != nk + 1:
                continue
            per.setdefault(k[:nk], {})[one_nan(k[nk])] = v[0]
        t.clear()
        keys = list(per)
        blocks = []
        for g in keys:
            d = per[g]
            if self.ordered:
                sample = next(iter(d))
                vs = sorted(d, key=order_of(sample, isinstance(sample, float)))
            else:
                vs = list(d)
            blocks.append((*vs, *[d[x] for x in vs]))
        t.put_many(keys, blocks)

    def apply(
        self,
        groups: list[Key],
        bounds: list[int],
        vals: list[Any],
        dws: list[int],
        fresh: list[bool],
        order: Callable[[Any], Any] | None,
    ) -> tuple[list[tuple[Any, ...] | None], list[int] | None]:
        """Apply one chunk's changes: group `groups[j]` changes the values
        `vals[bounds[j]:bounds[j + 1]]` (distinct, in SQL order) by the weights `dws[...]`.
        `fresh[j]`: the group had no row before (no block to read). `order`: the sort key
        of the values (`order_of`). Returns each group's new block (None: now empty) and,
        for DISTINCT blocks, every value's new count aligned with `vals` (None for
        min/max)."""
        table = self.table
        olds_at = [j for j, f in enumerate(fresh) if not f]
        olds = table.get_many([groups[j] for j in olds_at]) if olds_at else []
        old_of: dict[int, tuple[Any, ...] | None] = dict(zip(olds_at, olds, strict=True))
        blocks: list[tuple[Any, ...] | None] = []
        news: list[int] | None = None if self.ordered else []
        ordered = self.ordered
        bad = False
        for j in range(len(groups)):
            a, b = bounds[j], bounds[j + 1]
            vs = vals[a:b]
            ws = dws[a:b]
            old = old_of.get(j)
            if old is None:
                if min(ws) < 0:
                    bad = True
                blocks.append((*vs, *ws))
                if news is not None:
                    news.extend(ws)
                continue
            m = len(old) // 2
            olds_v = old[:m] if order is not float_order else map(one_nan, old[:m])
            d = dict(zip(olds_v, old[m:], strict=True))
            get = d.get
            cs = [get(v, 0) + w for v, w in zip(vs, ws, strict=True)]
            if news is not None:
                news.extend(cs)
            d.update(zip(vs, cs, strict=True))
            grew = len(d) > m  # new values were appended after the old, ordered ones
            low = min(cs)
            if low <= 0:
                bad |= low < 0
                for v in compress(vs, [c == 0 for c in cs]):
                    del d[v]
            if not d:
                blocks.append(None)
                continue
            # timsort merges the old ordered run with the appended new values
            ks = sorted(d, key=order) if ordered and grew else list(d)
            blocks.append((*ks, *map(d.__getitem__, ks)))
        if bad:
            raise InternalError(
                "aggregation value count became negative",
                detail=f"A value of {self.what} was deleted too often.",
            )
        live = [(groups[j], blk) for j, blk in enumerate(blocks) if blk is not None]
        table.put_many([g for g, _ in live], [blk for _, blk in live])
        dels = [groups[j] for j, blk in enumerate(blocks) if blk is None and not fresh[j]]
        if dels:
            table.delete_many(dels)
        return blocks, news

    def legacy_counts(self) -> dict[Key, dict[Any, int]] | None:
        """For an aggregate whose blocks live in its group rows (`merge_packed`): the
        values and counts per group of its table (resident, empty but for rows of the
        older (group, value) -> count layout), once, on the first step; the table is
        then cleared. None when there is nothing to convert."""
        if self._checked:
            return None
        self._checked = True
        t = self.table
        if getattr(t, "converting", None) is False or not len(t):
            return None
        nk = self.nk
        per: dict[Key, dict[Any, int]] = {}
        for k, v in list(t.items()):
            if len(k) == nk + 1:
                per.setdefault(k[:nk], {})[one_nan(k[nk])] = v[0]
        t.clear()
        return per


BIG_BLOCK = 4096
BIG_RATIO = 8
"""A group whose old block holds at least `BIG_BLOCK` values and `BIG_RATIO` times as
many as its changes is merged on its own (`_merge_one`: a binary search of the changes
in its sorted values and one insert, linear in the block) instead of joining the chunk's
`lexsort` (n log n in the block: a global min/max over a million values changed by a few
rows per step)."""


def merge_packed(
    olds: list[Any],
    bounds: np.ndarray,
    vals: np.ndarray,
    dws: np.ndarray,
    ordered: bool,
    what: str,
) -> PackedResult:
    """One chunk's changes to packed blocks (integer values), vectorized: group j's old
    block `olds[j]` (bytes: its values in order, then their counts, int64; None: no
    values) changes the values `vals[bounds[j]:bounds[j + 1]]` (distinct, in order) by
    `dws[...]`. The old blocks and the changes become one (group, value, count) array,
    sorted by group and value with one `lexsort`, equal pairs summed with `add.reduceat`,
    zero counts dropped, and every group's new block is cut from one buffer, values in
    order (big blocks apart, see `BIG_BLOCK`). `ordered`: report each group's least and
    greatest value (min/max); else each changed value's new count (DISTINCT). `what`
    names the aggregate in errors."""
    nd = np.diff(bounds)
    big = [
        j
        for j, o in enumerate(olds)
        if o is not None
        and len(o) > 2 * BIG_BLOCK
        and _values_in(o) >= max(BIG_BLOCK, BIG_RATIO * int(nd[j]))
    ]
    if not big:
        return _merge_many(olds, bounds, vals, dws, ordered, what)
    ng = len(olds)
    small = np.ones(ng, bool)
    small[big] = False
    elems = np.repeat(small, nd)
    sub_bounds = np.concatenate([[0], np.cumsum(nd[small])])
    rest = _merge_many(
        [o for o, f in zip(olds, small.tolist(), strict=True) if f],
        sub_bounds,
        vals[elems],
        dws[elems],
        ordered,
        what,
    )
    where = np.flatnonzero(small).tolist()
    blocks: list[bytes | None] = [None] * ng
    lo: list[Any] | None = [None] * ng if ordered else None
    hi: list[Any] | None = [None] * ng if ordered else None
    news = None if ordered else np.empty(len(vals), PACKED)
    for k, j in enumerate(where):
        blocks[j] = rest.blocks[k]
        if lo is not None and hi is not None and rest.lo is not None and rest.hi is not None:
            lo[j], hi[j] = rest.lo[k], rest.hi[k]
    if news is not None and rest.news is not None:
        news[elems] = rest.news
    for j in big:
        a, b = int(bounds[j]), int(bounds[j + 1])
        blk, least, most, new = _merge_one(olds[j], vals[a:b], dws[a:b], what)
        blocks[j] = blk
        if lo is not None and hi is not None:
            lo[j], hi[j] = least, most
        if news is not None:
            news[a:b] = new
    return PackedResult(blocks, lo, hi, news)


def _merge_one(
    old: bytes, dv: np.ndarray, dw: np.ndarray, what: str
) -> tuple[bytes | None, Any, Any, np.ndarray]:
    """One big block changed by the values `dv` (distinct, in order) by `dw`: its new
    block, least and greatest value, and the changed values' new counts."""
    ov, oc = _decode(old)
    m = len(ov)
    dv = dv.astype(PACKED, copy=False)
    dw = dw.astype(PACKED, copy=False)
    pos = np.searchsorted(ov, dv)
    hit = pos < m
    hit[hit] = ov[pos[hit]] == dv[hit]
    oc[pos[hit]] += dw[hit]
    new = dw.copy()
    new[hit] = oc[pos[hit]]
    if (len(new) and int(new.min()) < 0) or (m and int(oc.min()) < 0):
        raise InternalError(
            "aggregation value count became negative",
            detail=f"A value of {what} was deleted too often.",
        )
    ins = ~hit
    vs = np.insert(ov, pos[ins], dv[ins])
    cs = np.insert(oc, pos[ins], dw[ins])
    if not cs.all():
        keep = cs != 0
        vs, cs = vs[keep], cs[keep]
    if not len(vs):
        return None, None, None, new
    return _encode(vs, cs), int(vs[0]), int(vs[-1]), new


def _merge_many(
    olds: list[Any],
    bounds: np.ndarray,
    vals: np.ndarray,
    dws: np.ndarray,
    ordered: bool,
    what: str,
) -> PackedResult:
    """`merge_packed` of blocks of any size with one `lexsort` (the docstring there)."""
    ng = len(olds)
    at = [j for j, o in enumerate(olds) if o is not None]
    og, ov, oc = _decode_many([olds[j] for j in at], at)
    n_old = len(og)
    g = np.concatenate([og, np.repeat(np.arange(ng), np.diff(bounds))])
    v = np.concatenate([ov, vals.astype(PACKED, copy=False)])
    w = np.concatenate([oc, dws.astype(PACKED, copy=False)])
    order = np.lexsort((v, g))
    gs, vs = g[order], v[order]
    head = np.ones(len(gs), bool)
    head[1:] = (gs[1:] != gs[:-1]) | (vs[1:] != vs[:-1])
    starts = np.flatnonzero(head)
    cs = np.add.reduceat(w[order], starts) if len(starts) else w[:0]
    if len(cs) and int(cs.min()) < 0:
        raise InternalError(
            "aggregation value count became negative",
            detail=f"A value of {what} was deleted too often.",
        )
    news: np.ndarray | None = None
    if not ordered:  # each changed value's new count, aligned with `vals`
        bucket = np.empty(len(gs), np.int64)
        bucket[order] = np.cumsum(head) - 1
        news = cs[bucket[n_old:]]
    keep = cs != 0
    kg, kv, kc = gs[starts][keep], vs[starts][keep], cs[keep]
    k = np.bincount(kg, minlength=ng)
    kfirst = np.cumsum(k) - k
    blocks = _encode_many(kg, kv, kc, k, kfirst)
    lo: list[Any] | None = None
    hi: list[Any] | None = None
    if ordered:
        live = np.flatnonzero(k)
        lo = [None] * ng
        hi = [None] * ng
        least, most = kv[kfirst[live]].tolist(), kv[kfirst[live] + k[live] - 1].tolist()
        for j, x, y in zip(live.tolist(), least, most, strict=True):
            lo[j] = x
            hi[j] = y
    return PackedResult(blocks, lo, hi, news)


# -- block bytes: a width word, then the values, then their counts -------------------------
_DTYPES = [np.dtype(f"<i{w}") for w in (1, 2, 4, 8)]
_HEADS = [np.array([c], dt).tobytes() for c, dt in enumerate(_DTYPES)]


def _codes(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """Per block the narrowest width code (0..3: 1, 2, 4, 8 bytes) holding [lo, hi]."""
    code = np.full(len(lo), 3, np.int64)
    for c in (2, 1, 0):
        info = np.iinfo(_DTYPES[c])
        code[(lo >= info.min) & (hi <= info.max)] = c
    return code


def _values_in(block: bytes) -> int:
    return (len(block) // _DTYPES[block[0]].itemsize - 1) // 2


def _decode(block: bytes) -> tuple[np.ndarray, np.ndarray]:
    """A block's values and counts (int64; the counts a writable copy)."""
    a = np.frombuffer(block, _DTYPES[block[0]])[1:].astype(PACKED)
    m = len(a) // 2
    return a[:m], a[m:]


def _encode(vs: np.ndarray, cs: np.ndarray) -> bytes:
    """The block of values `vs` (in order) and their counts `cs` (all positive)."""
    code = int(_codes(np.array([vs[0]]), np.array([max(int(vs[-1]), int(cs.max()))]))[0])
    dt = _DTYPES[code]
    return _HEADS[code] + vs.astype(dt).tobytes() + cs.astype(dt).tobytes()


def _decode_many(pays: list[bytes], at: list[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(group index, value, count) int64 arrays of every value of the blocks `pays` (of
    groups `at`), decoded a width at a time from one joined buffer (the order of the
    rows is the caller's to sort)."""
    if not pays:
        e = np.zeros(0, PACKED)
        return e, e, e
    codes = np.fromiter(map(itemgetter(0), pays), np.int64, len(pays))
    gidx = np.asarray(at, np.int64)
    kinds = np.unique(codes).tolist()
    out_g, out_v, out_c = [], [], []
    for code in kinds:
        dt = _DTYPES[code]
        if len(kinds) == 1:
            part, groups = pays, gidx
        else:
            sel = np.flatnonzero(codes == code)
            part, groups = [pays[i] for i in sel.tolist()], gidx[sel]
        lens = np.fromiter(map(len, part), np.int64, len(part)) // dt.itemsize
        sizes = (lens - 1) // 2
        flat = np.frombuffer(b"".join(part), dt).astype(PACKED)
        first = np.cumsum(lens) - lens + 1  # each block's first value, past its width word
        mine = np.cumsum(sizes)
        n = int(mine[-1])
        vpos = np.repeat(first, sizes) + (np.arange(n) - np.repeat(mine - sizes, sizes))
        out_g.append(np.repeat(groups, sizes))
        out_v.append(flat[vpos])
        out_c.append(flat[vpos + np.repeat(sizes, sizes)])
    if len(out_g) == 1:
        return out_g[0], out_v[0], out_c[0]
    return np.concatenate(out_g), np.concatenate(out_v), np.concatenate(out_c)


def _encode_many(
    kg: np.ndarray, kv: np.ndarray, kc: np.ndarray, k: np.ndarray, kfirst: np.ndarray
) -> list[bytes | None]:
    """Per group its block (None: no values): group j's values are
    `kv[kfirst[j]:kfirst[j] + k[j]]` (in order), their counts the same slice of `kc`.
    Each block takes the narrowest width that holds its values and counts; the blocks of
    one width are cut from one buffer."""
    ng = len(k)
    blocks: list[bytes | None] = [None] * ng
    live = np.flatnonzero(k)
    if not len(live):
        return blocks
    f = kfirst[live]
    kl = k[live]
    codes = _codes(kv[f], np.maximum(kv[f + kl - 1], np.maximum.reduceat(kc, f)))
    n1 = 1 + 2 * kl  # elements per block: the width word, values, counts
    start = np.zeros(ng, np.int64)
    start[live] = np.cumsum(n1) - n1
    out = np.empty(int(n1.sum()), PACKED)
    out[start[live]] = codes
    pos = start[kg] + 1 + (np.arange(len(kg)) - kfirst[kg])
    out[pos] = kv
    out[pos + k[kg]] = kc
    kinds = np.unique(codes).tolist()
    for code in kinds:
        dt = _DTYPES[code]
        if len(kinds) == 1:
            mine, buf, at, size = live, out.astype(dt).tobytes(), start[live], n1
        else:
            sel = codes == code
            mine, size = live[sel], n1[sel]
            ends = np.cumsum(size)
            at = ends - size
            src = np.repeat(start[mine] - at, size) + np.arange(int(ends[-1]))
            buf = out[src].astype(dt).tobytes()
        a_s = (at * dt.itemsize).tolist()
        b_s = ((at + size) * dt.itemsize).tolist()
        for j, a, b in zip(mine.tolist(), a_s, b_s, strict=True):
            blocks[j] = buf[a:b]
    return blocks


class PackedResult:
    """What `merge_packed` found, per group: its new block (None: no values left), its
    least and greatest value (min/max only; None: none left), and for DISTINCT each
    changed value's new count (int64, aligned with the changes)."""

    __slots__ = ("blocks", "lo", "hi", "news")

    def __init__(
        self,
        blocks: list[bytes | None],
        lo: list[Any] | None,
        hi: list[Any] | None,
        news: np.ndarray | None,
    ) -> None:
        self.blocks = blocks
        self.lo = lo
        self.hi = hi
        self.news = news


def pack(counts: dict[int, int]) -> bytes:
    """A packed block of integer values -> counts (values in order)."""
    vs = sorted(counts)
    return _encode(np.asarray(vs, PACKED), np.asarray([counts[v] for v in vs], PACKED))


def unpack(block: bytes | tuple[Any, ...]) -> tuple[list[Any], list[int]]:
    """A block's values and counts (packed bytes or a tuple block), for tests."""
    if not isinstance(block, bytes):
        m = len(block) // 2
        return list(block[:m]), list(block[m:])
    vs, cs = _decode(block)
    return vs.tolist(), cs.tolist()
