"""Memcomparable key bytes: byte order equals `engine.state.order`'s key order.

Why: the RocksDB-first state table (`engine.state.disk_table`) keeps its rows in RocksDB
sorted by key bytes, and operators read ordered ranges (a group's entries, everything
below a time) straight from RocksDB iterators. That only works if comparing the encoded
bytes (`memcmp`) gives the order `engine.state.order.key_order` defines for the Python
keys, including across kinds (NULL first, numbers by value across int/float/Decimal,
NaN above every number, strings by code point, a key after its own prefixes). The
contract tests (`tests/unit/state/test_state_contract.py`) hold both to the same order.

Encoding: a key tuple is the concatenation of its elements' encodings; each element is
self-delimiting, so a key that is a prefix of another encodes to a byte prefix of it (and
sorts first), and "keys whose first elements equal `p`" are "bytes starting with
`encode_key(p)`". Each element starts with a kind tag, increasing in `order`'s kind order
(0x00 is never a tag: it ends a nested tuple):

* 0x01 NULL; 0x02 bool + 0x00/0x01;
* 0x03 number: the value rounded to float64 (8 bytes, sign-flipped IEEE bits, so bytes
  sort as values; -0.0 is 0.0), then the exact rest `v - float(v)` (0x02 when zero, the
  common case; 0x03 + magnitude for positive, 0x01 + inverted magnitude for negative, the
  magnitude as decimal exponent and digits), then the Python type (0x01 int, 0x02 float,
  0x03 Decimal). Rounding is monotone, so ordering by (rounded, rest) is ordering by
  value; ints beyond float64 and Decimals with more digits stay exact.
* 0x04 NaN (float or Decimal) + type byte; 0x05 string (UTF-8) and 0x06 bytes, with
  0x00 escaped as 0x00 0xFF and ended by 0x00 0x01;
* 0x07 date (proleptic ordinal, 4 bytes); 0x08 naive datetime and 0x09 aware datetime
  (microseconds since 0001-01-01, 8 bytes; aware ones as their UTC instant); 0x0A time
  (microseconds, 8 bytes);
* 0x0B tuple: the elements, then 0x00;
* 0x0C anything else: escaped type name, then the escaped `codec.encode_value` bytes
  (ordered by type name, then by those bytes: the order of such values is not defined).

Canonical forms: Python-equal keys encode equally as long as a column does not mix
int/float/Decimal (the engine never does), so Decimal keys come back normalized
(`1.50` -> `1.5`), aware datetimes in UTC, bytearray/memoryview as bytes.

`encode_keys` encodes many keys at once; equal-shaped keys whose columns are all small
ints, all strings or all bytes go column by column through numpy and Arrow instead of per
element.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.state import codec

Key = tuple[Any, ...]

T_NULL, T_BOOL, T_NUM, T_NAN, T_STR, T_BYTES = 1, 2, 3, 4, 5, 6
T_DATE, T_DT, T_DTZ, T_TIME, T_TUPLE, T_OTHER = 7, 8, 9, 10, 11, 12
_INT, _FLOAT, _DEC = 1, 2, 3
_REST_NEG, _REST_ZERO, _REST_POS = 1, 2, 3

_EXACT = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN)
_MAX_FLOAT = 1.7976931348623157e308
_SAFE_INT = 1 << 53
_EPOCH = datetime(1, 1, 1)
_D = struct.Struct(">d")
_EPOCH_US = 62_135_596_800_000_000  # 0001-01-01 -> 1970-01-01 in microseconds
_Q = struct.Struct(">Q")
_I = struct.Struct(">I")
_SIGN = 1 << 63
_MASK = (1 << 64) - 1
_ESC = b"\x00\x01"
_NUM_TAG = bytes([T_NUM])
_ZERO_INT = bytes([_REST_ZERO, _INT])


def _f64(x: float) -> bytes:
    """8 bytes that sort as float64 values sort (-0.0 encodes as 0.0)."""
    if x == 0.0:
        x = 0.0
    (u,) = _Q.unpack(_D.pack(x))
    return _Q.pack((u ^ _MASK) if u & _SIGN else (u | _SIGN))


def _un_f64(b: bytes) -> float:
    (u,) = _Q.unpack(b)
    return float(_D.unpack(_Q.pack((u ^ _SIGN) if u & _SIGN else (u ^ _MASK)))[0])


def _magnitude(r: Decimal) -> bytes:
    """Order-preserving bytes of a positive Decimal: exponent, digits, terminator 0x00."""
    sign, digits, exp = r.as_tuple()
    ds = list(digits)
    while len(ds) > 1 and ds[-1] == 0:
        ds.pop()
    adjusted = r.adjusted()
    return _I.pack(adjusted + (1 << 31)) + bytes(d + 1 for d in ds) + b"\x00"


def _un_magnitude(b: bytes, i: int) -> tuple[Decimal, int]:
    (adj,) = _I.unpack_from(b, i)
    adj -= 1 << 31
    j = b.index(0, i + 4)
    digits = tuple(x - 1 for x in b[i + 4 : j])
    return Decimal((0, digits, adj - len(digits) + 1)), j + 1


def _invert(b: bytes) -> bytes:
    return bytes(255 - x for x in b)


def _number(v: Any, kind: int) -> bytes:
    try:
        f = float(v)
    except OverflowError:
        f = _MAX_FLOAT if v > 0 else -_MAX_FLOAT
    if f in (float("inf"), float("-inf")) and kind != _FLOAT and not _is_inf(v):
        f = _MAX_FLOAT if f > 0 else -_MAX_FLOAT  # a finite value beyond float64
    if kind == _INT:
        rest: Any = 0 if abs(f) == float("inf") else v - int(f)
    elif kind == _DEC:
        rest = Decimal(0) if v.is_infinite() else _EXACT.subtract(v, Decimal(f))
    else:
        rest = 0
    out = _NUM_TAG + _f64(f)
    if not rest:
        return out + bytes([_REST_ZERO, kind])
    mag = _magnitude(_EXACT.abs(Decimal(rest)))
    if rest > 0:
        return out + bytes([_REST_POS]) + mag + bytes([kind])
    return out + bytes([_REST_NEG]) + _invert(mag) + bytes([kind])


def _is_inf(v: Any) -> bool:
    return isinstance(v, Decimal) and v.is_infinite()


def _escaped(b: bytes) -> bytes:
    return b.replace(b"\x00", b"\x00\xff") + _ESC


def _unescape(b: bytes, i: int) -> tuple[bytes, int]:
    out = bytearray()
    while True:
        j = b.index(0, i)
        out += b[i:j]
        if b[j + 1] == 0xFF:
            out.append(0)
            i = j + 2
        else:
            return bytes(out), j + 2


def _micros(v: datetime) -> bytes:
    d = v - _EPOCH
    return _Q.pack((d.days * 86400 + d.seconds) * 1_000_000 + d.microseconds)


def _dt(v: datetime) -> bytes:
    off = v.utcoffset()
    if v.tzinfo is None or off is None:
        return bytes([T_DT]) + _micros(v)
    return bytes([T_DTZ]) + _micros((v - off).replace(tzinfo=None))


def _time(v: time) -> bytes:
    if v.tzinfo is not None:
        return _other(v)
    us = ((v.hour * 60 + v.minute) * 60 + v.second) * 1_000_000 + v.microsecond
    return bytes([T_TIME]) + _Q.pack(us)


def _float(v: float) -> bytes:
    if v != v:
        return bytes([T_NAN, _FLOAT])
    return _NUM_TAG + _f64(v) + bytes([_REST_ZERO, _FLOAT])


def _int(v: int) -> bytes:
    if -_SAFE_INT <= v <= _SAFE_INT:
        return _NUM_TAG + _f64(float(v)) + _ZERO_INT
    return _number(v, _INT)


def _decimal(v: Decimal) -> bytes:
    if v.is_nan():
        return bytes([T_NAN, _DEC])
    return _number(v, _DEC)


def _other(v: Any) -> bytes:
    name = _escaped(type(v).__name__.encode())
    return bytes([T_OTHER]) + name + _escaped(codec.encode_value((v,)))


def _tuple(v: tuple[Any, ...]) -> bytes:
    return bytes([T_TUPLE]) + b"".join(map(encode_element, v)) + b"\x00"


_ENCODERS: dict[type, Callable[[Any], bytes]] = {
    type(None): lambda v: b"\x01",
    bool: lambda v: b"\x02\x01" if v else b"\x02\x00",
    int: _int,
    float: _float,
    Decimal: _decimal,
    str: lambda v: b"\x05" + _escaped(v.encode("utf-8", "surrogatepass")),
    bytes: lambda v: b"\x06" + _escaped(v),
    bytearray: lambda v: b"\x06" + _escaped(bytes(v)),
    memoryview: lambda v: b"\x06" + _escaped(bytes(v)),
    date: lambda v: bytes([T_DATE]) + _I.pack(v.toordinal()),
    datetime: _dt,
    time: _time,
    tuple: _tuple,
    list: lambda v: _tuple(tuple(v)),
}


def encode_element(v: Any) -> bytes:
    """The memcomparable bytes of one key element (see the module docstring)."""
    f = _ENCODERS.get(type(v))
    if f is not None:
        return f(v)
    if isinstance(v, np.generic):
        return encode_element(v.item())
    if isinstance(v, datetime):
        return _dt(v)
    if isinstance(v, date):
        return bytes([T_DATE]) + _I.pack(v.toordinal())
    if isinstance(v, tuple):
        return _tuple(v)
    return _other(v)


def encode_key(key: Key) -> bytes:
    """The memcomparable bytes of a key tuple."""
    return b"".join(map(encode_element, key))


def encode_keys(keys: list[Key]) -> list[bytes]:
    """`encode_key` of many keys (the same bytes), column by column where it can."""
    n = len(keys)
    if n < 64:
        return [encode_key(k) for k in keys]
    widths = set(map(len, keys))
    if len(widths) != 1:  # e.g. a join's heads and fragments: each width in bulk
        by_width: dict[int, list[int]] = {}
        for i, k in enumerate(keys):
            by_width.setdefault(len(k), []).append(i)
        mixed: list[bytes] = [b""] * n
        for idx in by_width.values():
            for i, e in zip(idx, encode_keys([keys[i] for i in idx]), strict=True):
                mixed[i] = e
        return mixed
    w = widths.pop()
    parts = [_column(list(map(itemgetter(j), keys))) for j in range(w)]
    if any(p is None for p in parts):
        return [encode_key(k) for k in keys]
    if not parts:
        return [b""] * n
    out = parts[0]
    for p in parts[1:]:
        out = list(map(bytes.__add__, out, p))  # type: ignore[arg-type]
    return out  # type: ignore[return-value]


def _column(col: list[Any]) -> list[bytes] | None:
    """One key column encoded in bulk, or None when its values need the per-element path."""
    types = set(map(type, col))
    if types == {int}:
        try:
            arr = np.array(col, dtype=np.int64)
        except OverflowError:
            return None
        if arr.size and (arr.min() < -_SAFE_INT or arr.max() > _SAFE_INT):
            return None
        u = (arr.astype(np.float64) + 0.0).view(np.uint64)  # + 0.0: -0.0 cannot occur
        neg = (u & np.uint64(_SIGN)) != 0
        u = np.where(neg, ~u, u | np.uint64(_SIGN)).astype(">u8")
        rows = np.empty((arr.size, 11), dtype=np.uint8)
        rows[:, 0] = T_NUM
        rows[:, 1:9] = u.view(np.uint8).reshape(-1, 8)
        rows[:, 9] = _REST_ZERO
        rows[:, 10] = _INT
        buf = rows.tobytes()
        return [buf[i : i + 11] for i in range(0, len(buf), 11)]
    if types == {datetime} and all(v.tzinfo is None for v in col):
        # naive timestamps (window bounds, event times): T_DT + microseconds since 0001-01-01
        ts = pa.array(col, type=pa.timestamp("us")).cast(pa.int64())
        us = ts.to_numpy(zero_copy_only=False) + _EPOCH_US
        rows = np.empty((len(col), 9), dtype=np.uint8)
        rows[:, 0] = T_DT
        rows[:, 1:] = us.astype(">u8").view(np.uint8).reshape(-1, 8)
        buf = rows.tobytes()
        return [buf[i : i + 9] for i in range(0, len(buf), 9)]
    if types == {str} or types == {bytes}:
        if types == {bytes}:
            arr = pa.array(col, type=pa.large_binary())
            tag = bytes([T_BYTES])
        else:
            try:
                arr = pa.array(col, type=pa.large_string()).cast(pa.large_binary())
            except (pa.ArrowException, UnicodeError):
                return None  # lone surrogates: the per-element path encodes them
            tag = bytes([T_STR])
        esc = pc.replace_substring(arr, b"\x00", b"\x00\xff")
        lb = pa.large_binary()
        out = pc.binary_join_element_wise(
            pa.scalar(tag, lb), esc, pa.scalar(_ESC, lb), pa.scalar(b"", lb)
        )
        return out.to_pylist()  # type: ignore[no-any-return]
    return None


def encode_int_matrix(values: np.ndarray, nulls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`encode_key((v,))` of each int64 of `values` as rows of an (n, 11) uint8 matrix, and
    the mask of rows whose encoding is not that row (NULL, or |v| > 2**53: those encode
    to other lengths, `encode_int_column` gives them)."""
    arr = np.asarray(values, np.int64)
    n = arr.size
    u = (arr.astype(np.float64) + 0.0).view(np.uint64)
    neg = (u & np.uint64(_SIGN)) != 0
    u = np.where(neg, ~u, u | np.uint64(_SIGN)).astype(">u8")
    rows = np.empty((n, 11), dtype=np.uint8)
    rows[:, 0] = T_NUM
    rows[:, 1:9] = u.view(np.uint8).reshape(-1, 8)
    rows[:, 9] = _REST_ZERO
    rows[:, 10] = _INT
    odd = np.asarray(nulls, bool) | (arr < -_SAFE_INT) | (arr > _SAFE_INT)
    return rows, odd


