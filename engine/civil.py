"""Calendar arithmetic on whole columns: days since the Unix epoch <-> (year, month, day).

Dates are Arrow date32 (days since 1970-01-01) and timestamps int64 microseconds, so their
storage holds PostgreSQL's whole range: dates from 4714-11-24 BC to 5874897-12-31,
timestamps from 4714-11-24 00:00 BC to 294276-12-31 23:59:59.999999. Python's `datetime`
and Arrow's own text casts stop at years 1..9999 (or print ISO's `-0043` for 44 BC), so
input, output and field extraction use the integer algorithms here instead (the proleptic
Gregorian calendar, with astronomical year numbering inside: year 0 is 1 BC, -43 is 44 BC).

Everything works on numpy int64 arrays; a value outside PostgreSQL's range is 22008 where
it is produced (`check_days`, `check_us`), as PostgreSQL answers. One difference remains:
timestamps end at 294247-01-10 04:00:54.775806 rather than PostgreSQL's 294276-12-31
(Arrow counts microseconds from 1970 where PostgreSQL counts from 2000).
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import DatetimeFieldOverflow

US_PER_DAY = 86_400_000_000
US_PER_SEC = 1_000_000


def days_from_civil_int(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Days since 1970-01-01 of (astronomical year, month 1-12, day); no validation."""
    y = y.astype(np.int64) - (m <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    mp = (m.astype(np.int64) + 9) % 12
    doy = (153 * mp + 2) // 5 + d.astype(np.int64) - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    days: np.ndarray = era * 146097 + doe - 719468
    return days


def civil_from_days(days: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(astronomical year, month, day) of days since 1970-01-01."""
    z = days.astype(np.int64) + 719468
    era = np.floor_divide(z, 146097)
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = np.where(mp < 10, mp + 3, mp - 9)
    y = yoe + era * 400 + (m <= 2)
    return y, m, d


def _scalar_days(y: int, m: int, d: int) -> int:
    return int(days_from_civil_int(np.array([y]), np.array([m]), np.array([d]))[0])


#: PostgreSQL's limits (datatype/timestamp.h): Julian day 0 .. the end of its int32 days.
#: Its timestamps count microseconds from 2000-01-01 and end at 294276-12-31; Arrow's
#: count from 1970-01-01 in the same int64, so Swell's end 30 years earlier, at
#: 294247-01-10 04:00:54.775806 (the int64's last value is kept for 'infinity').
DATE_MIN = _scalar_days(-4713, 11, 24)
DATE_MAX = _scalar_days(5874897, 12, 31)
TS_MIN = DATE_MIN * US_PER_DAY
TS_MAX = 2**63 - 2
#: the days Python's datetime.date can hold (years 1..9999)
PY_MIN_DAY = _scalar_days(1, 1, 1)
PY_MAX_DAY = _scalar_days(9999, 12, 31)
PY_MIN_US = PY_MIN_DAY * US_PER_DAY
PY_MAX_US = (PY_MAX_DAY + 1) * US_PER_DAY - 1
#: PostgreSQL's date infinities (date32 ends) and timestamp infinities (int64 ends)
DATE_NINF = -(2**31)
DATE_PINF = 2**31 - 1
TS_NINF = -(2**63)
TS_PINF = 2**63 - 1


def month_length(y: np.ndarray, m: np.ndarray) -> np.ndarray:
    ny = np.where(m == 12, y + 1, y)
    nm = np.where(m == 12, 1, m + 1)
    one = np.ones_like(m)
    length: np.ndarray = days_from_civil_int(ny, nm, one) - days_from_civil_int(y, m, one)
    return length


def valid_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Whether month and day exist (years are checked against the range elsewhere)."""
    ok = (m >= 1) & (m <= 12) & (d >= 1) & (np.abs(y) < 10_000_000)
    mm = np.where(ok, m, 1)
    yy = np.where(ok, y, 2000)
    exists: np.ndarray = ok & (d <= month_length(yy, mm))
    return exists


def check_days(days: np.ndarray, valid: np.ndarray | None = None) -> None:
    """22008 `date out of range` for a finite date beyond PostgreSQL's."""
    bad = ((days < DATE_MIN) | (days > DATE_MAX)) & (days != DATE_NINF) & (days != DATE_PINF)
    if valid is not None:
        bad &= valid
    if bad.any():
        raise DatetimeFieldOverflow("date out of range")


def check_us(us: np.ndarray, valid: np.ndarray | None = None) -> None:
    """22008 `timestamp out of range` for a finite timestamp beyond PostgreSQL's."""
    bad = ((us < TS_MIN) | (us > TS_MAX)) & (us != TS_NINF) & (us != TS_PINF)
    if valid is not None:
        bad &= valid
    if bad.any():
        raise DatetimeFieldOverflow("timestamp out of range")


def outside_python(days: np.ndarray) -> np.ndarray:
    """Which days Python's datetime cannot hold (years before 1 or after 9999)."""
    return (days < PY_MIN_DAY) | (days > PY_MAX_DAY)


def pg_year(y: np.ndarray) -> np.ndarray:
    """PostgreSQL's year number: no year 0, 1 BC is -1 (extract(year ...))."""
    return np.where(y <= 0, y - 1, y)


def _pad(v: np.ndarray, width: int) -> pa.Array:
    return pc.utf8_lpad(pa.array(v, pa.int64()).cast(pa.string()), width, "0")


def _date_parts(days: np.ndarray) -> tuple[pa.Array, np.ndarray]:
    """'YYYY-MM-DD' text (year of era, at least 4 digits) and the BC mask."""
    y, m, d = civil_from_days(days)
    bc = y <= 0
    text = pc.binary_join_element_wise(_pad(np.where(bc, 1 - y, y), 4), _pad(m, 2), _pad(d, 2), "-")
    return text, bc


def _fraction(us: np.ndarray) -> pa.Array:
    """'.ffffff' without trailing zeros, or '' for a whole second."""
    frac = pc.replace_substring_regex(_pad(us, 6), "0+$", "")
    return pc.if_else(pc.equal(frac, ""), "", pc.binary_join_element_wise(".", frac, ""))


def _with_era(text: pa.Array, bc: np.ndarray) -> pa.Array:
    if not bc.any():
        return text
    return pc.binary_join_element_wise(text, pa.array(np.where(bc, " BC", "")), "")


def _infinities(text: pa.Array, raw: np.ndarray, ninf: int, pinf: int) -> pa.Array:
    is_p, is_n = raw == pinf, raw == ninf
    if is_p.any() or is_n.any():
        text = pc.if_else(pa.array(is_p), "infinity", text)
        text = pc.if_else(pa.array(is_n), "-infinity", text)
    return text


def format_days(days: np.ndarray, mask: np.ndarray | None = None) -> pa.Array:
    """PostgreSQL's ISO text of dates: `2024-05-01`, `10000-01-01`, `0044-03-15 BC`."""
    safe = np.where((days == DATE_NINF) | (days == DATE_PINF), 0, days)
    text, bc = _date_parts(safe)
    out = _infinities(_with_era(text, bc), days, DATE_NINF, DATE_PINF)
    return _masked(out, mask)


def format_us(
    us: np.ndarray, offset: str | pa.Array = "", mask: np.ndarray | None = None
) -> pa.Array:
    """PostgreSQL's ISO text of timestamps (`offset` appended to the time for timestamptz):
    `294276-12-31 23:59:59.999999`, `0044-03-15 12:30:00+00:00 BC`."""
    safe = np.where((us == TS_NINF) | (us == TS_PINF), 0, us)
    days = np.floor_divide(safe, US_PER_DAY)
    tod = safe - days * US_PER_DAY
    secs, frac = np.divmod(tod, US_PER_SEC)
    date_text, bc = _date_parts(days)
    clock = pc.binary_join_element_wise(
        _pad(secs // 3600, 2), _pad(secs // 60 % 60, 2), _pad(secs % 60, 2), ":"
    )
    text = pc.binary_join_element_wise(date_text, " ", clock, _fraction(frac), offset, "")
    out = _infinities(_with_era(text, bc), us, TS_NINF, TS_PINF)
    return _masked(out, mask)


def _masked(text: pa.Array, mask: np.ndarray | None) -> pa.Array:
    if mask is None or not mask.any():
        return text
    return pc.if_else(pa.array(mask), pa.scalar(None, pa.string()), text)


def raw_ints(a: pa.Array) -> tuple[np.ndarray, np.ndarray | None]:
    """The integers under a date32/timestamp array (nulls as 0) and its null mask."""
    width = pa.int32() if pa.types.is_date32(a.type) else pa.int64()
    raw = a.cast(width)
    mask = pc.is_null(raw).to_numpy(zero_copy_only=False) if raw.null_count else None
    return pc.fill_null(raw, 0).to_numpy(zero_copy_only=False).astype(np.int64), mask


def needs_wide(a: pa.Array) -> bool:
    """Whether a date32/timestamp array holds a value Python's datetime cannot (years
    outside 1..9999, infinities): such columns take the integer paths here."""
    if len(a) == a.null_count:
        return False
    width = pa.int32() if pa.types.is_date32(a.type) else pa.int64()
    mm = pc.min_max(a.cast(width))
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    if pa.types.is_date32(a.type):
        return bool(lo < PY_MIN_DAY or hi > PY_MAX_DAY)
    return bool(lo < PY_MIN_US or hi > PY_MAX_US)


def has_temporal(t: pa.DataType) -> bool:
    """Whether `t` is date32/timestamp, or a list (of lists) of them."""
    while pa.types.is_list(t) or pa.types.is_large_list(t):
        t = t.value_type
    return bool(pa.types.is_date32(t) or pa.types.is_timestamp(t))


def py_temporal(a: pa.Array) -> list[object]:
    """`a.to_pylist()` for date32/timestamp arrays (or lists of them), with a value beyond
    Python's datetime as a numpy datetime64 (days or microseconds; UTC for timestamptz):
    pyarrow builds arrays of naive dates/timestamps back from those (engine.numeric.array_of
    also aware ones), and pgwire prints and sends them."""
    plain: list[object]
    if pa.types.is_list(a.type) or pa.types.is_large_list(a.type):
        if not needs_wide_any(a):
            plain = a.to_pylist()
            return plain
        inner = py_temporal(a.values)
        offs = a.offsets.to_numpy(zero_copy_only=False)
        valid = a.is_valid().to_numpy(zero_copy_only=False)
        return [inner[offs[i] : offs[i + 1]] if valid[i] else None for i in range(len(a))]
    if not needs_wide(a):
        plain = a.to_pylist()
        return plain
    raw, mask = raw_ints(a)
    is_date = pa.types.is_date32(a.type)
    if is_date:
        wide = (raw < PY_MIN_DAY) | (raw > PY_MAX_DAY)
    else:
        wide = (raw < PY_MIN_US) | (raw > PY_MAX_US)
    if mask is not None:
        wide &= ~mask
    fill = pa.scalar(0, pa.int32() if is_date else pa.int64()).cast(a.type)
    safe = pc.if_else(pa.array(wide), fill, a)
    out: list[object] = safe.to_pylist()
    for i in np.flatnonzero(wide):
        out[i] = np.datetime64(int(raw[i]), "D") if is_date else np.datetime64(int(raw[i]), "us")
    return out


def py_list(a: pa.Array) -> list[object]:
    """`a.to_pylist()`, through `py_temporal` for temporal columns."""
    return py_temporal(a) if has_temporal(a.type) else a.to_pylist()


def needs_wide_any(a: pa.Array) -> bool:
    """`needs_wide` through list levels."""
    while pa.types.is_list(a.type) or pa.types.is_large_list(a.type):
        a = a.flatten()
    return needs_wide(a)


def wide_text(v: np.datetime64, offset: str = "") -> str:
    """PostgreSQL's text of one value `py_temporal` gave as datetime64."""
    n = np.array([v.astype(np.int64)], dtype=np.int64)
    if np.datetime_data(v.dtype)[0] == "D":
        return str(format_days(n)[0])
    return str(format_us(n, offset)[0])


_EPOCH_DATE = date(1970, 1, 1)
_EPOCH = datetime(1970, 1, 1)
_EPOCH_UTC = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US = timedelta(microseconds=1)


def order_key(v: Any) -> Any:
    """A sort key ordering dates (days) or timestamps (microseconds) whether they come as
    datetime objects or as `py_temporal`'s datetime64 (which do not compare with them)."""
    if isinstance(v, np.datetime64):
        return int(v.astype(np.int64))
    if isinstance(v, datetime):
        return (v - (_EPOCH if v.tzinfo is None else _EPOCH_UTC)) // _ONE_US
    if isinstance(v, date):
        return (v - _EPOCH_DATE).days
    return v
