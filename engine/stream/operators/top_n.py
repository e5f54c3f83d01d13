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
non-order columns were updated in place.

Per step (state touched once per changed group):

1. the epoch's delta is consolidated by full row (net Z-set weight) when it contains
   deletes; sort keys are encoded column by column into plain comparable Python values
   (NULL placement, DESC and NaN handled in the encoding, Arrow kernels where possible);
2. rows are bucketed by group; for each changed group the current window is read,
   the group's deletes and then inserts are applied to its in-memory sorted index and to
   the `rows` table, and the window is read again;
3. the old and new windows are diffed (as multisets of index elements) into output rows.
   Deleting a row of the window thus brings in the next row automatically: every row of
   the group stays indexed, not only the window.

State: table `rows`, key `(*group, *order_by values, *ident) -> (*row, count)`, where
`ident` is the stream key (or every column when the stream key is empty; `count` then
records identical rows, which occupy `count` consecutive positions). The per-run index
`group -> _SortedList` of `(encoded sort key + encoded ident, state key)` elements is
rebuilt from the table on the first step after construction.

Insert-only epochs take a fast path: each group with at least `offset + limit` rows
remembers its `offset + limit`-th element; a new row that does not sort before it can
never enter the window (inserts only push that element down), so it is written to the
table in bulk and appended, unsorted, to the group's pending elements without a window
diff. Pending elements are merged into the sorted index only when the group next sees
a delete (or all its elements are read).