def encode_int_column(values: np.ndarray, nulls: np.ndarray) -> list[bytes]:
    """`encode_key((v,))` of each int64 of `values` (`(None,)` where `nulls`), in bulk for
    the common case (|v| <= 2**53, not NULL) and per element for the rest."""
    arr = np.asarray(values, np.int64)
    rows, odd = encode_int_matrix(arr, nulls)
    out: list[bytes] = rows.view("V11").ravel().tolist()
    for i in np.flatnonzero(odd).tolist():
        out[i] = b"\x01" if nulls[i] else _int(int(arr[i]))
    return out


def encode_timestamp_matrix(values: np.ndarray, nulls: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`encode_key((v,))` of naive timestamps (int64 microseconds since 1970-01-01) as
    rows of an (n, 9) uint8 matrix, and the mask of rows that are not (NULLs)."""
    us = np.asarray(values, np.int64) + _EPOCH_US
    rows = np.empty((us.size, 9), dtype=np.uint8)
    rows[:, 0] = T_DT
    rows[:, 1:] = us.astype(">u8").view(np.uint8).reshape(-1, 8)
    return rows, np.asarray(nulls, bool).copy()


def encode_timestamp_column(values: np.ndarray, nulls: np.ndarray) -> list[bytes]:
    """`encode_key((v,))` of each naive timestamp given as int64 microseconds since
    1970-01-01 (`(None,)` where `nulls`), in bulk."""
    rows, odd = encode_timestamp_matrix(values, nulls)
    out: list[bytes] = rows.view("V9").ravel().tolist()
    for i in np.flatnonzero(odd).tolist():
        out[i] = b"\x01"
    return out


# -- decoding ------------------------------------------------------------------------------
def decode_key(b: bytes) -> Key:
    """The key tuple of `encode_key` bytes."""
    out: list[Any] = []
    i, n = 0, len(b)
    while i < n:
        v, i = _decode(b, i)
        out.append(v)
    return tuple(out)


def _decode(b: bytes, i: int) -> tuple[Any, int]:
    tag = b[i]
    i += 1
    if tag == T_NUM:
        f = _un_f64(b[i : i + 8])
        i += 8
        rest_sign = b[i]
        i += 1
        rest: Decimal | None = None
        if rest_sign == _REST_POS:
            rest, i = _un_magnitude(b, i)
        elif rest_sign == _REST_NEG:
            j = i + 4  # past the exponent (its inverted bytes may hold 0xFF)
            while b[j] != 0xFF:
                j += 1
            rest, _ = _un_magnitude(_invert(b[i : j + 1]), 0)
            rest = _EXACT.minus(rest)
            i = j + 1
        kind = b[i]
        i += 1
        if kind == _FLOAT:
            return f, i
        if kind == _INT:
            if rest is None:
                return int(f), i
            return int(f) + int(rest), i
        d = Decimal(f) if rest is None else _EXACT.add(Decimal(f), rest)
        return _canonical(d), i
    if tag == T_STR:
        s, i = _unescape(b, i)
        return s.decode("utf-8", "surrogatepass"), i
    if tag == T_NULL:
        return None, i
    if tag == T_BOOL:
        return b[i] == 1, i + 1
    if tag == T_NAN:
        return (codec.NAN if b[i] == _FLOAT else Decimal("NaN")), i + 1
    if tag == T_BYTES:
        return _unescape(b, i)
    if tag == T_DATE:
        return date.fromordinal(_I.unpack_from(b, i)[0]), i + 4
    if tag in (T_DT, T_DTZ):
        (us,) = _Q.unpack_from(b, i)
        v = _EPOCH + timedelta(microseconds=us)
        return (v if tag == T_DT else v.replace(tzinfo=UTC)), i + 8
    if tag == T_TIME:
        (us,) = _Q.unpack_from(b, i)
        s, us = divmod(us, 1_000_000)
        m, s = divmod(s, 60)
        h, m = divmod(m, 60)
        return time(h, m, s, us), i + 8
    if tag == T_TUPLE:
        items: list[Any] = []
        while b[i] != 0:
            v, i = _decode(b, i)
            items.append(v)
        return tuple(items), i + 1
    if tag == T_OTHER:
        _, i = _unescape(b, i)
        raw, i = _unescape(b, i)
        return codec.decode_value(raw)[0], i
    raise ValueError(f"not a memcomparable key (tag {tag:#x} at {i - 1})")


def _canonical(d: Decimal) -> Decimal:
    if d.is_infinite() or not d:
        return d if d else Decimal(0)
    d = d.normalize(_EXACT)
    exp = d.as_tuple().exponent
    return d.quantize(Decimal(1), context=_EXACT) if isinstance(exp, int) and exp > 0 else d


def successor(prefix: bytes) -> bytes | None:
    """The smallest byte string above every string starting with `prefix` (None: none)."""
    b = bytearray(prefix)
    while b:
        if b[-1] != 0xFF:
            b[-1] += 1
            return bytes(b)
        b.pop()
    return None
