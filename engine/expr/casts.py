"""Cast kernels between every pair of engine types, and the rules saying which casts exist.

`cast_kernel(src, dst)` returns a column function (or None when Postgres has no such cast);
`can_cast(src, dst, level)` answers for the three Postgres cast contexts: implicit (operator
and function resolution), assignment (INSERT/UPDATE) and explicit (CAST / ::). Text input
parsing and output formatting follow Postgres/RisingWave text forms.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from enum import IntEnum

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import (
    EngineError,
    InvalidParameterValue,
    InvalidTextRepresentation,
    NumericValueOutOfRange,
    UnconvertibleValue,
)
from engine.expr import jsonb, temporal
from engine.expr.core import Datum, EvalContext, out_of_range
from engine.numeric import as_floats, finite_only, special_masks, with_specials
from engine.types import (
    NUMERIC,
    SqlType,
    TypeKind,
)

K = TypeKind
ArrayFn = Callable[[pa.Array, EvalContext], pa.Array]


class CastLevel(IntEnum):
    IMPLICIT = 0
    ASSIGN = 1
    EXPLICIT = 2


# numeric promotion order used by implicit casts
_NUM_RANK = {K.SMALLINT: 0, K.INT: 1, K.BIGINT: 2, K.NUMERIC: 3, K.REAL: 4, K.DOUBLE: 5}
_TIME_RANK = {K.DATE: 0, K.TIMESTAMP: 1, K.TIMESTAMPTZ: 2}


def can_cast(src: SqlType, dst: SqlType, level: CastLevel) -> bool:
    if src == dst or src.kind is K.UNKNOWN:
        return True
    s, d = src.kind, dst.kind
    if s in _NUM_RANK and d in _NUM_RANK:
        return level >= CastLevel.ASSIGN or _NUM_RANK[s] < _NUM_RANK[d]
    if s in _TIME_RANK and d in _TIME_RANK:
        return level >= CastLevel.ASSIGN or _TIME_RANK[s] < _TIME_RANK[d]
    if s in (K.TIMESTAMP, K.TIMESTAMPTZ) and d is K.TIME:
        return level >= CastLevel.ASSIGN
    if s is K.TIME and d is K.INTERVAL:
        return True
    if d is K.VARCHAR:
        return level >= CastLevel.ASSIGN
    if s is K.VARCHAR:
        return level >= CastLevel.EXPLICIT
    if s is K.JSONB and (d in _NUM_RANK or d is K.BOOLEAN):
        return level >= CastLevel.EXPLICIT
    if s is K.BOOLEAN and d in (K.INT,) or s is K.INT and d is K.BOOLEAN:
        return level >= CastLevel.EXPLICIT
    if s is K.LIST and d is K.LIST:
        assert src.elem is not None and dst.elem is not None
        return can_cast(src.elem, dst.elem, level)
    return False


def cast_datum(d: Datum, src: SqlType, dst: SqlType, n: int, ctx: EvalContext) -> Datum:
    """Cast a column (or scalar) from src to dst; scalars stay scalars."""
    if src == dst:
        return d
    fn = array_cast_fn(src, dst)
    if isinstance(d, pa.Scalar):
        if not d.is_valid:
            return pa.scalar(None, dst.arrow)
        arr = pa.repeat(d, 1)  # keeps the raw value (numeric specials)
        if src.kind is not K.UNKNOWN and arr.type != src.arrow:
            arr = pa.array([d.as_py()], src.arrow)
        return fn(arr, ctx)[0]
    return fn(d, ctx)


def array_cast_fn(src: SqlType, dst: SqlType) -> ArrayFn:
    fn = _lookup(src, dst)
    if fn is None:
        raise AssertionError(f"no cast from {src} to {dst}")
    return fn


def _lookup(src: SqlType, dst: SqlType) -> ArrayFn | None:
    s, d = src.kind, dst.kind
    if src == dst:
        return lambda a, c: a
    if s is K.UNKNOWN:
        return lambda a, c: pa.nulls(len(a), dst.arrow)
    if d is K.VARCHAR:
        return _to_text(src)
    if s in (K.VARCHAR,):
        return _from_text(dst)
    if s in _NUM_RANK and d in _NUM_RANK:
        return _num_to_num(src, dst)
    if s is K.BOOLEAN and d is K.INT:
        return lambda a, c: a.cast(pa.int32())
    if s is K.INT and d is K.BOOLEAN:
        return lambda a, c: pc.not_equal(a, 0)
    if s is K.JSONB and (d in _NUM_RANK or d is K.BOOLEAN):
        return _jsonb_to(dst)
    if s in _TIME_RANK or s is K.TIME:
        return _time_cast(src, dst)
    if s is K.LIST and d is K.LIST:
        assert src.elem is not None and dst.elem is not None
        inner = array_cast_fn(src.elem, dst.elem)

        def list_cast(a: pa.Array, c: EvalContext) -> pa.Array:
            vals = inner(a.values if a.offset == 0 else a.flatten(), c)
            if a.offset:
                a = pa.concat_arrays([a])
            return pa.ListArray.from_arrays(a.offsets, vals, type=dst.arrow, mask=a.is_null())

        return list_cast
    return None


# -- numbers -----------------------------------------------------------------------------------


def _num_to_num(src: SqlType, dst: SqlType) -> ArrayFn:
    def fn(a: pa.Array, ctx: EvalContext) -> pa.Array:
        if dst.is_integer:
            if src.is_float:
                bad = pc.fill_null(pc.or_(pc.is_nan(a), pc.is_inf(a)), False)
                if pc.any(bad).as_py():
                    raise out_of_range(dst)
                # PostgreSQL's float -> integer is rint(): halves to even (2.5 -> 2); a
                # numeric rounds halves away from zero (2.5 -> 3)
                a = pc.round(a, round_mode="half_to_even")
            elif src.kind is K.NUMERIC:
                m = special_masks(a)
                if m is not None:
                    if m[0].any():
                        raise UnconvertibleValue(f"cannot convert NaN to {dst.display}")
                    raise UnconvertibleValue(f"cannot convert infinity to {dst.display}")
                a = pc.round(a, round_mode="half_towards_infinity")
            try:
                return a.cast(dst.arrow)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                raise out_of_range(dst) from e
        if dst.kind is K.NUMERIC:
            if src.is_float:
                a = a.cast(pa.float64())
                nan = pc.fill_null(pc.is_nan(a), False)
                inf = pc.fill_null(pc.is_inf(a), False)
                if pc.any(pc.or_(nan, inf)).as_py():
                    neg = pc.and_(inf, pc.fill_null(pc.less(a, 0.0), False))
                    finite = fn(pc.if_else(pc.or_(nan, inf), pa.scalar(0.0), a), ctx)
                    nan_m = nan.to_numpy(zero_copy_only=False)
                    inf_m = inf.to_numpy(zero_copy_only=False)
                    neg_m = neg.to_numpy(zero_copy_only=False)
                    return with_specials(finite, nan_m, inf_m & ~neg_m, inf_m & neg_m)
                big = pc.max(pc.abs(a))
                if big.is_valid and big.as_py() >= 1e28:  # the unchecked cast would wrap
                    raise NumericValueOutOfRange(
                        "numeric field overflow",
                        detail="Swell's numeric holds up to 28 digits before the decimal "
                        "point and 10 after it.",
                    )
                a = pc.round(a, 10)
                try:
                    return a.cast(dst.arrow, safe=False)
                except pa.ArrowInvalid as e:
                    raise NumericValueOutOfRange("numeric field overflow") from e
            return a.cast(dst.arrow)
        if src.kind is K.NUMERIC:
            # via text: arrow's decimal->float cast is not correctly rounded
            m = special_masks(a)
            f = finite_only(a).cast(pa.string()).cast(pa.float64())
            if m is not None:
                f = pc.if_else(pa.array(m[0] | m[1] | m[2]), pa.array(as_floats(a)), f)
            return f.cast(dst.arrow, safe=False)
        return a.cast(dst.arrow, safe=False)

    return fn


_BOOL_TRUE = pa.array(["t", "true", "y", "yes", "on", "1", "tr", "tru", "ye"])
_BOOL_FALSE = pa.array(["f", "false", "n", "no", "off", "0", "fa", "fal", "fals", "of"])
_INT_RE = r"^\s*[+-]?\d+\s*$"
_FLOAT_RE = r"^\s*[+-]?((\d+\.?\d*|\.\d+)([eE][+-]?\d+)?|inf|infinity|nan)\s*$"


def _first_bad(a: pa.Array, ok: pa.Array, tname: str) -> None:
    bad = pc.and_(pc.is_valid(a), pc.invert(pc.fill_null(ok, False)))
    if pc.any(bad).as_py():
        idx = pc.index(bad, True).as_py()
        raise InvalidTextRepresentation(
            f'invalid input syntax for type {tname}: "{a[idx].as_py()}"'
        )


_NUMERIC_RE = r"^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$"


def text_syntax_errors(a: pa.Array, dst: SqlType) -> tuple[np.ndarray, EngineError] | None:
    """The rows of text column `a` whose syntax a cast to `dst` (boolean, integer, float,
    numeric) rejects, vectorised, with the error of the first; None for other targets.
    Non-strict evaluation (engine.expr.nonstrict) nulls them instead of bisecting."""
    if dst.kind is K.BOOLEAN:
        t = pc.utf8_lower(pc.utf8_trim_whitespace(a))
        ok = pc.or_(pc.is_in(t, value_set=_BOOL_TRUE), pc.is_in(t, value_set=_BOOL_FALSE))
        tname = "boolean"
    elif dst.is_integer:
        ok, tname = pc.match_substring_regex(a, _INT_RE), dst.display
    elif dst.is_float:
        ok, tname = pc.match_substring_regex(pc.utf8_lower(a), _FLOAT_RE), dst.display
    elif dst.kind is K.NUMERIC:
        ok, tname = pc.match_substring_regex(a, _NUMERIC_RE), "numeric"
    else:
        return None
    bad = pc.and_(pc.is_valid(a), pc.invert(pc.fill_null(ok, False)))
    mask = bad.to_numpy(zero_copy_only=False)
    if not mask.any():
        return mask, InvalidTextRepresentation("")
    v = a[int(mask.argmax())].as_py()
    return mask, InvalidTextRepresentation(f'invalid input syntax for type {tname}: "{v}"')


def text_to_int(a: pa.Array, dst: SqlType) -> pa.Array:
    _first_bad(a, pc.match_substring_regex(a, _INT_RE), dst.display)
    t = pc.utf8_trim_whitespace(a)
    try:
        wide = t.cast(pa.int64())
    except pa.ArrowInvalid:
        wide = None
    if wide is not None:
        try:
            return wide.cast(dst.arrow)
        except pa.ArrowInvalid:
            pass
    # find the offending value for the Postgres message
    for v in t.to_pylist():
        if v is not None:
            iv = int(v)
            bits = {K.SMALLINT: 15, K.INT: 31, K.BIGINT: 63}[dst.kind]
            if not -(2**bits) <= iv < 2**bits:
                raise NumericValueOutOfRange(f'value "{v}" is out of range for type {dst.display}')
    raise out_of_range(dst)


def text_to_float(a: pa.Array, dst: SqlType) -> pa.Array:
    low = pc.utf8_lower(a)
    _first_bad(a, pc.match_substring_regex(low, _FLOAT_RE), dst.display)
    t = pc.utf8_trim_whitespace(low)
    out = t.cast(pa.float64()).cast(dst.arrow, safe=False)
    overflow = pc.and_(pc.is_inf(out), pc.invert(pc.match_substring(t, "inf")))
    if pc.any(overflow).as_py():
        v = a[pc.index(overflow, True).as_py()].as_py()
        raise NumericValueOutOfRange(f'"{v.strip()}" is out of range for type {dst.display}')
    return out


_NUMERIC_NAN_RE = r"(?i)^\s*nan\s*$"
_NUMERIC_INF_RE = r"(?i)^\s*[+-]?inf(inity)?\s*$"


def text_to_numeric(a: pa.Array) -> pa.Array:
    nan = pc.fill_null(pc.match_substring_regex(a, _NUMERIC_NAN_RE), False)
    inf = pc.fill_null(pc.match_substring_regex(a, _NUMERIC_INF_RE), False)
    special = pc.or_(nan, inf)
    if pc.any(special).as_py():
        neg = pc.and_(inf, pc.fill_null(pc.match_substring(pc.utf8_trim_whitespace(a), "-"), False))
        finite = text_to_numeric(pc.if_else(special, pa.scalar("0"), a))
        nan_m = nan.to_numpy(zero_copy_only=False)
        inf_m = inf.to_numpy(zero_copy_only=False)
        neg_m = neg.to_numpy(zero_copy_only=False)
        return with_specials(finite, nan_m, inf_m & ~neg_m, inf_m & neg_m)
    _first_bad(a, pc.match_substring_regex(a, _NUMERIC_RE), "numeric")
    t = pc.utf8_trim_whitespace(a)
    try:
        return t.cast(NUMERIC.arrow)
    except pa.ArrowInvalid:
        pass
    q = Decimal(1).scaleb(-10)
    vals: list[Decimal | None] = []
    for v in t.to_pylist():
        if v is None:
            vals.append(None)
            continue
        try:
            vals.append(Decimal(v).quantize(q, rounding=ROUND_HALF_UP))
        except InvalidOperation as e:
            raise NumericValueOutOfRange("numeric field overflow") from e
    try:
        return pa.array(vals, NUMERIC.arrow)
    except (pa.ArrowInvalid, OverflowError) as e:
        raise NumericValueOutOfRange("numeric field overflow") from e


def text_to_bool(a: pa.Array) -> pa.Array:
    t = pc.utf8_lower(pc.utf8_trim_whitespace(a))
    is_t = pc.is_in(t, value_set=_BOOL_TRUE)
    is_f = pc.is_in(t, value_set=_BOOL_FALSE)
    _first_bad(a, pc.or_(is_t, is_f), "boolean")
    return pc.if_else(pc.is_null(a), None, is_t)


def float_text(v: float) -> str:
    """Postgres float8 output (shortest round-trip digits, exponent outside 1e-4..1e15)."""
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "Infinity" if v > 0 else "-Infinity"
    r = repr(v)
    if "e" in r or "E" in r:
        mant, exp = r.split("e")
        e = int(exp)
        if -4 <= e < 15:
            return _strip(format(Decimal(r), "f"))
        mant = _strip(mant) if "." in mant else mant
        return f"{mant}e{'+' if e >= 0 else '-'}{abs(e):02d}"
    if r.endswith(".0"):
        r = r[:-2]
    digits = r.lstrip("-").split(".")[0]
    if len(digits) > 15:
        d = Decimal(r)
        mant, _, exp = f"{d:e}".partition("e")
        return f"{_strip(mant)}e+{int(exp):02d}"
    return r


def _strip(m: str) -> str:
    if "." in m:
        m = m.rstrip("0").rstrip(".")
    return m


def float32_text(v: float) -> str:
    if math.isnan(v) or math.isinf(v):
        return float_text(v)
    r = repr(float(np.float32(v)))
    for prec in range(1, 10):
        s = f"{v:.{prec}g}"
        if np.float32(float(s)) == np.float32(v):
            r = s
            break
    f = float(r)
    return float_text(f) if "e" not in r else _fmt_exp(r)


def _fmt_exp(r: str) -> str:
    mant, exp = r.split("e")
    e = int(exp)
    return f"{_strip(mant)}e{'+' if e >= 0 else '-'}{abs(e):02d}"


def numeric_text(a: pa.Array, scale: int | None = None) -> pa.Array:
    """Numeric output: `scale` fraction digits when the type knows its display scale
    (numeric(p, s), 1.50, round(x, 2)), as PostgreSQL prints them, else without trailing
    fraction zeros ('1.5', '0', '-0.0000001')."""
    m = special_masks(a)
    if m is not None:
        s = numeric_text(finite_only(a), scale)
        s = pc.if_else(pa.array(m[0]), pa.scalar("NaN"), s)
        s = pc.if_else(pa.array(m[1]), pa.scalar("Infinity"), s)
        return pc.if_else(pa.array(m[2]), pa.scalar("-Infinity"), s)
    if scale is not None and 0 <= scale <= a.type.scale:
        return _scaled_numeric_text(a, scale)
    s = a.cast(pa.string())
    if pc.any(pc.match_substring(s, "E")).as_py():
        # arrow prints small magnitudes in scientific notation; Postgres never does
        s = pa.array(
            [None if v is None else _strip(format(v, "f")) for v in a.to_pylist()], pa.string()
        )
    s = pc.replace_substring_regex(s, r"(\.\d*?)0+$", r"\1")
    return pc.replace_substring_regex(s, r"\.$", "")


def _scaled_numeric_text(a: pa.Array, scale: int) -> pa.Array:
    """Finite numerics with exactly `scale` fraction digits (rounded half away from zero)."""
    r = pc.round(a, scale, round_mode="half_towards_infinity")
    s = r.cast(pa.decimal128(a.type.precision, scale)).cast(pa.string())
    if pc.any(pc.match_substring(s, "E")).as_py():  # scientific notation: zero, tiny values
        q = Decimal(1).scaleb(-scale)
        s = pa.array(
            [None if v is None else format(v.quantize(q), "f") for v in r.to_pylist()],
            pa.string(),
        )
    return s


def _quote_elem(s: str) -> str:
    if s == "" or any(c in s for c in ' ,{}"\\') or s.upper() == "NULL":
        return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return s


def _keep(s: str) -> str:
    return s


def _to_text(src: SqlType) -> ArrayFn:
    k = src.kind

    def fn(a: pa.Array, ctx: EvalContext) -> pa.Array:
        if k is K.BOOLEAN:
            return pc.if_else(a, "true", "false")
        if src.is_integer:
            return a.cast(pa.string())
        if k is K.DOUBLE:
            return pa.array(
                [None if v is None else float_text(v) for v in a.to_pylist()], pa.string()
            )
        if k is K.REAL:
            return pa.array(
                [None if v is None else float32_text(v) for v in a.to_pylist()], pa.string()
            )
        if k is K.NUMERIC:
            return numeric_text(a, src.scale)
        if k in (K.VARCHAR, K.JSONB):
            return a.cast(pa.string())
        if k is K.DATE:
            return temporal.format_date(a)
        if k is K.TIME:
            return temporal.format_time(a)
        if k is K.TIMESTAMP:
            return temporal.format_timestamp(a)
        if k is K.TIMESTAMPTZ:
            return temporal.format_timestamp(a, ctx.timezone)
        if k is K.INTERVAL:
            m, d, ns = temporal.interval_parts(a)
            valid = pc.is_valid(a).to_numpy(zero_copy_only=False)
            return pa.array(
                [
                    temporal.format_interval(int(m[i]), int(d[i]), int(ns[i])) if valid[i] else None
                    for i in range(len(a))
                ],
                pa.string(),
            )
        if k is K.BYTEA:
            return pa.array(
                [None if v is None else "\\x" + v.hex() for v in a.to_pylist()], pa.string()
            )
        if k is K.LIST:
            assert src.elem is not None
            flat = a.flatten()
            txt = _to_text(src.elem)(flat, ctx).to_pylist()
            offs = a.offsets.to_pylist()
            valid = pc.is_valid(a).to_pylist()
            # an inner array is already braced: `{{1,2},{3,4}}`, as PostgreSQL prints it
            quote = _keep if src.elem.kind is K.LIST else _quote_elem
            out: list[str | None] = []
            for i in range(len(a)):
                if not valid[i]:
                    out.append(None)
                    continue
                items = txt[offs[i] - offs[0] : offs[i + 1] - offs[0]]
                out.append("{" + ",".join("NULL" if x is None else quote(x) for x in items) + "}")
            return pa.array(out, pa.string())
        raise AssertionError(f"no text output for {src}")

    return fn


def _from_text(dst: SqlType) -> ArrayFn:
    k = dst.kind

    def fn(a: pa.Array, ctx: EvalContext) -> pa.Array:
        a = a.cast(pa.string())
        if k is K.BOOLEAN:
            return text_to_bool(a)
        if dst.is_integer:
            return text_to_int(a, dst)
        if dst.is_float:
            return text_to_float(a, dst)
        if k is K.NUMERIC:
            return text_to_numeric(a)
        if k is K.DATE:
            return temporal.text_to_date(a)
        if k is K.TIME:
            return temporal.text_to_time(a)
        if k is K.TIMESTAMP:
            return temporal.text_to_timestamp(a)
        if k is K.TIMESTAMPTZ:
            out = temporal.text_to_timestamptz(a)
            if ctx.timezone.upper() != "UTC":
                # values without an explicit offset are local to the session zone
                no_off = pc.invert(
                    pc.match_substring_regex(a, r"([Zz]|UTC|[+-]\d{1,2}(:?\d{2})?)\s*$")
                )
                local = pc.assume_timezone(
                    temporal.text_to_timestamp(a),
                    ctx.timezone,
                    ambiguous="earliest",
                    nonexistent="earliest",
                )
                out = pc.if_else(pc.fill_null(no_off, False), local.cast(out.type), out)
            return out
        if k is K.INTERVAL:
            vals = a.to_pylist()
            parts = [(0, 0, 0) if v is None else temporal.parse_interval(v) for v in vals]
            mask = np.array([v is None for v in vals], dtype=bool)
            arr = np.array(parts, dtype=np.int64).reshape(-1, 3)
            return temporal.make_interval_array(arr[:, 0], arr[:, 1], arr[:, 2], mask)
        if k is K.JSONB:
            return jsonb.text_to_jsonb(a)
        if k is K.BYTEA:
            return pa.array(
                [None if v is None else bytea_in(v) for v in a.to_pylist()], pa.binary()
            )
        if k is K.VARCHAR:
            return a
        if k is K.LIST:
            assert dst.elem is not None
            lists = [None if v is None else jsonb.parse_text_array(v) for v in a.to_pylist()]
            offsets = [0]
            flat: list[str | None] = []
            for lst in lists:
                flat.extend(lst or [])
                offsets.append(len(flat))
            inner = _from_text(dst.elem)(pa.array(flat, pa.string()), ctx)
            mask = pa.array([x is None for x in lists])
            return pa.ListArray.from_arrays(
                pa.array(offsets, pa.int32()), inner, type=dst.arrow, mask=mask
            )
        raise AssertionError(f"no text input for {dst}")

    return fn


_HEX_SPACE = " \n\t\r"
_HEX_DIGITS = "0123456789abcdefABCDEF"


def bytea_in(v: str) -> bytes:
    r"""PostgreSQL's byteain: `\x` + hex digit pairs (whitespace allowed between pairs),
    else the escape format: `\\` is one backslash, `\ooo` (first digit 0-3) one byte,
    any other backslash 22P02; other characters are their UTF-8 bytes."""
    if v.startswith("\\x"):
        return _hex_in(v)
    if "\\" not in v:
        return v.encode()
    out = bytearray()
    i, n = 0, len(v)
    while i < n:
        ch = v[i]
        if ch != "\\":
            j = v.find("\\", i)
            j = n if j < 0 else j
            out += v[i:j].encode()
            i = j
        elif v[i + 1 : i + 2] == "\\":
            out.append(0x5C)
            i += 2
        elif i + 3 < n and v[i + 1] in "0123" and v[i + 2] in "01234567" and v[i + 3] in "01234567":
            out.append(int(v[i + 1 : i + 4], 8))
            i += 4
        else:
            raise InvalidTextRepresentation("invalid input syntax for type bytea")
    return bytes(out)


def _hex_in(v: str) -> bytes:
    digits = v[2:]
    if digits.isascii() and digits.isalnum() and len(digits) % 2 == 0:
        with contextlib.suppress(ValueError):  # else the walk below names the bad digit
            return bytes.fromhex(digits)
    hexes: list[str] = []
    i, n = 2, len(v)
    while i < n:
        if v[i] in _HEX_SPACE:
            i += 1
            continue
        pair = v[i : i + 2]
        for d in pair:
            if d not in _HEX_DIGITS:
                raise InvalidParameterValue(f'invalid hexadecimal digit: "{d}"')
        if len(pair) < 2:
            raise InvalidParameterValue("invalid hexadecimal data: odd number of digits")
        hexes.append(pair)
        i += 2
    return bytes.fromhex("".join(hexes))


def _jsonb_to(dst: SqlType) -> ArrayFn:
    def fn(a: pa.Array, ctx: EvalContext) -> pa.Array:
        vals = jsonb.cast_scalar(a.to_pylist(), dst.display)
        if dst.kind is K.BOOLEAN:
            return pa.array(vals, pa.bool_())
        if dst.is_integer and all(type(v) is int or v is None for v in vals):
            try:
                return pa.array(vals, pa.int64()).cast(dst.arrow)
            except (pa.ArrowInvalid, OverflowError) as e:
                raise out_of_range(dst) from e
        if dst.is_float and all(type(v) in (int, float) or v is None for v in vals):
            return pa.array(vals, pa.float64()).cast(dst.arrow)
        dec = jsonb.to_numeric_values(vals)
        num = pa.array(dec, pa.decimal256(76, 20)) if dec else pa.array([], NUMERIC.arrow)
        num = pc.round(num, 10, round_mode="half_towards_infinity").cast(NUMERIC.arrow)
        if dst.kind is K.NUMERIC:
            return num
        return _num_to_num(NUMERIC, dst)(num, ctx)

    return fn


# -- temporal ------------------------------------------------------------------------------------


def _time_cast(src: SqlType, dst: SqlType) -> ArrayFn | None:
    s, d = src.kind, dst.kind

    def to_local(a: pa.Array, ctx: EvalContext) -> pa.Array:
        """timestamptz -> naive timestamp in the session zone."""
        if ctx.timezone.upper() == "UTC":
            return a.cast(pa.timestamp("us"))
        return pc.local_timestamp(a.cast(pa.timestamp("us", tz=ctx.timezone)))

    def from_local(a: pa.Array, ctx: EvalContext) -> pa.Array:
        if ctx.timezone.upper() == "UTC":
            return a.cast(pa.timestamp("us", tz="UTC"))
        return pc.assume_timezone(
            a, ctx.timezone, ambiguous="earliest", nonexistent="earliest"
        ).cast(pa.timestamp("us", tz="UTC"))

    def ts_to_date(a: pa.Array) -> pa.Array:
        return pc.floor_temporal(a, unit="day").cast(pa.date32())

    def ts_to_time(a: pa.Array) -> pa.Array:
        us = a.cast(pa.int64())
        day = pc.multiply(
            pc.floor(pc.divide(us.cast(pa.float64()), 86_400e6)).cast(pa.int64()), 86_400_000_000
        )
        return pc.subtract(us, day).cast(pa.time64("us"))

    if s is K.DATE and d is K.TIMESTAMP:
        return lambda a, c: a.cast(pa.timestamp("us"))
    if s is K.DATE and d is K.TIMESTAMPTZ:
        return lambda a, c: from_local(a.cast(pa.timestamp("us")), c)
    if s is K.TIMESTAMP and d is K.TIMESTAMPTZ:
        return from_local
    if s is K.TIMESTAMP and d is K.DATE:
        return lambda a, c: ts_to_date(a)
    if s is K.TIMESTAMP and d is K.TIME:
        return lambda a, c: ts_to_time(a)
    if s is K.TIMESTAMPTZ and d is K.TIMESTAMP:
        return to_local
    if s is K.TIMESTAMPTZ and d is K.DATE:
        return lambda a, c: ts_to_date(to_local(a, c))
    if s is K.TIMESTAMPTZ and d is K.TIME:
        return lambda a, c: ts_to_time(to_local(a, c))
    if s is K.TIME and d is K.INTERVAL:

        def t2i(a: pa.Array, c: EvalContext) -> pa.Array:
            us = pc.fill_null(a.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
            z = np.zeros(len(a), dtype=np.int64)
            return temporal.make_interval_array(
                z, z, us * 1000, pc.is_null(a).to_numpy(zero_copy_only=False)
            )

        return t2i
    return None
