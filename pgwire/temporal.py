"""Text forms of PostgreSQL date/time values: what `DateStyle=ISO` and `IntervalStyle=postgres`
print, and the input forms clients send as text parameters.

Kept apart from `pgwire.codecs` because the calendar rules (fraction trimming, the offset
spelling, the postgres interval grammar) are their own concern; `codecs` calls these
functions per value. Everything here is pure and stateless; the session time zone is passed
in as a `tzinfo`.

Interval values are `pyarrow.MonthDayNano(months, days, nanoseconds)`; the wire carries
microseconds, so sub-microsecond nanoseconds are truncated toward zero on output.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta, timezone, tzinfo
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa

from engine.errors import InvalidDatetimeFormat
from engine.expr.temporal import format_interval as engine_format_interval

USECS_PER_SEC = 1_000_000
USECS_PER_MINUTE = 60 * USECS_PER_SEC
USECS_PER_HOUR = 60 * USECS_PER_MINUTE
USECS_PER_DAY = 24 * USECS_PER_HOUR


@lru_cache(maxsize=128)
def zone(name: str) -> tzinfo:
    """The tzinfo for a session TimeZone setting (IANA name or a fixed `+HH[:MM]` offset).

    Unknown names fall back to UTC: the engine validates `SET TimeZone`, so reaching the
    fallback means the engine accepted a spelling we cannot map, and UTC is the least
    surprising rendering.
    """
    if name.upper() in ("UTC", "GMT", "Z", "ZULU", "UCT"):
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        pass
    m = re.fullmatch(r"(?:UTC|GMT)?\s*([+-])(\d{1,2})(?::?(\d{2}))?", name.strip(), re.I)
    if m:
        sign = -1 if m.group(1) == "-" else 1
        off = timedelta(hours=int(m.group(2)), minutes=int(m.group(3) or 0))
        return timezone(sign * off)
    return UTC


# -- output -------------------------------------------------------------------------------
def _fraction(us: int) -> str:
    """`.123` for 123000 microseconds, `` for zero (Postgres trims trailing zeros)."""
    if us == 0:
        return ""
    return "." + f"{us:06d}".rstrip("0")


def format_time(t: time) -> str:
    return f"{t.hour:02d}:{t.minute:02d}:{t.second:02d}{_fraction(t.microsecond)}"


def format_date(d: date) -> str:
    return f"{d.year:04d}-{d.month:02d}-{d.day:02d}"


def format_timestamp(ts: datetime) -> str:
    return f"{format_date(ts)} {format_time(ts.time())}"


def format_offset(off: timedelta) -> str:
    """RisingWave spells offsets `+00:00`; seconds appear only when non-zero."""
    secs = int(off.total_seconds())
    sign = "-" if secs < 0 else "+"
    secs = abs(secs)
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    out = f"{sign}{h:02d}:{m:02d}"
    return out + (f":{s:02d}" if s else "")


def format_timestamptz(ts: datetime, tz: tzinfo) -> str:
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=UTC)
    local = ts.astimezone(tz)
    off = local.utcoffset() or timedelta(0)
    return format_timestamp(local) + format_offset(off)


def format_interval(iv: pa.MonthDayNano) -> str:
    """IntervalStyle=postgres: `1 year 2 mons 3 days 04:05:06.5`, `00:00:00`, `-1 days`.

    The engine's text cast writes the same text (`interval::text`), so both share it."""
    return engine_format_interval(iv.months, iv.days, iv.nanoseconds)


# -- input ------------------------------------------------------------------------------------
def _bad(kind: str, text: str) -> InvalidDatetimeFormat:
    return InvalidDatetimeFormat(f'invalid input syntax for type {kind}: "{text}"')


def parse_date(text: str) -> date:
    s = text.strip()
    low = s.lower()
    if low == "infinity":
        return date.max
    if low == "-infinity":
        return date.min
    try:
        return date.fromisoformat(s)
    except ValueError:
        raise _bad("date", text) from None


def parse_time(text: str) -> time:
    try:
        return time.fromisoformat(text.strip())
    except ValueError:
        raise _bad("time", text) from None


_HOUR_OFFSET = re.compile(r"([+-]\d{2})$")


def _iso(s: str) -> str:
    # Python wants `+HH:MM`; Postgres prints `+HH` for whole-hour offsets.
    s = s.strip()
    if len(s) > 3 and s[-3] in "+-":
        return _HOUR_OFFSET.sub(r"\1:00", s)
    return s


def parse_timestamp(text: str) -> datetime:
    try:  # the common ISO text (what clients and COPY send) without the checks below
        ts = datetime.fromisoformat(text)
        return ts if ts.tzinfo is None else ts.replace(tzinfo=None)
    except ValueError:
        pass
    low = text.strip().lower()
    if low == "infinity":
        return datetime.max
    if low == "-infinity":
        return datetime.min
    try:
        ts = datetime.fromisoformat(_iso(text))
    except ValueError:
        raise _bad("timestamp", text) from None
    return ts if ts.tzinfo is None else ts.replace(tzinfo=None)


def parse_timestamptz(text: str, tz: tzinfo) -> datetime:
    """An aware UTC datetime; text without an offset is read in the session time zone."""
    low = text.strip().lower()
    if low == "infinity":
        return datetime.max.replace(tzinfo=UTC)
    if low == "-infinity":
        return datetime.min.replace(tzinfo=UTC)
    try:
        ts = datetime.fromisoformat(_iso(text))
    except ValueError:
        raise _bad("timestamp with time zone", text) from None
    if ts.tzinfo is None:
        ts = ts.replace(tzinfo=tz)
    return ts.astimezone(UTC)


