"""The key order of state tables: what `StateTable.scan` returns keys in.

Why a defined order: operators that read ranges (a buffer cut below a watermark, rows
expiring by time, later top-N and over-window ranges) need "every key from here to there,
in order" from the state layer instead of scanning a dict and sorting. The state-store
work lays keys out as memcomparable bytes in RocksDB, whose byte order must agree with
this order, so it is written down once here and pinned by the contract tests
(`tests/unit/state/test_state_contract.py`).

Keys are tuples compared element by element; a tuple that is a prefix of another sorts
first (so `(5,)` is below every `(5, ...)` and a scan bounded by `end=(5,)` stops before
them). Elements compare by kind first, then by value:

0. NULL (None) first, as in memcomparable encodings of nullable columns;
1. booleans (False < True);
2. numbers (int, float, Decimal compare by value across types), 3. then NaN (float or
   Decimal) above every number, as PostgreSQL sorts NaN;
4. strings, by code point (the same as their UTF-8 bytes); 5. bytes;
6. dates; 7. naive datetimes; 8. aware datetimes (by instant); 9. times;
10. tuples and lists (SQL arrays, composite keys), element-wise by these rules;
11. anything else (values the engine does not define), by type name and repr.

A single column holds one kind (the engine never mixes 1, 1.0 and True in a column),
so within a column this is the natural SQL ascending order with NULLs first; the kinds
matter for tables whose keys differ in shape (segment stores keep `(sid,)` and
`("mask", sid)` in one table).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, time
from decimal import Decimal
from typing import Any

Key = tuple[Any, ...]


def _num(v: Any) -> tuple[Any, ...]:
    return (3,) if v != v else (2, v)  # NaN above every number


def _dec(v: Decimal) -> tuple[Any, ...]:
    return (3,) if v.is_nan() else (2, v)


def _dt(v: datetime) -> tuple[Any, ...]:
    return (7, v) if v.tzinfo is None or v.utcoffset() is None else (8, v)


def _seq(v: Any) -> tuple[Any, ...]:
    return (10, tuple(map(element_order, v)))


_BY_TYPE: dict[type, Callable[[Any], tuple[Any, ...]]] = {
    type(None): lambda v: (0,),
    bool: lambda v: (1, v),
    int: lambda v: (2, v),
    float: _num,
    Decimal: _dec,
    str: lambda v: (4, v),
    bytes: lambda v: (5, v),
    bytearray: lambda v: (5, bytes(v)),
    memoryview: lambda v: (5, bytes(v)),
    date: lambda v: (6, v),
    datetime: _dt,
    time: lambda v: (9, v),
    tuple: _seq,
    list: _seq,
}


def element_order(v: Any) -> tuple[Any, ...]:
    """A comparable stand-in for one key element (see the module docstring)."""
    f = _BY_TYPE.get(type(v))
    if f is not None:
        return f(v)
    if isinstance(v, datetime):
        return _dt(v)
    if isinstance(v, date):
        return (6, v)
    if isinstance(v, (tuple, list)):
        return _seq(v)
    return (11, type(v).__name__, repr(v))


def key_order(key: Key) -> tuple[Any, ...]:
    """A comparable stand-in for a whole key: sort keys with `sorted(keys, key=key_order)`."""
    return tuple(map(element_order, key))
