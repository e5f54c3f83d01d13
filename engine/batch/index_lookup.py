"""Index lookups over an index's committed rows (see engine.plan.index_scan).

An index's rows are a materialized view's rows: immutable Arrow segments with live
masks (`SegmentSnapshot.parts`). A lookup needs them ordered by the searched index
columns, so each segment is sorted once by them (`np.lexsort`, rows with a NULL in
them left out since no comparison with a constant matches NULL) and the order kept in a
process-wide cache keyed by (segment, columns), which stays right forever because a
segment never changes: later epochs add segments (sorted on their first lookup, small)
or replace a segment's live mask (applied to the found rows). A lookup is then one
binary search per bound per segment (`np.searchsorted`; a multi-column lookup searches
each column inside the range of the equalities before it), the found row numbers
filtered by the pin's masks and taken, so its cost follows the rows found and the
segment count, not the index's size.

A non-covering index (the query needs columns the index does not store) finds the
primary keys of the matching rows, then `fetch` reads those rows of the indexed table
or view the same way: its segments sorted by the first primary-key column, all the keys
searched at once per segment.

The cache holds at most `CACHE_ROWS` sorted rows (least recently used segments go
first); an evicted segment is sorted again by the next lookup that needs it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

CACHE_ROWS = 64_000_000


class _Sorted:
    """One segment sorted by some key columns (lexicographically, first column first):
    `values[j][i]` is column j's value of row `perm[i]`; rows with a NULL in any of them
    are left out (no comparison with a constant matches NULL)."""

    __slots__ = ("batch", "values", "perm")

    def __init__(self, batch: pa.RecordBatch, cols: tuple[int, ...]) -> None:
        self.batch = batch  # keeps the segment alive while its id is a cache key
        valid = np.ones(batch.num_rows, dtype=bool)
        for c in cols:
            arr = batch.column(c)
            if arr.null_count:
                valid &= np.asarray(arr.is_valid())
        rows = np.flatnonzero(valid)
        taken = None if len(rows) == batch.num_rows else pa.array(rows)
        vals = []
        for c in cols:
            arr = batch.column(c) if taken is None else batch.column(c).take(taken)
            vals.append(arr.to_numpy(zero_copy_only=False))
        order = (
            np.lexsort(tuple(reversed(vals)))
            if len(vals) > 1
            else np.argsort(vals[0], kind="stable")
        )
        self.values = [v[order] for v in vals]
        self.perm = rows[order]


_cache: OrderedDict[tuple[int, tuple[int, ...]], _Sorted] = OrderedDict()
_cached_rows = 0
_lock = threading.Lock()


def _sorted(batch: pa.RecordBatch, cols: tuple[int, ...]) -> _Sorted:
    global _cached_rows
    key = (id(batch), cols)
    with _lock:
        s = _cache.get(key)
        if s is not None and s.batch is batch:
            _cache.move_to_end(key)
            return s
    s = _Sorted(batch, cols)  # outside the lock: another query may sort another segment
    with _lock:
        if key not in _cache:
            _cache[key] = s
            _cached_rows += len(s.perm) * len(cols)
            while _cached_rows > CACHE_ROWS and len(_cache) > 1:
                (_, old_cols), old = _cache.popitem(last=False)
                _cached_rows -= len(old.perm) * len(old_cols)
    return s


def _np_value(value: Any, typ: pa.DataType) -> Any:
    """A constant as numpy compares it with the sorted column's values."""
    return pa.array([value], type=typ).to_numpy(zero_copy_only=False)[0]


def _narrow(values: np.ndarray, lo: int, hi: int, op: str, x: Any) -> tuple[int, int]:
    """The part of `values[lo:hi]` (sorted) where `value op x` holds."""
    part = values[lo:hi]
    if op in ("=", ">="):
        lo2 = lo + int(np.searchsorted(part, x, "left"))
    elif op == ">":
        lo2 = lo + int(np.searchsorted(part, x, "right"))
    else:
        lo2 = lo
    if op in ("=", "<="):
        hi2 = lo + int(np.searchsorted(part, x, "right"))
    elif op == "<":
        hi2 = lo + int(np.searchsorted(part, x, "left"))
    else:
        hi2 = hi
    return lo2, hi2