_UNITS: dict[str, tuple[str, int]] = {}
for _names, _unit in (
    (("millennium", "millennia", "millenniums"), ("months", 12000)),
    (("century", "centuries"), ("months", 1200)),
    (("decade", "decades"), ("months", 120)),
    (("year", "years", "y", "yr", "yrs"), ("months", 12)),
    (("month", "months", "mon", "mons"), ("months", 1)),
    (("week", "weeks", "w"), ("days", 7)),
    (("day", "days", "d"), ("days", 1)),
    (("hour", "hours", "h", "hr", "hrs"), ("usecs", USECS_PER_HOUR)),
    (("minute", "minutes", "m", "min", "mins"), ("usecs", USECS_PER_MINUTE)),
    (("second", "seconds", "s", "sec", "secs"), ("usecs", USECS_PER_SEC)),
    (("millisecond", "milliseconds", "ms", "msec", "msecs"), ("usecs", 1000)),
    (("microsecond", "microseconds", "us", "usec", "usecs"), ("usecs", 1)),
):
    for _n in _names:
        _UNITS[_n] = _unit

_TOKEN = re.compile(
    r"\s*(?:(?P<clock>[+-]?\d+:\d{1,2}(?::\d{1,2}(?:\.\d*)?)?)"
    r"|(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+))\s*(?P<unit>[a-z]+)?)",
)
_ISO = re.compile(
    r"P(?:(?P<Y>-?[\d.]+)Y)?(?:(?P<M>-?[\d.]+)M)?(?:(?P<W>-?[\d.]+)W)?(?:(?P<D>-?[\d.]+)D)?"
    r"(?:T(?:(?P<h>-?[\d.]+)H)?(?:(?P<m>-?[\d.]+)M)?(?:(?P<s>-?[\d.]+)S)?)?",
)


class _Acc:
    """Accumulates interval parts, spilling fractions down (months -> days -> usecs)."""

    def __init__(self) -> None:
        self.months = 0
        self.days = 0
        self.usecs = Decimal(0)

    def add(self, value: Decimal, field: str, mult: int) -> None:
        v = value * mult
        if field == "months":
            whole = int(v)
            self.months += whole
            v = (v - whole) * 30
            field = "days"
            mult = 1
        if field == "days":
            whole = int(v)
            self.days += whole
            v = (v - whole) * USECS_PER_DAY
        self.usecs += v

    def result(self, negate: bool = False) -> pa.MonthDayNano:
        s = -1 if negate else 1
        usecs = int(self.usecs.to_integral_value())
        return pa.MonthDayNano([s * self.months, s * self.days, s * usecs * 1000])


def _clock_usecs(clock: str) -> Decimal:
    neg = clock.startswith("-")
    parts = clock.lstrip("+-").split(":")
    h = int(parts[0])
    m = int(parts[1])
    sec = Decimal(parts[2]) if len(parts) > 2 else Decimal(0)
    total = (h * 3600 + m * 60) * USECS_PER_SEC + sec * USECS_PER_SEC
    return -total if neg else total


def parse_interval(text: str) -> pa.MonthDayNano:
    """Postgres-style (`1 year 2 mons -3 days 04:05:06`, `@ 1 hour ago`) or ISO 8601 basic
    (`P1Y2M3DT4H5M6S`) interval text."""
    s = text.strip().lower()
    acc = _Acc()
    try:
        if s.startswith("p"):
            m = _ISO.fullmatch(text.strip().upper())
            if not m or s == "p":
                raise _bad("interval", text)
            for key, field, mult in (
                ("Y", "months", 12),
                ("M", "months", 1),
                ("W", "days", 7),
                ("D", "days", 1),
                ("h", "usecs", USECS_PER_HOUR),
                ("m", "usecs", USECS_PER_MINUTE),
                ("s", "usecs", USECS_PER_SEC),
            ):
                if m.group(key):
                    acc.add(Decimal(m.group(key)), field, mult)
            return acc.result()
        negate = False
        if s.startswith("@"):
            s = s[1:]
        if s.endswith(" ago"):
            negate = True
            s = s[:-4]
        pos = 0
        seen = False
        s = s.strip()
        while pos < len(s):
            m = _TOKEN.match(s, pos)
            if not m or m.end() == pos:
                raise _bad("interval", text)
            pos = m.end()
            seen = True
            if m.group("clock"):
                acc.usecs += _clock_usecs(m.group("clock"))
                continue
            num = Decimal(m.group("num"))
            unit = m.group("unit")
            if unit is None:
                acc.add(num, "usecs", USECS_PER_SEC)  # a bare number means seconds
                continue
            if unit not in _UNITS:
                raise _bad("interval", text)
            field, mult = _UNITS[unit]
            acc.add(num, field, mult)
        if not seen:
            raise _bad("interval", text)
        return acc.result(negate)
    except (InvalidOperation, ValueError):
        raise _bad("interval", text) from None


# -- binary epoch arithmetic -----------------------------------------------------------------
PG_EPOCH_DATE = date(2000, 1, 1)
PG_EPOCH = datetime(2000, 1, 1)
PG_EPOCH_TZ = datetime(2000, 1, 1, tzinfo=UTC)


def usecs_since(ts: datetime, epoch: datetime) -> int:
    d = ts - epoch
    return (d.days * 86400 + d.seconds) * USECS_PER_SEC + d.microseconds


def time_usecs(t: time) -> int:
    return ((t.hour * 60 + t.minute) * 60 + t.second) * USECS_PER_SEC + t.microsecond


def time_from_usecs(us: int) -> time:
    if us == USECS_PER_DAY:  # Postgres allows 24:00:00
        return time.max
    s, frac = divmod(us, USECS_PER_SEC)
    m, s = divmod(s, 60)
    h, m = divmod(m, 60)
    return time(h, m, s, frac)
