"""The exchange's vnodes equal the state layout's, and chunks split by actor losslessly."""

from __future__ import annotations

import zlib
from datetime import UTC, date, datetime, time
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from engine.chunk import StreamChunk
from engine.state import memcmp
from engine.stream.parallel.exchange import VNODES, actor_of, split, vnode_ranges, vnodes


def reference(cols: list[pa.Array]) -> list[int]:
    rows = list(zip(*(c.to_pylist() for c in cols), strict=True))
    return [zlib.crc32(memcmp.encode_key(r)) & (VNODES - 1) for r in rows]


COLUMNS = {
    "int64": pa.array([1, 2, None, -5, 2**40, 0], pa.int64()),
    "int16": pa.array([1, -2, None, 300, 7, 0], pa.int16()),
    "big": pa.array([2**60, 1, None, -(2**61), 4, 5], pa.int64()),
    "float": pa.array([1.5, float("nan"), None, -0.0, float("inf"), 3.0]),
    "bool": pa.array([True, False, None, True, False, True]),
    "str": pa.array(["a", "", None, "x\x00y", "ünï", "zz"]),
    "bytes": pa.array([b"a", b"\x00", None, b"", b"zz", b"q"]),
    "date": pa.array([date(2020, 1, 1), None, date(1, 1, 1), date(1999, 12, 31)] * 1 + [None] * 2),
    "ts": pa.array(
        [datetime(2020, 1, 1, 3, 4, 5, 6), None, datetime(1970, 1, 1), datetime(1960, 5, 5)]
        + [None] * 2,
        pa.timestamp("us"),
    ),
    "tstz": pa.array(
        [datetime(2020, 1, 1, tzinfo=UTC), None, datetime(1969, 1, 1, tzinfo=UTC)] + [None] * 3,
        pa.timestamp("us", "UTC"),
    ),
    "time": pa.array([time(1, 2, 3), None, time(0), time(23, 59), time(5), time(6)]),
    "decimal": pa.array([Decimal("1.50"), None, Decimal("-3"), Decimal("0"), None, None]),
}


@pytest.mark.parametrize("name", sorted(COLUMNS))
def test_vnode_of_one_column_is_the_state_layouts(name: str) -> None:
    col = COLUMNS[name]
    assert vnodes([col]).tolist() == reference([col])


def test_vnode_of_composite_and_variable_length_keys() -> None:
    cols = [COLUMNS["int16"], COLUMNS["str"], COLUMNS["float"]]
    assert vnodes(cols).tolist() == reference(cols)
    rng = np.random.default_rng(7)
    words = pa.array(["w" * int(n) + str(i) for i, n in enumerate(rng.integers(0, 40, 500))])
    ints = pa.array(rng.integers(-1000, 1000, 500))
    assert vnodes([words, ints]).tolist() == reference([words, ints])


def test_actor_ranges_are_contiguous_and_cover_every_vnode() -> None:
    for p in (1, 2, 3, 7, 256):
        owner = actor_of(p)
        assert sorted(set(owner.tolist())) == list(range(p))
        assert (np.diff(owner) >= 0).all()
        ranges = vnode_ranges(p)
        assert ranges[0][0] == 0 and ranges[-1][1] == VNODES - 1


def test_split_keeps_every_row_once_and_equal_keys_together() -> None:
    keys = pa.array([i % 13 for i in range(200)])
    vals = pa.array(list(range(200)))
    ops = pa.array(np.where(np.arange(200) % 3 == 0, 2, 1).astype(np.int8))
    chunk = StreamChunk(ops, pa.RecordBatch.from_arrays([keys, vals], names=["k", "v"]))
    parts = split(chunk, [0], 3)
    seen: dict[int, int] = {}
    rows = []
    for i, part in enumerate(parts):
        if part is None:
            continue
        for k, v, o in zip(
            part.data.column(0).to_pylist(),
            part.data.column(1).to_pylist(),
            part.ops.to_pylist(),
            strict=True,
        ):
            assert seen.setdefault(k, i) == i  # one actor per key
            rows.append((v, o))
    assert sorted(rows) == sorted(zip(vals.to_pylist(), ops.to_pylist(), strict=True))
    assert split(None, [0], 3) == [None, None, None]


def test_integer_keys_without_nulls_hash_from_their_values() -> None:
    rng = np.random.default_rng(3)
    a = pa.array(rng.integers(-(2**53), 2**53, 300))
    b = pa.array(rng.integers(-5, 5, 300).astype(np.int8))
    c = pa.array(rng.integers(0, 2**32, 300).astype(np.uint32))
    for cols in ([a], [b, c], [c, a, b]):
        assert vnodes(cols).tolist() == reference(cols)


def test_integer_keys_over_several_blocks_hash_as_the_state_layout() -> None:
    rng = np.random.default_rng(5)
    n = 70_000  # more than one block of the integer path, the last one partial
    a = pa.array(rng.integers(-(2**53), 2**53, n))
    b = pa.array(rng.integers(-3, 3, n))
    assert vnodes([a, b]).tolist() == reference([a, b])


def test_keys_from_a_dense_range_hash_as_the_state_layout_with_the_range_kept() -> None:
    rng = np.random.default_rng(7)
    chunks = [
        rng.integers(0, 1_000, 4_000),  # dense: the range's table is made
        rng.integers(10, 900, 3_000),  # inside it: looked up
        rng.integers(-2_000, -1_500, 2_000).astype(np.int32),  # another range, negative
        rng.integers(2**52, 2**52 + 100, 2_000),  # near the float64-exact limit
        rng.integers(0, 10**9, 5_000),  # sparse: hashed row by row
        np.arange(5_000),  # each value once: hashed
    ]
    for v in chunks:
        col = pa.array(v)
        assert vnodes([col]).tolist() == reference([col])
        assert vnodes([pa.chunked_array([col.slice(0, 1500), col.slice(1500)])]).tolist() == (
            reference([col])
        )
    with_null = pa.array([*rng.integers(0, 100, 3000).tolist(), None])
    assert vnodes([with_null]).tolist() == reference([with_null])
