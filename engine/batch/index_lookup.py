"""Index lookups over an index's committed rows (see engine.plan.index_scan).

An index's rows are a materialized view's rows: immutable Arrow segments with live
masks (`SegmentSnapshot.parts`). A lookup needs them ordered by the index key, so each
segment's key column is sorted once (`np.argsort`, NULLs left out since no comparison
with a constant matches NULL) and the order kept in a process-wide cache keyed by the
segment, which stays right forever because a segment never changes: later epochs add
segments (sorted on their first lookup, small) or replace a segment's live mask (applied
to the found rows). A lookup is then one binary search per bound per segment
(`np.searchsorted`), the found row numbers filtered by the pin's masks and taken, so
its cost follows the rows found and the segment count, not the index's size.

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
    """One segment's key column sorted: `values[i]` is the key of row `perm[i]`."""

    __slots__ = ("batch", "values", "perm")

    def __init__(self, batch: pa.RecordBatch, col: int) -> None:
        self.batch = batch  # keeps the segment alive while its id is a cache key
        arr = batch.column(col)
        if arr.null_count:
            rows = np.flatnonzero(np.asarray(arr.is_valid()))
            arr = arr.take(pa.array(rows))
        else:
            rows = np.arange(len(arr), dtype=np.int64)
        vals = arr.to_numpy(zero_copy_only=False)
        order = np.argsort(vals, kind="stable")
        self.values = vals[order]
        self.perm = rows[order]


_cache: OrderedDict[tuple[int, int], _Sorted] = OrderedDict()
_cached_rows = 0
_lock = threading.Lock()


def _sorted(batch: pa.RecordBatch, col: int) -> _Sorted:
    global _cached_rows
    key = (id(batch), col)
    with _lock:
        s = _cache.get(key)
        if s is not None and s.batch is batch:
            _cache.move_to_end(key)
            return s
    s = _Sorted(batch, col)  # outside the lock: another query may sort another segment
    with _lock:
        if key not in _cache:
            _cache[key] = s
            _cached_rows += len(s.perm)
            while _cached_rows > CACHE_ROWS and len(_cache) > 1:
                _, old = _cache.popitem(last=False)
                _cached_rows -= len(old.perm)
    return s


def _np_value(value: Any, typ: pa.DataType) -> Any:
    """A constant as numpy compares it with the sorted column's values."""
    return pa.array([value], type=typ).to_numpy(zero_copy_only=False)[0]


def lookup(pin: Any, key: int, bounds: list[tuple[str, Any]], columns: list[int]) -> pa.Table:
    """The live rows of `pin` whose column `key` satisfies every `(op, value)` bound
    (a None value: no rows),
    as columns `columns` of the pinned rows (row order unspecified)."""
    parts = getattr(pin, "parts", None)
    if any(v is None for _, v in bounds):  # a comparison with NULL matches no row
        schema = getattr(pin, "schema", None) or pin.table().schema
        return pa.schema([schema.field(c) for c in columns]).empty_table()
    if parts is None:  # not segments (an empty relation): filter the table
        return _filter(pin.table(), key, bounds).select(columns)
    typ = pin.schema.field(key).type
    targets = [(op, _np_value(v, typ)) for op, v in bounds]
    out = []
    for batch, mask, live in parts:
        if not live:
            continue
        s = _sorted(batch, key)
        lo, hi = 0, len(s.values)
        for op, x in targets:
            if op in ("=", ">="):
                lo = max(lo, int(np.searchsorted(s.values, x, "left")))
            elif op == ">":
                lo = max(lo, int(np.searchsorted(s.values, x, "right")))
            if op in ("=", "<="):
                hi = min(hi, int(np.searchsorted(s.values, x, "right")))
            elif op == "<":
                hi = min(hi, int(np.searchsorted(s.values, x, "left")))
        if lo >= hi:
            continue
        rows = s.perm[lo:hi]
        if mask is not None:
            rows = rows[mask[rows]]
        if len(rows):
            out.append(batch.take(pa.array(np.sort(rows))).select(columns))
    schema = pa.schema([pin.schema.field(c) for c in columns])
    return pa.Table.from_batches(out, schema)


_PC = {"=": pc.equal, "<": pc.less, "<=": pc.less_equal, ">": pc.greater, ">=": pc.greater_equal}


def _filter(t: pa.Table, key: int, bounds: list[tuple[str, Any]]) -> pa.Table:
    for op, v in bounds:
        t = t.filter(_PC[op](t.column(key), pa.scalar(v, t.schema.field(key).type)))
    return t
