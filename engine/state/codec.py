"""Byte encodings for state keys and values: CPython `marshal` (format 2) plus tagged extensions.

Why this format: state encoding sits on the checkpoint and recovery paths, once per dirty
key and once per loaded row. Measured on 3-column tuples (bench/state_bench.py), marshal
format 2 encodes about 3x and decodes about 2x faster than pickle protocol 5, its output is
shorter (no frame header), and, unlike pickle, it is deterministic: pickle memoizes repeated
objects by identity, so `(s, s)` and `(s, copy_of_s)` pickle differently although equal.
Format 2 (not 3/4) is used because from 3 on marshal also records object identity and
string interning in the bytes, which breaks determinism the same way.

Key layout in the store: `table_prefix(table_id) + encode_key(key_tuple)`. The prefix is
the 4-byte big-endian table id, so one table is one contiguous key range and
`table_prefix(id + 1)` is its exclusive upper bound. Ids from `MAX_TABLE_ID + 1`
(0xFFFF0000) up are never tables: the two-byte prefix `RESERVED_PREFIX` (0xFFFF) belongs to
the WAL and checkpoint metadata (engine.state.wal, engine.state.checkpoint).

Encoded forms (the first byte tells them apart, leaving room for later formats):

1. Plain: `marshal.dumps(t, 2)`, starting with `(` (0x28). Used when every element of the
   tuple is None, bool, int, float, str or bytes (exact types).
2. Extended: `b"\\x01" + marshal.dumps(t', 2)` where `t'` replaces each Decimal, date,
   time, datetime, MonthDayNano and Ellipsis by a tagged tuple `(Ellipsis, tag, payload...)`
   and converts nested tuples/lists element-wise. Ellipsis is never an engine value (and is
   itself escaped), so tags are unambiguous. Date/time/datetime payloads are the 4/6/10-byte
   states CPython's datetime uses in its pickles (stable because old pickles must load;
   fastest to produce and to turn back into objects). Decimal payloads are strings. Values
   of types the engine does not define (e.g. an operator's private object) are pickled
   inside a tag, and numpy scalars are converted to Python scalars first: marshal would
   otherwise silently store them as raw buffer bytes.
3. Fixed-width rows (values only): first byte 0x02, written a batch at a time by
   `engine.state.fixed_rows` (aggregation group states); `decode_value` reads them too.

Determinism (keys only; values need only round-trip): equal key tuples give equal bytes,
given the engine's rule that 1, 1.0 and True never mix within one column. Keys are
canonicalized so that Python-equal values with different representations agree: -0.0
becomes 0.0, Decimal('1.50') and Decimal('1.5') both encode as '1.5' (so a decoded key may
show fewer trailing zeros than the original, but compares equal), aware datetimes are
stored as UTC instants. NaN is not canonicalized (NaN keys are never equal in Python).
Values round-trip exactly (Decimal keeps its exponent, -0.0 stays -0.0), except that an
aware datetime comes back with tzinfo=UTC and bytearray/memoryview come back as bytes.
Ordering of encoded keys is not meaningful and is not relied upon.

marshal's format is CPython's, not a published standard; format 2 has been unchanged since
CPython 3.4 and every later reader still loads it. `tests/unit/state/test_state_codec.py`
pins exact bytes for sample tuples so a change would be caught before it reaches a store.
"""

from __future__ import annotations

import marshal
import pickle
import struct
from collections.abc import Callable
from datetime import UTC, date, datetime, time
from decimal import Context, Decimal
from itertools import chain, repeat
from math import copysign as _copysign
from types import EllipsisType, NoneType
from typing import Any

import numpy as np
import pyarrow as pa

from engine.state import fixed_rows

NAN = float("nan")
"""The one float NaN of state keys: NaN equals nothing, so a key holding a NaN of its own
finds no entry in a dict (a resident table, an overlay, a cache) keyed by another NaN;
tuples compare elements by identity first, so keys sharing this object find each other.
Loaded and decoded keys and the operators' value keys use it."""


MAX_TABLE_ID = 0xFFFEFFFF
"""Largest usable table id; `table_prefix(MAX_TABLE_ID + 1)` is still valid as a bound."""

