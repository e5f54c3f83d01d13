"""The backfill's key order and snapshot cursor: slices read exactly the upstream's current
rows in each key range, although rows are killed and appended between slices."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from engine.stream.backfill_cursor import SnapshotCursor, key_le, orderable

SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])


class Pin:
    """The shape of `SegmentSnapshot` the cursor reads: (batch, live mask, live rows)."""

    def __init__(self, *parts: tuple[pa.RecordBatch, np.ndarray | None]) -> None:
        self.parts = tuple((b, m, b.num_rows if m is None else int(m.sum())) for b, m in parts)


def batch(rows: list[tuple[Any, str]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([{"k": k, "v": v} for k, v in rows], schema=SCHEMA)


def rows(t: pa.Table) -> list[tuple[Any, ...]]:
    return sorted(
        ((r["k"], r["v"]) for r in t.to_pylist()), key=lambda r: (r[0] is not None, r[0] or 0)
    )


def test_key_le_orders_nulls_first_and_compares_lexicographically() -> None:
    t = pa.table({"a": [1, 1, 2, None, 1], "b": ["x", "y", "a", "z", None]})
    assert key_le(t, [0, 1], (1, "x")).tolist() == [True, False, False, True, True]
    assert key_le(t, [0], (None,)).tolist() == [False, False, False, True, False]
    f = pa.table({"f": [1.0, float("nan"), None]})
    assert key_le(f, [0], (2.0,)).tolist() == [True, False, True]
    assert key_le(f, [0], (float("nan"),)).tolist() == [True, True, True]


def test_orderable_types() -> None:
    assert orderable([pa.int64(), pa.string(), pa.decimal128(10, 2), pa.date32()])
    assert not orderable([pa.int64(), pa.month_day_nano_interval()])
    assert not orderable([pa.list_(pa.int32())])


def test_slices_read_the_current_rows_of_each_range() -> None:
    b1 = batch([(5, "e"), (1, "a"), (3, "c")])
    b2 = batch([(2, "b"), (4, "d"), (None, "n")])
    base = Pin((b1, None), (b2, None))
    cur = SnapshotCursor([0], None)
    cur.prepare(base)
    got, final = cur.next_slice(base, 2)
    assert rows(got) == [(None, "n"), (1, "a")] and not final
    assert cur.pos == (1,)
    # between slices: key 3 is updated (killed, appended in a new segment), key 0 is
    # inserted behind the position (the live stream forwards it), key 7 past the end
    b3 = batch([(3, "c2"), (0, "z"), (7, "g")])
    fresh = Pin((b1, np.array([True, True, False])), (b2, None), (b3, None))
    got, final = cur.next_slice(fresh, 2)
    assert rows(got) == [(2, "b"), (3, "c2")] and not final
    assert cur.pos == (3,)
    # a compaction rewrote b2 into b4 (4 is deleted meanwhile): its rows come from b4
    b4 = batch([(2, "b"), (None, "n")])
    fresh = Pin((b1, np.array([True, True, False])), (b3, None), (b4, None))
    got, final = cur.next_slice(fresh, 10)
    assert rows(got) == [(5, "e"), (7, "g")] and final


def test_resuming_from_a_position_reads_only_what_follows() -> None:
    b = batch([(i, str(i)) for i in range(10)])
    pin = Pin((b, None))
    cur = SnapshotCursor([0], (6,))
    cur.prepare(pin)
    assert cur.remaining() == 3
    got, final = cur.next_slice(pin, 100)
    assert rows(got) == [(7, "7"), (8, "8"), (9, "9")] and final


def test_a_segment_rewritten_in_place_is_read_as_new_rows() -> None:
    """An update replaces its segment's batch (same positions, new values): the old batch
    is gone from the pin and the new one's rows count as written since the sort."""
    b1 = batch([(5, "e"), (1, "a"), (3, "c")])
    b2 = batch([(2, "b"), (4, "d")])
    cur = SnapshotCursor([0], None)
    base = Pin((b1, None), (b2, None))
    cur.prepare(base)
    got, final = cur.next_slice(base, 1)
    assert rows(got) == [(1, "a")] and not final
    b1_new = batch([(5, "e2"), (1, "a2"), (3, "c")])  # 5 and 1 updated in place
    b2_new = batch([(2, "b2"), (4, "d")])
    fresh = Pin((b1_new, np.array([True, True, False])), (b2_new, None))  # and 3 deleted
    got, final = cur.next_slice(fresh, 10)
    assert rows(got) == [(2, "b2"), (4, "d"), (5, "e2")] and final