Cost: O(log group size) per changed row plus O(offset + limit) per changed group per
epoch; O(1) per inserted row that falls below a full window. All rows of every group
stay in memory (no append-only truncation yet).
"""

from __future__ import annotations

import logging
from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Iterable
from functools import total_ordering
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.chunk import Op, StreamChunk
from engine.errors import InternalError, not_supported
from engine.state import codec
from engine.state.table import StateTable
from engine.stream.operator import Operator
from engine.stream.operators.base import StateAllocator
from engine.stream.operators.frames import (
    batch_from_rows,
    consolidate,
    ops_array,
)
from engine.stream.operators.hash_join import canonical_nan, hashable_values
from engine.types import BIGINT, Field, SqlType, TypeKind

log = logging.getLogger(__name__)

Key = tuple[Any, ...]
Elem = tuple[Key, Key]  # (encoded sort key + encoded ident, state key)
OrderSpec = tuple[int, bool, bool]  # (column, desc, nulls_first)

_INVERT = bytes(range(255, -1, -1))


class _SortedList:
    """A sorted multiset as a list of bounded sorted sublists (bisect within and across).

    Inserting into or removing from one long Python list moves O(n) pointers; bounded
    sublists keep every change O(log n + _LOAD). `head(k)` walks sublists from the start.
    """

    __slots__ = ("_lists", "_maxes", "_len", "pending")
    _LOAD = 512

    def __init__(self) -> None:
        self._lists: list[list[Elem]] = []
        self._maxes: list[Elem] = []
        self._len = 0
        # elements known not to be among the first `hi` (see `TopNOp._insert_fast`),
        # kept unsorted until a removal or a full `head` needs them
        self.pending: list[Elem] = []

    @classmethod
    def from_sorted(cls, items: list[Elem]) -> _SortedList:
        sl = cls()
        step = cls._LOAD
        sl._lists = [items[i : i + step] for i in range(0, len(items), step)]
        sl._maxes = [s[-1] for s in sl._lists]
        sl._len = len(items)
        return sl

    def __len__(self) -> int:
        return self._len + len(self.pending)

    def _flush(self) -> None:
        """Merge the pending elements into the sorted sublists."""
        pend = self.pending
        self.pending = []
        if len(pend) * 8 > self._len:
            merged = sorted([x for sub in self._lists for x in sub] + pend)
            step = self._LOAD
            self._lists = [merged[i : i + step] for i in range(0, len(merged), step)]
            self._maxes = [sub[-1] for sub in self._lists]
            self._len = len(merged)
        else:
            for x in pend:
                self.add(x)

    def at(self, i: int) -> Elem | None:
        """The i-th element of the sorted part (pending ones excluded), or None."""
        if i >= self._len:
            return None
        for sub in self._lists:
            if i < len(sub):
                return sub[i]
            i -= len(sub)
        return None

    def add(self, x: Elem) -> None:
        lists, maxes = self._lists, self._maxes
        self._len += 1
        if not maxes:
            lists.append([x])
            maxes.append(x)
            return
        pos = bisect_left(maxes, x)
        if pos == len(maxes):
            pos -= 1
            lists[pos].append(x)
            maxes[pos] = x
        else:
            insort(lists[pos], x)
        sub = lists[pos]
        if len(sub) > 2 * self._LOAD:
            half = sub[self._LOAD :]
            del sub[self._LOAD :]
            maxes[pos] = sub[-1]
            lists.insert(pos + 1, half)
            maxes.insert(pos + 1, half[-1])

    def remove(self, x: Elem) -> bool:
        if self.pending:
            self._flush()
        lists, maxes = self._lists, self._maxes
        pos = bisect_left(maxes, x)
        if pos == len(maxes):
            return False
        sub = lists[pos]
        i = bisect_left(sub, x)
        if i == len(sub) or sub[i] != x:
            return False
        del sub[i]
        self._len -= 1
        if not sub:
            del lists[pos]
            del maxes[pos]
        elif i == len(sub):
            maxes[pos] = sub[-1]
        return True

    def head(self, k: int | None) -> list[Elem]:
        """The first k elements (all when k is None).

        Pending elements are never among the first `hi` (the caller's bound), so they
        are merged in only when all elements are asked for.
        """
        if k is None and self.pending:
            self._flush()
        out: list[Elem] = []
        for sub in self._lists:
            if k is not None and len(out) + len(sub) >= k:
                out.extend(sub[: k - len(out)])
                break
            out.extend(sub)
        return out


@total_ordering
class _Desc:
    """Reverses the order of a value with no cheaper order-inverting encoding (bytea)."""

    __slots__ = ("v",)

    def __init__(self, v: Any) -> None:
        self.v = v

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.v == other.v

    def __lt__(self, other: _Desc) -> bool:
        return bool(other.v < self.v)

    def __hash__(self) -> int:
        return hash(self.v)


def _sort_parts(arr: pa.Array, t: SqlType, desc: bool, nulls_first: bool) -> list[list[Any]]:
    """Comparable Python values for one sort column: a NULL-rank list then value lists."""
    isnull = pc.is_null(arr).to_numpy(zero_copy_only=False)
    nrank = (~isnull if nulls_first else isnull).astype(np.int8).tolist()
    k = t.kind
    if t.is_float:
        a = arr.to_numpy(zero_copy_only=False).astype(np.float64)
        nan = np.isnan(a)
        flag = (nan & ~isnull).astype(np.int8)  # NaN sorts above every number
        vals = np.where(nan, 0.0, a)
        if desc:
            flag, vals = -flag, -vals
        return [nrank, flag.tolist(), vals.tolist()]
    if k in (TypeKind.DATE, TypeKind.TIME, TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ):
        ints = arr.cast(pa.int32() if k is TypeKind.DATE else pa.int64())
        v = pc.fill_null(ints, 0).to_numpy(zero_copy_only=False).astype(np.int64)
        return [nrank, (-v if desc else v).tolist()]
    values = arr.to_pylist()
    sign = -1 if desc else 1
    if t.is_integer or k in (TypeKind.NUMERIC, TypeKind.BOOLEAN):
        return [nrank, [0 if v is None else sign * v for v in values]]
    if k is TypeKind.INTERVAL:  # PostgreSQL compares intervals as 30-day months
        return [
            nrank,
            [
                0
                if v is None
                else sign * ((v.months * 30 + v.days) * 86_400_000_000_000 + v.nanoseconds)
                for v in values
            ],
        ]
    if k in (TypeKind.VARCHAR, TypeKind.JSONB):
        if not desc:
            return [nrank, ["" if v is None else v for v in values]]
        # UTF-8 byte order is code point order; inverting bytes and ending with 0xff
        # (above every inverted byte of a NUL-free string) reverses it
        return [
            nrank,
            [b"" if v is None else v.encode().translate(_INVERT) + b"\xff" for v in values],
        ]
    if k is TypeKind.BYTEA:
        return [nrank, [b"" if v is None else (_Desc(v) if desc else v) for v in values]]
    raise not_supported(
        f"ORDER BY a value of type {t.display} in a streaming top-N",
        hint="Order by a scalar column or expression instead.",
    )


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
        self._ident = list(stream_key) or list(range(n))
        self.schema = list(input_schema)
        if with_rank_column:
            self.schema.append(Field(rank_name, BIGINT))
        if stream_key:
            self.stream_key = list(stream_key)
        else:
            self.stream_key = list(range(len(self.schema)))
        self._rows = alloc.table("rows")
        self._groups: dict[Key, _SortedList] | None = None
        self._hi = None if limit is None else offset + limit
        # group -> its `hi`-th element while the group has at least `hi` (sorted)
        # elements: an inserted element not below it cannot enter the window
        self._thr: dict[Key, Elem] = {}

    def state_tables(self) -> list[StateTable]:
        return [self._rows]

    def explain(self) -> str:
        def one(c: int, d: bool, nf: bool) -> str:
            return f"${c} {'DESC' if d else 'ASC'}{' NULLS FIRST' if nf else ' NULLS LAST'}"

        order = ", ".join(one(*o) for o in self.order_by)
        name = "StreamGroupTopN" if self.group_keys else "StreamTopN"
        extra = ""
        if self.group_keys:
            extra = ", group_key: [" + ", ".join(f"${g}" for g in self.group_keys) + "]"
        if self.with_rank_column:
            extra += ", output_rank"
        return f"{name} {{ order: [{order}], limit: {self.limit}, offset: {self.offset}{extra} }}"

    # -- encoding -----------------------------------------------------------------------
    def _encode(self, batch: pa.RecordBatch) -> list[Key]:
        """Per row: the comparable sort key followed by the ident tie-breaker."""
        parts: list[list[Any]] = []
        for c, desc, nf in self.order_by:
            parts += _sort_parts(batch.column(c), self.input_schema[c].type, desc, nf)
        for c in self._ident:
            t = self.input_schema[c].type
            if t.kind is TypeKind.LIST:  # no SQL order needed, only a deterministic one
                parts.append([codec.encode_key((v,)) for v in hashable_values(batch.column(c))])
            else:
                parts += _sort_parts(batch.column(c), t, False, False)
        return list(zip(*parts, strict=True))

    def _state_keys(self, cols: list[list[Any]], n: int) -> list[Key]:
        kc = [cols[g] for g in self.group_keys]
        kc += [cols[c] for c, _, _ in self.order_by]
        kc += [cols[i] for i in self._ident]
        return _tuples(kc, n)

    # -- step ---------------------------------------------------------------------------
    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        chunk = inputs[0]
        if chunk is None or len(chunk) == 0:
            return None
        if self._groups is None:
            self._build_index()
        assert self._groups is not None
        batch, w = consolidate(chunk)
        if batch.num_rows == 0:
            return None
        n = batch.num_rows
        enc = self._encode(batch)
        cols = [hashable_values(c) for c in batch.columns]
        rows = _tuples(cols, n)
        skeys = self._state_keys(cols, n)
        gkeys = _tuples([cols[g] for g in self.group_keys], n)
        ws = w.tolist()
        todo: Iterable[int] = range(n)
        if self._hi and (w == 1).all():
            todo = self._insert_fast(gkeys, enc, rows, skeys)
        by_group: dict[Key, list[int]] = {}
        for i in todo:
            g = gkeys[i]
            lst = by_group.get(g)
            if lst is None:
                by_group[g] = [i]
            else:
                lst.append(i)
        ops: list[int] = []
        out: list[Key] = []
        for g, idxs in by_group.items():
            self._apply_group(g, idxs, ws, enc, rows, skeys, ops, out)
        if not ops:
            return None
        return StreamChunk(ops_array(ops), batch_from_rows(self.schema, out))

    def _insert_fast(
        self, gkeys: list[Key], enc: list[Key], rows: list[Key], skeys: list[Key]
    ) -> list[int]:
        """Insert-only epoch: store rows that cannot enter their group's window in bulk.

        A new row whose element is not below its group's `hi`-th element stays outside
        the window (inserts only push that element down), so it is only written to the
        table and appended to the group's pending elements, with no window diff. Returns
        the rows left for the general path (groups without a full window, rows that
        may enter it, rows whose state key is already stored or repeated).
        """
        assert self._groups is not None
        thr_get = self._thr.get
        groups = self._groups
        data = self._rows.data
        seen: set[Key] = set()
        rest: list[int] = []
        keys: list[Key] = []
        vals: list[Key] = []
        for i, (g, e, sk) in enumerate(zip(gkeys, enc, skeys)):
            t = thr_get(g)
            if t is None or sk in seen or sk in data:
                rest.append(i)
                continue
            elem = (e, sk)
            if elem < t:
                rest.append(i)
                continue
            seen.add(sk)
            groups[g].pending.append(elem)
            keys.append(sk)
            vals.append(rows[i] + (1,))
        if keys:
            self._rows.put_many(keys, vals)
        return rest

    def _apply_group(
        self,
        g: Key,
        idxs: list[int],
        ws: list[int],
        enc: list[Key],
        rows: list[Key],
        skeys: list[Key],
        ops: list[int],
        out: list[Key],
    ) -> None:
        assert self._groups is not None
        sl = self._groups.get(g)
        if sl is None:
            sl = self._groups[g] = _SortedList()
        off, hi = self.offset, self._hi
        old = sl.head(hi)[off:]
        data = self._rows.data
        table = self._rows
        gone: dict[Key, Key] = {}
        changed: set[Key] = set()
        for i in sorted(idxs, key=lambda j: ws[j] > 0):  # deletes first
            wi, sk = ws[i], skeys[i]
            elem = (enc[i], sk)
            v = data.get(sk)
            if wi < 0:
                if v is None or v[-1] + wi < 0:
                    raise InternalError(
                        "top-n state row count became negative",
                        detail=f"A row of {self.explain()} was deleted but never inserted.",
                    )
                for _ in range(-wi):
                    sl.remove(elem)
                c = v[-1] + wi
                if c:
                    table.put(sk, v[:-1] + (c,))
                else:
                    gone[sk] = v[:-1]
                    table.delete(sk)
            else:
                if v is None:
                    c = wi
                    if sk in gone and gone[sk] != rows[i]:
                        changed.add(sk)
                else:
                    c = v[-1] + wi
                table.put(sk, rows[i] + (c,))
                for _ in range(wi):
                    sl.add(elem)
        if not len(sl):
            del self._groups[g]
        if hi:
            t = sl.at(hi - 1)
            if t is None:
                self._thr.pop(g, None)
            else:
                self._thr[g] = t
        new = sl.head(hi)[off:]
        if old == new and not changed:
            return

        def old_row(sk: Key) -> Key:
            r = gone.get(sk)
            return data[sk][:-1] if r is None else r

        def new_row(sk: Key) -> Key:
            return data[sk][:-1]

        if self.with_rank_column:
            self._diff_ranked(old, new, changed, old_row, new_row, ops, out)
            return
        oc, nc = Counter(old), Counter(new)
        for e, k in oc.items():
            m = nc.get(e, 0)
            if k > m:
                r = old_row(e[1])
                ops.extend([Op.DELETE] * (k - m))
                out.extend([r] * (k - m))
            if m and e[1] in changed:
                for _ in range(min(k, m)):
                    ops += (Op.UPDATE_DELETE, Op.UPDATE_INSERT)
                    out += (old_row(e[1]), new_row(e[1]))
        for e, m in nc.items():
            k = oc.get(e, 0)
            if m > k:
                ops.extend([Op.INSERT] * (m - k))
                out.extend([new_row(e[1])] * (m - k))

    def _diff_ranked(
        self,
        old: list[Elem],
        new: list[Elem],
        changed: set[Key],
        old_row: Any,
        new_row: Any,
        ops: list[int],
        out: list[Key],
    ) -> None:
        base = self.offset + 1
        opos = _positions(old, base)
        npos = _positions(new, base)
        for e in dict.fromkeys([*old, *new]):
            ro = opos.get(e, [])
            rn = npos.get(e, [])
            sk = e[1]
            for j in range(max(len(ro), len(rn))):
                if j < len(ro) and j < len(rn):
                    if ro[j] != rn[j] or sk in changed:
                        ops += (Op.UPDATE_DELETE, Op.UPDATE_INSERT)
                        out += (old_row(sk) + (ro[j],), new_row(sk) + (rn[j],))
                elif j < len(ro):
                    ops.append(Op.DELETE)
                    out.append(old_row(sk) + (ro[j],))
                else:
                    ops.append(Op.INSERT)
                    out.append(new_row(sk) + (rn[j],))

    def _build_index(self) -> None:
        """Rebuild every group's sorted index from the `rows` table."""
        canonical_nan(self._rows)
        items = list(self._rows.items())
        groups: dict[Key, _SortedList] = {}
        if items:
            values = [v for _, v in items]
            batch = batch_from_rows(self.input_schema, [v[:-1] for v in values])
            enc = self._encode(batch)
            ng = len(self.group_keys)
            elems: dict[Key, list[Elem]] = {}
            for (k, v), e in zip(items, enc, strict=True):
                lst = elems.setdefault(k[:ng], [])
                lst.extend([(e, k)] * v[-1])
            for g, lst in elems.items():
                lst.sort()
                groups[g] = _SortedList.from_sorted(lst)
            log.debug("%s: rebuilt %d group indexes", self.explain(), len(groups))
        self._groups = groups
        self._thr = {}


def _positions(elems: Iterable[Elem], base: int) -> dict[Elem, list[int]]:
    pos: dict[Elem, list[int]] = {}
    for i, e in enumerate(elems):
        pos.setdefault(e, []).append(base + i)
    return pos


def _tuples(columns: list[list[Any]], n: int) -> list[Key]:
    if not columns:
        return [()] * n
    return list(zip(*columns, strict=True))
