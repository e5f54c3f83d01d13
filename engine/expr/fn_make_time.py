"""Date/time constructors and differences: make_interval (positional or named arguments),
make_time, make_timestamptz, age(ts, ts) / age(ts), localtimestamp / localtime.

All are column kernels in numpy / pyarrow.compute. `age` is PostgreSQL's symbolic
difference (timestamp_age): the field-by-field difference of the two timestamps' local
fields, negative fields borrowed from the next larger one (a month borrows the days of
the earlier operand's month), so `age('2020-03-01', '2020-01-31')` is `1 mon 1 day`.

Lifecycle: registered in the function table on import (engine.expr.binder imports every
fn_ module); `make_interval(days => 10)` is bound by the node binder registered here.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from engine.errors import DatetimeFieldOverflow, InvalidParameterValue
from engine.expr.core import Datum, EvalContext, Expr, Func, Literal, as_array
from engine.expr.registry import NODE_BINDERS, call, coerce_to, no_function, register
from engine.expr.temporal import make_interval_array
from engine.types import (
    DOUBLE,
    INT,
    INTERVAL,
    TIME,
    TIMESTAMP,
    TIMESTAMPTZ,
    VARCHAR,
    SqlType,
    TypeKind,
)

_US = 1_000_000
_DAY_US = 86_400 * _US
_MONTH_DAYS = [31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
_DAYS = np.array([_MONTH_DAYS, [31, 29, *_MONTH_DAYS[2:]]])  # [leap year][month - 1]


def _nulls(cols: list[pa.Array]) -> np.ndarray:
    mask = np.zeros(len(cols[0]) if cols else 0, dtype=bool)
    for col in cols:
        mask |= pc.is_null(col).to_numpy(zero_copy_only=False)
    return mask


def _ints(col: pa.Array, fill: Any = 0) -> np.ndarray:
    out: np.ndarray = pc.fill_null(col, fill).to_numpy(zero_copy_only=False).astype(np.int64)
    return out


def _floats(col: pa.Array) -> np.ndarray:
    out: np.ndarray = pc.fill_null(col, 0.0).to_numpy(zero_copy_only=False).astype(np.float64)
    return out


_INTERVAL_ARGS = ("year", "month", "week", "day", "hour", "minute", "second")


@register("make_interval")
def _make_interval(args: list[Expr]) -> Expr:
    """make_interval(years, months, weeks, days, hours, mins, secs), every one defaulting
    to 0: months = 12·years + months, days = 7·weeks + days, the rest as time."""
    if len(args) > 7:
        raise no_function("make_interval", args)
    full = (
        list(args)
        + [Literal(0, INT)] * (6 - len(args))
        + [Literal(0.0, DOUBLE)] * (7 - max(len(args), 6))
    )
    a = coerce_to("make_interval", full, [INT] * 6 + [DOUBLE])

    def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
        cols = [as_array(v, n) for v in x]
        mask = _nulls(cols)
        y, mo, w, d, h, mi = (_ints(col) for col in cols[:6])
        secs = _floats(cols[6])
        if not np.isfinite(secs[~mask]).all():
            raise DatetimeFieldOverflow("interval out of range")
        us = np.rint(secs * _US).astype(np.int64)
        nanos = ((h * 60 + mi) * 60 * _US + us) * 1000
        return make_interval_array(y * 12 + mo, w * 7 + d, nanos, mask)

    return Func("make_interval", tuple(a), INTERVAL, kernel)


def _bind_make_interval(b: Any, node: exp.Expression) -> Expr | None:
    """Positional and named (`days => 10`) arguments alike: sqlglot files both under the
    field names; absent ones are 0."""
    args: list[Expr] = []
    for i, key in enumerate(_INTERVAL_ARGS):
        v = node.args.get(key)
        if isinstance(v, exp.Kwarg):
            v = v.expression
        if v is None:
            args.append(Literal(0.0, DOUBLE) if i == 6 else Literal(0, INT))
        else:
            args.append(b._bind(v))
    return call("make_interval", args)


NODE_BINDERS[exp.MakeInterval] = _bind_make_interval


_US_PER_DAY = 86_400 * 1_000_000


@register("make_time")
def _make_time(args: list[Expr]) -> Expr:
    """make_time(hour, min, sec): 22008 for fields out of range, as PostgreSQL."""
    a = coerce_to("make_time", args, [INT, INT, DOUBLE])

    def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
        cols = [as_array(v, n) for v in x]
        mask = _nulls(cols)
        hh, mi = _ints(cols[0]), _ints(cols[1])
        sec = _floats(cols[2])
        us = np.rint(sec * _US).astype(np.int64)
        bad = ~mask & ((hh < 0) | (hh > 24) | (mi < 0) | (mi > 59) | (us < 0) | (us > 60 * _US))
        bad |= ~mask & (hh == 24) & ((mi > 0) | (us > 0))
        if bad.any():
            i = int(np.argmax(bad))
            raise DatetimeFieldOverflow(
                f"time field value out of range: {hh[i]}:{mi[i]:02d}:{sec[i]:02g}"
            )
        out = (hh * 3600 + mi * 60) * _US + us
        # PostgreSQL's time holds 24:00:00; Arrow's time64 stops short of it, and wrapping
        # to 00:00:00 would be a silent wrong answer
        midnight = ~mask & (out >= _US_PER_DAY)
        if midnight.any():
            raise DatetimeFieldOverflow(
                "time field value out of range: 24:00:00",
                hint="Swell's time type ends at 23:59:59.999999; "
                "use a timestamp or an interval for the end of a day.",
            )
        return pa.array(out, pa.int64(), mask=mask if mask.any() else None).cast(TIME.arrow)

    return Func("make_time", tuple(a), TIME, kernel)


def _bind_time_from_parts(b: Any, node: exp.Expression) -> Expr | None:
    args = [b._bind(node.args[k]) for k in ("hour", "min", "sec") if node.args.get(k) is not None]
    return call("make_time", args)


NODE_BINDERS[exp.TimeFromParts] = _bind_time_from_parts


def _local_now(c: EvalContext) -> pa.Array:
    """The statement's now() as a naive timestamp in the session's time zone."""
    ts = pa.array([c.now_utc()], TIMESTAMPTZ.arrow)
    if c.timezone.upper() != "UTC":
        ts = pc.local_timestamp(ts.cast(pa.timestamp("us", tz=c.timezone)))
    return ts.cast(pa.timestamp("us"))


def _precision(args: list[Expr], name: str) -> int | None:
    if not args:
        return None
    p = args[0]
    if len(args) > 1 or not isinstance(p, Literal) or not isinstance(p.value, int):
        raise no_function(name, args)
    return max(0, min(6, p.value))


def _round_us(us: np.ndarray, p: int | None) -> np.ndarray:
    if p is None or p >= 6:
        return us
    q = 10 ** (6 - p)
    out: np.ndarray = np.floor_divide(us + q // 2, q) * q
    return out


@register("localtimestamp")
def _localtimestamp(args: list[Expr]) -> Expr:
    """The statement's now() in the session's time zone, as timestamp [p]."""
    p = _precision(args, "localtimestamp")

    def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
        us = _round_us(_local_now(c).cast(pa.int64()).to_numpy(), p)
        return pa.scalar(int(us[0]), pa.int64()).cast(TIMESTAMP.arrow)

    return Func("localtimestamp", (), TIMESTAMP, kernel, uses_now=True)


@register("localtime")
def _localtime(args: list[Expr]) -> Expr:
    """The time of day of localtimestamp, as time [p]."""
    p = _precision(args, "localtime")

    def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
        us = _round_us(_local_now(c).cast(pa.int64()).to_numpy(), p) % _DAY_US
        return pa.scalar(int(us[0]), pa.int64()).cast(TIME.arrow)

    return Func("localtime", (), TIME, kernel, uses_now=True)


def _fields(ts: pa.Array, tz: str | None) -> list[np.ndarray]:
    """(year, month, day, hour, minute, second, microsecond) of each timestamp, local to
    the session's time zone for timestamptz."""
    if tz is not None:
        ts = ts.cast(pa.timestamp("us", tz="UTC"))
        if tz.upper() != "UTC":
            ts = pc.local_timestamp(ts.cast(pa.timestamp("us", tz=tz)))
        ts = ts.cast(pa.timestamp("us"))
    ts = pc.fill_null(ts, pa.scalar(0, pa.timestamp("us")))
    us = ts.cast(pa.int64()).to_numpy(zero_copy_only=False)
    day_us = np.mod(us, _DAY_US)
    return [
        pc.year(ts).to_numpy(zero_copy_only=False).astype(np.int64),
        pc.month(ts).to_numpy(zero_copy_only=False).astype(np.int64),
        pc.day(ts).to_numpy(zero_copy_only=False).astype(np.int64),
        day_us // (3600 * _US),
        day_us // (60 * _US) % 60,
        day_us // _US % 60,
        day_us % _US,
    ]


