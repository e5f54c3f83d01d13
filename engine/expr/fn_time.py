"""Date/time functions: now(), date_trunc, extract/date_part, to_timestamp, make_date.

`now()` reads the statement's `EvalContext.now` and marks the expression `has_now()` so the
planner can treat it as a temporal filter. Field extraction returns numeric like Postgres 14+
(exact: built from scaled integers, not floats).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import civil
from engine.errors import DatetimeFieldOverflow, FeatureNotSupported, InvalidParameterValue
from engine.expr import temporal
from engine.expr.coerce import implicit_cast, is_untyped
from engine.expr.core import Datum, EvalContext, Expr, Func, Literal, as_array
from engine.expr.registry import coerce_to, no_function, register
from engine.types import (
    DATE,
    DOUBLE,
    INT,
    INTERVAL,
    NUMERIC,
    TIMESTAMP,
    TIMESTAMPTZ,
    VARCHAR,
    SqlType,
    TypeKind,
)

K = TypeKind


def scaled_to_numeric(v: np.ndarray, scale: int, mask: np.ndarray | None) -> pa.Array:
    """int64 unscaled values with `scale` decimal places -> numeric (decimal128(38,10))."""
    v = v.astype(np.int64)
    words = np.empty((len(v), 2), dtype=np.int64)
    words[:, 0] = v
    words[:, 1] = np.where(v < 0, -1, 0)
    validity = None
    nulls = 0
    if mask is not None and mask.any():
        validity = pa.py_buffer(np.packbits(~mask, bitorder="little").tobytes())
        nulls = int(mask.sum())
    arr = pa.Array.from_buffers(
        pa.decimal128(38, scale), len(v), [validity, pa.py_buffer(words.tobytes())], nulls
    )
    return arr.cast(NUMERIC.arrow)


@register("now", "current_timestamp", "transaction_timestamp", "statement_timestamp")
def _now(args: list[Expr]) -> Expr:
    if args:
        raise no_function("now", args)
    return Func(
        "now",
        (),
        TIMESTAMPTZ,
        lambda a, n, c: pa.scalar(c.now_utc(), TIMESTAMPTZ.arrow),
        uses_now=True,
    )


@register("current_date")
def _current_date(args: list[Expr]) -> Expr:
    def kernel(a: list[Datum], n: int, c: EvalContext) -> Datum:
        ts = pa.array([c.now_utc()], TIMESTAMPTZ.arrow)
        local = (
            ts
            if c.timezone.upper() == "UTC"
            else pc.local_timestamp(ts.cast(pa.timestamp("us", tz=c.timezone)))
        )
        return pc.floor_temporal(local.cast(pa.timestamp("us")), unit="day").cast(pa.date32())[0]

    return Func("current_date", (), DATE, kernel, uses_now=True)


_TRUNC_UNITS = {
    "microseconds": "microsecond",
    "microsecond": "microsecond",
    "milliseconds": "millisecond",
    "millisecond": "millisecond",
    "second": "second",
    "seconds": "second",
    "minute": "minute",
    "minutes": "minute",
    "hour": "hour",
    "hours": "hour",
    "day": "day",
    "days": "day",
    "week": "week",
    "weeks": "week",
    "month": "month",
    "months": "month",
    "quarter": "quarter",
    "year": "year",
    "years": "year",
    "decade": "decade",
    "century": "century",
    "millennium": "millennium",
}


def _const_text(e: Expr, what: str) -> str:
    if isinstance(e, Literal) and isinstance(e.value, str):
        return e.value.lower()
    raise InvalidParameterValue(f"{what} must be a constant string")


@register("date_trunc")
def _date_trunc(args: list[Expr]) -> Expr:
    if len(args) != 2:
        raise no_function("date_trunc", args)
    unit_e, x = args
    if x.type.kind is K.DATE or is_untyped(x):
        x = implicit_cast(x, TIMESTAMPTZ) or x
    if x.type.kind not in (K.TIMESTAMP, K.TIMESTAMPTZ):
        raise no_function("date_trunc", args)
    unit_raw = _const_text(unit_e, "date_trunc unit")
    unit = _TRUNC_UNITS.get(unit_raw)
    if unit is None:
        raise InvalidParameterValue(f'timestamp units "{unit_raw}" not recognized')
    t = x.type

    def trunc(ts: pa.Array) -> pa.Array:
        if unit in ("decade", "century", "millennium"):
            span = {"decade": 10, "century": 100, "millennium": 1000}[unit]
            y = pc.year(ts).to_numpy(zero_copy_only=False)
            base = np.floor_divide(y - (1 if span > 10 else 0), span) * span + (
                1 if span > 10 else 0
            )
            days, _ = temporal.days_from_civil(base, np.ones_like(base), np.ones_like(base))
            return pa.array(days * temporal.US_PER_DAY).cast(pa.timestamp("us"))
        return pc.floor_temporal(ts, unit=unit, week_starts_monday=True)

    def kernel(a: list[Datum], n: int, c: EvalContext) -> Datum:
        v = as_array(a[1], n)
        if t.kind is K.TIMESTAMP or c.timezone.upper() == "UTC":
            naive = v.cast(pa.timestamp("us"))
            out = trunc(pc.fill_null(naive, 0) if naive.null_count else naive)
            out = pc.if_else(pc.is_null(naive), pa.scalar(None, out.type), out)
            return out.cast(t.arrow)
        local = pc.local_timestamp(v.cast(pa.timestamp("us", tz=c.timezone)))
        out = trunc(local)
        return pc.assume_timezone(
            out, c.timezone, ambiguous="earliest", nonexistent="earliest"
        ).cast(t.arrow)

    return Func("date_trunc", (Literal(unit_raw, VARCHAR), x), t, kernel)


_FIELDS = {
    "year",
    "month",
    "day",
    "hour",
    "minute",
    "second",
    "epoch",
    "dow",
    "isodow",
    "doy",
    "week",
    "quarter",
    "millisecond",
    "milliseconds",
    "microsecond",
    "microseconds",
    "decade",
    "century",
    "millennium",
    "isoyear",
    "julian",
    "timezone",
}
_ALIASES = {
    "years": "year",
    "months": "month",
    "days": "day",
    "hours": "hour",
    "minutes": "minute",
    "seconds": "second",
    "millisecond": "milliseconds",
    "microsecond": "microseconds",
    "mon": "month",
    "mons": "month",
}


def bind_extract(field: str, x: Expr, as_double: bool = False) -> Expr:
    """extract(field FROM x), numeric; `as_double`: date_part(field, x), the same value as
    double precision (PostgreSQL's date_part casts extract's numeric to float8)."""
    f = field.lower()
    f = _ALIASES.get(f, f)
    if f not in _FIELDS:
        raise InvalidParameterValue(
            f'unit "{field.lower()}" not recognized for type {x.type.display}'
        )
    if is_untyped(x):
        x = implicit_cast(x, TIMESTAMPTZ) or x
    k = x.type.kind
    if k not in (K.DATE, K.TIMESTAMP, K.TIMESTAMPTZ, K.TIME, K.INTERVAL):
        raise no_function("extract", [Literal(f, VARCHAR), x])
    t = x.type

    def kernel(a: list[Datum], n: int, c: EvalContext) -> Datum:
        v = as_array(a[1], n)
        mask = pc.is_null(v).to_numpy(zero_copy_only=False)
        if k is K.INTERVAL:
            vals, scale = _extract_interval(f, v)
        else:
            vals, scale = _extract_ts(f, v, t, c)
        if as_double:  # one correctly rounded division, as numeric_float8's strtod
            out = vals.astype(np.float64) / 10.0**scale if scale else vals.astype(np.float64)
            return pa.array(out, pa.float64(), mask=mask)
        return scaled_to_numeric(vals, scale, mask)

    if as_double:
        return Func("date_part", (Literal(f.upper(), VARCHAR), x), DOUBLE, kernel)
    return Func("extract", (Literal(f.upper(), VARCHAR), x), NUMERIC, kernel)


def _extract_ts(f: str, v: pa.Array, t: SqlType, c: EvalContext) -> tuple[np.ndarray, int]:
    if t.kind is K.TIMESTAMPTZ and f != "epoch" and c.timezone.upper() != "UTC":
        v = pc.local_timestamp(v.cast(pa.timestamp("us", tz=c.timezone)))
    if t.kind is K.DATE:
        v = v.cast(pa.timestamp("us"))
    if t.kind is K.TIME:
        v = v.cast(pa.int64()).cast(pa.timestamp("us"))
    v = v.cast(pa.timestamp("us"))
    raw = pc.fill_null(v.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
    vv = pa.array(raw).cast(pa.timestamp("us"))

    def np_(a: pa.Array) -> np.ndarray:
        return a.to_numpy(zero_copy_only=False).astype(np.int64)

    sec_us = np.mod(raw, 60_000_000)
    if f == "epoch":
        return raw, 6
    if f == "second":
        return sec_us, 6
    if f == "milliseconds":
        return sec_us, 3
    if f == "microseconds":
        return sec_us, 0
    simple = {
        "year": pc.year,
        "month": pc.month,
        "day": pc.day,
        "hour": pc.hour,
        "minute": pc.minute,
        "doy": pc.day_of_year,
        "quarter": pc.quarter,
        "week": pc.iso_week,
        "isoyear": pc.iso_year,
    }
    if f in ("year", "isoyear"):  # no year 0 in PostgreSQL: 1 BC is -1
        return civil.pg_year(np_(simple[f](vv))), 0
    if f in simple:
        return np_(simple[f](vv)), 0
    if f == "dow":
        return np_(pc.day_of_week(vv, count_from_zero=True, week_start=7)), 0
    if f == "isodow":
        return np_(pc.day_of_week(vv, count_from_zero=False, week_start=1)), 0
    y = np_(pc.year(vv))
    if f == "decade":  # y is the astronomical year (0 is 1 BC), as PostgreSQL's tm_year
        return np.where(y > 0, y // 10, -((8 - (y - 1)) // 10)), 0
    if f == "century":
        return np.where(y > 0, (y + 99) // 100, -((99 - (y - 1)) // 100)), 0
    if f == "millennium":
        return np.where(y > 0, (y + 999) // 1000, -((999 - (y - 1)) // 1000)), 0
    if f == "timezone":
        return np.zeros(len(raw), np.int64), 0
    if f == "julian":
        days = np.floor_divide(raw, temporal.US_PER_DAY) + 2440588
        if t.kind is K.DATE:
            return days, 0
        # the day's fraction at 10 places (1e10 / US_PER_DAY = 25 / 216), rounded half up
        frac = (np.mod(raw, temporal.US_PER_DAY) * 50 + 216) // 432
        return days * 10**10 + frac, 10
    raise InvalidParameterValue(f'unit "{f}" not supported')


def _extract_interval(f: str, v: pa.Array) -> tuple[np.ndarray, int]:
    m, d, ns = temporal.interval_parts(v)
    us = ns // 1000
    if f == "epoch":
        # C's truncating division, as PostgreSQL's interval_part: -1 month is -30 days,
        # not -1 year (365.25 days) + 11 months
        years = np.sign(m) * (np.abs(m) // 12)
        mons = m - years * 12
        secs_us = years * 36525 * 864 * 1_000_000  # 365.25 days per year
        total = secs_us + (mons * 30 + d) * temporal.US_PER_DAY + us
        return total, 6
    if f == "year":
        return np.trunc(m / 12).astype(np.int64), 0
    if f == "month":
        return np.fmod(m, 12), 0
    if f == "day":
        return d, 0
    if f == "hour":
        return np.trunc(us / 3_600_000_000).astype(np.int64), 0
    if f == "minute":
        return np.fmod(np.trunc(us / 60_000_000).astype(np.int64), 60), 0
    if f == "second":
        return np.fmod(us, 60_000_000), 6
    if f == "milliseconds":
        return np.fmod(us, 60_000_000), 3
    if f == "microseconds":
        return np.fmod(us, 60_000_000), 0
    raise InvalidParameterValue(f'unit "{f}" not supported for type interval')


@register("date_part")
def _date_part(args: list[Expr]) -> Expr:
    if len(args) != 2:
        raise no_function("date_part", args)
    return bind_extract(_const_text(args[0], "date_part field"), args[1], as_double=True)


@register("extract")
def _extract_fn(args: list[Expr]) -> Expr:
    if len(args) != 2:
        raise no_function("extract", args)
    return bind_extract(_const_text(args[0], "extract field"), args[1])


@register("to_timestamp")
def _to_timestamp(args: list[Expr]) -> Expr:
    if len(args) != 1:
        raise no_function("to_timestamp", args)
    (a,) = coerce_to("to_timestamp", args, [DOUBLE])

    def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
        v = as_array(x[0], n)
        us = pc.round(pc.multiply(v, 1e6))
        if pc.any(pc.is_inf(us)).as_py():
            raise DatetimeFieldOverflow("timestamp out of range")
        return us.cast(pa.int64()).cast(TIMESTAMPTZ.arrow)

    return Func("to_timestamp", (a,), TIMESTAMPTZ, kernel)


@register("make_date")
def _make_date(args: list[Expr]) -> Expr:
    a = coerce_to("make_date", args, [INT, INT, INT])

    def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
        cols = [as_array(v, n) for v in x]
        mask = np.zeros(n, dtype=bool)
        for col in cols:
            mask |= pc.is_null(col).to_numpy(zero_copy_only=False)
        y, m, d = (
            pc.fill_null(col, 1).to_numpy(zero_copy_only=False).astype(np.int64) for col in cols
        )
        y = np.where(y < 0, y + 1, y)  # negative years are BC
        days, ok = temporal.days_from_civil(y, m, d)
        bad = ~ok & ~mask
        if bad.any():
            i = int(np.argmax(bad))
            raise DatetimeFieldOverflow(
                f"date field value out of range: {y[i]}-{m[i]:02d}-{d[i]:02d}"
            )
        return (
            pa.array(days, pa.int64(), mask=mask if mask.any() else None)
            .cast(pa.int32())
            .cast(pa.date32())
        )

    return Func("make_date", tuple(a), DATE, kernel)


_DAY_NS = 86_400 * 10**9


def _tdiv(a: np.ndarray, b: int) -> np.ndarray:
    """C's integer division (toward zero), as PostgreSQL's interval code uses."""
    q: np.ndarray = np.sign(a) * (np.abs(a) // b)
    return q


def _justify(
    kind: str, m: np.ndarray, d: np.ndarray, t: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """PostgreSQL 15's justify_hours / justify_days / justify_interval on whole columns."""
    if kind == "justify_days":
        w = _tdiv(d, 30)
        d, m = d - w * 30, m + w
        fix = (m > 0) & (d < 0)
        d, m = np.where(fix, d + 30, d), np.where(fix, m - 1, m)
        fix = (m < 0) & (d > 0)
        return np.where(fix, m + 1, m), np.where(fix, d - 30, d), t
    if kind == "justify_interval":
        pre = ((d > 0) & (t > 0)) | ((d < 0) & (t < 0))
        w = np.where(pre, _tdiv(d, 30), 0)
        d, m = d - w * 30, m + w
    w = _tdiv(t, _DAY_NS)
    t, d = t - w * _DAY_NS, d + w
    if kind == "justify_interval":
        w = _tdiv(d, 30)
        d, m = d - w * 30, m + w
        fix = (m > 0) & ((d < 0) | ((d == 0) & (t < 0)))
        d, m = np.where(fix, d + 30, d), np.where(fix, m - 1, m)
        fix = (m < 0) & ((d > 0) | ((d == 0) & (t > 0)))
        d, m = np.where(fix, d - 30, d), np.where(fix, m + 1, m)
    fix = (d > 0) & (t < 0)
    t, d = np.where(fix, t + _DAY_NS, t), np.where(fix, d - 1, d)
    fix = (d < 0) & (t > 0)
    return m, np.where(fix, d + 1, d), np.where(fix, t - _DAY_NS, t)