RESERVED_PREFIX = b"\xff\xff"
"""Every store key starting with these bytes belongs to the state layer itself (WAL, meta)."""

_MARSHAL_VERSION = 2
_EXTENDED = 0x01
_EXTENDED_BYTE = b"\x01"

_PLAIN: frozenset[type] = frozenset({type(None), bool, int, float, str, bytes})
_PLAIN_NO_FLOAT: frozenset[type] = _PLAIN - {float}
_CONTAINERS: frozenset[type] = frozenset({tuple, list})
_MDN = pa.MonthDayNano

# Tags of extended scalars: (Ellipsis, tag, payload...).
_T_DECIMAL = 0
_T_DATE = 1
_T_TIME = 2
_T_DATETIME = 3
_T_DATETIME_TZ = 4
_T_INTERVAL = 5
_T_ELLIPSIS = 98
_T_PICKLE = 99

_DEC_CTX = Context(prec=100_000, Emax=999_999_999, Emin=-999_999_999)

_dumps = marshal.dumps
_loads = marshal.loads


def table_prefix(table_id: int) -> bytes:
    """The 4-byte key prefix of a table (or, for `MAX_TABLE_ID + 1`, the end of all tables)."""
    if not 0 <= table_id <= MAX_TABLE_ID + 1:
        raise ValueError(f"state table id {table_id} out of range 0..{MAX_TABLE_ID}")
    return struct.pack(">I", table_id)


# -- encoding ------------------------------------------------------------------------------
def encode_key(key: tuple[Any, ...]) -> bytes:
    """Deterministic bytes for a key tuple (see the module docstring)."""
    for v in key:
        # floats stay on the fast path unless they are -0.0, which must encode as 0.0
        if type(v) not in _PLAIN_NO_FLOAT and (
            type(v) is not float or (not v and _copysign(1.0, v) < 0.0)
        ):
            return _encode_slow(key, True)
    return _dumps(key, _MARSHAL_VERSION)


def encode_value(value: tuple[Any, ...]) -> bytes:
    """Bytes for a value tuple; exact round trip, no canonicalization."""
    for v in value:
        if type(v) not in _PLAIN:
            return _encode_slow(value, False)
    return _dumps(value, _MARSHAL_VERSION)


BULK_SLICE = 1 << 15
"""`encode_keys`/`encode_values` work on this many at a time: each of their type scans and
`map` passes runs in C without a bytecode boundary, so no other thread gets the
interpreter lock meanwhile, and 1M values at once (a COPY's checkpoint) held it 140 ms
while webhook acks and reads waited."""


def encode_keys(keys: list[tuple[Any, ...]]) -> list[bytes]:
    """`encode_key` of many keys (the same bytes); see `_encode_columns` for the bulk path."""
    if len(keys) > BULK_SLICE:
        return _sliced(encode_keys, keys)
    types = set(map(type, chain.from_iterable(keys)))
    if types <= _PLAIN_NO_FLOAT:
        return [_dumps(k, _MARSHAL_VERSION) for k in keys]
    if types <= _COLUMNAR and set(map(type, keys)) <= _TUPLE and len(set(map(len, keys))) == 1:
        return _encode_columns(keys, True)
    return [encode_key(k) for k in keys]


def encode_values(values: list[tuple[Any, ...]]) -> list[bytes]:
    """`encode_value` of many values (the same bytes); see `_encode_columns`."""
    if len(values) > BULK_SLICE:
        return _sliced(encode_values, values)
    types = set(map(type, chain.from_iterable(values)))
    if types <= _PLAIN:
        return list(map(_dumps, values, repeat(_MARSHAL_VERSION, len(values))))
    if types <= _COLUMNAR and set(map(type, values)) <= _TUPLE and len(set(map(len, values))) == 1:
        return _encode_columns(values, False)
    return [encode_value(v) for v in values]


def _sliced(
    fn: Callable[[list[tuple[Any, ...]]], list[bytes]], items: list[tuple[Any, ...]]
) -> list[bytes]:
    out: list[bytes] = []
    for i in range(0, len(items), BULK_SLICE):
        out += fn(items[i : i + BULK_SLICE])
    return out


_COLUMNAR: frozenset[type] = _PLAIN | {datetime, date}
_TUPLE: frozenset[type] = frozenset({tuple})


