"""ColumnarMaterializeOp: MaterializeOp's behaviour (tests run on both), types, compaction.

The first group is `tests/unit/stream/operators/test_materialize.py` parametrized over
both operator classes, so the two must agree on every case. The rest covers what only
the columnar operator has: every SQL type as pk and payload, segment compaction and
small-segment merging, persistence through a real RocksDB `StateStore`, `apply_preview`.
"""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from unit.stream.operators.helpers import DictStore, assert_chunk, chunk, make_chunk

from engine.chunk import Op, StreamChunk
from engine.errors import InternalError
from engine.state.store import StateStore
from engine.stream.operators import LocalStateAllocator, MaterializeOp
from engine.stream.operators import columnar_materialize as mat
from engine.stream.operators import keyed_segments as cm
from engine.stream.operators.columnar_materialize import ColumnarMaterializeOp
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
    VARCHAR,
    Field,
    list_of,
)

F = [Field("id", INT), Field("name", VARCHAR), Field("v", INT)]
Row = tuple[Any, ...]
Mat = MaterializeOp | ColumnarMaterializeOp
CLASSES = [MaterializeOp, ColumnarMaterializeOp]


def sorted_rows(t: pa.Table) -> list[Row]:
    return sorted(zip(*[c.to_pylist() for c in t.columns], strict=True), key=repr)


def snapshot_rows(op: Mat) -> list[Row]:
    t = op.snapshot()
    assert t.schema.names == [f.name for f in op.schema]
    return sorted_rows(t)


def commit(store: StateStore, op: Mat) -> None:
    batch = store.new_batch()
    for t in op.state_tables():
        t.write_dirty(batch)
    store.write(batch)


def reopen(cls: type[Mat], store: StateStore, fields: list[Field], pk: list[int]) -> Mat:
    """A fresh operator over tables loaded from `store` (what recovery does)."""
    alloc = LocalStateAllocator()
    probe = cls(fields, pk, LocalStateAllocator())
    for t in probe.state_tables():
        alloc.table(t.name).load(store)
    return cls(fields, pk, alloc)


# -- MaterializeOp's tests, on both classes ------------------------------------------------
@pytest.fixture(params=CLASSES, ids=["row", "columnar"])
def cls(request: pytest.FixtureRequest) -> type[Mat]:
    return request.param  # type: ignore[no-any-return]


def test_consistent_delta_passes_through(cls: type[Mat]) -> None:
    op = cls(F, [0], LocalStateAllocator())
    assert op.stream_key == [0]
    assert op.explain() == "StreamMaterialize { columns: [id, name, v], pk_columns: [id] }"
    assert_chunk(op.step([chunk("+ 1 a 10\n+ 2 b 20\n+ 3 c .", F)]), "+ 1 a 10\n+ 2 b 20\n+ 3 c .")
    assert_chunk(
        op.step([chunk("U- 1 a 10\nU+ 1 a 11\n- 2 b 20", F)]), "U- 1 a 10\nU+ 1 a 11\n- 2 b 20"
    )
    assert snapshot_rows(op) == [(1, "a", 11), (3, "c", None)]
    assert len(op) == 2


def test_insert_on_existing_pk_overwrites(cls: type[Mat]) -> None:
    op = cls(F, [0], LocalStateAllocator())
    op.step([chunk("+ 1 a 10", F)])
    assert_chunk(op.step([chunk("+ 1 b 20", F)]), "U- 1 a 10\nU+ 1 b 20")
    assert_chunk(
        op.step([chunk("+ 2 x 1\n+ 2 y 2\n+ 1 c 30\n+ 1 d 40", F)]), "+ 2 y 2\nU- 1 b 20\nU+ 1 d 40"
    )
    assert op.step([chunk("+ 2 y 2", F)]) is None
    assert snapshot_rows(op) == [(1, "d", 40), (2, "y", 2)]


def test_order_within_epoch_does_not_matter_for_consistent_input(cls: type[Mat]) -> None:
    op = cls(F, [0], LocalStateAllocator())
    op.step([chunk("+ 1 a 10", F)])
    assert_chunk(op.step([chunk("+ 1 b 11\n- 1 a 10", F)]), "U- 1 a 10\nU+ 1 b 11")
    assert op.step([chunk("+ 5 e 1\n- 5 e 1", F)]) is None


