"""Location helpers of `engine.stream.operators.segments`: grouping by segment, gather."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest

from engine.stream.operators.segments import SHIFT, by_segment, gather, replace_rows


@pytest.mark.parametrize("span", [1, 40, (1 << 16) + 5])
def test_by_segment_groups_locations_in_order_within_each_segment(span: int) -> None:
    """Each segment once, ascending; within it the locations' positions in input order
    (stable), for segment ids spanning little (the 16-bit sort) and much."""
    rng = np.random.default_rng(span)
    sids = rng.choice(np.array([3, 3 + span - 1, 3 + span // 2]), 5000)
    rows = rng.integers(0, 1000, 5000)
    locs = (sids.astype(np.int64) << SHIFT) | rows
    got = list(by_segment(locs))
    want = sorted(set(sids.tolist()))
    assert [sid for sid, _, _ in got] == want
    for sid, pos, r in got:
        expect = np.flatnonzero(sids == sid) if len(want) > 1 else None
        if expect is None:
            assert pos is None and (r == rows).all()
        else:
            assert pos is not None and (pos == expect).all() and (r == rows[expect]).all()


def test_gather_reads_rows_at_locations_in_their_order() -> None:
    segs = {sid: pa.record_batch({"x": pa.array(np.arange(10) + 100 * sid)}) for sid in (0, 7, 300)}
    rng = np.random.default_rng(1)
    sids = rng.choice(np.array([0, 7, 300]), 200)
    rows = rng.integers(0, 10, 200)
    locs = (sids.astype(np.int64) << SHIFT) | rows
    out = gather(locs, segs.__getitem__)
    assert out.column(0).to_pylist() == (100 * sids + rows).tolist()


def test_replace_rows_matches_concat_and_take_for_every_column_kind() -> None:
    """Fixed-width columns (numpy path, with and without NULLs, a sliced batch) and the
    others (strings, booleans: concat + take) give the rows a concat-and-take gives."""
    n = 50
    base = pa.RecordBatch.from_pydict(
        {
            "i": pa.array(range(n), pa.int64()),
            "s": pa.array([i % 7 for i in range(n)], pa.int16()),
            "d": pa.array(
                [None if i % 5 == 0 else Decimal(i) / 4 for i in range(n)], pa.decimal128(20, 2)
            ),
            "f": pa.array([float(i) for i in range(n)], pa.float64()),
            "t": pa.array([datetime(2024, 1, 1 + i % 28) for i in range(n)], pa.timestamp("us")),
            "b": pa.array([i % 2 == 0 for i in range(n)], pa.bool_()),
            "x": pa.array([f"v{i}" for i in range(n)], pa.string()),
        }
    ).slice(3, 40)
    rows = np.array([0, 7, 39, 12], np.int64)
    m = len(rows)
    new = pa.RecordBatch.from_pydict(
        {
            "i": pa.array([-1, -2, -3, -4], pa.int64()),
            "s": pa.array([None, 1, 2, None], pa.int16()),
            "d": pa.array(
                [Decimal("1.25"), None, Decimal("-3.50"), Decimal(7)], pa.decimal128(20, 2)
            ),
            "f": pa.array([0.5, None, 2.5, 3.5], pa.float64()),
            "t": pa.array(
                [None, datetime(2000, 1, 1), None, datetime(2001, 1, 1)], pa.timestamp("us")
            ),
            "b": pa.array([None, True, False, True], pa.bool_()),
            "x": pa.array(["a", None, "ccc", ""], pa.string()),
        }
    )
    got = replace_rows(base, rows, new)
    idx = np.arange(base.num_rows)
    idx[rows] = base.num_rows + np.arange(m)
    want = pa.concat_batches([base, new]).take(pa.array(idx))
    got.validate(full=True)
    assert got.to_pylist() == want.to_pylist()
    assert got.schema == base.schema
    assert base.column("i")[0].as_py() == 3  # the input batch is not changed
