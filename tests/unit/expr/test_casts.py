"""Casts between engine types: text in/out, numeric conversions, temporal, jsonb, arrays."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from engine.errors import (
    DataError,
    InvalidParameterValue,
    InvalidTextRepresentation,
    NumericValueOutOfRange,
)

D = Decimal
UTC = dt.UTC


def test_text_to_numbers(ev, ev1) -> None:
    assert ev1("' 42 '::int") == 42
    assert ev1("'-5'::bigint") == -5
    assert ev1("'1.25'::numeric") == D("1.25")
    assert ev1("'1e3'::double precision") == 1000.0
    assert ev1("'NaN'::float8") != ev1("'NaN'::float8")
    assert ev1("'-Infinity'::float8") == float("-inf")
    with pytest.raises(InvalidTextRepresentation) as e:
        ev1("CAST('abc' AS INT)")
    assert str(e.value) == 'invalid input syntax for type integer: "abc"'
    assert e.value.sqlstate == "22P02"
    with pytest.raises(InvalidTextRepresentation, match="type bigint"):
        ev1("'1.5'::bigint")
    with pytest.raises(NumericValueOutOfRange, match='value "99999999999" is out of range'):
        ev1("'99999999999'::int")
    with pytest.raises(InvalidTextRepresentation):
        ev("s::int")


def test_text_to_bool(ev1) -> None:
    for v in ("t", "TRUE", " yes ", "on", "1"):
        assert ev1(f"'{v}'::boolean") is True
    for v in ("f", "false", "no", "off", "0"):
        assert ev1(f"'{v}'::boolean") is False
    with pytest.raises(InvalidTextRepresentation, match='type boolean: "maybe"'):
        ev1("'maybe'::boolean")


def test_numeric_conversions(ev, ev1) -> None:
    assert ev("f::int") == [2, -2, None, 0]  # a float rounds half to even (rint)
    assert ev1("2.5::int") == 3
    assert ev1("(-2.5)::int") == -3
    assert ev1("0.1::float8") == 0.1
    assert ev1("(0.1::float8)::numeric") == D("0.1")
    assert ev("i::bigint") == [1, -7, None, 2147483647]
    assert ev("n::double precision") == [1.5, -2.25, None, 0.0]
    with pytest.raises(NumericValueOutOfRange, match="^integer out of range$"):
        ev1("3000000000::int")
    with pytest.raises(NumericValueOutOfRange, match="^smallint out of range$"):
        ev1("40000::smallint")
    with pytest.raises(NumericValueOutOfRange):
        ev1("'Infinity'::float8::int")


def test_to_text(ev, ev1) -> None:
    assert ev("i::text") == ["1", "-7", None, "2147483647"]
    assert ev("n::varchar") == ["1.5", "-2.25", None, "0"]
    assert ev("f::text") == ["1.5", "-2.5", None, "0"]
    assert ev("b::text") == ["true", "false", None, "true"]
    assert ev("d::text") == ["2024-01-31", "2020-02-29", None, "1969-12-31"]
    assert ev("ts::text") == [
        "2024-01-31 10:30:15.25",
        None,
        "2020-02-29 00:00:00",
        "1969-12-31 23:59:59",
    ]
    assert ev("tz::text")[0] == "2024-03-10 12:00:00+00:00"
    assert ev("tz::text", tz="Asia/Kolkata")[0] == "2024-03-10 17:30:00+05:30"
    assert ev1("1e20::float8::text") == "1e+20"
    assert ev1("0.00001::float8::text") == "1e-05"
    assert ev1("(1.0/3)::float8::text") == "0.3333333333"
    assert ev1("'1 day 02:03:04'::interval::text") == "1 day 02:03:04"
    assert ev1("INTERVAL '14 months'::text") == "1 year 2 mons"
    assert ev1("'\\x6869'::bytea::text") == "\\x6869"
    assert ev1("ARRAY[1, 2]::text") == "{1,2}"
    assert ev1("'12:30:00.5'::time::text") == "12:30:00.5"


def test_text_to_temporal(ev1) -> None:
    assert ev1("'2024-01-02'::date") == dt.date(2024, 1, 2)
    assert ev1("'2024-01-02 03:04:05.123'::timestamp") == dt.datetime(2024, 1, 2, 3, 4, 5, 123000)
    assert ev1("'2024-01-02T03:04:05Z'::timestamptz") == dt.datetime(
        2024, 1, 2, 3, 4, 5, tzinfo=UTC
    )
    assert ev1("'2024-01-02 03:04:05+02:00'::timestamptz") == dt.datetime(
        2024, 1, 2, 1, 4, 5, tzinfo=UTC
    )
    assert ev1("'2024-01-02 03:04:05-0530'::timestamptz") == dt.datetime(
        2024, 1, 2, 8, 34, 5, tzinfo=UTC
    )
    assert ev1("'2024-01-02 03:04:05'::timestamptz", tz="Europe/Paris") == dt.datetime(
        2024, 1, 2, 2, 4, 5, tzinfo=UTC
    )
    with pytest.raises(DataError) as e:
        ev1("'2023-02-29'::date")
    assert e.value.sqlstate == "22008"  # PostgreSQL: date/time field value out of range
    with pytest.raises(DataError):
        ev1("'not a time'::timestamp")


def test_temporal_conversions(ev) -> None:
    assert ev("ts::date") == [
        dt.date(2024, 1, 31),
        None,
        dt.date(2020, 2, 29),
        dt.date(1969, 12, 31),
    ]
    assert ev("d::timestamp")[0] == dt.datetime(2024, 1, 31)
    assert ev("tz::timestamp")[0] == dt.datetime(2024, 3, 10, 12)
    assert ev("tz::timestamp", tz="America/New_York")[0] == dt.datetime(2024, 3, 10, 8)
    assert ev("ts::timestamptz")[0] == dt.datetime(2024, 1, 31, 10, 30, 15, 250000, tzinfo=UTC)
    assert ev("ts::time")[3] == dt.time(23, 59, 59)


def test_jsonb_casts(ev, ev1) -> None:
    assert ev1('\'{"b": 1, "a": 2}\'::jsonb') == '{"a": 2, "b": 1}'
    assert ev1('\'{"a": 1, "a": 2}\'::jsonb') == '{"a": 2}'
    assert ev1("'[1.50, 1e2, -0.0]'::jsonb") == "[1.50, 100, 0.0]"
    assert ev1("'\"x\"'::jsonb::text") == '"x"'
    assert ev1("'5'::jsonb::int") == 5
    assert ev1("'1.5'::jsonb::numeric") == D("1.5")
    assert ev1("'2.5'::jsonb::float8") == 2.5
    assert ev1("'true'::jsonb::boolean") is True
    assert ev1("'null'::jsonb::int") is None
    with pytest.raises(InvalidParameterValue) as e:
        ev1("'\"x\"'::jsonb::int")
    assert str(e.value) == "cannot cast jsonb string to type integer"
    assert e.value.sqlstate == "22023"
    with pytest.raises(InvalidTextRepresentation):
        ev1("'{bad'::jsonb")
    assert ev("j::text")[3] == '"str"'


def test_arrays(ev1) -> None:
    assert ev1("'{1,2,3}'::int[]") == [1, 2, 3]
    assert ev1("'{a,\"b c\",NULL}'::varchar[]") == ["a", "b c", None]
    assert ev1("ARRAY['1', '2']::int[]") == [1, 2]
    assert ev1("ARRAY[1, 2.5]") == [D(1), D("2.5")]


def test_cannot_cast(bind) -> None:
    with pytest.raises(Exception) as e:
        bind("b::date")
    assert getattr(e.value, "sqlstate", None) == "42846"