def _encode_columns(rows: list[tuple[Any, ...]], canonical: bool) -> list[bytes]:
    """Bulk form of `encode_key`/`encode_value` for equal-length tuples of plain values,
    dates and datetimes (table rows, join state): work column by column so each column
    pays one type scan and one comprehension instead of a per-value `_convert` call, then
    marshal each row. Bytes equal the per-tuple functions': a row gets the extended prefix
    exactly when one of its values was converted to a tagged tuple."""
    cols: list[Any] = list(zip(*rows, strict=True))
    tagged: list[list[bool]] = []
    for i, col in enumerate(cols):
        ct = set(map(type, col))
        if ct <= _PLAIN_NO_FLOAT:
            continue
        if ct <= _PLAIN:  # floats: keys canonicalize -0.0 to 0.0 (0.0 == -0.0)
            if canonical:
                cols[i] = [0.0 if type(v) is float and v == 0.0 else v for v in col]
            continue
        if ct == {datetime} or ct == {datetime, NoneType}:
            conv = [
                None
                if v is None
                else (..., _T_DATETIME, v.__reduce__()[1][0])
                if v.tzinfo is None
                else _convert(v, canonical)
                for v in col
            ]
        else:
            conv = [v if type(v) in _PLAIN else _convert(v, canonical) for v in col]
        cols[i] = conv
        tagged.append([type(v) is tuple for v in conv])
    dumps = _dumps
    out_rows = zip(*cols, strict=True)
    if not tagged:
        return [dumps(r, _MARSHAL_VERSION) for r in out_rows]
    flags = map(any, zip(*tagged, strict=True)) if len(tagged) > 1 else tagged[0]
    ext = _EXTENDED_BYTE
    return [
        ext + dumps(r, _MARSHAL_VERSION) if f else dumps(r, _MARSHAL_VERSION)
        for r, f in zip(out_rows, flags, strict=True)
    ]


def _encode_slow(t: tuple[Any, ...], canonical: bool) -> bytes:
    out = tuple([v if type(v) in _PLAIN_NO_FLOAT else _convert(v, canonical) for v in t])
    for c in out:
        if type(c) in _CONTAINERS:
            return _EXTENDED_BYTE + _dumps(out, _MARSHAL_VERSION)
    # Nothing tagged or nested: write exactly what the fast path writes for an equal tuple
    # (numpy scalars and -0.0 land here).
    return _dumps(out, _MARSHAL_VERSION)


def _convert(v: Any, canonical: bool) -> Any:
    """A marshal-able stand-in for one value: itself, a tagged tuple, or a converted container.

    Whether the result is a tuple/list depends only on the value's type, so equal keys pick
    the same (plain or extended) form.
    """
    t = type(v)
    if t in _PLAIN:
        if t is float and canonical and v == 0.0:
            return 0.0
        return v
    if t is datetime:
        if v.tzinfo is None:
            return (..., _T_DATETIME, v.__reduce__()[1][0])
        if v.tzinfo is not UTC:
            if v.utcoffset() is None:
                return (..., _T_DATETIME, v.__reduce__()[1][0])
            v = v.astimezone(UTC)
        return (..., _T_DATETIME_TZ, v.__reduce__()[1][0])
    if t is Decimal:
        if canonical and v.is_finite():
            return (..., _T_DECIMAL, format(v.normalize(_DEC_CTX), "f") if v else "0")
        return (..., _T_DECIMAL, str(v))
    if t is date:
        return (..., _T_DATE, v.__reduce__()[1][0])
    if t is tuple:
        return tuple([_convert(x, canonical) for x in v])
    if t is list:
        return [_convert(x, canonical) for x in v]
    if t is time and v.tzinfo is None:
        return (..., _T_TIME, v.__reduce__()[1][0])
    if t is _MDN:
        return (..., _T_INTERVAL, v.months, v.days, v.nanoseconds)
    if t is EllipsisType:
        return (..., _T_ELLIPSIS)
    if isinstance(v, np.generic):
        return _convert(v.item(), canonical)
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    return (..., _T_PICKLE, pickle.dumps(v, 5))