def lookup(
    pin: Any, keys: list[int], bounds: list[tuple[int, str, Any]], columns: list[int]
) -> pa.Table:
    """The live rows of `pin` within `bounds`, as columns `columns` of the pinned rows
    (row order unspecified). `keys` are the searched columns, in the index's order;
    a bound `(j, op, value)` constrains column `keys[j]` (a None value: no rows). Every
    column but the last one searched must be bounded by `=` (a prefix of equalities),
    so one sort by `keys` answers each level with binary searches inside the previous
    level's range."""
    if any(v is None for _, _, v in bounds):  # a comparison with NULL matches no row
        schema = getattr(pin, "schema", None) or pin.table().schema
        return pa.schema([schema.field(c) for c in columns]).empty_table()
    parts = getattr(pin, "parts", None)
    if parts is None:  # not segments (an empty relation): filter the table
        return _filter(pin.table(), keys, bounds).select(columns)
    used = tuple(keys[: 1 + max(j for j, _, _ in bounds)]) if bounds else tuple(keys[:1])
    targets = [(j, op, _np_value(v, pin.schema.field(keys[j]).type)) for j, op, v in bounds]
    out = []
    for batch, mask, live in parts:
        if not live:
            continue
        s = _sorted(batch, used)
        lo, hi = 0, len(s.perm)
        for j in range(len(used)):
            for jj, op, x in targets:
                if jj == j and lo < hi:
                    lo, hi = _narrow(s.values[j], lo, hi, op, x)
        if lo >= hi:
            continue
        rows = s.perm[lo:hi]
        if mask is not None:
            rows = rows[mask[rows]]
        if len(rows):
            out.append(batch.take(pa.array(np.sort(rows))).select(columns))
    schema = pa.schema([pin.schema.field(c) for c in columns])
    return pa.Table.from_batches(out, schema)


def fetch(pin: Any, key_cols: list[int], keys: pa.Table) -> pa.Table:
    """The live rows of `pin` (all columns) whose primary key `key_cols` is a row of
    `keys` (distinct key tuples, e.g. the keys an index lookup found): a non-covering
    index's second step. Per segment, one vectorised binary search of all the keys in
    the segment sorted by the first key column (cached like the index's sorts); a
    composite key's other columns are matched exactly with a join of the candidates."""
    schema = pin.schema if getattr(pin, "parts", None) is not None else pin.table().schema
    if keys.num_rows == 0:
        return schema.empty_table()
    parts = getattr(pin, "parts", None)
    if parts is None:
        return _join_keys(pin.table(), key_cols, keys)
    first = keys.column(0).combine_chunks()
    want = np.unique(first.to_numpy(zero_copy_only=False))
    out = []
    for batch, mask, live in parts:
        if not live:
            continue
        s = _sorted(batch, (key_cols[0],))
        lo = np.searchsorted(s.values[0], want, "left")
        hi = np.searchsorted(s.values[0], want, "right")
        n = hi - lo
        total = int(n.sum())
        if not total:
            continue
        starts = np.repeat(lo - (np.cumsum(n) - n), n)
        rows = s.perm[starts + np.arange(total)]
        if mask is not None:
            rows = rows[mask[rows]]
        if len(rows):
            out.append(batch.take(pa.array(np.sort(rows))))
    found = pa.Table.from_batches(out, schema)
    if len(key_cols) > 1 and found.num_rows:
        found = _join_keys(found, key_cols, keys)
    return found


def _join_keys(t: pa.Table, key_cols: list[int], keys: pa.Table) -> pa.Table:
    """Rows of `t` whose `key_cols` equal a row of `keys` (an inner join, t's columns)."""
    names = [f"__k{i}" for i in range(len(key_cols))]
    probe = pa.table(dict(zip(names, keys.columns, strict=True)))
    base = t.rename_columns([f"__c{i}" for i in range(t.num_columns)])
    base = base.append_column("__pos", pa.array(np.arange(t.num_rows, dtype=np.int64)))
    joined = base.join(probe, [f"__c{c}" for c in key_cols], names, join_type="inner")
    pos = pc.sort_indices(joined.column("__pos"))
    return t.take(joined.column("__pos").take(pos))


_PC = {"=": pc.equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater, ">=": pc.greater_equal}


def _filter(t: pa.Table, keys: list[int], bounds: list[tuple[int, str, Any]]) -> pa.Table:
    for j, op, v in bounds:
        col = keys[j]
        t = t.filter(_PC[op](t.column(col), pa.scalar(v, t.schema.field(col).type)))
    return t
