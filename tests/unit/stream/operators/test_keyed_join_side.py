"""The hash join's RocksDB-first side store (`KeyedJoinSide`): row blobs of every column
type, a hot key's fragments, and the conversion of a side stored in the older resident
segment layout, through a real RocksDB store."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
from unit.stream.operators.helpers import assert_chunk
from unit.stream.operators.helpers import chunk as text
from unit.stream.operators.join_topn_helpers import DiskAllocator, checkpoint, restart

from engine.chunk import StreamChunk
from engine.state.store import StateStore
from engine.stream.operators import LocalStateAllocator, join_key_filter
from engine.stream.operators.frames import batch_from_rows
from engine.stream.operators.hash_join import HashJoinOp
from engine.stream.operators.join_key_filter import JoinKeyFilter, key_hashes
from engine.stream.operators.keyed_join_layout import TAIL_ROWS, plan_merges
from engine.stream.operators.keyed_join_side import KeyedJoinSide
from engine.stream.operators.row_blob import RowBlobs
from engine.stream.operators.segments import rows_equal
from engine.types import INT, VARCHAR, Field

L = [Field("id", INT), Field("k", INT), Field("v", INT)]
R = [Field("rid", INT), Field("rk", INT), Field("w", INT)]


def test_row_blobs_round_trip_every_type() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            "i": pa.array([1, None, -(2**62)], pa.int64()),
            "s": pa.array([3, 4, None], pa.int16()),
            "f": pa.array([float("nan"), -0.0, None], pa.float64()),
            "b": pa.array([True, None, False]),
            "t": pa.array(["x", "", None]),
            "y": pa.array([b"\x00", None, b"ab"], pa.binary()),
            "d": pa.array([Decimal("1.50"), None, Decimal("-2")], pa.decimal128(38, 10)),
            "dt": pa.array([dt.date(2020, 1, 2), None, dt.date(1, 1, 1)]),
            "tm": pa.array([dt.time(1, 2, 3), None, dt.time(0)], pa.time64("us")),
            "ts": pa.array([dt.datetime(2020, 1, 1), None, dt.datetime(1999, 12, 31)]),
            "tz": pa.array([1, None, 2], pa.timestamp("us", tz="UTC")),
            "iv": pa.array(
                [pa.MonthDayNano([1, 2, 3]), None, pa.MonthDayNano([0, 0, 0])],
                pa.month_day_nano_interval(),
            ),
            "l": pa.array([[1, None], None, []], pa.list_(pa.int64())),
        }
    )
    rb = RowBlobs(batch.schema, 2)
    blobs = rb.encode(batch, [0, 1], [np.array([5, 6, 7]), None])
    got, sizes, (count, degree) = rb.decode(blobs, (1, 0))
    assert got.schema == batch.schema
    assert rows_equal(got, batch, nan_equal=True).all() and sizes.tolist() == [1, 2]
    assert count.tolist() == [5, 6, 7] and degree.tolist() == [0, 0, 0]


def test_row_blobs_fixed_width_rows_mix_with_marshal_records() -> None:
    """A numeric schema's one-row groups are fixed-width rows (first byte 0x02); they
    decode alone (numpy path), framed together, and framed with marshal records."""
    n = 20
    batch = pa.RecordBatch.from_pydict(
        {
            "i": pa.array([None if j % 7 == 3 else j - 10 * 2**40 for j in range(n)], pa.int64()),
            "s": pa.array([j - 5 for j in range(n)], pa.int16()),
            "f": pa.array([None if j == 2 else j / 3 for j in range(n)], pa.float32()),
            "ts": pa.array([dt.datetime(2020, 1, 1, 0, 0, j) for j in range(n)]),
            "dt": pa.array([None if j == 5 else dt.date(1, 1, 1 + j) for j in range(n)]),
        }
    )
    rb = RowBlobs(batch.schema, 2)
    singles = rb.encode(batch, list(range(n)), [None, None])
    assert all(b[0] == 0x02 for b in singles)
    got, sizes, (count, degree) = rb.decode(singles, (1, 0))
    assert got.schema == batch.schema and rows_equal(got, batch).all()
    assert sizes.tolist() == [1] * n and count.tolist() == [1] * n and degree.tolist() == [0] * n
    # with extras, or in multi-row groups: marshal records; frames mix both kinds
    counted = rb.encode(batch, list(range(n)), [np.arange(n) + 2, None])
    assert all(b[0] != 0x02 for b in counted)
    framed = [
        RowBlobs.join([singles[0], singles[1]]),
        RowBlobs.join([singles[2], counted[3], singles[4]]),
        counted[5],
    ]
    got, sizes, (count, _) = rb.decode(framed, (1, 0))
    assert rows_equal(got, batch.slice(0, 6)).all() and sizes.tolist() == [2, 3, 1]
    assert count.tolist() == [1, 1, 1, 5, 1, 7]
    # groups of a few rows are framed fixed-width rows, larger ones one marshal record
    few = rb.encode(batch, [0, 3, 4, 10, 16], [None, None])
    assert [b[0] for b in few] == [0x00, 0x02, 0x00, 0x00, 0x00]
    got, sizes, _ = rb.decode(few, (1, 0))
    assert rows_equal(got, batch).all() and sizes.tolist() == [3, 1, 6, 6, 4]
    # empty groups (a rewrite's emptied pieces) among them
    holes = rb.encode(batch.slice(0, 3), [0, 0, 1, 1, 3, 3], [None, None])
    got, sizes, _ = rb.decode(holes, (1, 0))
    assert rows_equal(got, batch.slice(0, 3)).all() and sizes.tolist() == [0, 1, 0, 2, 0, 0]
    holes = rb.encode(batch.slice(0, 3), [0, 0, 3], [None, None])  # as many groups as rows
    got, sizes, _ = rb.decode(holes, (1, 0))
    assert rows_equal(got, batch.slice(0, 3)).all() and sizes.tolist() == [0, 3, 0]
    large = rb.encode(batch, [0, 1, 11], [None, None])
    assert [b[0] for b in large] == [0x28, 0x28, 0x28]
    got, sizes, _ = rb.decode([few[0], large[1], singles[11]], (1, 0))
    want = batch.take(pa.array([0, 1, 2, *range(1, 11), 11]))
    assert rows_equal(got, want).all() and sizes.tolist() == [3, 10, 1]


def test_plan_merges_keeps_fragments_logarithmic() -> None:
    sizes: dict[int, int] = {}
    nf = 1
    for _ in range(200):  # 200 spilled tails into one key
        sizes[nf] = TAIL_ROWS + 1
        _, nf = plan_merges(sizes, nf + 1)
        assert len(sizes) <= 3 * 4
    assert sum(sizes.values()) == 200 * (TAIL_ROWS + 1)


def chunk(fields: list[Field], rows: list[tuple[int, int, int]], sign: int = 1) -> StreamChunk:
    b = batch_from_rows(fields, rows)
    return StreamChunk.inserts(b) if sign > 0 else StreamChunk.deletes(b)


def rows_of(out: StreamChunk | None) -> list[tuple[object, ...]]:
    if out is None:
        return []
    w = out.weights()
    rows = [tuple(r.values()) for r in out.data.to_pylist()]
    return sorted(((r, int(x)) for r, x in zip(rows, w, strict=True)), key=repr)


def join(alloc: object, kind: str = "left") -> HashJoinOp:
    return HashJoinOp(L, R, kind, [1], [1], None, None, alloc, [0], [0])  # type: ignore[arg-type]


def test_hot_key_spills_merges_and_deletes(tmp_path: Path) -> None:
    store = StateStore.open(tmp_path / "state")
    try:

        def make() -> HashJoinOp:
            return join(DiskAllocator(store, {"left": 1, "right": 1}))

        op = make()
        assert isinstance(op._left, KeyedJoinSide)
        n = 0
        for step in range(12):  # 12 steps of 50 rows under key 7, restarts in between
            rows = [(n + i, 7, i) for i in range(50)]
            n += 50
            op.step([chunk(L, rows), None])
            checkpoint(store, op)
            if step % 5 == 4:
                op = restart(store, make)
        heads = {k: v for k, v in op._left.table.items() if len(k) == 1}
        frags = np.frombuffer(heads[(7,)][1], np.int64)
        assert heads[(7,)][0] == 600 and 1 <= len(frags) // 2 <= 6
        assert op.side_rows(0) == 600
        # a right row matches all 600 (their NULL-padded rows are retracted)
        got = rows_of(out := op.step([None, chunk(R, [(1, 7, 0)])]))
        assert sum(w for _, w in got if w > 0) == 600 and sum(w for _, w in got if w < 0) == -600
        assert out is not None
        checkpoint(store, op)
        out = op.step([chunk(L, [(i, 7, i % 50) for i in range(0, 600, 2)], -1), None])
        assert all(w == -1 for _, w in rows_of(out)) and len(rows_of(out)) == 300
        checkpoint(store, op)
        op = restart(store, make)
        assert op.side_rows(0) == 300
        out = op.step([None, chunk(R, [(1, 7, 0)], -1)])
        got = rows_of(out)
        # the last right row went: 300 pairs retracted, 300 left rows NULL-padded
        assert sum(1 for _, w in got if w < 0) == 300 and sum(1 for _, w in got if w > 0) == 300
    finally:
        store.close()


def test_a_key_growing_over_checkpoints_keeps_every_row(tmp_path: Path) -> None:
    """A key's head outgrows what the table caches (its rows are read back from RocksDB,
    not the cache) while the same operator runs on across checkpoints: a right row still
    matches every left row under it."""
    store = StateStore.open(tmp_path / "state")
    try:
        op = join(DiskAllocator(store, {"left": 1, "right": 1}), "inner")
        for step in range(12):  # 12 checkpointed steps of 5 rows under key 7
            op.step([chunk(L, [(step * 5 + i, 7, i) for i in range(5)]), None])
            checkpoint(store, op)
        assert op.side_rows(0) == 60
        got = rows_of(op.step([None, chunk(R, [(1, 7, 0)])]))
        assert sum(w for _, w in got) == 60
    finally:
        store.close()


def test_resident_side_layout_is_converted(tmp_path: Path) -> None:
    store = StateStore.open(tmp_path / "state")
    try:
        old = join(LocalStateAllocator(1000), "inner")
        old.step([chunk(L, [(i, i % 10, i) for i in range(100)]), chunk(R, [(1, 3, 0)])])
        checkpoint(store, old)
        new = restart(store, lambda: join(DiskAllocator(store, {"left": 1, "right": 1}), "inner"))
        assert isinstance(new._left, KeyedJoinSide)
        assert new.side_rows(0) == 100 and new.side_rows(1) == 1
        out = new.step([None, chunk(R, [(2, 4, 0)])])
        assert sorted(r[0][0] for r in rows_of(out)) == list(range(4, 100, 10))
        checkpoint(store, new)
        again = restart(store, lambda: join(DiskAllocator(store, {"left": 1, "right": 1}), "inner"))
        assert again.side_rows(0) == 100 and again.side_rows(1) == 2
    finally:
        store.close()


def test_keys_growing_over_many_epochs_keep_every_row(tmp_path: Path) -> None:
    """Keys gain a row or two per epoch for many epochs (their new rows are appended to
    the stored ones without reading them), some rows over 1 KB (not cached: read back
    from RocksDB), with restarts in between; then every row still pairs, a delete finds
    its row, and a restart still holds what remains."""
    big = [Field("id", INT), Field("k", INT), Field("s", VARCHAR)]
    store = StateStore.open(tmp_path / "state")
    try:

        def make() -> HashJoinOp:
            alloc = DiskAllocator(store, {"left": 1, "right": 1})
            return HashJoinOp(big, R, "inner", [1], [1], None, None, alloc, [0], [0])  # type: ignore[arg-type]

        op = make()
        want: dict[int, set[int]] = {k: set() for k in range(5)}
        n = 0
        for epoch in range(90):
            rows = []
            for k in range(5):
                for _ in range(1 + (epoch + k) % 2):
                    size = 1500 if (n % 7 == 0 or k == 4) else 10
                    rows.append((n, k, f"{n}:" + "x" * size))
                    want[k].add(n)
                    n += 1
            op.step([StreamChunk.inserts(batch_from_rows(big, rows)), None])
            checkpoint(store, op)
            if epoch % 30 == 29:
                op = restart(store, make)
        side = op._left
        assert isinstance(side, KeyedJoinSide)
        heads = {k: v for k, v in side.table.items() if len(k) == 1}
        nfrags = [len(np.frombuffer(heads[(k,)][1], np.int64)) // 2 for k in range(5)]
        assert nfrags[4] >= 2 and max(nfrags) <= 12  # a binary counter of fragments
        assert op.side_rows(0) == n
        got = op.step([None, chunk(R, [(100 + k, k, 0) for k in range(5)])])
        pairs = [r for r, w in rows_of(got) if w > 0]
        assert {k: {r[0] for r in pairs if r[1] == k} for k in range(5)} == want
        assert all(r[2].startswith(f"{r[0]}:") for r in pairs)
        checkpoint(store, op)
        # delete every third row of key 4 (rows over 1 KB): each delete finds its row
        gone = sorted(want[4])[::3]
        dels = [(i, 4, f"{i}:" + "x" * 1500) for i in gone]
        out = op.step([StreamChunk.deletes(batch_from_rows(big, dels)), None])
        assert sorted(r[0] for r, w in rows_of(out) if w < 0) == gone
        checkpoint(store, op)
        op = restart(store, make)
        assert op.side_rows(0) == n - len(gone)
        out = op.step([None, chunk(R, [(100 + k, k, 0) for k in range(5)], -1)])
        assert {r[0] for r, w in rows_of(out) if w < 0} == set().union(*want.values()) - set(gone)
    finally:
        store.close()


def test_fresh_keys_skip_reads_and_retractions_on_both_sides(tmp_path: Path) -> None:
    """A full join over RocksDB-first sides from an empty store: fresh keys are written
    without reads (the key filter is complete), rows under them are found again in the
    same step, after a checkpoint and after a restart (filter incomplete: store reads),
    and retractions on either side pad or drop their partners."""
    store = StateStore.open(tmp_path / "state")
    try:

        def make() -> HashJoinOp:
            return join(DiskAllocator(store, {"left": 1, "right": 1}), "full")

        op = make()
        assert isinstance(op._left, KeyedJoinSide) and op._left._filter.complete is False
        assert_chunk(
            op.step([text("+ 1 10 1\n+ 2 20 2", L), text("+ 5 10 5\n+ 6 30 6", R)]),
            """
            + 1 10 1 5 10 5
            + 2 20 2 . . .
            + . . . 6 30 6
            """,
        )
        assert op._left._filter.complete and op._right._filter.complete
        assert op._left._filter.size == 2
        checkpoint(store, op)
        assert_chunk(  # both sides retract under a key the other side holds
            op.step([text("- 1 10 1\n+ 3 30 3", L), text("- 6 30 6\n+ 7 20 7", R)]),
            """
            - 1 10 1 5 10 5
            + . . . 5 10 5
            - 2 20 2 . . .
            + 2 20 2 7 20 7
            - . . . 6 30 6
            + 3 30 3 . . .
            """,
        )
        checkpoint(store, op)
        op = restart(store, make)
        assert not op._left._filter.complete  # rows in the store: every key is read
        assert_chunk(
            op.step([text("+ 4 10 4", L), text("- 7 20 7\n+ 8 30 8", R)]),
            """
            - . . . 5 10 5
            + 4 10 4 5 10 5
            - 2 20 2 7 20 7
            + 2 20 2 . . .
            - 3 30 3 . . .
            + 3 30 3 8 30 8
            """,
        )
        checkpoint(store, op)
        op = restart(store, make)
        assert op.side_rows(0) == 3 and op.side_rows(1) == 2
    finally:
        store.close()


def test_key_filter_is_a_superset_and_gives_up_when_large(monkeypatch: object) -> None:
    f = JoinKeyFilter()
    f.add(key_hashes([1, 2]))
    assert not f.absent(key_hashes([1, 3])).any()  # not complete: nothing is known absent
    f.reset(True)
    for batch in ([1, 2, 2], [3], [2, 4], ["a", (1, 2)], [5, 6, 7, 8]):
        f.add(key_hashes(batch))
    assert f.size == 10
    assert f.absent(key_hashes([1, 1.0, 4, "a", (1, 2), 8])).tolist() == [False] * 6
    assert f.absent(key_hashes([9, "b", (2, 1)])).tolist() == [True] * 3
    monkeypatch.setattr(join_key_filter, "MAX_KEYS", 12)  # type: ignore[attr-defined]
    f.add(key_hashes(list(range(100, 110))))
    assert not f.complete and not f.absent(key_hashes([9])).any()