def test_delete_of_missing_pk(cls: type[Mat]) -> None:
    op = cls(F, [0], LocalStateAllocator())
    op.step([chunk("+ 1 a 10", F)])
    assert op.step([chunk("- 7 z 1", F)]) is None
    assert_chunk(op.step([chunk("- 1 old 0", F)]), "- 1 a 10")
    strict = cls(F, [0], LocalStateAllocator(), strict=True)
    with pytest.raises(InternalError, match="does not exist"):
        strict.step([chunk("- 7 z 1", F)])


def test_snapshot_empty_and_restart(cls: type[Mat]) -> None:
    op = cls(F, [0], LocalStateAllocator())
    assert op.snapshot().num_rows == 0
    op.step([chunk("+ 1 a 10\n+ 2 b .", F)])
    store = DictStore()
    store.checkpoint(op.state_tables())
    alloc = LocalStateAllocator()
    for t in op.state_tables():
        alloc.table(t.name).load(store)
    op2 = cls(F, [0], alloc)
    assert snapshot_rows(op2) == [(1, "a", 10), (2, "b", None)]
    assert_chunk(op2.step([chunk("- 2 b .", F)]), "- 2 b .")


def test_composite_pk(cls: type[Mat]) -> None:
    op = cls(F, [1, 0], LocalStateAllocator())
    op.step([chunk("+ 1 a 1\n+ 1 b 2", F)])
    assert_chunk(op.step([chunk("+ 1 a 3", F)]), "U- 1 a 1\nU+ 1 a 3")
    assert op.get(("b", 1)) == (1, "b", 2)
    assert op.get(("c", 1)) is None


# -- every type --------------------------------------------------------------------------
ALL = [
    Field("b", BOOLEAN),
    Field("i2", SMALLINT),
    Field("i4", INT),
    Field("i8", BIGINT),
    Field("f4", REAL),
    Field("f8", DOUBLE),
    Field("n", NUMERIC),
    Field("s", VARCHAR),
    Field("by", BYTEA),
    Field("d", DATE),
    Field("t", TIME),
    Field("ts", TIMESTAMP),
    Field("tz", TIMESTAMPTZ),
    Field("iv", INTERVAL),
    Field("j", JSONB),
    Field("l", list_of(INT)),
]


def all_row(k: int, v: int | None) -> Row:
    """Row `k` of the all-types schema; `v` None gives NULLs in every non-key column."""
    if v is None:
        return (
            k % 2 == 0,
            k,
            k,
            k,
            None,
            None,
            Decimal(k),
            f"s{k}",
            None,
            date(2020, 1, 1 + k),
            None,
            datetime(2020, 1, 1, k),
            None,
            pa.MonthDayNano([k, 0, 0]),
            None,
            [k],
        )
    return (
        k % 2 == 0,
        k,
        k,
        k,
        float(v),
        v / 3,
        Decimal(k) + Decimal(v) / 100,
        f"s{k}",
        bytes([v % 256]),
        date(2020, 1, 1 + k),
        time(0, v % 60),
        datetime(2020, 1, 1, k),
        datetime(2020, 1, 1, k, v % 60, tzinfo=UTC),
        pa.MonthDayNano([k, v, 1000 * v]),
        f'{{"v": {v}}}',
        [k, v, None],
    )


