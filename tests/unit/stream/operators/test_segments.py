"""Location helpers of `engine.stream.operators.segments`: grouping by segment, gather."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from engine.stream.operators.segments import SHIFT, by_segment, gather


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
