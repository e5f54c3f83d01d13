"""ValueState: an aggregation's per-group multisets of values, in bounded blocks on disk.

Why: min/max over an input that can retract must know a group's next best value when the
current extreme is deleted, and a DISTINCT aggregate must know when a value's last copy
leaves; both keep every counted value of a group with its multiplicity. Keeping those
multisets as Python dicts bounds state by RAM, and one RocksDB key per (group, value)
costs a store read and write per value. So a group's values are a few rows (parts) of a
state table (a disk table in a running server: RocksDB is the truth):

    (*group key, part) -> block

Integer and float arguments: each part holds the values of a range in order with their
counts as packed little-endian bytes (`_encode`), at most `PART_MAX` values; `part` is
None for the group's first part and the least value a later part held when it was cut.
Other argument types (strings, decimals, dates, ...): one part (None) per group whose
block is the flat tuple `(v_1, ..., v_m, c_1, ..., c_m)`.

Per epoch (the costs the layout exists for): a chunk's changes are sorted by group and
value (`HashAggOp._value_deltas`); the first chunk of an epoch that touches a group reads
its parts (one batched prefix read) into the epoch's working set, decoded. Later chunks
only add their changes to it: numeric changes are kept as sorted runs (a run merged into
the one before it once as large, so lookups search a few runs), and min/max follow each
group's least and greatest value from the changes alone unless a change deletes one of
them. DISTINCT looks every changed value's count up (a binary search per run). At the
checkpoint the table asks the working set (`write_columns`, the `ColumnOverlay` hook of
`engine.state.disk_table`) for its rows: each touched group's runs are merged into its
parts once, only the parts that changed are encoded and written, a part grown past
`PART_MAX` is cut into parts of `PART_TARGET` values, an emptied part is deleted; the
working set is then dropped, so memory between epochs is the disk table's bounded cache.
So a backfill reads and writes each group's state once per epoch, not once per chunk, and
a change to a group of millions of values rewrites only the parts it falls in.

Lifecycle: built by `HashAggOp` over its `minmax_<i>` / `distinct_<i>` table. A resident
table (tests, ad-hoc runs) has no checkpoint hook: its rows are written after every chunk.
A table still holding the older layout (one row `(*group, value) -> (count,)` per value,
written before data format 12) is converted into blocks on the operator's first step
(`convert_legacy`); the next checkpoint rewrites it. A failed epoch drops the operator
with its working set; recovery (`load`) resets it.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import numpy as np

from engine import civil
from engine.errors import InternalError
from engine.state.table import StateTable

if TYPE_CHECKING:
    from engine.state.store import WriteBatchLike

Key = tuple[Any, ...]

PART_MAX = 8192
"""A numeric part with more values than this is cut at the checkpoint that changes it."""
PART_TARGET = 4096
"""Values per part when one is cut: a change rewrites at most `PART_MAX` values' bytes."""

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


def _negative(what: str) -> InternalError:
    return InternalError(
        "aggregation value count became negative",
        detail=f"A value of {what} was deleted too often.",
    )


# -- numeric blocks: a width word, then the values, then their counts ----------------------
_DTYPES = [np.dtype(f"<i{w}") for w in (1, 2, 4, 8)]
_HEADS = [np.array([c], dt).tobytes() for c, dt in enumerate(_DTYPES)]
_FLOAT = 4  # code of float blocks: an 8-byte word, float64 values, int64 counts
_FLOAT_HEAD = np.array([_FLOAT], "<i8").tobytes()
_I8 = np.dtype("<i8")
_F8 = np.dtype("<f8")


def _encode(vs: np.ndarray, cs: np.ndarray) -> bytes:
    """The block of values `vs` (in order) and their counts `cs` (all positive). Integer
    blocks take the narrowest width of 1, 2, 4 or 8 bytes that holds values and counts."""
    if vs.dtype.kind == "f":
        return _FLOAT_HEAD + vs.astype(_F8).tobytes() + cs.astype(_I8).tobytes()
    lo, hi = int(vs[0]), max(int(vs[-1]), int(cs.max()))
    code = 3
    for c in (0, 1, 2):
        info = np.iinfo(_DTYPES[c])
        if lo >= info.min and hi <= info.max:
            code = c
            break
    dt = _DTYPES[code]
    return _HEADS[code] + vs.astype(dt).tobytes() + cs.astype(dt).tobytes()


