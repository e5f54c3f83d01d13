"""Vectorised date/time text parsing, formatting and interval arithmetic.

Shared by casts (text <-> temporal) and the time functions. Everything here works on whole
columns with pyarrow string kernels and numpy integer math; timestamps are handled as int64
microseconds since the Unix epoch, intervals as (months, days, nanoseconds) triples.
"""

from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import civil
from engine.errors import (
    DatetimeFieldOverflow,
    IntervalFieldOverflow,
    InvalidDatetimeFormat,
    InvalidTextRepresentation,
)

US_PER_DAY = 86_400_000_000
US_PER_SEC = 1_000_000

_TS_RE = (
    r"^\s*(?P<y>\d{4,})-(?P<mo>\d{1,2})-(?P<d>\d{1,2})"
    r"(?:(?:[ T]|\s+)(?P<h>\d{1,2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:\.(?P<f>\d{1,9}))?)?)?"
    r"\s*(?P<tz>[Zz]|UTC|utc|[+-]\d{1,2}(?::?\d{2})?)?\s*(?P<era>(?i:BC|AD))?\s*$"
)
_TIME_RE = r"^\s*(?P<h>\d{1,2}):(?P<mi>\d{2})(?::(?P<s>\d{2})(?:\.(?P<f>\d{1,9}))?)?\s*$"


def _field(st: pa.StructArray, name: str) -> np.ndarray:
    col = st.field(name)
    col = pc.if_else(pc.equal(pc.utf8_length(col), 0), None, col)
    return pc.fill_null(col.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)


def _frac_us(st: pa.StructArray) -> np.ndarray:
    f = st.field("f")
    f = pc.utf8_slice_codeunits(pc.fill_null(f, ""), 0, 6)
    f = pc.utf8_rpad(f, 6, "0")
    return f.cast(pa.int64()).to_numpy(zero_copy_only=False)


def _bad(text: pa.Array, ok: np.ndarray, tname: str) -> None:
    valid = pc.is_valid(text).to_numpy(zero_copy_only=False)
    bad = valid & ~ok
    if bad.any():
        val = text[int(np.argmax(bad))].as_py()
        if tname in ("date", "time", "timestamp", "timestamp with time zone"):
            raise InvalidDatetimeFormat(f'invalid input syntax for type {tname}: "{val}"')
        raise InvalidTextRepresentation(f'invalid input syntax for type {tname}: "{val}"')


def _first(text: pa.Array, rows: np.ndarray) -> str:
    return str(text[int(np.argmax(rows))].as_py())


