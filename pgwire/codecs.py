"""Value codecs between the engine's Python values (see `engine.types`) and the PostgreSQL
wire formats: text (format code 0) and binary (format code 1).

Encoders serve result columns (DataRow), decoders serve Bind parameters. The connection
picks one encoder per result column once (`encoder(type, fmt, tz)`) and applies it to every
value of that column, so per-value work is a single call at the wire's true row boundary.
Text output follows what PostgreSQL/RisingWave print (`t`/`f`, shortest round-trip floats,
numerics without exponent or trailing zeros, ISO timestamps, postgres-style intervals);
binary layouts follow the backend's `*_send`/`*_recv` functions.

NULL never reaches a codec: DataRow and Bind carry it as length -1, handled by the caller.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta, tzinfo
from decimal import Context, Decimal, InvalidOperation
from typing import Any

import numpy as np
import pyarrow as pa

from engine import civil
from engine.errors import InvalidTextRepresentation, NumericValueOutOfRange, ProtocolViolation
from engine.expr import temporal as engine_temporal
from engine.expr.casts import bytea_in
from engine.types import SqlType, TypeKind
from pgwire import temporal as tm

Encoder = Callable[[Any], bytes]
Decoder = Callable[[bytes], Any]

TEXT = 0
BINARY = 1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_F32 = struct.Struct(">f")
_F64 = struct.Struct(">d")
_INTERVAL = struct.Struct(">qii")
_INT_RANGE = {
    TypeKind.SMALLINT: (-(2**15), 2**15 - 1),
    TypeKind.INT: (-(2**31), 2**31 - 1),
    TypeKind.BIGINT: (-(2**63), 2**63 - 1),
}


# -- floats and numerics -----------------------------------------------------------------------
def _pg_float(digits: str, exp10: int, negative: bool, fixed_below: int) -> str:
    """Lay out shortest digits the way Postgres' Ryu output does: fixed notation for
    decimal exponents in [-4, fixed_below), else `d.ddde+XX` (at least two exponent digits)."""
    sign = "-" if negative else ""
    if -4 <= exp10 < fixed_below:
        if exp10 < 0:
            return f"{sign}0.{'0' * (-exp10 - 1)}{digits}"
        int_len = exp10 + 1
        if len(digits) <= int_len:
            return sign + digits + "0" * (int_len - len(digits))
        return f"{sign}{digits[:int_len]}.{digits[int_len:]}"
    mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    esign = "-" if exp10 < 0 else "+"
    return f"{sign}{mant}e{esign}{abs(exp10):02d}"


def _special_float(v: float) -> str | None:
    if v != v:
        return "NaN"
    if v == float("inf"):
        return "Infinity"
    if v == float("-inf"):
        return "-Infinity"
    if v == 0:
        return "-0" if str(v).startswith("-") else "0"
    return None


def _digits_exp(sci: str) -> tuple[str, int]:
    """Digits and decimal exponent of the leading digit from `d.ddde±x` / `d.ddd` text."""
    mant, _, exp = sci.partition("e")
    exp10 = int(exp) if exp else 0
    ip, _, fp = mant.partition(".")
    digits = (ip + fp).lstrip("0")
    exp10 += len(ip.lstrip("0")) - 1 if ip.lstrip("0") else -(len(fp) - len(fp.lstrip("0")) + 1)
    return digits.rstrip("0") or "0", exp10


def format_float8(v: float) -> str:
    special = _special_float(v)
    if special is not None:
        return special
    digits, exp10 = _digits_exp(repr(abs(v)))
    return _pg_float(digits, exp10, v < 0, 15)


def format_float4(v: float) -> str:
    special = _special_float(v)
    if special is not None:
        return special
    sci = np.format_float_scientific(np.float32(abs(v)), unique=True, trim="-")
    digits, exp10 = _digits_exp(sci)
    return _pg_float(digits, exp10, v < 0, 6)


def format_numeric(v: Decimal, scale: int | None = None) -> str:
    """PostgreSQL's numeric text: `scale` digits after the point when the type knows its
    scale (numeric(p, s), round(x, 2), 1.50), else as computed without trailing zeros."""
    if v.is_nan():
        return "NaN"
    if v.is_infinite():
        return "-Infinity" if v < 0 else "Infinity"
    if scale is not None:
        q = v.quantize(_SCALES[scale], context=_WIDE) if scale < len(_SCALES) else v
        s = format(q, "f")
        return s[1:] if s.startswith("-") and not s.strip("-0.") else s
    s = format(v, "f")
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    return "0" if s in ("-0", "") else s


_SCALES = [Decimal(1).scaleb(-i) for i in range(39)]
_WIDE = Context(prec=100)  # quantize needs room for every digit (the default holds 28)


_NUMERIC_HEAD = struct.Struct(">hhHH")
_NUMERIC_SPECIAL = re.compile(r"(?i)^\s*(nan|[+-]?inf(inity)?)\s*$")
_NUMERIC_NEG = 0x4000
_NUMERIC_NAN = 0xC000
_NUMERIC_PINF = 0xD000
_NUMERIC_NINF = 0xF000


def numeric_send(v: Decimal, scale: int | None = None) -> bytes:
    """Base-10000 digits with weight/sign/dscale, as `numeric_send` lays them out."""
    if v.is_nan():
        return _NUMERIC_HEAD.pack(0, 0, _NUMERIC_NAN, 0)
    if v.is_infinite():
        return _NUMERIC_HEAD.pack(0, 0, _NUMERIC_NINF if v < 0 else _NUMERIC_PINF, 0)
    text = format_numeric(v, scale)
    sign = _NUMERIC_NEG if text.startswith("-") else 0
    ip, _, fp = text.lstrip("-").partition(".")
    dscale = len(fp)
    ip = ip.lstrip("0")
    ip = "0" * (-len(ip) % 4) + ip
    fp = fp + "0" * (-len(fp) % 4)
    groups = [int(ip[i : i + 4]) for i in range(0, len(ip), 4)]
    weight = len(groups) - 1
    groups += [int(fp[i : i + 4]) for i in range(0, len(fp), 4)]
    while groups and groups[0] == 0:
        groups.pop(0)
        weight -= 1
    while groups and groups[-1] == 0:
        groups.pop()
    if not groups:
        return _NUMERIC_HEAD.pack(0, 0, 0, dscale)
    return _NUMERIC_HEAD.pack(len(groups), weight, sign, dscale) + struct.pack(
        f">{len(groups)}h", *groups
    )


def numeric_recv(data: bytes) -> Decimal:
    ndigits, weight, sign, dscale = _NUMERIC_HEAD.unpack_from(data)
    if sign == _NUMERIC_NAN:
        return Decimal("NaN")
    if sign == _NUMERIC_PINF:
        return Decimal("Infinity")
    if sign == _NUMERIC_NINF:
        return Decimal("-Infinity")
    groups = struct.unpack_from(f">{ndigits}h", data, 8)
    digits = "".join(f"{g:04d}" for g in groups) or "0"
    exp = 4 * (weight - ndigits + 1)
    target = -dscale
    if exp < target:
        digits = digits[: len(digits) - (target - exp)] or "0"
    elif exp > target:
        digits += "0" * (exp - target)
    return Decimal((1 if sign == _NUMERIC_NEG else 0, tuple(int(c) for c in digits), target))


# -- arrays ----------------------------------------------------------------------------------------
_ARRAY_SPECIAL = set('{}",\\ \t\n\r\v\f')


def _quote_elem(s: str) -> str:
    if s == "" or s.upper() == "NULL" or any(c in _ARRAY_SPECIAL for c in s):
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return s


def array_text_encoder(elem: Callable[[Any], str]) -> Callable[[Any], str]:
    def enc(values: Any) -> str:
        parts: list[str] = []
        for x in values:
            if x is None:
                parts.append("NULL")
            elif isinstance(x, list):
                parts.append(enc(x))
            else:
                parts.append(_quote_elem(elem(x)))
        return "{" + ",".join(parts) + "}"

    return enc


def parse_array_text(text: str, elem: Callable[[str], Any]) -> list[Any]:
    """`{1,NULL,"a b"}` (optionally `[1:2]={...}`, nested braces) into a Python list."""
    s = text.strip()
    if s.startswith("["):
        eq = s.find("=")
        if eq < 0:
            raise InvalidTextRepresentation(f'malformed array literal: "{text}"')
        s = s[eq + 1 :].lstrip()
    pos = 0

    def bad() -> InvalidTextRepresentation:
        return InvalidTextRepresentation(f'malformed array literal: "{text}"')

    def parse_list() -> list[Any]:
        nonlocal pos
        if pos >= len(s) or s[pos] != "{":
            raise bad()
        pos += 1
        out: list[Any] = []
        while pos < len(s) and s[pos].isspace():
            pos += 1
        if pos < len(s) and s[pos] == "}":
            pos += 1
            return out
        while True:
            while pos < len(s) and s[pos].isspace():
                pos += 1
            if pos >= len(s):
                raise bad()
            if s[pos] == "{":
                out.append(parse_list())
            elif s[pos] == '"':
                pos += 1
                buf: list[str] = []
                while pos < len(s) and s[pos] != '"':
                    if s[pos] == "\\":
                        pos += 1
                    if pos < len(s):
                        buf.append(s[pos])
                    pos += 1
                if pos >= len(s):
                    raise bad()
                pos += 1
                out.append(elem("".join(buf)))
            else:
                start = pos
                buf = []
                while pos < len(s) and s[pos] not in ",}":
                    if s[pos] == "\\" and pos + 1 < len(s):
                        pos += 1
                    buf.append(s[pos])
                    pos += 1
                raw = "".join(buf).strip()
                if not raw:
                    raise bad()
                is_null = raw.upper() == "NULL" and "\\" not in s[start:pos]
                out.append(None if is_null else elem(raw))
            while pos < len(s) and s[pos].isspace():
                pos += 1
            if pos >= len(s):
                raise bad()
            if s[pos] == ",":
                pos += 1
                continue
            if s[pos] == "}":
                pos += 1
                return out
            raise bad()

    result = parse_list()
    if s[pos:].strip():
        raise bad()
    return result


def array_send(values: list[Any], elem_oid: int, elem: Encoder) -> bytes:
    if not values:
        return _I32.pack(0) + _I32.pack(0) + _I32.pack(elem_oid)
    dims: list[int] = []
    level: Any = values
    while isinstance(level, list):
        dims.append(len(level))
        level = level[0] if level else None
    flat: list[Any] = values
    for _ in range(len(dims) - 1):
        flat = [x for sub in flat for x in sub]
    has_null = any(x is None for x in flat)
    out = [struct.pack(">iii", len(dims), 1 if has_null else 0, elem_oid)]
    for d in dims:
        out.append(struct.pack(">ii", d, 1))
    for x in flat:
        if x is None:
            out.append(_I32.pack(-1))
        else:
            b = elem(x)
            out.append(_I32.pack(len(b)))
            out.append(b)
    return b"".join(out)


def array_recv(data: bytes, elem: Decoder) -> list[Any]:
    ndim, _flags, _oid = struct.unpack_from(">iii", data)
    if ndim == 0:
        return []
    off = 12
    dims = []
    for _ in range(ndim):
        size, _lb = struct.unpack_from(">ii", data, off)
        dims.append(size)
        off += 8
    count = 1
    for d in dims:
        count *= d
    flat: list[Any] = []
    for _ in range(count):
        (n,) = _I32.unpack_from(data, off)
        off += 4
        if n < 0:
            flat.append(None)
        else:
            flat.append(elem(data[off : off + n]))
            off += n
    for d in reversed(dims[1:]):
        flat = [flat[i : i + d] for i in range(0, len(flat), d)]
    return flat


# -- text -----------------------------------------------------------------------------------------
def _bytea_text(b: bytes) -> str:
    return "\\x" + bytes(b).hex()


def _timestamp_naive(v: datetime) -> datetime:
    if v.tzinfo is not None:
        return v.astimezone(UTC).replace(tzinfo=None)
    return v


# -- dates and timestamps beyond Python's datetime ------------------------------------------
# Rows carry values of years outside 1..9999 (and BC) as numpy datetime64 (see
# engine.civil.py_temporal); these print and travel through the integer calendar code.
_PG_EPOCH_DAYS = 10_957  # 2000-01-01 in days since 1970-01-01
_PG_EPOCH_US = _PG_EPOCH_DAYS * 86_400_000_000
_NEAR = (datetime(2, 1, 1, tzinfo=UTC), datetime(9998, 12, 31, tzinfo=UTC))


def _wide_int(v: np.datetime64) -> int:
    return int(v.astype(np.int64))


def _date_text(v: Any) -> str:
    return civil.wide_text(v) if isinstance(v, np.datetime64) else tm.format_date(v)


def _timestamp_text(v: Any) -> str:
    if isinstance(v, np.datetime64):
        return civil.wide_text(v)
    return tm.format_timestamp(_timestamp_naive(v))


def _wide_tstz_text(v: np.datetime64, tz: tzinfo) -> str:
    """The zone's offset at the value, or at the nearest instant Python's zone rules reach
    (they repeat beyond; before, the zone's earliest offset applies)."""
    us = _wide_int(v)
    near = _NEAR[0] if us < 0 else _NEAR[1]
    off = near.astimezone(tz).utcoffset() or timedelta(0)
    off_us = (off.days * 86_400 + off.seconds) * 1_000_000
    return str(civil.format_us(np.array([us + off_us]), tm.format_offset(off))[0])


def _tstz_text(tz: tzinfo) -> Callable[[Any], str]:
    def fmt(v: Any) -> str:
        if isinstance(v, np.datetime64):
            return _wide_tstz_text(v, tz)
        return tm.format_timestamptz(v, tz)

    return fmt


def _wide_parser(parse: Callable[[str], Any], kind: TypeKind) -> Callable[[str], Any]:
    """Python's parser for the common text, the engine's (years beyond 9999, BC, and
    PostgreSQL's messages) when that one refuses."""
    engine_parse = {
        TypeKind.DATE: engine_temporal.text_to_date,
        TypeKind.TIMESTAMP: engine_temporal.text_to_timestamp,
    }[kind]

    def parse_any(s: str) -> Any:
        try:
            return parse(s)
        except Exception:
            return civil.py_temporal(engine_parse(pa.array([s], pa.string())))[0]

    return parse_any


def text_formatter(t: SqlType, tz: tzinfo) -> Callable[[Any], str]:
    """The function printing one non-NULL value of type `t` as Postgres text."""
    k = t.kind
    if k is TypeKind.BOOLEAN:
        return lambda v: "t" if v else "f"
    if k in _INT_RANGE:
        return lambda v: str(int(v))
    if k is TypeKind.DOUBLE:
        return lambda v: format_float8(float(v))
    if k is TypeKind.REAL:
        return lambda v: format_float4(float(v))
    if k is TypeKind.NUMERIC:
        scale = t.scale
        return lambda v: format_numeric(v if isinstance(v, Decimal) else Decimal(str(v)), scale)
    if k is TypeKind.BYTEA:
        return _bytea_text
    if k is TypeKind.DATE:
        return _date_text
    if k is TypeKind.TIME:
        return tm.format_time
    if k is TypeKind.TIMESTAMP:
        return _timestamp_text
    if k is TypeKind.TIMESTAMPTZ:
        return _tstz_text(tz)
    if k is TypeKind.INTERVAL:
        return tm.format_interval
    if k is TypeKind.LIST:
        assert t.elem is not None  # nested arrays: inner braces, elements of the innermost type
        return array_text_encoder(text_formatter(t.elem.innermost, tz))
    return str  # varchar, jsonb, unknown


def _utf8(f: Callable[[Any], str]) -> Encoder:
    return lambda v: f(v).encode()


def _bad_input(t: SqlType, text: str) -> InvalidTextRepresentation:
    return InvalidTextRepresentation(f'invalid input syntax for type {t.display}: "{text}"')


def text_parser(t: SqlType, tz: tzinfo) -> Callable[[str], Any]:
    """The function reading one non-NULL text-format parameter of type `t`."""
    k = t.kind
    if k is TypeKind.BOOLEAN:

        def parse_bool(s: str) -> bool:
            low = s.strip().lower()
            if low in ("t", "true", "1", "yes", "y", "on"):
                return True
            if low in ("f", "false", "0", "no", "n", "off"):
                return False
            raise _bad_input(t, s)

        return parse_bool
    if k in _INT_RANGE:
        lo, hi = _INT_RANGE[k]

        def parse_int(s: str) -> int:
            try:
                v = int(s.strip())
            except ValueError:
                raise _bad_input(t, s) from None
            if not lo <= v <= hi:
                raise NumericValueOutOfRange(f'value "{s}" is out of range for type {t.display}')
            return v

        return parse_int
    if k in (TypeKind.REAL, TypeKind.DOUBLE):

        def parse_float(s: str) -> float:
            try:
                return float(s.strip())
            except ValueError:
                raise _bad_input(t, s) from None

        return parse_float
    if k is TypeKind.NUMERIC:

        def parse_numeric(s: str) -> Decimal:
            try:
                d = Decimal(s.strip())
            except InvalidOperation:
                raise _bad_input(t, s) from None
            if not d.is_finite() and not _NUMERIC_SPECIAL.match(s):  # sNaN, -nan
                raise _bad_input(t, s)
            return d

        return parse_numeric
    if k is TypeKind.BYTEA:
        return bytea_in  # a text parameter reads as a bytea literal does (byteain)
    if k is TypeKind.DATE:
        return _wide_parser(tm.parse_date, k)
    if k is TypeKind.TIME:
        return tm.parse_time
    if k is TypeKind.TIMESTAMP:
        return _wide_parser(tm.parse_timestamp, k)
    if k is TypeKind.TIMESTAMPTZ:
        return lambda s: tm.parse_timestamptz(s, tz)
    if k is TypeKind.INTERVAL:
        return tm.parse_interval
    if k is TypeKind.LIST:
        assert t.elem is not None
        elem = text_parser(t.elem, tz)
        return lambda s: parse_array_text(s, elem)
    return lambda s: s  # varchar, jsonb (JSON text as str), unknown


# -- binary ------------------------------------------------------------------------------------
def _pack(st: struct.Struct, conv: Callable[[Any], Any]) -> Encoder:
    return lambda v: st.pack(conv(v))


def _unpack(st: struct.Struct) -> Decoder:
    def dec(b: bytes) -> Any:
        if len(b) != st.size:
            raise ProtocolViolation(f"incorrect binary data format: expected {st.size} bytes")
        return st.unpack(b)[0]

    return dec


def _interval_send(v: pa.MonthDayNano) -> bytes:
    n = v.nanoseconds
    us = n // 1000 if n >= 0 else -((-n) // 1000)
    return _INTERVAL.pack(us, v.days, v.months)


def _interval_recv(b: bytes) -> pa.MonthDayNano:
    us, days, months = _INTERVAL.unpack(b)
    return pa.MonthDayNano([months, days, us * 1000])


_TS_INF = 2**63 - 1
_TS_NINF = -(2**63)


def _ts_recv(b: bytes, aware: bool) -> datetime | np.datetime64:
    (us,) = _I64.unpack(b)
    if us in (_TS_INF, _TS_NINF):
        edge = datetime.max if us == _TS_INF else datetime.min
        return edge.replace(tzinfo=UTC) if aware else edge
    base = tm.PG_EPOCH_TZ if aware else tm.PG_EPOCH
    try:
        return base + timedelta(microseconds=us)
    except OverflowError:
        if aware:
            raise
        unix = us + _PG_EPOCH_US
        civil.check_us(np.array([unix]))
        return np.datetime64(unix, "us")


def _date_recv(b: bytes) -> date | np.datetime64:
    (days,) = _I32.unpack(b)
    if days == 2**31 - 1:
        return date.max
    if days == -(2**31):
        return date.min
    try:
        return tm.PG_EPOCH_DATE + timedelta(days=days)
    except OverflowError:
        unix = days + _PG_EPOCH_DAYS
        civil.check_days(np.array([unix]))
        return np.datetime64(unix, "D")


def _date_send(v: Any) -> bytes:
    if isinstance(v, np.datetime64):
        return _I32.pack(_wide_int(v) - _PG_EPOCH_DAYS)
    return _I32.pack((v - tm.PG_EPOCH_DATE).days)


def _ts_send(v: Any) -> bytes:
    if isinstance(v, np.datetime64):
        return _I64.pack(_wide_int(v) - _PG_EPOCH_US)
    return _I64.pack(tm.usecs_since(_timestamp_naive(v), tm.PG_EPOCH))


def _tstz_send(v: datetime | np.datetime64) -> bytes:
    if isinstance(v, np.datetime64):
        return _I64.pack(_wide_int(v) - _PG_EPOCH_US)
    if v.tzinfo is None:
        v = v.replace(tzinfo=UTC)
    return _I64.pack(tm.usecs_since(v, tm.PG_EPOCH_TZ))


def binary_encoder(t: SqlType) -> Encoder:
    """The function producing the binary (`*_send`) form of one non-NULL value of `t`."""
    k = t.kind
    if k is TypeKind.BOOLEAN:
        return lambda v: b"\x01" if v else b"\x00"
    if k is TypeKind.SMALLINT:
        return _pack(_I16, int)
    if k is TypeKind.INT:
        return _pack(_I32, int)
    if k is TypeKind.BIGINT:
        return _pack(_I64, int)
    if k is TypeKind.REAL:
        return _pack(_F32, float)
    if k is TypeKind.DOUBLE:
        return _pack(_F64, float)
    if k is TypeKind.NUMERIC:
        scale = t.scale
        return lambda v: numeric_send(v if isinstance(v, Decimal) else Decimal(str(v)), scale)
    if k is TypeKind.BYTEA:
        return bytes
    if k is TypeKind.DATE:
        return _date_send
    if k is TypeKind.TIME:
        return lambda v: _I64.pack(tm.time_usecs(v))
    if k is TypeKind.TIMESTAMP:
        return _ts_send
    if k is TypeKind.TIMESTAMPTZ:
        return _tstz_send
    if k is TypeKind.INTERVAL:
        return _interval_send
    if k is TypeKind.JSONB:
        return lambda v: b"\x01" + v.encode()
    if k is TypeKind.LIST:
        assert t.elem is not None
        elem_t = t.elem.innermost  # nested arrays: one multi-dimensional array
        elem = binary_encoder(elem_t)
        return lambda v: array_send(v, elem_t.oid, elem)
    return lambda v: str(v).encode()  # varchar, unknown


def binary_decoder(t: SqlType) -> Decoder:
    """The function reading one non-NULL binary-format parameter of type `t`."""
    k = t.kind
    if k is TypeKind.BOOLEAN:
        return lambda b: b != b"\x00"
    if k is TypeKind.SMALLINT:
        return _unpack(_I16)
    if k is TypeKind.INT:
        return _unpack(_I32)
    if k is TypeKind.BIGINT:
        return _unpack(_I64)
    if k is TypeKind.REAL:
        return _unpack(_F32)
    if k is TypeKind.DOUBLE:
        return _unpack(_F64)
    if k is TypeKind.NUMERIC:
        return numeric_recv
    if k is TypeKind.BYTEA:
        return bytes
    if k is TypeKind.DATE:
        return _date_recv
    if k is TypeKind.TIME:
        return lambda b: tm.time_from_usecs(_I64.unpack(b)[0])
    if k is TypeKind.TIMESTAMP:
        return lambda b: _ts_recv(b, aware=False)
    if k is TypeKind.TIMESTAMPTZ:
        return lambda b: _ts_recv(b, aware=True)
    if k is TypeKind.INTERVAL:
        return _interval_recv
    if k is TypeKind.JSONB:

        def jsonb_recv(b: bytes) -> str:
            if b[:1] != b"\x01":
                raise ProtocolViolation("unsupported jsonb version number")
            return b[1:].decode()

        return jsonb_recv
    if k is TypeKind.LIST:
        assert t.elem is not None
        elem = binary_decoder(t.elem)
        return lambda b: array_recv(b, elem)
    return lambda b: bytes(b).decode()


# -- entry points -------------------------------------------------------------------------------
def encoder(t: SqlType, fmt: int, tz: tzinfo) -> Encoder:
    """Pick the encoder for a result column of type `t` in format `fmt` (0 text, 1 binary)."""
    if fmt == BINARY:
        return binary_encoder(t)
    return _utf8(text_formatter(t, tz))


def decoder(t: SqlType, fmt: int, tz: tzinfo) -> Decoder:
    """Pick the decoder for a Bind parameter of type `t` sent in format `fmt`."""
    if fmt == BINARY:
        return binary_decoder(t)
    parse = text_parser(t, tz)

    def dec(b: bytes) -> Any:
        try:
            s = bytes(b).decode()
        except UnicodeDecodeError:
            raise InvalidTextRepresentation('invalid byte sequence for encoding "UTF8"') from None
        return parse(s)

    return dec


def encode_value(value: Any, t: SqlType, fmt: int = TEXT, tz: tzinfo = UTC) -> bytes | None:
    """One value to its wire bytes (None for NULL); convenience for tests and tools."""
    if value is None:
        return None
    return encoder(t, fmt, tz)(value)


def decode_value(data: bytes | None, t: SqlType, fmt: int = TEXT, tz: tzinfo = UTC) -> Any:
    if data is None:
        return None
    return decoder(t, fmt, tz)(data)


__all__ = [
    "BINARY",
    "TEXT",
    "Decoder",
    "Encoder",
    "binary_decoder",
    "binary_encoder",
    "decode_value",
    "decoder",
    "encode_value",
    "encoder",
    "format_float4",
    "format_float8",
    "format_numeric",
    "numeric_recv",
    "numeric_send",
    "parse_array_text",
    "text_formatter",
    "text_parser",
]