def _leap(y: np.ndarray) -> np.ndarray:
    out: np.ndarray = ((y % 4 == 0) & (y % 100 != 0)) | (y % 400 == 0)
    return out


def symbolic_age(t1: pa.Array, t2: pa.Array, tz: str | None) -> pa.Array:
    """PostgreSQL's timestamp_age(t1, t2) over two equal-length timestamp columns."""
    mask = _nulls([t1, t2])
    f1, f2 = _fields(t1, tz), _fields(t2, tz)
    a1 = t1.cast(pa.timestamp("us")) if tz is None else t1.cast(pa.timestamp("us", tz="UTC"))
    a2 = t2.cast(pa.timestamp("us")) if tz is None else t2.cast(pa.timestamp("us", tz="UTC"))
    neg = _ints(a1.cast(pa.int64())) < _ints(a2.cast(pa.int64()))
    sign = np.where(neg, -1, 1)
    y, mo, d, h, mi, s, us = (sign * (a - b) for a, b in zip(f1, f2, strict=True))
    borrow = us < 0
    us, s = np.where(borrow, us + _US, us), s - borrow
    borrow = s < 0
    s, mi = np.where(borrow, s + 60, s), mi - borrow
    borrow = mi < 0
    mi, h = np.where(borrow, mi + 60, mi), h - borrow
    borrow = h < 0
    h, d = np.where(borrow, h + 24, h), d - borrow
    # the days of the earlier operand's month (PostgreSQL's day_tab of tm1 or tm2)
    ey = np.where(neg, f1[0], f2[0])
    em = np.where(neg, f1[1], f2[1])
    month_days = _DAYS[_leap(ey).astype(np.int64), np.clip(em - 1, 0, 11)]
    for _ in range(3):
        borrow = d < 0
        d, mo = np.where(borrow, d + month_days, d), mo - borrow
    borrow = mo < 0
    mo, y = np.where(borrow, mo + 12, mo), y - borrow
    nanos = (((h * 60 + mi) * 60 + s) * _US + us) * 1000
    return make_interval_array(sign * (y * 12 + mo), sign * d, sign * nanos, mask)