_ROWS_PLAIN = 0x10  # a list of tuples of plain values
_ROWS_EXTENDED = 0x11  # a list of tuples, values in the extended forms
_ROWS_GENERIC = 0x12  # a list of anything, each item in the extended form


def encode_rows(rows: list[Any]) -> bytes:
    """One blob for a list of tuples (a state table's log record, engine.state.table):
    a tag byte, then `marshal.dumps(list, 2)` of the tuples, in the extended forms of
    `encode_value` when some value needs a tag. One C-level marshal call for the whole
    list is what makes this much cheaper per row than `encode_values`. Items round-trip
    as with `encode_value` (no canonicalization: the blob is never compared as a key)."""
    if set(map(type, rows)) <= _TUPLE:
        types = set(map(type, chain.from_iterable(rows)))
        if types <= _PLAIN:
            return bytes((_ROWS_PLAIN,)) + _dumps(rows, _MARSHAL_VERSION)
        if types <= _COLUMNAR and len(set(map(len, rows))) == 1:
            cols: list[Any] = list(zip(*rows, strict=True))
            for i, col in enumerate(cols):
                ct = set(map(type, col))
                if ct <= _PLAIN:
                    continue
                if ct == {datetime} or ct == {datetime, NoneType}:
                    cols[i] = [
                        None
                        if v is None
                        else (..., _T_DATETIME, v.__reduce__()[1][0])
                        if v.tzinfo is None
                        else _convert(v, False)
                        for v in col
                    ]
                else:
                    cols[i] = [v if type(v) in _PLAIN else _convert(v, False) for v in col]
            conv: list[Any] = list(zip(*cols, strict=True))
        else:
            conv = [
                tuple([v if type(v) in _PLAIN else _convert(v, False) for v in r]) for r in rows
            ]
        return bytes((_ROWS_EXTENDED,)) + _dumps(conv, _MARSHAL_VERSION)
    return bytes((_ROWS_GENERIC,)) + _dumps([_convert(r, False) for r in rows], _MARSHAL_VERSION)


def decode_rows(data: bytes) -> list[Any]:
    """The items of an `encode_rows` blob."""
    rows: list[Any] = _loads(data[1:])
    tag = data[0]
    if tag == _ROWS_PLAIN:
        return rows
    containers = _CONTAINERS
    if tag == _ROWS_EXTENDED:
        return [
            tuple([_restore(v) if type(v) in containers else v for v in r])
            if any(type(v) in containers for v in r)
            else r
            for r in rows
        ]
    if tag == _ROWS_GENERIC:
        return [_restore(r) if type(r) in containers else r for r in rows]
    raise ValueError(f"not a row blob (tag {tag:#x})")


# -- decoding ------------------------------------------------------------------------------
def decode_key(data: bytes) -> tuple[Any, ...]:
    if data[0] != _EXTENDED:
        return _loads(data)  # type: ignore[no-any-return]
    return tuple([_restore(v) if type(v) in _CONTAINERS else v for v in _loads(data[1:])])


def decode_value(data: bytes) -> tuple[Any, ...]:
    """Values use the same forms as keys (only encoding differs: no canonicalization),
    plus the fixed-width rows of `engine.state.fixed_rows` (first byte 0x02)."""
    if data[0] == fixed_rows.TAG:
        return fixed_rows.decode_row(data)
    return decode_key(data)


def _restore(v: Any) -> Any:
    if type(v) is tuple:
        if v and v[0] is ...:
            return _DECODERS[v[1]](v)
        return tuple([_restore(x) if type(x) in _CONTAINERS else x for x in v])
    return [_restore(x) if type(x) in _CONTAINERS else x for x in v]


_DECODERS: dict[int, Callable[[tuple[Any, ...]], Any]] = {
    _T_DECIMAL: lambda v: Decimal(v[2]),
    _T_DATE: lambda v: date(v[2]),
    _T_TIME: lambda v: time(v[2]),
    _T_DATETIME: lambda v: datetime(v[2]),
    _T_DATETIME_TZ: lambda v: datetime(v[2], UTC),
    _T_INTERVAL: lambda v: _MDN((v[2], v[3], v[4])),
    _T_ELLIPSIS: lambda v: ...,
    _T_PICKLE: lambda v: pickle.loads(v[2]),
}
