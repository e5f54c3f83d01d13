"""Sort keys for values Arrow cannot order itself, in PostgreSQL's order.

Arrow's `sort_indices` / `rank` order primitive columns only. ORDER BY (and window / ordered
aggregate ORDER BY) over an interval or an array column needs a stand-in column that Arrow can
order and that sorts the rows exactly as PostgreSQL does:

- interval: an approximate total (30-day months, 24-hour days), as PostgreSQL's
  `interval_cmp` compares;
- float with NaN: a dense rank with NaN above +Infinity (Arrow keeps NaN last in both
  directions; PostgreSQL's NaN is the greatest value, first in a descending sort);
- array: a dense rank of the arrays, compared element by element (NULL elements after every
  non-NULL one), and where one array is a prefix of the other, the shorter one first
  (PostgreSQL's `array_cmp`). Nested arrays rank their inner arrays first, so any depth works.

`sortable(col)` returns the column itself when Arrow can already order it, otherwise an int64 /
float64 array of the same length with NULL exactly where `col` is NULL. Callers keep their own
NULL placement (a separate null flag key), so the stand-in only has to order the non-NULL rows.
The work is vectorized (one rank over the flattened elements, one lexsort over an n x max-length
code matrix); nothing runs per row in Python.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_NANOS_PER_DAY = 86_400_000_000_000
_MDN = np.dtype([("m", "<i4"), ("d", "<i4"), ("n", "<i8")])


def sortable(col: pa.ChunkedArray | pa.Array) -> Any:
    """`col` itself when Arrow orders it as PostgreSQL does, else an orderable stand-in."""
    t = col.type
    if pa.types.is_interval(t):
        return _interval_key(_combined(col))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _list_rank(_combined(col))
    if pa.types.is_floating(t) and pc.any(pc.is_nan(col)).as_py():
        return _float_rank(_combined(col))
    return col


def _float_rank(a: pa.Array) -> pa.Array:
    """Dense rank (int64) of floats with NaN above +Infinity (PostgreSQL's float order);
    Arrow places NaN at the end whatever the direction, so a descending sort would put it
    last instead of first. NULL stays NULL."""
    codes = pc.rank(a, sort_keys="ascending", tiebreaker="dense")  # NaN, then NULL last
    return pa.array(np.asarray(codes, dtype=np.int64), pa.int64(), mask=np.asarray(a.is_null()))


def _combined(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        return col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
    return col


def _interval_key(a: pa.Array) -> pa.Array:
    """month_day_nano -> float64 total nanoseconds (months as 30 days), read off the buffer."""
    buf = a.buffers()[1]
    rec = np.frombuffer(buf, dtype=_MDN, count=a.offset + len(a))[a.offset :] if buf else None
    if rec is None:
        return pa.nulls(len(a), pa.float64())
    total = (rec["m"].astype(np.float64) * 30 + rec["d"]) * _NANOS_PER_DAY + rec["n"]
    return pa.array(total, pa.float64(), mask=np.asarray(a.is_null()))


def _list_rank(a: pa.Array) -> pa.Array:
    """Dense rank (int64) of each array in PostgreSQL's array order; NULL stays NULL."""
    n = len(a)
    is_null = np.asarray(a.is_null())
    lengths = np.asarray(pc.fill_null(pc.list_value_length(a), 0).to_numpy(), dtype=np.int64)
    lengths[is_null] = 0
    width = int(lengths.max()) if n else 0
    if width == 0:
        return pa.array(np.zeros(n, np.int64), pa.int64(), mask=is_null)
    values = pc.list_flatten(a)  # skips NULL arrays' slots
    elem = sortable(values)
    # element codes: 1..k for values (NULL elements rank last), 0 for "no element here"
    codes = np.asarray(
        pc.rank(elem, sort_keys="ascending", tiebreaker="dense"),  # NULLs last
        dtype=np.int64,
    )
    rows = np.repeat(np.arange(n, dtype=np.int64), lengths)
    starts = np.cumsum(lengths) - lengths
    pos = np.arange(len(rows), dtype=np.int64) - np.repeat(starts, lengths)
    matrix = np.zeros((n, width), dtype=np.int64)
    matrix[rows, pos] = codes
    order = np.lexsort(tuple(matrix[:, j] for j in range(width - 1, -1, -1)))
    srt = matrix[order]
    new = np.ones(n, dtype=bool)
    if n > 1:
        new[1:] = np.any(srt[1:] != srt[:-1], axis=1)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.cumsum(new)
    return pa.array(rank, pa.int64(), mask=is_null)