@pytest.mark.parametrize(
    "pk",
    [[2], [3], [6], [7], [8], [9], [10], [11], [12], [13], [15], [0, 7], [12, 6, 2]],
    ids=lambda pk: "+".join(ALL[i].name for i in pk),
)
def test_all_types_agree_with_row_op(pk: list[int], tmp_path: Path) -> None:
    ops: list[Mat] = [
        MaterializeOp(ALL, pk, LocalStateAllocator()),
        ColumnarMaterializeOp(ALL, pk, LocalStateAllocator()),
    ]
    epochs = [
        [(Op.INSERT, all_row(k, k)) for k in range(6)],
        [
            (Op.UPDATE_DELETE, all_row(1, 1)),
            (Op.UPDATE_INSERT, all_row(1, None)),
            (Op.INSERT, all_row(2, 7)),
            (Op.DELETE, all_row(3, 3)),
            (Op.INSERT, all_row(4, 4)),
        ],
        [(Op.INSERT, all_row(1, None)), (Op.INSERT, all_row(3, 9)), (Op.INSERT, all_row(3, 8))],
    ]
    for ev in epochs:
        c = make_chunk(ALL, [o for o, _ in ev], [r for _, r in ev])
        outs = [op.step([c]) for op in ops]
        assert outs[0] is not None and outs[1] is not None
        assert sorted_pairs(outs[0]) == sorted_pairs(outs[1])
        assert snapshot_rows(ops[0]) == snapshot_rows(ops[1])
    col = ops[1]
    with StateStore.open(tmp_path / "db") as store:
        commit(store, col)
        again = reopen(ColumnarMaterializeOp, store, ALL, pk)
    final = snapshot_rows(ops[0])
    assert snapshot_rows(again) == final
    for row in final:
        # the row operator keys SQL arrays by tuples; the columnar one accepts both
        key = tuple(tuple(row[i]) if isinstance(row[i], list) else row[i] for i in pk)
        assert col.get(key) == again.get(key) == ops[0].get(key) == row
    assert col.get(tuple(all_row(9, 99)[i] for i in pk)) is None


def sorted_pairs(c: StreamChunk) -> list[str]:
    """Rows of a chunk as text units, U-/U+ pairs kept together, sorted."""
    rows = c.to_rows()
    out, i = [], 0
    while i < len(rows):
        op, row = rows[i]
        if op is Op.UPDATE_DELETE:
            assert rows[i + 1][0] is Op.UPDATE_INSERT
            out.append(f"{row!r} -> {rows[i + 1][1]!r}")
            i += 2
        else:
            out.append(f"{op.name} {row!r}")
            i += 1
    return sorted(out)


def test_nan_and_unchanged_rows_match_row_op() -> None:
    fields = [Field("k", INT), Field("x", DOUBLE), Field("l", list_of(INT))]
    ops: list[Mat] = [
        MaterializeOp(fields, [0], LocalStateAllocator()),
        ColumnarMaterializeOp(fields, [0], LocalStateAllocator()),
    ]
    rows = [(1, float("nan"), [1]), (2, -0.0, None), (3, 1.5, [None, 2])]
    for ev in [rows, [(1, float("nan"), [1]), (2, 0.0, None), (3, 1.5, [None, 2])]]:
        c = make_chunk(fields, [Op.INSERT] * len(ev), ev)
        a, b = (op.step([c]) for op in ops)
        assert (a is None) == (b is None)
        if a is not None and b is not None:
            assert sorted_pairs(a) == sorted_pairs(b)


# -- segments, compaction, persistence -------------------------------------------------------
def ints(keys: list[int], v: int, op: Op = Op.INSERT) -> StreamChunk:
    return make_chunk(F, [op] * len(keys), [(k, f"n{k}", v) for k in keys])


def test_fresh_keys_become_segments_and_upserts_rewrite_rows_in_place() -> None:
    op = ColumnarMaterializeOp(F, [0], LocalStateAllocator())
    out = op.step([ints(list(range(100)), 0)])
    assert out is not None and out.ops.to_pylist() == [Op.INSERT] * 100
    op.step([ints(list(range(100, 200)), 0)])
    assert op.segment_count == 2
    pinned = op.pin()
    # upsert 60 rows of the first segment and one of the second (the int-key U-/U+ path)
    out = op.step([ints(list(range(60)), 1)])
    assert out is not None and len(out) == 120
    out = op.step([make_chunk(F, [Op.UPDATE_DELETE, Op.UPDATE_INSERT],
                              [(150, "n150", 0), (150, "n150", 7)])])  # fmt: skip
    assert_chunk(out, "U- 150 n150 0\nU+ 150 n150 7")
    # the rows changed where they are: no new segment, nothing compacted
    assert op.segment_count == 2
    assert len(op) == 200
    want = {k: 1 if k < 60 else 7 if k == 150 else 0 for k in range(200)}
    assert sorted_rows(op.snapshot()) == sorted(
        [(k, f"n{k}", v) for k, v in want.items()], key=repr
    )
    assert op.get((5,)) == (5, "n5", 1) and op.get((150,)) == (150, "n150", 7)
    # a snapshot pinned before still holds the old rows
    assert sorted_rows(pinned.table()) == sorted([(k, f"n{k}", 0) for k in range(200)], key=repr)
    # deleting every row of a segment drops it
    op.step([ints(list(range(100, 200)), 0, Op.DELETE)])
    assert op.segment_count == 1 and len(op) == 100