def days_from_civil(y: np.ndarray, m: np.ndarray, d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Days since epoch (astronomical years: 0 is 1 BC) and a validity mask for (y, m, d)."""
    ok = civil.valid_civil(y, m, d)
    days = civil.days_from_civil_int(np.where(ok, y, 1970), np.where(ok, m, 1), np.where(ok, d, 1))
    return days, ok


def _parse_ts(text: pa.Array, tname: str, with_tz: bool) -> np.ndarray:
    """int64 microseconds (UTC for tz inputs with offsets; days for dates);
    raises on bad input: 22007 for bad syntax, 22008 for fields that do not exist (year 0,
    February 30) and for values beyond PostgreSQL's range (see engine.expr.civil)."""
    text = text.cast(pa.string())
    special = _special_ts(text)
    st = pc.extract_regex(text, _TS_RE)
    ok = pc.is_valid(st).to_numpy(zero_copy_only=False)
    if special is not None:
        ok |= special[0]
    _bad(text, ok, tname)
    matched = pc.is_valid(st).to_numpy(zero_copy_only=False)
    y, mo, d = _field(st, "y"), _field(st, "mo"), _field(st, "d")
    h, mi, s = _field(st, "h"), _field(st, "mi"), _field(st, "s")
    bc = pc.fill_null(pc.equal(pc.utf8_upper(st.field("era")), "BC"), False)
    bc_np = bc.to_numpy(zero_copy_only=False) & matched
    fields_ok = (y > 0) & (h < 24) & (mi < 60) & (s < 60)
    y = np.where(bc_np, 1 - y, y)  # 44 BC is astronomical year -43
    days, dok = days_from_civil(y, mo, d)
    fields_ok &= dok
    if (matched & ~fields_ok).any():
        raise DatetimeFieldOverflow(
            f'date/time field value out of range: "{_first(text, matched & ~fields_ok)}"'
        )
    what = "date" if tname == "date" else "timestamp"
    last_day = civil.DATE_MAX if tname == "date" else civil.TS_MAX // US_PER_DAY + 1
    far = matched & ((days < civil.DATE_MIN) | (days > last_day))
    if far.any():
        raise DatetimeFieldOverflow(f'{what} out of range: "{_first(text, far)}"')
    days = np.where(matched, days, 0)
    if tname == "date":  # no microseconds: dates reach beyond int64 microseconds
        return days if special is None else np.where(special[0], 0, days)
    tod = ((h * 60 + mi) * 60 + s) * US_PER_SEC + _frac_us(st)
    # int64 microseconds may overflow on the last days: exact check there (an offset that
    # wraps past the end lands far below TS_MIN, caught below)
    edge = days >= last_day - 1
    if edge.any():
        for i in np.flatnonzero(edge):
            if int(days[i]) * US_PER_DAY + int(tod[i]) > civil.TS_MAX:
                raise DatetimeFieldOverflow(f'{what} out of range: "{text[int(i)].as_py()}"')
    us = days * US_PER_DAY + tod
    tz = pc.fill_null(st.field("tz"), "")
    has_off = pc.match_substring_regex(tz, r"^[+-]").to_numpy(zero_copy_only=False)
    if has_off.any():
        sign = np.where(pc.starts_with(tz, "-").to_numpy(zero_copy_only=False), -1, 1)
        digits = pc.replace_substring(pc.utf8_slice_codeunits(tz, 1), ":", "")
        oh = pc.utf8_slice_codeunits(digits, 0, 2)
        om = pc.utf8_slice_codeunits(digits, 2, 4)
        oh = pc.if_else(pc.equal(pc.utf8_length(digits), 1), digits, oh)
        oh_n = pc.fill_null(pc.if_else(pc.equal(oh, ""), "0", oh).cast(pa.int64()), 0)
        om_n = pc.fill_null(pc.if_else(pc.equal(om, ""), "0", om).cast(pa.int64()), 0)
        off = (
            sign
            * (
                oh_n.to_numpy(zero_copy_only=False) * 3600
                + om_n.to_numpy(zero_copy_only=False) * 60
            )
            * US_PER_SEC
        )
        if with_tz:
            us = us - np.where(has_off, off, 0)
    if tname != "date":
        far = matched & ((us < civil.TS_MIN) | (us > civil.TS_MAX))
        if far.any():
            raise DatetimeFieldOverflow(f'{what} out of range: "{_first(text, far)}"')
    if special is not None:
        sp_ok, sp_val = special
        us = np.where(sp_ok, sp_val, us)
    return us


def _special_ts(text: pa.Array) -> tuple[np.ndarray, np.ndarray] | None:
    low = pc.utf8_lower(pc.utf8_trim_whitespace(text))
    is_epoch = pc.fill_null(pc.equal(low, "epoch"), False).to_numpy(zero_copy_only=False)
    if not is_epoch.any():
        return None
    return is_epoch, np.zeros(len(text), dtype=np.int64)


def _with_nulls(values: np.ndarray, src: pa.Array, typ: pa.DataType) -> pa.Array:
    mask = pc.is_null(src).to_numpy(zero_copy_only=False)
    arr = pa.array(values, type=pa.int64(), mask=mask if mask.any() else None)
    if pa.types.is_date32(typ):
        return arr.cast(pa.int32()).cast(typ)
    return arr.cast(typ)


def text_to_timestamp(text: pa.Array) -> pa.Array:
    us = _parse_ts(text, "timestamp", with_tz=False)
    return _with_nulls(us, text, pa.timestamp("us"))


def text_to_timestamptz(text: pa.Array) -> pa.Array:
    us = _parse_ts(text, "timestamp with time zone", with_tz=True)
    return _with_nulls(us, text, pa.timestamp("us", tz="UTC"))


def text_to_date(text: pa.Array) -> pa.Array:
    days = _parse_ts(text, "date", with_tz=False)
    return _with_nulls(days, text, pa.date32())


def text_to_time(text: pa.Array) -> pa.Array:
    text = text.cast(pa.string())
    st = pc.extract_regex(text, _TIME_RE)
    ok = pc.is_valid(st).to_numpy(zero_copy_only=False)
    h, mi, s = _field(st, "h"), _field(st, "mi"), _field(st, "s")
    ok &= (h < 24) & (mi < 60) & (s < 60)
    _bad(text, ok, "time")
    us = ((h * 60 + mi) * 60 + s) * US_PER_SEC + _frac_us(st)
    return _with_nulls(us, text, pa.time64("us"))


# -- formatting ------------------------------------------------------------------------------


def _frac_suffix(us: pa.Array) -> pa.Array:
    """'.ffffff' with trailing zeros removed, or '' when the fraction is zero."""
    frac = pc.cast(us, pa.string())
    frac = pc.utf8_lpad(frac, 6, "0")
    frac = pc.replace_substring_regex(frac, "0+$", "")
    return pc.if_else(pc.equal(frac, ""), "", pc.binary_join_element_wise(".", frac, ""))


def _split_us(ts: pa.Array) -> tuple[pa.Array, pa.Array]:
    """(whole seconds, microsecond remainder) of a timestamp/time array, nulls preserved."""
    raw = ts.cast(pa.int64())
    mask = pc.is_null(raw).to_numpy(zero_copy_only=False)
    v = pc.fill_null(raw, 0).to_numpy(zero_copy_only=False)
    secs, us = np.divmod(v, US_PER_SEC)
    m = mask if mask.any() else None
    return pa.array(secs, mask=m), pa.array(us, mask=m)


def _strip_fraction(text: pa.Array) -> pa.Array:
    """'... 10:00:00.250000' -> '... 10:00:00.25'; a zero fraction disappears."""
    text = pc.replace_substring_regex(text, r"(\.\d*?)0+$", r"\1")
    return pc.replace_substring_regex(text, r"\.$", "")


def format_timestamp(ts: pa.Array, tz: str | None = None) -> pa.Array:
    """Postgres text of timestamp / timestamptz (`+00:00`-style offset for tz inputs)."""
    if civil.needs_wide(ts):
        return _format_wide_timestamp(ts, tz)
    if tz is None:
        return _strip_fraction(ts.cast(pa.timestamp("us")).cast(pa.string()))
    utc = ts.cast(pa.timestamp("us", tz="UTC"))
    if _is_utc(tz):
        local = utc.cast(pa.timestamp("us"))
        text = _strip_fraction(local.cast(pa.string()))
        return pc.binary_join_element_wise(text, "+00:00", "")
    local = pc.local_timestamp(utc.cast(pa.timestamp("us", tz=tz)))
    text = _strip_fraction(local.cast(pa.string()))
    return pc.binary_join_element_wise(text, _offsets(local, utc), "")


def _is_utc(tz: str) -> bool:
    return tz.upper() in ("UTC", "Z", "GMT", "ETC/UTC")


def _offsets(local: pa.Array, utc: pa.Array) -> pa.Array:
    """`+05:30` / `-04:00` text of local minus UTC time."""
    off_min = np.floor_divide(
        pc.fill_null(local.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
        - pc.fill_null(utc.cast(pa.int64()), 0).to_numpy(zero_copy_only=False),
        60_000_000,
    )
    sign = np.where(off_min < 0, "-", "+")
    absm = np.abs(off_min)
    hh = pc.utf8_lpad(pa.array(absm // 60).cast(pa.string()), 2, "0")
    mm = pc.utf8_lpad(pa.array(absm % 60).cast(pa.string()), 2, "0")
    return pc.binary_join_element_wise(pa.array(sign), hh, ":", mm, "")


def _format_wide_timestamp(ts: pa.Array, tz: str | None) -> pa.Array:
    """Timestamps with years outside 1..9999 (or BC): integer calendar math (civil)."""
    us, mask = civil.raw_ints(ts)
    if tz is None or _is_utc(tz):
        return civil.format_us(us, "" if tz is None else "+00:00", mask)
    # the zone's offset at the value's instant, or at the nearest year Python's zone
    # database reaches (its rules beyond repeat; before, the zone's earliest offset)
    clamped = np.clip(us, civil.PY_MIN_US + US_PER_DAY, civil.PY_MAX_US - US_PER_DAY)
    utc = pa.array(clamped, pa.timestamp("us", tz="UTC"))
    local = pc.local_timestamp(utc.cast(pa.timestamp("us", tz=tz)))
    delta = local.cast(pa.int64()).to_numpy(zero_copy_only=False) - clamped
    return civil.format_us(us + delta, _offsets(local, utc), mask)


def format_date(d: pa.Array) -> pa.Array:
    if civil.needs_wide(d):
        days, mask = civil.raw_ints(d)
        return civil.format_days(days, mask)
    return d.cast(pa.string())


def format_time(t: pa.Array) -> pa.Array:
    secs, us = _split_us(t)
    base = pc.strftime(secs.cast(pa.timestamp("s")), format="%H:%M:%S")
    return pc.binary_join_element_wise(base, _frac_suffix(us), "")


# -- intervals -------------------------------------------------------------------------------

_MDN = np.dtype([("months", "<i4"), ("days", "<i4"), ("nanos", "<i8")])


def interval_parts(iv: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """months, days, nanoseconds arrays of a month_day_nano_interval array (nulls -> 0)."""
    if iv.null_count:
        iv = iv.fill_null(pa.scalar((0, 0, 0), pa.month_day_nano_interval()))
    buf = iv.buffers()[1]
    rec = np.frombuffer(buf, dtype=_MDN, count=len(iv) + iv.offset)[iv.offset :]
    return (
        rec["months"].astype(np.int64),
        rec["days"].astype(np.int64),
        rec["nanos"].astype(np.int64),
    )


def out_of_i32(v: np.ndarray) -> bool:
    """Whether a months or days array leaves PostgreSQL's field range [-2**31, 2**31 - 1]
    (the range is not symmetric: -2147483648 days is an interval, 2147483648 days is not)."""
    return bool(
        len(v)
        and (v.dtype.itemsize > 4 or v.dtype.kind == "f")
        and (v.max() > 2**31 - 1 or v.min() < -(2**31))
    )


def make_interval_array(
    months: np.ndarray, days: np.ndarray, nanos: np.ndarray, mask: np.ndarray | None = None
) -> pa.Array:
    if len(months) and (out_of_i32(months) or out_of_i32(days)):
        raise DatetimeFieldOverflow("interval out of range")
    rec = np.empty(len(months), dtype=_MDN)
    rec["months"], rec["days"], rec["nanos"] = months, days, nanos
    validity = None
    null_count = 0
    if mask is not None and mask.any():
        validity = pa.py_buffer(np.packbits(~mask, bitorder="little").tobytes())
        null_count = int(mask.sum())
    return pa.Array.from_buffers(
        pa.month_day_nano_interval(),
        len(months),
        [validity, pa.py_buffer(rec.tobytes())],
        null_count,
    )


def time_plus_interval(t: pa.Array, iv: pa.Array, sign: int) -> pa.Array:
    """`time ± interval` as PostgreSQL's time_pl_interval: only the interval's time part
    moves the clock (its months and days are ignored), wrapping around midnight."""
    mask = pc.or_(pc.is_null(t), pc.is_null(iv)).to_numpy(zero_copy_only=False)
    us = np.asarray(t.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    _, _, nanos = interval_parts(iv)
    out = np.mod(us + sign * (nanos // 1000), US_PER_DAY)
    return pa.array(out, pa.int64(), mask=mask).cast(pa.time64("us"))


def time_minus_time(a: pa.Array, b: pa.Array) -> pa.Array:
    """`time - time`: the difference as an interval of hours, minutes and seconds."""
    mask = pc.or_(pc.is_null(a), pc.is_null(b)).to_numpy(zero_copy_only=False)
    ua = np.asarray(a.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    ub = np.asarray(b.cast(pa.int64()).fill_null(0).to_numpy(zero_copy_only=False), np.int64)
    zeros = np.zeros(len(ua), np.int64)
    return make_interval_array(zeros, zeros, (ua - ub) * 1000, mask)


def add_interval_us(
    us: np.ndarray, months: np.ndarray, days: np.ndarray, nanos: np.ndarray
) -> np.ndarray:
    """Timestamp (µs) + interval: months first (clamping the day), then days, then time."""
    day = np.floor_divide(us, US_PER_DAY)
    tod = us - day * US_PER_DAY
    if months.any():
        d64 = day.astype("datetime64[D]")
        m64 = d64.astype("datetime64[M]")
        dom = day - m64.astype("datetime64[D]").astype(np.int64)
        nm = m64 + months.astype("timedelta64[M]")
        first = nm.astype("datetime64[D]").astype(np.int64)
        mlen = (nm + 1).astype("datetime64[D]").astype(np.int64) - first
        day = first + np.minimum(dom, mlen - 1)
    return (day + days) * US_PER_DAY + tod + nanos // 1000


_IV_UNITS = {
    "microsecond": (0, 0, 1_000),
    "microseconds": (0, 0, 1_000),
    "us": (0, 0, 1_000),
    "millisecond": (0, 0, 1_000_000),
    "milliseconds": (0, 0, 1_000_000),
    "ms": (0, 0, 1_000_000),
    "second": (0, 0, 10**9),
    "seconds": (0, 0, 10**9),
    "sec": (0, 0, 10**9),
    "secs": (0, 0, 10**9),
    "s": (0, 0, 10**9),
    "minute": (0, 0, 60 * 10**9),
    "minutes": (0, 0, 60 * 10**9),
    "min": (0, 0, 60 * 10**9),
    "mins": (0, 0, 60 * 10**9),
    "m": (0, 0, 60 * 10**9),
    "hour": (0, 0, 3600 * 10**9),
    "hours": (0, 0, 3600 * 10**9),
    "h": (0, 0, 3600 * 10**9),
    "hr": (0, 0, 3600 * 10**9),
    "hrs": (0, 0, 3600 * 10**9),
    "day": (0, 1, 0),
    "days": (0, 1, 0),
    "d": (0, 1, 0),
    "week": (0, 7, 0),
    "weeks": (0, 7, 0),
    "w": (0, 7, 0),
    "month": (1, 0, 0),
    "months": (1, 0, 0),
    "mon": (1, 0, 0),
    "mons": (1, 0, 0),
    "year": (12, 0, 0),
    "years": (12, 0, 0),
    "y": (12, 0, 0),
    "yr": (12, 0, 0),
    "yrs": (12, 0, 0),
    "decade": (120, 0, 0),
    "decades": (120, 0, 0),
    "century": (1200, 0, 0),
    "centuries": (1200, 0, 0),
}
_IV_TOKEN = re.compile(r"([+-]?\d+(?:\.\d*)?|[+-]?\.\d+)\s*([a-z]+)?")
_IV_TIME = re.compile(r"^([+-])?(\d+):(\d{1,2})(?::(\d{1,2})(?:\.(\d{1,9}))?)?$")


def parse_interval(text: str, unit: str | None = None) -> tuple[int, int, int]:
    """Parse Postgres interval input ('1 day 02:00:00', '5', '1 hour 30 minutes', '-1 mon')."""
    s = text.strip().lower()
    if s.startswith("@"):
        s = s[1:].strip()
    ago = s.endswith(" ago")
    if ago:
        s = s[:-4]
    months = days = nanos = 0
    parts = s.split()
    i = 0
    ok = bool(parts)
    while i < len(parts) and ok:
        p = parts[i]
        tm = _IV_TIME.match(p)
        if tm:
            sign = -1 if tm.group(1) == "-" else 1
            frac = (tm.group(5) or "").ljust(9, "0")[:9]
            secs = int(tm.group(2)) * 3600 + int(tm.group(3)) * 60 + int(tm.group(4) or 0)
            nanos += sign * (secs * 10**9 + int(frac or 0))
            i += 1
            continue
        m = _IV_TOKEN.fullmatch(p)
        if not m:
            ok = False
            break
        num = m.group(1)
        u = m.group(2)
        if u is None:
            if i + 1 < len(parts) and parts[i + 1] in _IV_UNITS:
                u = parts[i + 1]
                i += 1
            else:
                u = (unit or "second").lower()
        if u not in _IV_UNITS:
            ok = False
            break
        mo, d, ns = _IV_UNITS[u]
        val = float(num) if "." in num else int(num)
        if isinstance(val, float):
            whole = int(val)
            rest = val - whole
            months += whole * mo
            days += whole * d
            nanos += whole * ns
            # carry fractions down like Postgres (month -> 30 days, day -> 24 hours)
            if mo:
                days_f = rest * mo * 30
                days += int(days_f)
                nanos += round((days_f - int(days_f)) * 86_400 * 10**9)
            elif d:
                days_f = rest * d
                days += int(days_f)
                nanos += round((days_f - int(days_f)) * 86_400 * 10**9)
            else:
                nanos += round(rest * ns)
        else:
            months += val * mo
            days += val * d
            nanos += val * ns
        i += 1
    if not ok:
        raise InvalidDatetimeFormat(f'invalid input syntax for type interval: "{text}"')
    if ago:
        months, days, nanos = -months, -days, -nanos
    if not (-(2**31) <= months < 2**31 and -(2**31) <= days < 2**31 and -(2**63) <= nanos < 2**63):
        raise IntervalFieldOverflow(f'interval field value out of range: "{text}"')
    return months, days, nanos


def format_interval(months: int, days: int, nanos: int) -> str:
    """IntervalStyle `postgres` output, as PostgreSQL's EncodeInterval writes it.

    `1 year 2 mons 3 days 04:05:06.5`, `00:00:00`, `-1 years -1 mons` (every value but 1
    takes the plural, -1 too), `-1 days +02:00:00` (a positive part after a negative one
    gets an explicit `+`). Years are months / 12 truncated toward zero; sub-microsecond
    nanoseconds are truncated toward zero.
    """
    years = abs(months) // 12 * (-1 if months < 0 else 1)
    out: list[str] = []
    is_zero, is_before = True, False
    for value, unit in ((years, "year"), (months - years * 12, "mon"), (days, "day")):
        if value == 0:
            continue
        plus = "+" if is_before and value > 0 else ""
        out.append(f"{'' if is_zero else ' '}{plus}{value} {unit}{'' if value == 1 else 's'}")
        is_zero, is_before = False, value < 0
    usecs = nanos // 1000 if nanos >= 0 else -((-nanos) // 1000)
    if is_zero or usecs != 0:
        a = abs(usecs)
        hours, a = divmod(a, 3_600_000_000)
        mins, a = divmod(a, 60_000_000)
        secs, frac = divmod(a, 1_000_000)
        sign = "-" if usecs < 0 else ("+" if is_before else "")
        text = f"{hours:02d}:{mins:02d}:{secs:02d}"
        if frac:
            text += "." + f"{frac:06d}".rstrip("0")
        out.append(f"{'' if is_zero else ' '}{sign}{text}")
    return "".join(out)
