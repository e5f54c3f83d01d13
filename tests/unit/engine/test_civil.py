"""engine.civil: the integer calendar against numpy's datetime64 (same proleptic Gregorian
calendar with astronomical years) over PostgreSQL's whole date range, and the text forms."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from engine import civil
from engine.errors import DatetimeFieldOverflow


def test_days_and_civil_dates_agree_with_numpy_over_the_whole_range() -> None:
    days = np.concatenate(
        [
            np.linspace(civil.DATE_MIN, civil.DATE_MAX, 20_000).astype(np.int64),
            np.arange(-800_000, -700_000, 7),  # around year 1 / 1 BC
            np.array([civil.DATE_MIN, civil.DATE_MAX, 0, -1, civil.PY_MIN_DAY - 1]),
        ]
    )
    y, m, d = civil.civil_from_days(days)
    assert (civil.days_from_civil_int(y, m, d) == days).all()
    d64 = days.astype("datetime64[D]")
    assert (y == d64.astype("datetime64[Y]").astype(np.int64) + 1970).all()
    assert (m == d64.astype("datetime64[M]").astype(np.int64) % 12 + 1).all()
    assert civil.valid_civil(y, m, d).all()


def test_text_of_dates_and_timestamps_as_postgresql_prints_them() -> None:
    days = civil.days_from_civil_int(
        np.array([10000, -43, 0, 2024, -4713]),
        np.array([1, 3, 12, 2, 11]),
        np.array([1, 15, 31, 29, 24]),
    )
    text = civil.format_days(days, np.array([False, False, False, False, True])).to_pylist()
    assert text == ["10000-01-01", "0044-03-15 BC", "0001-12-31 BC", "2024-02-29", None]
    us = days[:2] * civil.US_PER_DAY + 45_296_500_000  # 12:34:56.5
    assert civil.format_us(us, "+00:00").to_pylist() == [
        "10000-01-01 12:34:56.5+00:00",
        "0044-03-15 12:34:56.5+00:00 BC",
    ]


def test_python_values_beyond_datetime_are_datetime64_and_build_arrays_back() -> None:
    a = pa.array([civil.PY_MAX_DAY + 1, 0, None, civil.DATE_MIN], pa.int32()).cast(pa.date32())
    values = civil.py_temporal(a)
    assert values[0] == np.datetime64("10000-01-01") and values[2] is None
    assert pa.array(values, pa.date32()).equals(a)
    ordered = sorted([values[1], values[0], values[3]], key=civil.order_key)
    assert ordered == [values[3], values[1], values[0]]


def test_range_checks_answer_22008() -> None:
    with pytest.raises(DatetimeFieldOverflow, match="date out of range"):
        civil.check_days(np.array([civil.DATE_MAX + 1]))
    with pytest.raises(DatetimeFieldOverflow, match="timestamp out of range"):
        civil.check_us(np.array([civil.TS_MIN - 1]))
    civil.check_days(np.array([civil.DATE_MIN, civil.DATE_MAX]))
