"""Date/time arithmetic and functions; jsonb operators, functions and canonical text."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
import pytest

from engine.errors import DatetimeFieldOverflow, InvalidParameterValue
from engine.expr import jsonb_canonical

D = Decimal
UTC = dt.UTC


def test_timestamp_interval_arithmetic(ev, ev1) -> None:
    assert ev("ts + INTERVAL '1 month'")[0] == dt.datetime(2024, 2, 29, 10, 30, 15, 250000)
    assert ev("ts - INTERVAL '1 day'")[2] == dt.datetime(2020, 2, 28)
    assert ev("ts + INTERVAL '90' MINUTE")[3] == dt.datetime(1970, 1, 1, 1, 29, 59)
    assert ev("INTERVAL '1 hour' + ts")[2] == dt.datetime(2020, 2, 29, 1)
    assert ev("tz + INTERVAL '1 day'")[0] == dt.datetime(2024, 3, 11, 12, tzinfo=UTC)
    assert ev("d + INTERVAL '1 hour'")[0] == dt.datetime(2024, 1, 31, 1)
    assert ev1("DATE '2024-03-01' - DATE '2024-01-01'") == 60
    assert ev("d + 1") == [dt.date(2024, 2, 1), dt.date(2020, 3, 1), None, dt.date(1970, 1, 1)]
    assert ev("d - 1")[0] == dt.date(2024, 1, 30)
    diff = ev1("TIMESTAMP '2024-01-02 03:00:00' - TIMESTAMP '2024-01-01 00:00:00'")
    assert diff == pa.MonthDayNano([0, 1, 3 * 3600 * 10**9])
    assert (
        ev1("(TIMESTAMP '2024-01-02 03:00:00' - TIMESTAMP '2024-01-01')::text") == "1 day 03:00:00"
    )
    assert ev1("(INTERVAL '1 hour' * 2)::text") == "02:00:00"
    assert ev1("(INTERVAL '1 day' + INTERVAL '1 hour')::text") == "1 day 01:00:00"
    assert ev1("INTERVAL '1 hour' < INTERVAL '1 day'") is True


def test_now_and_current_date(ev, bind) -> None:
    assert ev("now()")[0] == dt.datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert ev("current_timestamp")[1] == dt.datetime(2024, 5, 1, 12, tzinfo=UTC)
    assert ev("current_date")[0] == dt.date(2024, 5, 1)
    assert bind("tz > now() - INTERVAL '1 hour'").has_now()


def test_date_trunc(ev) -> None:
    assert ev("date_trunc('month', ts)")[0] == dt.datetime(2024, 1, 1)
    assert ev("date_trunc('hour', ts)")[0] == dt.datetime(2024, 1, 31, 10)
    assert ev("date_trunc('week', ts)")[0] == dt.datetime(2024, 1, 29)
    assert ev("date_trunc('year', ts)")[3] == dt.datetime(1969, 1, 1)
    assert ev("date_trunc('day', tz)")[0] == dt.datetime(2024, 3, 10, tzinfo=UTC)
    # in a session zone the day boundary is local
    assert ev("date_trunc('day', tz)", tz="Asia/Tokyo")[0] == dt.datetime(
        2024, 3, 9, 15, tzinfo=UTC
    )
    assert ev("date_trunc('day', d)")[0] == dt.datetime(2024, 1, 31, tzinfo=UTC)
    with pytest.raises(InvalidParameterValue, match='units "fortnight" not recognized'):
        ev("date_trunc('fortnight', ts)")


def test_extract(ev, bind) -> None:
    assert bind("extract(year FROM ts)").type.display == "numeric"
    assert ev("extract(year FROM ts)") == [2024, None, 2020, 1969]
    assert ev("extract(month FROM d)") == [1, 2, None, 12]
    assert ev("extract(second FROM ts)")[0] == D("15.25")
    assert ev("extract(milliseconds FROM ts)")[0] == D("15250")
    assert ev("extract(microseconds FROM ts)")[0] == 15250000
    assert ev("extract(epoch FROM ts)")[0] == D("1706697015.25")
    assert ev("extract(epoch FROM ts)")[3] == -1
    assert ev("extract(dow FROM d)") == [3, 6, None, 3]
    assert ev("extract(doy FROM d)") == [31, 60, None, 365]
    assert ev("extract(quarter FROM d)") == [1, 1, None, 4]
    assert ev("extract(week FROM d)")[0] == 5
    assert ev("date_part('hour', ts)")[0] == 10
    assert ev("extract(epoch FROM INTERVAL '1 day 1 second')")[0] == 86401
    assert ev("extract(hour FROM tz)", tz="Asia/Kolkata")[0] == 17


def test_to_timestamp_make_date(ev1) -> None:
    assert ev1("to_timestamp(0)") == dt.datetime(1970, 1, 1, tzinfo=UTC)
    assert ev1("to_timestamp(1.5)") == dt.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=UTC)
    assert ev1("make_date(2024, 2, 29)") == dt.date(2024, 2, 29)
    with pytest.raises(DatetimeFieldOverflow, match="date field value out of range"):
        ev1("make_date(2023, 2, 29)")


def test_jsonb_access(ev) -> None:
    assert ev("j -> 'a'") == ["1", None, None, None]
    assert ev("j ->> 'b'") == ['[1, 2.50, "x"]', None, None, None]
    assert ev("j -> 'b' -> 2") == ['"x"', None, None, None]
    assert ev("j -> 'b' ->> 2") == ["x", None, None, None]
    assert ev("j -> 1") == [None, '"x"', None, None]
    # a scalar document is a one-element array to PostgreSQL's -> / ->> (index 0 and -1)
    assert ev("j ->> -1") == [None, "true", None, "str"]
    assert ev("j -> 'c' ->> 'd'") == [None, None, None, None]  # JSON null -> SQL NULL
    assert ev("j -> 'c' -> 'd'") == ["null", None, None, None]
    assert ev("j #> '{b,1}'") == ["2.50", None, None, None]
    assert ev("j #>> '{b,2}'") == ["x", None, None, None]
    assert ev("jsonb_extract_path(j, 'c', 'd')") == ["null", None, None, None]
    assert ev("jsonb_extract_path_text(j, 'b', '0')") == ["1", None, None, None]


def test_jsonb_predicates_and_functions(ev) -> None:
    assert ev("j @> '{\"a\": 1}'") == [True, False, None, False]
    assert ev("j @> '{\"b\": [2.5]}'") == [True, False, None, False]
    assert ev("j @> '1'") == [False, True, None, False]
    assert ev("j ? 'a'") == [True, False, None, False]
    assert ev("j ? 'x'") == [False, True, None, False]
    assert ev("jsonb_typeof(j)") == ["object", "array", None, "string"]
    assert ev("jsonb_array_length(j -> 'b')") == [3, None, None, None]
    with pytest.raises(InvalidParameterValue, match="cannot get array length of a scalar"):
        ev("jsonb_array_length('5'::jsonb)")
    assert ev("jsonb_build_object('s', s, 'i', i, 'n', n)")[0] == '{"i": 1, "n": 1.5, "s": "hello"}'
    assert ev("jsonb_build_object('s', s)")[2] == '{"s": null}'
    assert ev("jsonb_build_array(i, s, b, j)")[1] == '[-7, "Wörld", false, [1, "x", true]]'
    assert ev("to_jsonb(s)") == ['"hello"', '"Wörld"', None, '""']
    assert ev("to_jsonb(ts)")[0] == '"2024-01-31T10:30:15.25"'
    assert ev("to_jsonb(f)") == ["1.5", "-2.5", None, "0"]
    assert ev("j || '{\"z\": 0}'")[0] == '{"a": 1, "b": [1, 2.50, "x"], "c": {"d": null}, "z": 0}'


def test_jsonb_canonical() -> None:
    assert (
        jsonb_canonical({"bb": 1, "a": [1, 2.5, None, True], "c": "x\n"})
        == '{"a": [1, 2.5, null, true], "c": "x\\n", "bb": 1}'
    )
    assert jsonb_canonical(D("1.50")) == "1.50"
    assert jsonb_canonical("é") == '"é"'
    assert jsonb_canonical([]) == "[]" and jsonb_canonical({}) == "{}"