def _decode(block: bytes) -> tuple[np.ndarray, np.ndarray]:
    """A block's values (int64 or float64) and counts (int64)."""
    if block[0] == _FLOAT:
        m = (len(block) - 8) // 16
        return (
            np.frombuffer(block, _F8, m, 8),
            np.frombuffer(block, _I8, m, 8 + 8 * m),
        )
    a = np.frombuffer(block, _DTYPES[block[0]])[1:].astype(_I8)
    m = len(a) // 2
    return a[:m], a[m:]


def _find(vs: np.ndarray, xs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of `xs` in the sorted `vs` and which of them are there (NaN finds NaN)."""
    pos = np.searchsorted(vs, xs)
    hit = pos < len(vs)
    if hit.any():
        at = vs[pos[hit]]
        xh = xs[hit]
        eq = at == xh
        if vs.dtype.kind == "f":
            eq |= (at != at) & (xh != xh)
        hit[hit] = eq
    return pos, hit


def _consolidate(v: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values and their summed weights (zero sums dropped)."""
    order = np.argsort(v, kind="stable")
    v, w = v[order], w[order]
    if len(v) > 1:
        head = np.empty(len(v), bool)
        head[0] = True
        nxt, prv = v[1:], v[:-1]
        ne = nxt != prv
        if v.dtype.kind == "f":
            ne &= ~((nxt != nxt) & (prv != prv))
        head[1:] = ne
        starts = np.flatnonzero(head)
        v, w = v[starts], np.add.reduceat(w, starts)
    keep = w != 0
    return (v, w) if keep.all() else (v[keep], w[keep])


def _after(a: Any, b: Any) -> bool:
    """a > b in SQL order (floats: NaN above every number)."""
    if a != a:
        return bool(b == b)
    return bool(a > b)


_EMPTY = {_I8: np.zeros(0, _I8), _F8: np.zeros(0, _F8)}
"""The values and counts of a group without any (never changed in place)."""


class _Nums:
    """One group's numeric values in the epoch's working set: its parts as loaded (their
    keys, and their values and counts joined in order; `bounds` None for one part), the
    epoch's changes as sorted runs, its least and greatest live value, whether it
    changed and which parts the merged changes fell in. Small on purpose: a backfill
    holds one per touched group and aggregate."""

    __slots__ = ("pkeys", "bounds", "v", "c", "runs", "lo", "hi", "dirty", "changed")

    def __init__(self, pkeys: list[Any], blocks: list[bytes], dtype: np.dtype) -> None:
        self.pkeys = pkeys
        self.bounds: np.ndarray | None = None
        if len(blocks) == 1:
            self.v, self.c = _decode(blocks[0])
        elif blocks:
            dec = [_decode(b) for b in blocks]
            self.v = np.concatenate([v for v, _ in dec])
            self.c = np.concatenate([c for _, c in dec])
            self.bounds = np.cumsum([0, *[len(v) for v, _ in dec]])
        else:
            self.v = _EMPTY[dtype]
            self.c = _EMPTY[_I8]
        self.runs: list[tuple[np.ndarray, np.ndarray]] = []
        n = len(self.v)
        self.lo: Any = self.v[0].item() if n else None
        self.hi: Any = self.v[-1].item() if n else None
        self.dirty = False
        self.changed = [False] * max(len(pkeys), 1)

    def part(self, p: int) -> tuple[int, int]:
        """[start, end) of part p in the merged values."""
        if self.bounds is None:
            return 0, len(self.v)
        return int(self.bounds[p]), int(self.bounds[p + 1])

    def counts(self, xs: np.ndarray) -> np.ndarray:
        """The live counts of the values `xs` (sorted, distinct)."""
        pos, hit = _find(self.v, xs)
        out = np.zeros(len(xs), _I8)
        out[hit] = self.c[pos[hit]]
        for rv, rw in self.runs:
            pos, hit = _find(rv, xs)
            out[hit] += rw[pos[hit]]
        return out

    def add(self, xs: np.ndarray, ws: np.ndarray) -> None:
        """Record a change run (sorted distinct values, nonzero weights); a run as large
        as the one before it is merged into it, so the runs stay few."""
        self.dirty = True
        runs = self.runs
        runs.append((xs, ws))
        while len(runs) > 1 and len(runs[-2][0]) <= 2 * len(runs[-1][0]):
            b = runs.pop()
            a = runs.pop()
            runs.append(_consolidate(np.concatenate([a[0], b[0]]), np.concatenate([a[1], b[1]])))

    def compact(self, what: str) -> list[bool]:
        """Merge the runs into the values; returns which loaded parts changed so far (a
        bool per part, by the range each change falls in)."""
        changed = self.changed
        if not self.runs:
            return changed
        if len(self.runs) == 1:
            dv, dw = self.runs[0]
        else:
            dv, dw = _consolidate(
                np.concatenate([r[0] for r in self.runs]), np.concatenate([r[1] for r in self.runs])
            )
        self.runs = []
        if not len(dv):
            return changed
        multi = len(self.pkeys) > 1
        if multi:
            cuts = np.asarray(self.pkeys[1:], self.v.dtype)
            for p in np.unique(np.searchsorted(cuts, dv, side="right")).tolist():
                changed[p] = True
        else:
            changed[0] = True
        v, c = self.v, self.c.copy()
        pos, hit = _find(v, dv)
        c[pos[hit]] += dw[hit]
        ins = ~hit
        if (ins.any() and int(dw[ins].min()) < 0) or (len(c) and int(c.min()) < 0):
            raise _negative(what)
        # the parts' bounds move with the values inserted before and removed within them
        bounds = self.bounds
        if ins.any():
            v = np.insert(v, pos[ins], dv[ins])
            c = np.insert(c, pos[ins], dw[ins])
            if multi:
                bounds = np.concatenate([[0], np.searchsorted(v, cuts), [len(v)]])
        zero = c == 0
        if zero.any():
            keep = ~zero
            if bounds is not None:
                gone = np.concatenate([[0], np.cumsum(zero)])
                bounds = bounds - gone[bounds]
            v, c = v[keep], c[keep]
        self.v, self.c, self.bounds = v, c, bounds
        return changed

    def extremes(self) -> None:
        """lo/hi from the merged values (after `compact`)."""
        n = len(self.v)
        self.lo = self.v[0].item() if n else None
        self.hi = self.v[-1].item() if n else None


class ValueState:
    """One aggregate's per-group value multisets; see the module docstring."""

    def __init__(self, table: StateTable, nk: int, ordered: bool, kind: str, what: str) -> None:
        """`nk`: group key width; `ordered`: report least/greatest values (min/max);
        `kind`: "int", "float" (numeric blocks) or "obj" (tuple blocks); `what` names the
        aggregate in errors."""
        self.table = table
        self.nk = nk
        self.ordered = ordered
        self.kind = kind
        self.what = what
        self.dtype = _F8 if kind == "float" else _I8
        self._checked = False
        self._work: dict[Key, Any] = {}
        self.deferred = hasattr(table, "attach_columns")
        if self.deferred:
            table.attach_columns(self)  # type: ignore[attr-defined]
        self.written_bytes = 0
        """Bytes of blocks this state wrote (a counter for tests and the dashboard)."""

    # -- the older layout ----------------------------------------------------------------
    def convert_legacy(self) -> None:
        """Group a table of the older (group, value) -> count layout into blocks (once,
        on the first step; a disk table flags such a range as `converting`, a resident
        one holds rows of key width `nk + 1` whose value is one count)."""
        if self._checked:
            return
        self._checked = True
        t = self.table
        if getattr(t, "converting", None) is False or not len(t):
            return
        nk = self.nk
        per: dict[Key, dict[Any, int]] = {}
        legacy = True
        for k, v in list(t.items()):
            if len(k) != nk + 1 or len(v) != 1 or not isinstance(v[0], int):
                legacy = False
                break
            per.setdefault(k[:nk], {})[one_nan(k[nk])] = v[0]
        if not legacy or not per:
            return
        t.clear()
        keys: list[Key] = []
        blocks: list[tuple[Any, ...]] = []
        for g, d in per.items():
            keys.append((*g, None))
            if self.kind != "obj":
                vs = np.array(sorted(d, key=float_order if self.kind == "float" else None))
                vs = vs.astype(self.dtype)
                cs = np.array([d[x] for x in vs.tolist()], _I8)
                blocks.append((_encode(vs, cs),))
            else:
                vs_l = list(d)
                if self.ordered:
                    vs_l.sort(key=order_of(vs_l[0], False))
                blocks.append((*vs_l, *[d[x] for x in vs_l]))
        t.put_many(keys, blocks)

    # -- a chunk ---------------------------------------------------------------------------
    def _load(self, groups: list[Key]) -> None:
        """Read the parts of `groups` (not in the working set) into it."""
        rows = self.table.scan_prefixes(groups, **({"spill": False} if self.deferred else {}))
        nk = self.nk
        w: _Nums | _Objs
        for g, parts in zip(groups, rows, strict=True):
            if self.kind == "obj":
                d: dict[Any, int] = {}
                for _, blk in parts:
                    m = len(blk) // 2
                    vs = blk[:m]
                    if any(isinstance(x, float) for x in vs[:1]):
                        vs = tuple(map(one_nan, vs))
                    d.update(zip(vs, blk[m:], strict=True))
                w = _Objs(d, [k[nk] for k, _ in parts])  # type: ignore[index]
            else:
                w = _Nums(
                    [k[nk] for k, _ in parts],  # type: ignore[index]
                    [blk[0] for _, blk in parts],
                    self.dtype,
                )
            self._work[g] = w

    def apply(
        self,
        groups: list[Key],
        bounds: list[int],
        vals: Any,
        dws: Any,
        order: Callable[[Any], Any] | None,
    ) -> tuple[list[Any] | None, list[Any] | None, Any]:
        """Apply one chunk's changes: group `groups[j]` changes the values
        `vals[bounds[j]:bounds[j + 1]]` (distinct, in SQL order; int64/float64 arrays for
        numeric kinds, else lists) by the weights `dws[...]`. Returns each group's least
        and greatest value (min/max; None: no values) and for DISTINCT every value's new
        count aligned with `vals` (an int64 array for numeric kinds, else a list)."""
        work = self._work
        missing = [g for g in groups if g not in work]
        if missing:
            self._load(missing)
        if self.kind == "obj":
            out = self._apply_objs(groups, bounds, vals, dws, order)
        else:
            out = self._apply_nums(groups, bounds, vals, dws)
        if not self.deferred:
            self._write_through()
        return out

    def _apply_nums(
        self, groups: list[Key], bounds: list[int], vals: np.ndarray, dws: np.ndarray
    ) -> tuple[list[Any] | None, list[Any] | None, Any]:
        work = self._work
        ordered = self.ordered
        news = None if ordered else np.empty(len(vals), _I8)
        lows: list[Any] | None = [] if ordered else None
        highs: list[Any] | None = [] if ordered else None
        pos_ws = dws > 0
        for j, g in enumerate(groups):
            a, b = bounds[j], bounds[j + 1]
            dv, dw = vals[a:b], dws[a:b]
            w: _Nums = work[g]
            all_pos = bool(pos_ws[a:b].all())
            if news is not None or not all_pos:
                cs = w.counts(dv) + dw
                if len(cs) and int(cs.min()) < 0:
                    raise _negative(self.what)
                if news is not None:
                    news[a:b] = cs
            w.add(dv, dw)
            if lows is None or highs is None:
                continue
            if all_pos:
                x, y = dv[0].item(), dv[-1].item()
                if w.lo is None or _after(w.lo, x):
                    w.lo = x
                if w.hi is None or _after(y, w.hi):
                    w.hi = y
            else:
                gone = dv[cs == 0]
                lost = False
                if len(gone) and w.lo is not None:
                    _, hit = _find(gone, np.asarray([w.lo, w.hi], gone.dtype))
                    lost = bool(hit.any())
                if lost or w.lo is None:
                    w.compact(self.what)
                    w.extremes()
                else:
                    up = dv[pos_ws[a:b]]
                    if len(up):
                        x, y = up[0].item(), up[-1].item()
                        if _after(w.lo, x):
                            w.lo = x
                        if _after(y, w.hi):
                            w.hi = y
            lows.append(w.lo)
            highs.append(w.hi)
        return lows, highs, news

    def _apply_objs(
        self,
        groups: list[Key],
        bounds: list[int],
        vals: list[Any],
        dws: list[int],
        order: Callable[[Any], Any] | None,
    ) -> tuple[list[Any] | None, list[Any] | None, Any]:
        work = self._work
        ordered = self.ordered
        news: list[int] | None = None if ordered else []
        lows: list[Any] | None = [] if ordered else None
        highs: list[Any] | None = [] if ordered else None
        bad = False
        for j, g in enumerate(groups):
            a, b = bounds[j], bounds[j + 1]
            vs, ws = vals[a:b], dws[a:b]
            w: _Objs = work[g]
            w.dirty = True
            d = w.d
            get = d.get
            cs = [get(v, 0) + x for v, x in zip(vs, ws, strict=True)]
            if news is not None:
                news.extend(cs)
            d.update(zip(vs, cs, strict=True))
            lost = False
            if min(cs) <= 0:
                bad |= min(cs) < 0
                for v, c in zip(vs, cs, strict=True):
                    if c == 0:
                        del d[v]
                        lost |= v is w.lo or v is w.hi or v == w.lo or v == w.hi
            if lows is None or highs is None:
                continue
            if lost or w.lo is None:
                w.extremes(order)
            else:
                up = [v for v, x in zip(vs, ws, strict=True) if x > 0]
                if up:  # the values are in SQL order
                    key = order or _same
                    if key(up[0]) < key(w.lo):
                        w.lo = up[0]
                    if key(up[-1]) > key(w.hi):
                        w.hi = up[-1]
            lows.append(w.lo)
            highs.append(w.hi)
        if bad:
            raise _negative(self.what)
        return lows, highs, news

    # -- the checkpoint: the ColumnOverlay hook of the disk table ---------------------------
    def _rows(self) -> tuple[list[Key], list[tuple[Any, ...] | None]]:
        """The changed parts of every touched group as rows (None: a part to delete)."""
        keys: list[Key] = []
        vals: list[tuple[Any, ...] | None] = []
        nbytes = 0
        for g, w in self._work.items():
            if not w.dirty:
                continue
            if isinstance(w, _Objs):
                d = w.d
                for pk in w.pkeys[1:]:  # a single part (None) per group of this kind
                    keys.append((*g, pk))
                    vals.append(None)
                keys.append((*g, None))
                if not d:
                    vals.append(None)
                    continue
                vs = list(d)
                if self.ordered:
                    vs.sort(key=w.order or _same)
                vals.append((*vs, *map(d.__getitem__, vs)))
                continue
            changed = w.compact(self.what)
            pkeys = w.pkeys or [None]
            for p, pk in enumerate(pkeys):
                if not changed[p]:
                    continue
                a, b = w.part(p)
                n = b - a
                if n == 0:
                    keys.append((*g, pk))
                    vals.append(None)
                    continue
                cuts = [a]
                if n > PART_MAX:
                    cuts = list(range(a, b, PART_TARGET))
                    if b - cuts[-1] < PART_TARGET // 2 and len(cuts) > 1:
                        cuts.pop()
                    if w.v.dtype.kind == "f":  # a part never starts with NaN
                        nan_at = int(np.searchsorted(w.v[a:b], np.nan)) + a
                        cuts = [x for x in cuts if x == a or x < nan_at]
                ends = [*cuts[1:], b]
                if p == 0 and pk is not None:
                    # the first part takes every value below the second's key: it is
                    # keyed None again (its own key was the least value it once held)
                    keys.append((*g, pk))
                    vals.append(None)
                    pk = None
                for i, (x, y) in enumerate(zip(cuts, ends, strict=True)):
                    blk = _encode(w.v[x:y], w.c[x:y])
                    nbytes += len(blk)
                    keys.append((*g, pk if i == 0 else w.v[x].item()))
                    vals.append((blk,))
        self.written_bytes += nbytes
        return keys, vals

    def _write_through(self) -> None:
        keys, vals = self._rows()
        self._work.clear()
        live = [(k, v) for k, v in zip(keys, vals, strict=True) if v is not None]
        self.table.put_many([k for k, _ in live], [v for _, v in live])
        dead = [k for k, v in zip(keys, vals, strict=True) if v is None]
        if dead:
            self.table.delete_many(dead)

    @property
    def dirty_count(self) -> int:
        return sum(1 for w in self._work.values() if w.dirty)

    def len_delta(self) -> int:
        """Rows the pending changes add: they are first handed to the table's overlay
        (`spill`, through an empty write), which its length then counts."""
        if self.dirty_count:
            self.table.put_many([], [])
        return 0

    def write_columns(self, batch: WriteBatchLike) -> int:
        keys, vals = self.spill()
        if keys:
            self.table.write_rows(batch, keys, vals)  # type: ignore[attr-defined]
        return len(keys)

    def spill(self) -> tuple[list[Key], list[tuple[Any, ...] | None]]:
        """Every changed part as a row (None: deleted); the working set is dropped (the
        table's overlay holds the rows from then on, and the next chunk reads them)."""
        keys, vals = self._rows()
        self._work.clear()
        return keys, vals

    def reset(self) -> None:
        self._work.clear()

    def shadow_rows(self) -> int:
        return 0


def _same(v: Any) -> Any:
    return v


class _Objs:
    """One group's values of a non-numeric argument in the epoch's working set: a dict
    value -> count, its least and greatest value, and whether it changed."""

    __slots__ = ("d", "pkeys", "lo", "hi", "dirty", "order")

    def __init__(self, d: dict[Any, int], pkeys: list[Any]) -> None:
        self.d = d
        self.pkeys = pkeys
        self.order: Callable[[Any], Any] | None = None
        self.dirty = False
        self.lo: Any = None
        self.hi: Any = None
        if d:
            self.order = order_of(next(iter(d)), isinstance(next(iter(d)), float))
            self.extremes(self.order)

    def extremes(self, order: Callable[[Any], Any] | None) -> None:
        if order is not None:
            self.order = order
        d = self.d
        if not d:
            self.lo = self.hi = None
        elif self.order is None:
            self.lo, self.hi = min(d), max(d)
        else:
            self.lo, self.hi = min(d, key=self.order), max(d, key=self.order)


def pack(counts: dict[Any, int]) -> bytes:
    """A numeric block of values -> counts (values in order), for tests."""
    vs = sorted(counts, key=float_order if any(isinstance(v, float) for v in counts) else None)
    arr = np.asarray(vs)
    return _encode(arr, np.asarray([counts[v] for v in vs], _I8))


def unpack(block: bytes | tuple[Any, ...]) -> tuple[list[Any], list[int]]:
    """A block's values and counts (numeric bytes or a tuple block), for tests."""
    if not isinstance(block, bytes):
        m = len(block) // 2
        return list(block[:m]), list(block[m:])
    vs, cs = _decode(block)
    return vs.tolist(), cs.tolist()
