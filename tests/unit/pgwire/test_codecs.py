"""Value codecs: exact text forms (as PostgreSQL/RisingWave print them), the binary layouts
of PostgreSQL's *_send functions, and text/binary round trips of every supported type."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.errors import EngineError, InvalidTextRepresentation, NumericValueOutOfRange
from engine.types import (
    BIGINT,
    BOOLEAN,
    BYTEA,
    DATE,
    DOUBLE,
    INT,
    INTERVAL,
    JSONB,
    NUMERIC,
    REAL,
    SMALLINT,
    TIME,
    TIMESTAMP,
    TIMESTAMPTZ,
    UNKNOWN,
    VARCHAR,
    SqlType,
    list_of,
)
from pgwire.codecs import (
    BINARY,
    TEXT,
    decode_value,
    encode_value,
    format_float4,
    format_float8,
    format_numeric,
    numeric_recv,
    numeric_send,
)
from pgwire.temporal import format_interval, parse_interval

UTC = dt.UTC
SHANGHAI = ZoneInfo("Asia/Shanghai")


def mdn(months: int, days: int, nanos: int) -> pa.MonthDayNano:
    return pa.MonthDayNano([months, days, nanos])


def text(value: Any, t: SqlType, tz: dt.tzinfo = UTC) -> str:
    out = encode_value(value, t, TEXT, tz)
    assert out is not None
    return out.decode()


# -- text output --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.0, "1"),
        (0.1, "0.1"),
        (-2.5, "-2.5"),
        (1e15, "1e+15"),
        (123456789012345.0, "123456789012345"),
        (1e-5, "1e-05"),
        (0.0001, "0.0001"),
        (1e300, "1e+300"),
        (1 / 3, "0.3333333333333333"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
        (float("nan"), "NaN"),
        (-0.0, "-0"),
        (100.0, "100"),
    ],
)
def test_float8_text(value: float, expected: str) -> None:
    assert format_float8(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1.5, "1.5"),
        (0.1, "0.1"),
        (1e6, "1e+06"),
        (123456.0, "123456"),
        (3.4028234663852886e38, "3.4028235e+38"),
    ],
)
def test_float4_text(value: float, expected: str) -> None:
    assert format_float4(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1.5000000000", "1.5"),
        ("3.0000000000", "3"),
        ("0E-10", "0"),
        ("-0.0000", "0"),
        ("100", "100"),
        ("1E+3", "1000"),
        ("-12345.678", "-12345.678"),
        ("0.0001", "0.0001"),
        ("NaN", "NaN"),
        ("Infinity", "Infinity"),
        ("-Infinity", "-Infinity"),
    ],
)
def test_numeric_text(value: str, expected: str) -> None:
    assert format_numeric(Decimal(value)) == expected


@pytest.mark.parametrize(
    ("value", "hexed"),
    [
        # the layouts PostgreSQL 15's numeric_send produces (dscale follows our trimmed text)
        ("1.5", "00020000000000010001 1388"),
        ("-12345.678", "0003000140000003 0001 0929 1a7c"),
        ("0.0001", "0001ffff00000004 0001"),
        ("0", "0000000000000000"),
        ("NaN", "00000000c0000000"),
    ],
)
def test_numeric_binary_layout(value: str, hexed: str) -> None:
    assert numeric_send(Decimal(value)).hex() == hexed.replace(" ", "")
    back = numeric_recv(bytes.fromhex(hexed.replace(" ", "")))
    assert str(back) == value or (back.is_nan() and value == "NaN")


def test_numeric_recv_honours_dscale() -> None:
    # PostgreSQL sends 1.50 as dscale 2; the value keeps its scale
    assert numeric_recv(bytes.fromhex("000200000000000200011388")) == Decimal("1.50")
    assert str(numeric_recv(bytes.fromhex("000200000000000200011388"))) == "1.50"


@pytest.mark.parametrize(
    ("iv", "expected"),
    [
        (mdn(14, 3, 14_706 * 10**9), "1 year 2 mons 3 days 04:05:06"),
        (mdn(0, 0, 0), "00:00:00"),
        (mdn(0, -1, 0), "-1 days"),
        (mdn(1, 1, 0), "1 mon 1 day"),
        (mdn(-14, -3, -14_706 * 10**9), "-1 years -2 mons -3 days -04:05:06"),
        (mdn(0, 1, -3600 * 10**9), "1 day -01:00:00"),
        (mdn(-1, 2, 500_000_000), "-1 mons +2 days 00:00:00.5"),
        (mdn(0, 0, 90_000 * 10**9 + 1_000), "25:00:00.000001"),
        (mdn(0, -2, 3600 * 10**9), "-2 days +01:00:00"),
    ],
)
def test_interval_text(iv: pa.MonthDayNano, expected: str) -> None:
    assert format_interval(iv) == expected
    assert parse_interval(expected) == iv


@pytest.mark.parametrize(
    ("textval", "iv"),
    [
        ("P1Y2M3DT4H5M6.5S", mdn(14, 3, 14_706_500_000_000)),
        ("@ 1 hour ago", mdn(0, 0, -3600 * 10**9)),
        ("1.5 days", mdn(0, 1, 43_200 * 10**9)),
        ("2 weeks 30 minutes", mdn(0, 14, 1800 * 10**9)),
        ("-00:00:01.25", mdn(0, 0, -1_250_000_000)),
        ("10", mdn(0, 0, 10 * 10**9)),
    ],
)
def test_interval_input_forms(textval: str, iv: pa.MonthDayNano) -> None:
    assert parse_interval(textval) == iv


def test_temporal_text() -> None:
    assert text(dt.date(2024, 1, 2), DATE) == "2024-01-02"
    assert text(dt.time(3, 4, 5), TIME) == "03:04:05"
    assert text(dt.time(3, 4, 5, 120), TIME) == "03:04:05.00012"
    assert text(dt.datetime(2024, 1, 2, 3, 4, 5), TIMESTAMP) == "2024-01-02 03:04:05"
    assert text(dt.datetime(2024, 1, 2, 3, 4, 5, 123456), TIMESTAMP) == "2024-01-02 03:04:05.123456"
    assert text(dt.datetime(2024, 1, 2, 3, 4, 5, 100000), TIMESTAMP) == "2024-01-02 03:04:05.1"
    tstz = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert text(tstz, TIMESTAMPTZ) == "2024-01-02 03:04:05+00:00"
    assert text(tstz, TIMESTAMPTZ, SHANGHAI) == "2024-01-02 11:04:05+08:00"
    assert text(tstz, TIMESTAMPTZ, ZoneInfo("America/St_Johns")) == "2024-01-01 23:34:05-03:30"
    summer = dt.datetime(2024, 7, 1, 12, tzinfo=UTC)
    assert text(summer, TIMESTAMPTZ, ZoneInfo("Europe/Berlin")) == "2024-07-01 14:00:00+02:00"


def test_scalar_text() -> None:
    assert text(True, BOOLEAN) == "t" and text(False, BOOLEAN) == "f"
    assert text(b"\x00\xffA", BYTEA) == "\\x00ff41"
    assert text('{"a": 1}', JSONB) == '{"a": 1}'
    assert text(-5, SMALLINT) == "-5"


def test_array_text() -> None:
    assert text([1, None, 3], list_of(INT)) == "{1,NULL,3}"
    assert text(["a b", "c", None, "", "NULL", 'q"\\'], list_of(VARCHAR)) == (
        '{"a b",c,NULL,"","NULL","q\\"\\\\"}'
    )
    assert text([], list_of(INT)) == "{}"
    assert text([True, False], list_of(BOOLEAN)) == "{t,f}"
    assert text([dt.datetime(2024, 1, 2, 3, 4, 5)], list_of(TIMESTAMP)) == '{"2024-01-02 03:04:05"}'
    assert decode_value(b'{"a b",c,NULL,"","NULL"}', list_of(VARCHAR)) == [
        "a b",
        "c",
        None,
        "",
        "NULL",
    ]
    assert decode_value(b"[0:1]={1,2}", list_of(INT)) == [1, 2]
    assert decode_value(b"{{1,2},{3,4}}", list_of(INT)) == [[1, 2], [3, 4]]
    with pytest.raises(InvalidTextRepresentation):
        decode_value(b"{1,2", list_of(INT))


# -- binary layouts -------------------------------------------------------------------------------
def test_binary_layouts() -> None:
    assert encode_value(dt.date(1999, 12, 31), DATE, BINARY) == bytes.fromhex("ffffffff")
    assert encode_value(dt.datetime(2000, 1, 1, 0, 0, 1), TIMESTAMP, BINARY) == (
        1_000_000
    ).to_bytes(8, "big")
    tstz = dt.datetime(2000, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert encode_value(tstz, TIMESTAMPTZ, BINARY) == bytes(8)
    assert encode_value(mdn(2, 3, 4_000), INTERVAL, BINARY) == bytes.fromhex(
        "00000000000000040000000300000002"
    )
    assert encode_value('{"a":1}', JSONB, BINARY) == b'\x01{"a":1}'
    assert encode_value([1, None], list_of(INT), BINARY) == bytes.fromhex(
        "00000001 00000001 00000017 00000002 00000001 00000004 00000001 ffffffff".replace(" ", "")
    )
    assert encode_value(True, BOOLEAN, BINARY) == b"\x01"
    assert encode_value(-2, SMALLINT, BINARY) == b"\xff\xfe"


# -- round trips ---------------------------------------------------------------------------------------
ROUND_TRIP: list[tuple[SqlType, Any]] = [
    (BOOLEAN, True),
    (BOOLEAN, False),
    (SMALLINT, -32768),
    (INT, 2**31 - 1),
    (BIGINT, -(2**63)),
    (REAL, 1.5),
    (REAL, float("inf")),
    (DOUBLE, 0.1),
    (DOUBLE, -1e-300),
    (DOUBLE, float("-inf")),
    (NUMERIC, Decimal("-12345.678")),
    (NUMERIC, Decimal("0.0001")),
    (NUMERIC, Decimal("1E+20")),
    (NUMERIC, Decimal("123456789012345678901234567.8901234567")),
    (VARCHAR, "héllo"),
    (VARCHAR, ""),
    (BYTEA, b"\x00\x01\xff"),
    (BYTEA, b""),
    (DATE, dt.date(1999, 12, 31)),
    (DATE, dt.date(2024, 2, 29)),
    (DATE, dt.date(1, 1, 1)),
    (TIME, dt.time(0, 0)),
    (TIME, dt.time(23, 59, 59, 999999)),
    (TIMESTAMP, dt.datetime(1970, 1, 1)),
    (TIMESTAMP, dt.datetime(2024, 1, 2, 3, 4, 5, 6)),
    (TIMESTAMPTZ, dt.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC)),
    (TIMESTAMPTZ, dt.datetime(1960, 6, 1, 12, tzinfo=UTC)),
    (INTERVAL, mdn(14, 3, 14_706_000_000_000)),
    (INTERVAL, mdn(-14, -3, -1_000)),
    (INTERVAL, mdn(0, 0, 0)),
    (INTERVAL, mdn(0, -1, 0)),
    (INTERVAL, mdn(1, -2, 3_000)),
    (JSONB, '{"a": [1, 2, null]}'),
    (list_of(INT), [1, None, 3]),
    (list_of(INT), []),
    (list_of(VARCHAR), ["a b", None, "", "{}", '"']),
    (list_of(NUMERIC), [Decimal("1.5"), None]),
    (list_of(TIMESTAMPTZ), [dt.datetime(2024, 1, 1, tzinfo=UTC)]),
    (list_of(INTERVAL), [mdn(0, -1, 0), None]),
    (list_of(BOOLEAN), [True, None]),
    (list_of(DATE), [dt.date(2000, 1, 1)]),
    (list_of(BYTEA), [b"\x00", None]),
    (list_of(JSONB), ['{"k": "v"}']),
    (list_of(DOUBLE), [1.0, -0.5]),
]


@pytest.mark.parametrize(("t", "value"), ROUND_TRIP, ids=lambda x: str(x)[:30])
@pytest.mark.parametrize("fmt", [TEXT, BINARY])
@pytest.mark.parametrize("tz", [UTC, SHANGHAI], ids=["utc", "shanghai"])
def test_round_trip(t: SqlType, value: Any, fmt: int, tz: dt.tzinfo) -> None:
    wire = encode_value(value, t, fmt, tz)
    assert wire is not None
    assert decode_value(wire, t, fmt, tz) == value


@pytest.mark.parametrize("fmt", [TEXT, BINARY])
def test_null(fmt: int) -> None:
    for t, _ in ROUND_TRIP:
        assert encode_value(None, t, fmt) is None
        assert decode_value(None, t, fmt) is None


@given(st.floats(allow_nan=False))
def test_float8_text_round_trips(v: float) -> None:
    assert float(format_float8(v)) == v


@given(
    st.decimals(
        allow_nan=False,
        allow_infinity=False,
        places=10,
        min_value=Decimal("-1e27"),
        max_value=Decimal("1e27"),
    )
)
def test_numeric_binary_round_trips(v: Decimal) -> None:
    back = numeric_recv(numeric_send(v))
    assert back == v and format_numeric(back) == format_numeric(v)


@given(
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**62), 2**62).map(lambda n: n // 1000 * 1000),
)
def test_interval_text_round_trips(months: int, days: int, nanos: int) -> None:
    iv = mdn(months, days, nanos)
    assert parse_interval(format_interval(iv)) == iv


# -- text parameter input ---------------------------------------------------------------------
def test_text_inputs() -> None:
    for word in ("t", "true", "1", "yes", "on", "TRUE", " y "):
        assert decode_value(word.encode(), BOOLEAN) is True
    for word in ("f", "false", "0", "no", "off"):
        assert decode_value(word.encode(), BOOLEAN) is False
    assert decode_value(b"2024-01-02 03:04:05+05", TIMESTAMPTZ) == dt.datetime(
        2024, 1, 1, 22, 4, 5, tzinfo=UTC
    )
    assert decode_value(b"2024-01-02T03:04:05Z", TIMESTAMPTZ) == dt.datetime(
        2024, 1, 2, 3, 4, 5, tzinfo=UTC
    )
    # without an offset, a timestamptz is read in the session time zone
    assert decode_value(b"2024-01-02 08:00:00", TIMESTAMPTZ, TEXT, SHANGHAI) == dt.datetime(
        2024, 1, 2, 0, 0, tzinfo=UTC
    )
    assert decode_value(b"\\x0aff", BYTEA) == b"\n\xff"
    assert decode_value(b"a\\\\b\\001", BYTEA) == b"a\\b\x01"
    assert decode_value(b" 42 ", INT) == 42
    assert decode_value(b"1.50", NUMERIC) == Decimal("1.50")
    assert math.isnan(decode_value(b"NaN", DOUBLE))
    assert decode_value(b"Infinity", DOUBLE) == float("inf")
    assert decode_value(b'{"a": 1}', JSONB) == '{"a": 1}'
    assert decode_value(b"anything", UNKNOWN) == "anything"
    assert decode_value(b"2024-01-02", DATE) == dt.date(2024, 1, 2)
    assert decode_value(b"12:00:00.5", TIME) == dt.time(12, 0, 0, 500000)


@pytest.mark.parametrize(
    ("raw", "t", "sqlstate"),
    [
        (b"maybe", BOOLEAN, "22P02"),
        (b"12x", INT, "22P02"),
        (b"40000", SMALLINT, "22003"),
        (b"1.2.3", NUMERIC, "22P02"),
        (b"abc", DOUBLE, "22P02"),
        (b"2024-13-01", DATE, "22008"),  # PostgreSQL: date/time field value out of range
        (b"soon", TIMESTAMP, "22007"),
        (b"1 fortnight", INTERVAL, "22007"),
        (b"\\xzz", BYTEA, "22023"),  # PostgreSQL: invalid hexadecimal digit: "z"
    ],
)
def test_bad_text_inputs(raw: bytes, t: SqlType, sqlstate: str) -> None:
    with pytest.raises(EngineError) as info:
        decode_value(raw, t)
    assert info.value.sqlstate == sqlstate
    if sqlstate == "22003":
        assert isinstance(info.value, NumericValueOutOfRange)