def test_rows_grown_in_place_split_their_segment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cm, "SMALL_SEGMENT_ROWS", 4)
    monkeypatch.setattr(cm, "SEGMENT_BYTES", 1024)
    monkeypatch.setattr(cm, "GROWN_BYTES", 4096)
    op = ColumnarMaterializeOp(F, [0], LocalStateAllocator())
    op.step([ints(list(range(40)), 0)])
    assert op.segment_count == 1
    long = make_chunk(F, [Op.INSERT] * 40, [(k, "x" * 200 + str(k), 1) for k in range(40)])
    op.step([long])
    assert op.segment_count >= 4  # 8 kB of rows: split at about SEGMENT_BYTES
    assert sorted_rows(op.snapshot()) == sorted(
        [(k, "x" * 200 + str(k), 1) for k in range(40)], key=repr
    )
    assert op.get((39,)) == (39, "x" * 200 + "39", 1)


def test_small_segments_are_merged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cm, "MAX_SMALL_SEGMENTS", 4)
    monkeypatch.setattr(cm, "SMALL_SEGMENT_ROWS", 10)
    op = ColumnarMaterializeOp(F, [0], LocalStateAllocator())
    for k in range(40):
        op.step([ints([k], k)])
        # at most 4 small segments plus the one just added, and merged ones of >= 10 rows
        assert op.segment_count <= 5 + (k + 1) // 10
    assert len(op) == 40
    assert [r[0] for r in sorted(snapshot_rows(op))] == list(range(40))
    assert op.get((17,)) == (17, "n17", 17)


