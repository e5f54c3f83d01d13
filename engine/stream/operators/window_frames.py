"""Frame bounds with offsets in RANGE and GROUPS mode, vectorised (PostgreSQL semantics).

`window_kernel` sorts the rows by (partition, ORDER BY, tie-break) and knows every row's
partition and peer group; this module turns `n PRECEDING` / `n FOLLOWING` bounds of the
two value-based modes into row positions on those sorted rows:

* GROUPS: the bound is the first (start) or last (end) row of the peer group `n` groups
  before/after the current row's, clipped to the partition; a group beyond the partition
  gives an empty frame.
* RANGE (exactly one ORDER BY column): the bound is the first row whose key is >= (start)
  or the last row whose key is <= (end) `key ± offset`, where the key is the ORDER BY
  value made ascending (negated for DESC). Rows are found for all rows at once by one
  lexicographic sort of the (partition, key) pairs of rows and of targets
  (`_segmented_search`). NULL keys: a row with a NULL key has its NULL peers as frame
  for offset bounds; NULL rows are never in range of a non-NULL row.

Keys: integers and floats as they are; numerics as scaled 64-bit integers (exact; wider
values are refused); date, timestamp and time as integer nanoseconds with an interval
offset of days and time (an interval with months is refused: a month has no fixed
length).

Lifecycle: called by `window_kernel._frame` per call that has such a bound; the planner
(`engine.plan.plan_window`) has already checked the ORDER BY count and the offset types.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import not_supported

_DAY_NS = 86_400_000_000_000
_UNIT_NS = {"s": 1_000_000_000, "ms": 1_000_000, "us": 1_000, "ns": 1}


def groups_bound(
    kind: str,
    off: int,
    is_start: bool,
    new_peer: np.ndarray,
    pstart: np.ndarray,
    pend: np.ndarray,
) -> np.ndarray:
    """Row position of a GROUPS `off PRECEDING/FOLLOWING` bound for every row."""
    gid = np.cumsum(new_peer) - 1
    gstarts = np.flatnonzero(new_peer)
    gends = np.r_[gstarts[1:], len(new_peer)] - 1
    lo, hi = gid[pstart], gid[pend]
    target = gid - off if kind == "preceding" else gid + off
    inside = (target >= lo) & (target <= hi)
    t = np.clip(target, lo, hi)
    if is_start:
        # before the partition: its first row; after it: past its end (empty frame)
        return np.where(inside, gstarts[t], np.where(target < lo, pstart, pend + 1))
    return np.where(inside, gends[t], np.where(target > hi, pend, pstart - 1))


def range_bound(
    kind: str,
    off: Any,
    is_start: bool,
    col: pa.Array,
    desc: bool,
    part_id: np.ndarray,
    pstart: np.ndarray,
    pend: np.ndarray,
    qstart: np.ndarray,
    qend: np.ndarray,
) -> np.ndarray:
    """Row position of a RANGE `off PRECEDING/FOLLOWING` bound for every row."""
    key, delta = range_keys(col, off)
    valid = np.asarray(pc.is_valid(col))
    if desc:  # ~k = -k - 1 reverses the order without overflowing at the int64 minimum
        key = ~key if key.dtype == np.int64 else -key
    down = kind == "preceding"
    target, past = _shifted(key, delta, down)
    nn = np.flatnonzero(valid)
    out = qstart.copy() if is_start else qend.copy()  # NULL rows: their NULL peers
    if len(nn) == 0:
        return out
    rows = np.flatnonzero(valid)
    found = _segmented_search(part_id[nn], key[nn], part_id[rows], target[rows], is_start)
    ok = found >= 0
    if is_start != down:  # a bound past the int64 end on the side this search looks at
        ok &= ~past[rows]
    pos = np.where(ok, nn[np.maximum(found, 0)], 0)
    # no value reaches the bound: the partition's NULL rows lie beyond every value where
    # they sort (PostgreSQL: the head moves onto NULLs sorted last, the tail over NULLs
    # sorted first), else the frame is empty
    if is_start:
        last = pend[rows]
        out[rows] = np.where(ok, pos, np.where(valid[last], last + 1, qstart[last]))
    else:
        first = pstart[rows]
        out[rows] = np.where(ok, pos, np.where(valid[first], first - 1, qend[first]))
    return out


def _shifted(key: np.ndarray, delta: Any, down: bool) -> tuple[np.ndarray, np.ndarray]:
    """(key - delta (`down`) or key + delta, where that passes the int64 range). Past the
    range the bound saturates at the int64 end instead of wrapping, and the caller finds
    no value beyond it (PostgreSQL's in_range: a bound past the type's range lies beyond
    every value on that side)."""
    if key.dtype != np.int64:
        return (key - delta if down else key + delta), np.zeros(len(key), bool)
    info = np.iinfo(np.int64)
    if delta > info.max:
        return np.full_like(key, info.min if down else info.max), np.ones(len(key), bool)
    d = np.int64(delta)
    with np.errstate(over="ignore"):
        if down:
            past = key < info.min + d
            return np.where(past, info.min, key - d), past
        past = key > info.max - d
        return np.where(past, info.max, key + d), past


def _segmented_search(
    dp: np.ndarray, dk: np.ndarray, qp: np.ndarray, qk: np.ndarray, first_ge: bool
) -> np.ndarray:
    """Per query (qp, qk): index into the (dp, dk)-sorted data of the first row of partition
    qp with key >= qk (`first_ge`), else of the last with key <= qk; -1 when none."""
    nd, nq = len(dp), len(qp)
    parts = np.r_[dp, qp]
    keys = np.r_[dk, qk]
    # a query sorts before equal data when looking for the first >=, after it for the last <=
    tag = np.r_[np.ones(nd, np.int8), np.zeros(nq, np.int8)]
    if not first_ge:
        tag = 1 - tag
    order = np.lexsort((tag, keys, parts))
    is_data = order < nd
    before = np.cumsum(is_data) - is_data  # data rows before each merged position
    rank = np.empty(nd + nq, np.int64)
    rank[order] = before
    r = rank[nd:]
    idx = r if first_ge else r - 1
    ok = (idx >= 0) & (idx < nd)
    safe = np.clip(idx, 0, max(nd - 1, 0))
    ok &= dp[safe] == qp
    return np.where(ok, idx, -1)


def range_keys(col: pa.Array, off: Any, type_name: str | None = None) -> tuple[np.ndarray, Any]:
    """The ORDER BY column as a comparable numpy key, and the offset in the same units
    (`type_name`: the column's SQL type, for the refusal message). The planner calls it on
    an empty column (`engine.plan.plan_window.check_range_offsets`) to refuse an offset
    that does not fit the column when the statement is planned, with the same message."""
    t = col.type
    try:
        return _keys_of(col, t, off)
    except _Mismatch:
        raise not_supported(
            f"RANGE with offset PRECEDING/FOLLOWING for column type {type_name or t} and "
            f"offset type {_offset_type(off)}",
            hint="Order by a number with a numeric offset, or by a date/timestamp with an "
            "interval offset; or use ROWS BETWEEN.",
        ) from None


class _Mismatch(Exception):
    pass


def _offset_type(off: Any) -> str:
    if isinstance(off, bool):
        return "boolean"
    if isinstance(off, int):
        return "integer"
    if isinstance(off, Decimal):
        return "numeric"
    if isinstance(off, float):
        return "double precision"
    if hasattr(off, "months"):
        return "interval"
    return type(off).__name__


def _keys_of(col: pa.Array, t: pa.DataType, off: Any) -> tuple[np.ndarray, Any]:
    if pa.types.is_integer(t):
        if not isinstance(off, int):
            raise _unsupported(t, off)
        return np.asarray(pc.fill_null(col, 0).to_numpy(zero_copy_only=False), np.int64), off
    if pa.types.is_floating(t):
        if isinstance(off, bool) or not isinstance(off, int | float | Decimal):
            raise _unsupported(t, off)
        v = pc.fill_null(col, 0).to_numpy(zero_copy_only=False)
        return np.asarray(v, np.float64), float(off)
    if pa.types.is_decimal(t):
        if isinstance(off, bool) or not isinstance(off, int | Decimal):
            raise _unsupported(t, off)
        d = Decimal(off)
        exp = -int(d.normalize().as_tuple().exponent) if d else 0
        scale = max(t.scale, exp, 0)
        return _unscaled(col, scale), int(d.scaleb(scale))
    if pa.types.is_date(t) or pa.types.is_timestamp(t) or pa.types.is_time(t):
        if not isinstance(off, pa.MonthDayNano) and type(off).__name__ != "MonthDayNano":
            raise _unsupported(t, off)
        months, days, nanos = off.months, off.days, off.nanoseconds
        if months:
            raise not_supported(
                "RANGE offsets of intervals with months or years",
                hint="Use an interval in days, hours, minutes or seconds.",
            )
        delta = days * _DAY_NS + nanos
        if pa.types.is_date(t):
            days_v = pc.fill_null(col.cast(pa.date32()), 0).cast(pa.int32())
            v = np.asarray(days_v.to_numpy(zero_copy_only=False), np.int64) * _DAY_NS
            return v, delta
        unit = getattr(t, "unit", "ns")
        raw = pc.fill_null(col.cast(pa.int64()), 0)
        v = np.asarray(raw.to_numpy(zero_copy_only=False), np.int64) * _UNIT_NS[unit]
        return v, delta
    raise _unsupported(t, off)


def _unscaled(col: pa.Array, scale: int) -> np.ndarray:
    """Decimal values times 10**scale as int64 (exact), from the decimal128 buffer."""
    a = pc.fill_null(col.cast(pa.decimal128(38, scale)), Decimal(0))
    a = a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
    words = np.frombuffer(a.buffers()[1], dtype=np.int64)[2 * a.offset : 2 * (a.offset + len(a))]
    lo, hi = words[0::2], words[1::2]
    if not (hi == (lo >> 63)).all():
        raise not_supported("RANGE offsets over numerics wider than 18 digits")
    return lo.copy()


def _unsupported(t: pa.DataType, off: Any) -> Exception:
    return _Mismatch()
