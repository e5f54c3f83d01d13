"""The hash join's columnar store (`JoinSide`): tiered merges, restarts through a real RocksDB
store, NaN/NULL join keys, duplicate rows without a stream key, persisted degrees, row-id
renumbering and key-id compaction, the state format check, and a larger random workload
(every tier, segment splits, restarts) checked against DuckDB."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from unit.stream.operators.helpers import assert_chunk, chunk, integrate
from unit.stream.operators.join_topn_helpers import arrow_table, checkpoint, restart

from engine.chunk import Op, StreamChunk
from engine.errors import InternalError
from engine.expr import InputRef
from engine.expr.ops import bind_compare
from engine.state.store import StateStore
from engine.state.table import StateTable
from engine.stream.operators import LocalStateAllocator, join_side
from engine.stream.operators.frames import batch_from_rows
from engine.stream.operators.hash_join import HashJoinOp
from engine.stream.operators.join_side import FANOUT, JoinKeyIds, JoinSide, _tier
from engine.types import DOUBLE, INT, VARCHAR, Field

L = [Field("id", INT), Field("k", INT), Field("v", VARCHAR)]
R = [Field("rid", INT), Field("rk", INT), Field("w", VARCHAR)]
FL = [Field("id", INT), Field("x", DOUBLE)]
FR = [Field("rid", INT), Field("y", DOUBLE)]


def side(table: StateTable | None = None) -> tuple[JoinSide, JoinKeyIds]:
    s = JoinSide("left", L, [1], [0], table or StateTable(1, "left"), True, "test join")
    return s, JoinKeyIds()


def rows(ids: range, key: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [
            pa.array(list(ids), pa.int32()),
            pa.array([key + i % 3 for i in ids], pa.int32()),
            pa.array([f"v{i}" for i in ids]),
        ],
        names=["id", "k", "v"],
    )


def add(s: JoinSide, ids: JoinKeyIds, batch: pa.RecordBatch, sign: int = 1) -> None:
    jk = ids.assign(batch, s.keys)
    s.grow(len(ids))
    n = batch.num_rows
    s.apply(batch, np.full(n, sign, np.int64), jk, np.arange(n, dtype=np.int64))
    s.flush()


def test_tiered_merge_keeps_few_segments_and_every_row(tmp_path: Path) -> None:
    s, ids = side()
    for e in range(40):
        add(s, ids, rows(range(e * 100, e * 100 + 100), 0))
        tiers = [_tier(seg.live) for seg in s.segs.values()]
        assert all(tiers.count(t) < FANOUT for t in tiers), tiers
    assert len(s) == 4000 and len(s.segs) < FANOUT
    # delete most of the rows: sparse segments are rewritten, the rest stay findable
    add(s, ids, rows(range(0, 3000), 0), -1)
    assert len(s) == 1000
    assert sum(seg.live for seg in s.segs.values()) == 1000
    assert all(seg.live * 2 >= seg.batch.num_rows for seg in s.segs.values())
    # probing finds exactly the live rows per key (keys 0, 1, 2 by id % 3)
    ujk = ids.assign(rows(range(3), 0), [1])
    key_pos, locs = s.probe(ujk)
    assert np.bincount(key_pos).tolist() == [334, 333, 333]
    got = s.rows_at(locs).column(0).to_pylist()
    assert sorted(got) == list(range(3000, 4000))
    # degrees follow rows through merges and a restart
    assert sorted(s.degrees_at(locs).tolist()) == sorted(list(range(100)) * 10)
    store = StateStore.open(tmp_path / "state")
    try:
        batch = store.new_batch()
        s.table.write_dirty(batch)
        store.write(batch, sync=False)
        t2 = StateTable(1, "left")
        t2.load(store)
        s2, ids2 = side(t2)
        s2.load(ids2)
        assert len(s2) == 1000 and len(s2.segs) == len(s.segs)
        key_pos2, locs2 = s2.probe(ids2.assign(rows(range(3), 0), [1]))
        assert sorted(s2.rows_at(locs2).column(0).to_pylist()) == sorted(got)
        assert sorted(s2.degrees_at(locs2).tolist()) == sorted(s.degrees_at(locs).tolist())
        assert s2.tot[ids2.assign(rows(range(3), 0), [1])].tolist() == [334, 333, 333]
    finally:
        store.close()


def test_row_ids_renumbered_after_many_updates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(join_side, "RENUMBER_SLACK", 0)
    s, ids = side()
    add(s, ids, rows(range(0, 50), 0))
    for _ in range(10):  # every row deleted and re-inserted: ids run far ahead of live rows
        add(s, ids, rows(range(0, 50), 0), -1)
        add(s, ids, rows(range(0, 50), 0))
        assert s._next_rid <= 2 * len(s) + 50
    assert len(s) == 50
    assert s.stored(rows(range(0, 60), 0)).tolist() == [True] * 50 + [False] * 10
    _, locs = s.probe(ids.assign(rows(range(3), 0), [1]))
    assert sorted(s.rows_at(locs).column(0).to_pylist()) == list(range(50))


def test_unknown_state_format_is_refused() -> None:
    t = StateTable(1, "left")
    t.put((10, 1), (1, 10, "a", 1))  # the version-1 layout: (*join key, *ident) -> row
    s, ids = side(t)
    with pytest.raises(InternalError, match="unsupported segment format"):
        s.load(ids)
    t2 = StateTable(2, "left")
    t2.put(("meta",), (1, 5))
    s2, ids2 = side(t2)
    with pytest.raises(InternalError, match="unsupported segment format"):
        s2.load(ids2)


def fjoin(kind: str, lkey: list[int] | None = None) -> HashJoinOp:
    return HashJoinOp(
        FL,
        FR,
        kind,
        [1],
        [1],
        None,
        None,
        LocalStateAllocator(),
        [0] if lkey is None else lkey,
        [0],
    )


def test_nan_keys_match_each_other_and_null_keys_never(tmp_path: Path) -> None:
    store = StateStore.open(tmp_path / "state")
    try:
        op = fjoin("full")
        out = op.step(
            [chunk("+ 1 NaN\n+ 2 .\n+ 3 0.0", FL), chunk("+ 10 NaN\n+ 11 .\n+ 12 -0.0", FR)]
        )
        got = sorted(str(r) for r in out.to_rows())
        assert got == sorted(
            str(r)
            for r in chunk(
                "+ 1 NaN 10 NaN\n+ 2 . . .\n+ . . 11 .\n+ 3 0.0 12 -0.0", FL + FR
            ).to_rows()
        )
        checkpoint(store, op)
        op = restart(store, lambda: fjoin("full"))
        # the NaN row found again after the restart: its pair is retracted, 10 padded
        out = op.step([chunk("- 1 NaN", FL), None])
        assert sorted(str(r) for r in out.to_rows()) == sorted(
            str(r) for r in chunk("- 1 NaN 10 NaN\n+ . . 10 NaN", FL + FR).to_rows()
        )
        assert op.side_rows(0) == 1  # row 3 (row 2 has a NULL key, never stored)
    finally:
        store.close()


def test_duplicate_rows_without_stream_key_survive_restart(tmp_path: Path) -> None:
    def make() -> HashJoinOp:
        return HashJoinOp(L, R, "left", [1], [1], None, None, LocalStateAllocator(), [], [0])

    store = StateStore.open(tmp_path / "state")
    try:
        op = make()
        op.step([chunk("+ 1 10 a\n+ 1 10 a\n+ 1 10 a\n+ 2 20 b", L), None])
        checkpoint(store, op)
        op = restart(store, make)
        assert_chunk(
            op.step([None, chunk("+ 100 10 x", R)]),
            """
            - 1 10 a . . .
            - 1 10 a . . .
            - 1 10 a . . .
            + 1 10 a 100 10 x
            + 1 10 a 100 10 x
            + 1 10 a 100 10 x
        """,
        )
        assert_chunk(
            op.step([chunk("- 1 10 a\n- 1 10 a", L), None]),
            """
            - 1 10 a 100 10 x
            - 1 10 a 100 10 x
        """,
        )
        checkpoint(store, op)
        op = restart(store, make)
        assert_chunk(
            op.step([None, chunk("- 100 10 x", R)]),
            """
            - 1 10 a 100 10 x
            + 1 10 a . . .
        """,
        )
        with pytest.raises(InternalError, match="row count became negative"):
            op.step([chunk("- 1 10 a\n- 1 10 a", L), None])
    finally:
        store.close()


def test_degrees_with_condition_survive_merges_and_restart(tmp_path: Path) -> None:
    cond = bind_compare(">", InputRef(0, INT), InputRef(3, INT))  # l.id > r.rid

    def make() -> HashJoinOp:
        return HashJoinOp(L, R, "left", [1], [1], cond, None, LocalStateAllocator(), [0], [0])

    store = StateStore.open(tmp_path / "state")
    try:
        op = make()
        op.step([None, chunk("+ 5 10 x", R)])
        for e in range(6):  # six epochs of left rows: tier-0 segments get merged
            op.step([chunk(f"+ {e * 2 + 1} 10 a\n+ {e * 2 + 20} 10 b", L), None])
            checkpoint(store, op)
        op = restart(store, make)
        # rid 5 matches ids 7, 9, 11 and 20..30; ids 1, 3, 5 stay padded
        assert_chunk(
            op.step([None, chunk("- 5 10 x", R)]),
            "\n".join(
                [f"- {i} 10 a 5 10 x\n+ {i} 10 a . . ." for i in (7, 9, 11)]
                + [f"- {i} 10 b 5 10 x\n+ {i} 10 b . . ." for i in range(20, 31, 2)]
            ),
        )
        assert_chunk(
            op.step([None, chunk("+ 2 10 y", R)]),
            "\n".join(
                [f"- {i} 10 a . . .\n+ {i} 10 a 2 10 y" for i in (3, 5, 7, 9, 11)]
                + [f"- {i} 10 b . . .\n+ {i} 10 b 2 10 y" for i in range(20, 31, 2)]
            ),
        )
    finally:
        store.close()


def test_multi_column_and_text_keys() -> None:
    op = HashJoinOp(L, R, "inner", [1, 2], [1, 2], None, None, LocalStateAllocator(), [0], [0])
    assert_chunk(
        op.step(
            [chunk("+ 1 10 a\n+ 2 10 b\n+ 3 . a", L), chunk("+ 100 10 a\n+ 101 10 c\n+ 102 . a", R)]
        ),
        "+ 1 10 a 100 10 a",
    )
    assert_chunk(op.step([None, chunk("U- 101 10 c\nU+ 101 10 b", R)]), "+ 2 10 b 101 10 b")


def test_key_ids_of_vanished_keys_are_forgotten(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(join_side, "KEY_SLACK", 0)
    op = HashJoinOp(L, R, "left", [1], [1], None, None, LocalStateAllocator(), [0], [0])
    op.step([None, chunk("+ 100 5 keep", R)])
    for e in range(1, 30):  # keys come and go; key 5 stays matched throughout
        new = f"+ {e * 10} {e * 10} a\n+ {e * 10 + 1} 5 b"
        old = f"\n- {(e - 1) * 10} {(e - 1) * 10} a" if e > 1 else ""
        right = chunk(
            f"+ {200 + e} {e * 10} x" + (f"\n- {199 + e} {e * 10 - 10} x" if e > 1 else ""), R
        )
        out = op.step([chunk(new + old, L), right])
        expect = [f"+ {e * 10} {e * 10} a {200 + e} {e * 10} x", f"+ {e * 10 + 1} 5 b 100 5 keep"]
        if e > 1:
            expect.append(f"- {(e - 1) * 10} {(e - 1) * 10} a {199 + e} {e * 10 - 10} x")
        assert_chunk(out, "\n".join(expect))
        assert len(op._jkids) <= 2 * 3 + 2
    # key 5 still finds all its left rows after many compactions
    assert_chunk(
        op.step([None, chunk("- 100 5 keep", R)]),
        "\n".join(f"- {e * 10 + 1} 5 b 100 5 keep\n+ {e * 10 + 1} 5 b . . ." for e in range(1, 30)),
    )


def workload(rng: np.random.Generator, epochs: int, n_ins: int, keys: int) -> list[Any]:
    """Per epoch a chunk of inserts, updates (U-/U+, key and value change) and deletes."""
    live: dict[int, tuple[Any, ...]] = {}
    out: list[Any] = []
    next_id = 0
    for _ in range(epochs):
        ops: list[int] = []
        rows_: list[tuple[Any, ...]] = []
        ids = list(live)
        picked = rng.choice(len(ids), min(len(ids), n_ins // 3), replace=False) if ids else []
        for j, i in enumerate(np.asarray(picked).tolist()):
            old = live[ids[i]]
            if j % 4 == 0:
                ops.append(Op.DELETE)
                rows_.append(old)
                del live[ids[i]]
                continue
            k = None if rng.random() < 0.03 else int(rng.integers(0, keys))
            new = (old[0], k, int(rng.integers(0, 50)))
            ops += [Op.UPDATE_DELETE, Op.UPDATE_INSERT]
            rows_ += [old, new]
            live[ids[i]] = new
        for _ in range(n_ins):
            k = None if rng.random() < 0.03 else int(rng.integers(0, keys))
            row = (next_id, k, int(rng.integers(0, 50)))
            live[next_id] = row
            next_id += 1
            ops.append(Op.INSERT)
            rows_.append(row)
        out.append((ops, rows_))
    return out


def as_chunk(fields: list[Field], ev: tuple[list[int], list[tuple[Any, ...]]]) -> StreamChunk:
    ops, rs = ev
    return StreamChunk(pa.array(ops, pa.int8()), batch_from_rows(fields, rs))


@pytest.mark.parametrize("kind,cond", [("full", True), ("left", False), ("anti", False)])
def test_many_tiers_restarts_and_compactions_match_duckdb(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str, cond: bool
) -> None:
    # small tiers and segments so a few thousand rows make every tier, splits and renumbering
    for name, value in (
        ("BASE_ROWS", 64),
        ("MAX_SEGMENT_ROWS", 4096),
        ("KEY_SLACK", 0),
        ("RENUMBER_SLACK", 0),
    ):
        monkeypatch.setattr(join_side, name, value)
    li = [Field("id", INT), Field("k", INT), Field("v", INT)]
    ri = [Field("rid", INT), Field("rk", INT), Field("w", INT)]
    rng = np.random.default_rng(7)
    left, right = workload(rng, 8, 1200, 300), workload(rng, 8, 150, 300)
    condition = bind_compare(">", InputRef(2, INT), InputRef(5, INT)) if cond else None

    def make() -> HashJoinOp:
        return HashJoinOp(li, ri, kind, [1], [1], condition, None, LocalStateAllocator(), [0], [0])

    store = StateStore.open(tmp_path / "state")
    con = duckdb.connect()
    try:
        op = make()
        got: Counter[tuple[Any, ...]] = Counter()
        lrows: Counter[tuple[Any, ...]] = Counter()
        rrows: Counter[tuple[Any, ...]] = Counter()
        sizes: set[int] = set()
        for e in range(8):
            if e in (3, 6):
                op = restart(store, make)
            lc, rc = as_chunk(li, left[e]), as_chunk(ri, right[e])
            integrate(got, op.step([lc, rc]))
            checkpoint(store, op)
            integrate(lrows, lc)
            integrate(rrows, rc)
            sides = (op._left, op._right)  # type: ignore[attr-defined]
            sizes |= {seg.batch.num_rows for s in sides for seg in s.segs.values()}
            assert all(len(s.segs) < 12 for s in sides)
        assert max(sizes) == 4096 and min(sizes) < 256  # split at the maximum; small tiers
        con.register("l", arrow_table(li, lrows))
        con.register("r", arrow_table(ri, rrows))
        extra = " AND l.v > r.w" if cond else ""
        if kind == "anti":
            sql = f"SELECT l.* FROM l WHERE NOT EXISTS (SELECT 1 FROM r WHERE r.rk = l.k{extra})"
        else:
            sql = f"SELECT * FROM l {kind.upper()} JOIN r ON l.k = r.rk{extra}"
        assert got == Counter(tuple(r) for r in con.execute(sql).fetchall())
    finally:
        con.close()
        store.close()