def test_large_input_is_split(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(cm, "MAX_SEGMENT_ROWS", 16)
    op = ColumnarMaterializeOp(F, [0], LocalStateAllocator())
    op.step([ints(list(range(50)), 0)])
    assert op.segment_count == 4
    op.step([ints(list(range(0, 50, 2)), 1)])
    with StateStore.open(tmp_path / "db") as store:
        commit(store, op)
        again = reopen(ColumnarMaterializeOp, store, F, [0])
    assert snapshot_rows(again) == snapshot_rows(op)
    assert again.get((48,)) == (48, "n48", 1)


def test_a_large_input_is_split_into_segments_of_about_segment_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(cm, "SMALL_SEGMENT_ROWS", 4)
    monkeypatch.setattr(cm, "SEGMENT_BYTES", 256)  # 100 rows here are about 1.5 kB
    op = ColumnarMaterializeOp(F, [0], LocalStateAllocator())
    op.step([ints(list(range(100)), 0)])
    assert 4 <= op.segment_count <= 10  # one store value each: short writes
    assert [r[0] for r in sorted(snapshot_rows(op))] == list(range(100))
    assert op.get((99,)) == (99, "n99", 0)


def test_checkpoint_writes_few_keys_and_restart_continues(tmp_path: Path) -> None:
    op = ColumnarMaterializeOp(F, [0], LocalStateAllocator())
    (table,) = op.state_tables()
    with StateStore.open(tmp_path / "db") as store:
        op.step([ints(list(range(1000)), 0)])
        assert table.dirty_count == 2  # the segment and the meta key
        commit(store, op)
        op.step([ints([5, 6], 1)])
        op.step([ints([7], 0, Op.DELETE)])
        # the segment rewritten in place and its mask
        assert table.dirty_count == 2
        commit(store, op)
        again = reopen(ColumnarMaterializeOp, store, F, [0])
        assert snapshot_rows(again) == snapshot_rows(op)
        assert len(again) == 999
        assert_chunk(again.step([ints([5], 2)]), "U- 5 n5 1\nU+ 5 n5 2")
        assert again.step([ints([7], 0, Op.DELETE)]) is None
        assert_chunk(again.step([ints([7], 3)]), "+ 7 n7 3")
        commit(store, again)
        third = reopen(ColumnarMaterializeOp, store, F, [0])
        assert snapshot_rows(third) == snapshot_rows(again)


# -- apply_preview ------------------------------------------------------------------------
def test_apply_preview_leaves_state_alone() -> None:
    op = ColumnarMaterializeOp(F, [0], LocalStateAllocator())
    op.step([chunk("+ 1 a 10\n+ 2 b 20\n+ 3 c 30", F)])
    before = snapshot_rows(op)
    pending = [
        chunk("+ 4 d 40\n- 2 b 20", F),
        chunk("U- 1 a 10\nU+ 1 z 11\n+ 5 e 50", F),
        chunk("- 4 d 40\n- 9 q 0", F),
        chunk("+ 3 c 31\n+ 3 c 32\n- 3 c 30", F),
    ]
    got = sorted_rows(op.apply_preview(pending))
    assert got == [(1, "z", 11), (3, "c", 32), (5, "e", 50)]
    assert snapshot_rows(op) == before
    assert sorted_rows(op.apply_preview([])) == before
    for c in pending:
        op.step([c])
    assert snapshot_rows(op) == got


def test_integer_pk_above_every_stored_key_and_below_it() -> None:
    """Inserts above, below and at a deleted maximum of an integer pk: new rows or updates."""
    op = ColumnarMaterializeOp(F, [0], LocalStateAllocator())
    assert_chunk(op.step([chunk("+ 10 a 1\n+ 11 b 2", F)]), "+ 10 a 1\n+ 11 b 2")
    assert_chunk(op.step([chunk("+ 12 c 3", F)]), "+ 12 c 3")  # above: new
    assert_chunk(op.step([chunk("+ 5 d 4\n+ 11 e 5", F)]), "+ 5 d 4\nU- 11 b 2\nU+ 11 e 5")
    assert_chunk(op.step([chunk("- 12 c 3", F)]), "- 12 c 3")
    assert_chunk(op.step([chunk("+ 12 f 6", F)]), "+ 12 f 6")  # deleted max comes back
    assert_chunk(op.step([chunk("+ 12 g 7\n+ 13 h 8", F)]), "U- 12 f 6\nU+ 12 g 7\n+ 13 h 8")
    assert sorted(snapshot_rows(op)) == [
        (5, "d", 4),
        (10, "a", 1),
        (11, "e", 5),
        (12, "g", 7),
        (13, "h", 8),
    ]


@pytest.mark.parametrize("seed", range(8))
def test_int_pk_change_pairing_matches_the_general_pairing(seed: int) -> None:
    """The int-pk pairing of a chunk's deletes and inserts (its shortcut for U-/U+ pairs
    that follow each other, and its search otherwise) answers as the list-of-keys one."""
    rnd = random.Random(seed)
    rows: list[tuple[Op, tuple[int, str, int]]] = []
    keys = rnd.sample(range(1000), 60)
    for k in keys[:20]:
        rows.append((Op.INSERT, (k, f"n{k}", 0)))
    for k in keys[20:50]:
        v = rnd.randrange(3)
        rows += [
            (Op.UPDATE_DELETE, (k, f"n{k}", v)),
            (Op.UPDATE_INSERT, (k, f"n{k}", v * rnd.randrange(2))),
        ]
    if seed % 2:  # a delete, and a delete whose insert comes later: no adjacent pairs
        rows.append((Op.DELETE, (keys[50], "x", 1)))
        rows.insert(0, (Op.DELETE, (keys[51], "y", 1)))
        rows.append((Op.INSERT, (keys[51], "y", 2)))
    ch = make_chunk(F, [op for op, _ in rows], [r for _, r in rows])
    w = ch.weights()
    arr = np.asarray(ch.data.column(0).to_numpy(), np.int64)
    got = mat._paired_int_changes(ch.data, arr, w)
    want = mat._paired_changes(ch.data, arr.tolist(), w)
    assert got is not None and want is not None
    dk, pos, ik, pair = got
    assert (dk.tolist(), pos.tolist(), ik.tolist()) == (want[0], want[1].tolist(), want[2])
    for d, p in zip(dk.tolist(), pair.tolist(), strict=True):
        assert p == (ik.tolist().index(d) if d in ik.tolist() else -1)