def _midnight(c: EvalContext, tz: bool) -> pa.Array:
    """current_date at midnight (local), as timestamp or as timestamptz."""
    local = pc.floor_temporal(_local_now(c), unit="day")
    if not tz:
        return local
    if c.timezone.upper() == "UTC":
        return local.cast(pa.timestamp("us", tz="UTC"))
    return pc.assume_timezone(local, c.timezone).cast(pa.timestamp("us", tz="UTC"))


@register("age")
def _age(args: list[Expr]) -> Expr:
    """age(ts1, ts2): the symbolic difference ts1 - ts2; age(ts): from today's midnight."""
    if not 1 <= len(args) <= 2:
        raise no_function("age", args)
    kinds = {a.type.kind for a in args}
    t: SqlType = TIMESTAMPTZ if TypeKind.TIMESTAMPTZ in kinds else TIMESTAMP
    a = coerce_to("age", args, [t] * len(args))
    with_tz = t.kind is TypeKind.TIMESTAMPTZ

    def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
        cols = [as_array(v, n) for v in x]
        if len(cols) == 1:
            base = _midnight(c, with_tz)
            cols = [pa.repeat(base[0], n) if n else base.slice(0, 0), cols[0]]
        return symbolic_age(cols[0], cols[1], c.timezone if with_tz else None)

    return Func("age", tuple(a), INTERVAL, kernel, uses_now=len(args) == 1)


@register("make_timestamptz")
def _make_timestamptz(args: list[Expr]) -> Expr:
    """make_timestamptz(year, month, day, hour, min, sec [, timezone]): the wall-clock time
    in that zone (the session's by default), as make_timestamp checks its fields; per
    distinct zone, one pyarrow assume_timezone."""
    if len(args) not in (6, 7):
        raise no_function("make_timestamptz", args)
    local = call("make_timestamp", args[:6])
    parts = [local, *coerce_to("make_timestamptz", args[6:], [VARCHAR] * (len(args) - 6))]

    def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
        ts = as_array(x[0], n)
        zones = as_array(x[1], n) if len(x) > 1 else pa.repeat(pa.scalar(c.timezone), n)
        out = pa.nulls(n, TIMESTAMPTZ.arrow)
        for z in pc.unique(zones.drop_null()).to_pylist():
            sel = pc.fill_null(pc.equal(zones, z), False)
            try:
                conv = pc.assume_timezone(
                    ts, timezone=z, ambiguous="earliest", nonexistent="earliest"
                ).cast(TIMESTAMPTZ.arrow)
            except pa.ArrowInvalid:
                raise InvalidParameterValue(f'time zone "{z}" not recognized') from None
            out = pc.if_else(sel, conv, out)
        return out

    return Func("make_timestamptz", tuple(parts), TIMESTAMPTZ, kernel)