def _justify_fn(kind: str) -> Any:
    def resolve(args: list[Expr]) -> Expr:
        a = coerce_to(kind, args, [INTERVAL])

        def kernel(v: list[Datum], n: int, ctx: EvalContext) -> Datum:
            iv = as_array(v[0], n, INTERVAL)
            m, d, t = _justify(kind, *temporal.interval_parts(iv))
            mask = pc.is_null(iv).to_numpy(zero_copy_only=False)
            return temporal.make_interval_array(m, d, t, mask)

        return Func(kind, tuple(a), INTERVAL, kernel)

    return resolve


for _kind in ("justify_days", "justify_hours", "justify_interval"):
    register(_kind)(_justify_fn(_kind))


@register("date_bin")
def _date_bin(args: list[Expr]) -> Expr:
    """date_bin(stride, source, origin): the start of the stride-wide bin `source` falls in,
    bins aligned on `origin` (timestamp or timestamptz), in numpy over the columns. As
    PostgreSQL 15: a stride with months is refused (0A000), a stride must be positive (22008)."""
    if len(args) != 3:
        raise no_function("date_bin", args)
    kinds = {a.type.kind for a in args[1:] if not is_untyped(a)}
    t = TIMESTAMPTZ if K.TIMESTAMPTZ in kinds else TIMESTAMP
    a = coerce_to("date_bin", args, [INTERVAL, t, t])

    def kernel(v: list[Datum], n: int, ctx: EvalContext) -> Datum:
        stride = as_array(v[0], n, INTERVAL)
        src, org = (as_array(x, n, t) for x in v[1:])
        mask = pc.or_(pc.or_(pc.is_null(stride), pc.is_null(src)), pc.is_null(org)).to_numpy(
            zero_copy_only=False
        )
        months, days, nanos = temporal.interval_parts(stride)
        live = ~mask
        if (months[live] != 0).any():
            raise FeatureNotSupported(
                "timestamps cannot be binned into intervals containing months or years"
            )
        step = (days * _DAY_NS + nanos) // 1000
        if (step[live] <= 0).any():
            raise DatetimeFieldOverflow("stride must be greater than zero")
        s = pc.fill_null(src.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
        o = pc.fill_null(org.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
        step = np.where(live, step, 1)
        out = o + ((s - o) // step) * step
        return pa.array(out, pa.int64(), mask=mask).cast(t.arrow)

    return Func("date_bin", tuple(a), t, kernel)


@register("make_timestamp")
def _make_timestamp(args: list[Expr]) -> Expr:
    """make_timestamp(year, month, day, hour, min, sec) in numpy over the columns; fields
    out of range are 22008 as PostgreSQL's (`date field value out of range: ...`,
    `time field value out of range: ...`)."""
    a = coerce_to("make_timestamp", args, [INT, INT, INT, INT, INT, DOUBLE])

    def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
        cols = [as_array(v, n) for v in x]
        mask = np.zeros(n, dtype=bool)
        for col in cols:
            mask |= pc.is_null(col).to_numpy(zero_copy_only=False)
        y, m, d, hh, mi = (
            pc.fill_null(col, 1).to_numpy(zero_copy_only=False).astype(np.int64) for col in cols[:5]
        )
        sec = pc.fill_null(cols[5], 0.0).to_numpy(zero_copy_only=False).astype(np.float64)
        days, ok = temporal.days_from_civil(np.where(y < 0, y + 1, y), m, d)
        bad = ~ok & ~mask
        if bad.any():
            i = int(np.argmax(bad))
            raise DatetimeFieldOverflow(
                f"date field value out of range: {y[i]}-{m[i]:02d}-{d[i]:02d}"
            )
        us = np.rint(sec * 1e6).astype(np.int64)
        tbad = ~mask & ((hh < 0) | (hh > 24) | (mi < 0) | (mi > 59) | (us < 0) | (us > 60_000_000))
        tbad |= ~mask & (hh == 24) & ((mi > 0) | (us > 0))
        if tbad.any():
            i = int(np.argmax(tbad))
            raise DatetimeFieldOverflow(
                f"time field value out of range: {hh[i]}:{mi[i]:02d}:{sec[i]:02g}"
            )
        out = days * 86_400_000_000 + (hh * 3600 + mi * 60) * 1_000_000 + us
        return pa.array(out, pa.int64(), mask=mask if mask.any() else None).cast(TIMESTAMP.arrow)

    return Func("make_timestamp", tuple(a), TIMESTAMP, kernel)
