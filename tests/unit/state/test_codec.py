"""Codec: round trip for every engine value type, key determinism, pinned bytes."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.state import codec

INT64 = st.integers(-(2**63), 2**63 - 1)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    INT64,
    st.integers(),  # numeric contexts may exceed 64 bits
    st.floats(allow_nan=False),
    st.decimals(allow_nan=False, allow_infinity=False),
    st.text(),
    st.binary(),
    st.dates(),
    st.times(),
    st.datetimes(),
    st.datetimes(timezones=st.just(UTC)),
    st.builds(
        lambda m, d, n: pa.MonthDayNano((m, d, n)),
        st.integers(-(2**31), 2**31 - 1),
        st.integers(-(2**31), 2**31 - 1),
        INT64,
    ),
)
values = st.one_of(scalars, st.lists(scalars, max_size=4))
rows = st.lists(values, max_size=5).map(tuple)
keys = st.lists(scalars, max_size=5).map(tuple)


def same(a: Any, b: Any) -> bool:
    """Equal, same type, and same representation where Python equality hides it."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return math.copysign(1, a) == math.copysign(1, b) and (a == b or a != a and b != b)
    if isinstance(a, Decimal):
        return str(a) == str(b)
    if isinstance(a, datetime):
        return a == b and (a.tzinfo is None) == (b.tzinfo is None)
    return bool(a == b)


@settings(max_examples=400)
@given(rows)
def test_value_round_trip_is_exact(row: tuple[Any, ...]) -> None:
    assert same(codec.decode_value(codec.encode_value(row)), row)


@settings(max_examples=400)
@given(keys)
def test_key_round_trip_is_equal(key: tuple[Any, ...]) -> None:
    out = codec.decode_key(codec.encode_key(key))
    assert out == key
    assert [type(v) for v in out] == [type(v) for v in key]
    assert codec.encode_key(out) == codec.encode_key(key)


def twin(v: Any) -> Any:
    """An equal value with a different representation or identity, where one exists."""
    if type(v) is str:
        return "".join(list(v))  # a distinct object (pickle's memo would see the difference)
    if type(v) is float and v == 0.0:
        return -v
    if type(v) is Decimal and v.is_finite():
        sign, digits, exp = v.as_tuple()
        assert isinstance(exp, int)
        return Decimal((sign, (*digits, 0, 0, 0), exp - 3)) if v else -v  # 3 more zeros
    if type(v) is datetime and v.tzinfo is not None:
        try:
            return v.astimezone(timezone(timedelta(hours=5, minutes=30)))
        except OverflowError:
            return v
    if type(v) is int and -(2**63) <= v < 2**63:
        return np.int64(v)
    return v


@settings(max_examples=400)
@given(keys)
def test_equal_keys_give_equal_bytes(key: tuple[Any, ...]) -> None:
    other = tuple(twin(v) for v in key)
    assert other == key
    assert codec.encode_key(other) == codec.encode_key(key)


def test_repeated_object_does_not_change_bytes() -> None:
    s = "".join(["ab", "cd"])
    assert codec.encode_key((s, s)) == codec.encode_key((s, "".join(["a", "bcd"])))


def test_value_keeps_representation_key_canonicalizes() -> None:
    v = (Decimal("1.50"), -0.0, Decimal("100"))
    out = codec.decode_value(codec.encode_value(v))
    assert str(out[0]) == "1.50" and math.copysign(1, out[1]) == -1 and str(out[2]) == "100"
    k = codec.decode_key(codec.encode_key(v))
    assert str(k[0]) == "1.5" and math.copysign(1, k[1]) == 1 and str(k[2]) == "100"


def test_nan_and_special_values_round_trip() -> None:
    out = codec.decode_value(codec.encode_value((math.nan, Decimal("NaN"), Decimal("-Infinity"))))
    assert math.isnan(out[0]) and out[1].is_nan() and out[2] == Decimal("-Infinity")


def test_numpy_scalars_are_not_stored_as_raw_bytes() -> None:
    out = codec.decode_value(codec.encode_value((np.int64(5), np.float64(1.5), np.bool_(True))))
    assert out == (5, 1.5, True)
    assert [type(v) for v in out] == [int, float, bool]


def test_nested_tuples_ellipsis_and_foreign_objects() -> None:
    row = ((1, (date(2020, 1, 1), "x")), ..., (..., 1), frozenset({1, 2}), [[Decimal("1")]])
    assert same(codec.decode_value(codec.encode_value(row)), row)
    aware_time = (time(1, 2, tzinfo=UTC),)
    assert codec.decode_value(codec.encode_value(aware_time)) == aware_time


def test_aware_datetime_comes_back_as_utc() -> None:
    ist = timezone(timedelta(hours=5, minutes=30))
    v = datetime(2024, 1, 1, 12, 0, tzinfo=ist)
    (out,) = codec.decode_value(codec.encode_value((v,)))
    assert out == v and out.tzinfo is UTC


def test_pinned_bytes() -> None:
    """The on-disk format; a change here needs a migration, not a new expected value."""
    assert codec.encode_key((1, "a", None, True, 2.5, b"z")) == bytes.fromhex(
        "280600000069010000007501000000614e5467000000000000 044073010000007a".replace(" ", "")
    )
    assert codec.encode_key((date(2024, 1, 2), Decimal("1.50"))) == bytes.fromhex(
        "01280200000028030000002e6901000000730400000007e8010228030000002e69000000007503000000312e35"
    )
    assert codec.encode_value((datetime(2024, 5, 1, 12, 0, 1, 5, tzinfo=UTC),)) == (
        b"\x01(\x01\x00\x00\x00(\x03\x00\x00\x00.i\x04\x00\x00\x00"
        b"s\n\x00\x00\x00\x07\xe8\x05\x01\x0c\x00\x01\x00\x00\x05"
    )


def test_table_prefix_range() -> None:
    assert codec.table_prefix(1) == b"\x00\x00\x00\x01"
    assert codec.table_prefix(codec.MAX_TABLE_ID + 1) == codec.RESERVED_PREFIX + b"\x00\x00"
    with pytest.raises(ValueError):
        codec.table_prefix(codec.MAX_TABLE_ID + 2)
    with pytest.raises(ValueError):
        codec.table_prefix(-1)


# -- bulk encoding: the same bytes as one tuple at a time ------------------------------------
column_values = st.one_of(
    st.just(st.none()),
    st.just(st.one_of(st.none(), st.datetimes())),
    st.just(st.one_of(st.none(), st.datetimes(timezones=st.just(UTC)), st.datetimes())),
    st.just(st.one_of(st.none(), st.dates())),
    st.just(st.floats(allow_nan=False)),
    st.just(st.one_of(st.none(), INT64)),
    st.just(st.text(max_size=3)),
    st.just(scalars),
)


@st.composite
def tables(draw: Any) -> list[tuple[Any, ...]]:
    """Rows of one arity whose columns each draw from one strategy (as state rows do)."""
    cols = draw(st.lists(column_values, min_size=1, max_size=4))
    n = draw(st.integers(1, 6))
    return [tuple(draw(c) for c in cols) for _ in range(n)]


@settings(max_examples=300)
@given(tables())
def test_bulk_encoding_equals_per_tuple_encoding(rows_: list[tuple[Any, ...]]) -> None:
    assert codec.encode_values(rows_) == [codec.encode_value(r) for r in rows_]
    assert codec.encode_keys(rows_) == [codec.encode_key(r) for r in rows_]
    for r, b in zip(rows_, codec.encode_values(rows_), strict=True):
        assert same(codec.decode_value(b), r)


def test_bulk_datetime_column_rows_mix_plain_and_extended_forms() -> None:
    rows_ = [(1, datetime(2024, 1, 1, 0, 0, 1)), (2, None), (3, -0.0)]
    assert codec.encode_keys(rows_[:2]) == [codec.encode_key(r) for r in rows_[:2]]
    assert codec.encode_keys([(1, -0.0), (2, 1.5)]) == [
        codec.encode_key((1, 0.0)),
        codec.encode_key((2, 1.5)),
    ]
    assert codec.encode_keys(rows_[:2])[1][:1] == b"("  # no datetime in that row: plain form


@settings(max_examples=300)
@given(st.lists(rows, max_size=6))
def test_row_blobs_round_trip_exactly(rows_: list[tuple[Any, ...]]) -> None:
    out = codec.decode_rows(codec.encode_rows(rows_))
    assert same(out, rows_) if rows_ else out == []


@settings(max_examples=200)
@given(tables())
def test_row_blobs_of_uniform_rows_round_trip(rows_: list[tuple[Any, ...]]) -> None:
    assert same(codec.decode_rows(codec.encode_rows(rows_)), rows_)


def test_row_blobs_keep_non_tuple_items() -> None:
    items = ["abc", [1, datetime(2024, 1, 1)], (..., 1), datetime(2024, 1, 2), ()]
    assert same(codec.decode_rows(codec.encode_rows(items)), items)
    with pytest.raises(ValueError):
        codec.decode_rows(b"\x7f" + b"N")


def test_memcmp_bulk_naive_datetime_columns_match_per_key_encoding() -> None:
    from datetime import UTC, timedelta

    from engine.state import memcmp

    base = datetime(2015, 7, 15)
    keys = [(i, base + timedelta(microseconds=i * 777_777)) for i in range(100)]
    keys += [(-1, datetime(1, 1, 1)), (-2, datetime(9999, 12, 31, 23, 59, 59, 999_999))]
    assert memcmp.encode_keys(keys) == [memcmp.encode_key(k) for k in keys]
    aware = [(i, base.replace(tzinfo=UTC)) for i in range(100)]  # the per-element form
    assert memcmp.encode_keys(aware) == [memcmp.encode_key(k) for k in aware]


def test_bulk_encoding_in_slices_equals_per_tuple_encoding() -> None:
    """More rows than one slice, whose slices take different paths (plain marshal, the
    columnar path with datetimes, the per-tuple fallback): the same bytes, in order."""
    n = codec.BULK_SLICE
    plain = [(i, f"v{i}", None) for i in range(n)]
    dated = [(i, datetime(2024, 1, 1 + i % 28), 1.5) for i in range(n)]
    mixed = [(i, Decimal(i) / 4, (1, 2)) for i in range(n // 2)]
    rows_ = plain + dated + mixed + plain[:7]
    assert codec.encode_values(rows_) == [codec.encode_value(r) for r in rows_]
    assert codec.encode_keys(rows_) == [codec.encode_key(r) for r in rows_]
