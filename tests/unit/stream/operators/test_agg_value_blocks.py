"""min/max and DISTINCT value state as per-group blocks in RocksDB-first tables: a table of
the older (group, value) -> count layout is converted on the first step, and random
retracting epochs through checkpoints and restarts agree with a recomputation."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from unit.stream.operators.helpers import assert_chunk, chunk, integrate, make_chunk
from unit.stream.operators.join_topn_helpers import DiskAllocator, checkpoint, restart

from engine.chunk import Op
from engine.errors import InternalError
from engine.state.store import StateStore
from engine.state.table import StateTable
from engine.stream.operator import Operator
from engine.stream.operators import AggCall, HashAggOp, agg_values
from engine.stream.operators.agg_values import unpack
from engine.types import BIGINT, DOUBLE, INT, Field

F = [Field("k", INT), Field("v", INT)]
AGGS = [
    AggCall("count_star", None, BIGINT),
    AggCall("min", 1, INT),
    AggCall("max", 1, INT),
    AggCall("count", 1, BIGINT, distinct=True),
]


def agg(alloc: DiskAllocator) -> HashAggOp:
    return HashAggOp(F, [0], AGGS, alloc, ["k", "n", "lo", "hi", "nd"])


def test_older_per_value_rows_are_converted(tmp_path: Path) -> None:
    store = StateStore.open(tmp_path / "state")
    try:
        # the layout written before value blocks: (group, value) -> (count,) per value
        op = agg(DiskAllocator(store))
        checkpoint(store, op)  # allocates the ids: groups 1000, minmax_1 1001, distinct_3 1002
        op.step([chunk("+ 1 5\n+ 1 1\n+ 1 9\n+ 1 9\n+ 2 3", F)])
        batch = store.new_batch()
        op.state_tables()[0].write_dirty(batch)
        for tid, name in ((1001, "minmax_1"), (1002, "distinct_3")):
            old = StateTable(tid, name)
            for k, c in {(1, 1): 1, (1, 5): 1, (1, 9): 2, (2, 3): 1}.items():
                old.put(k, (c,))
            old.write_dirty(batch)
        store.write(batch, sync=False)

        def make() -> Operator:
            return agg(DiskAllocator(store))

        op2 = restart(store, make)
        assert_chunk(
            op2.step([chunk("- 1 9\n- 1 1", F)]),
            """
            U- 1 4 1 9 3
            U+ 1 2 5 9 2
        """,
        )
        checkpoint(store, op2)
        op3 = restart(store, make)
        tables = op3.state_tables()
        # integer values: packed blocks (values in order, then counts), one part (key
        # None) per group in each value table
        for t in tables[1:]:
            blocks = {k: unpack(row[0]) for k, row in t.to_dict().items()}
            assert blocks == {(1, None): ([5, 9], [1, 1]), (2, None): ([3], [1])}
        assert_chunk(op3.step([chunk("- 1 9", F)]), "U- 1 2 5 9 2\nU+ 1 1 5 5 1")
    finally:
        store.close()


def _expected(live: Counter[tuple[int, int]]) -> Counter[tuple[object, ...]]:
    groups: dict[int, list[int]] = {}
    for (k, v), n in live.items():
        groups.setdefault(k, []).extend([v] * n)
    return Counter((k, len(vs), min(vs), max(vs), len(set(vs))) for k, vs in groups.items() if vs)


FL = [Field("k", INT), Field("v", DOUBLE)]
AGGS_FL = [
    AggCall("count_star", None, BIGINT),
    AggCall("min", 1, DOUBLE),
    AggCall("max", 1, DOUBLE),
    AggCall("count", 1, BIGINT, distinct=True),
]


@pytest.mark.parametrize("kind", ["int", "float", "parts"])
def test_random_retractions_through_restarts_match_a_recompute(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Random inserts and deletes, several chunks per epoch (the working set carries
    them to the checkpoint), restarts: the view stays equal to a recompute. `parts`:
    groups are cut into parts of two values (every change lands in a part of its own)."""
    if kind == "parts":
        monkeypatch.setattr(agg_values, "PART_MAX", 3)
        monkeypatch.setattr(agg_values, "PART_TARGET", 2)
    rnd = random.Random(11)
    store = StateStore.open(tmp_path / "state")
    fields, aggs = (FL, AGGS_FL) if kind == "float" else (F, AGGS)
    try:

        def make() -> Operator:
            alloc = DiskAllocator(store, {"groups": 1, "minmax_1": 1, "distinct_3": 1})
            return HashAggOp(fields, [0], aggs, alloc, ["k", "n", "lo", "hi", "nd"])

        op = make()
        live: Counter[tuple[int, object]] = Counter()
        view: Counter[tuple[object, ...]] = Counter()
        for epoch in range(40):
            for _ in range(rnd.randint(1, 3)):  # chunks of one epoch
                ops: list[Op] = []
                rows: list[tuple[int, object]] = []
                for _ in range(rnd.randint(1, 60)):
                    present = [r for r, n in live.items() if n > 0]
                    if present and rnd.random() < 0.4:
                        r = rnd.choice(present)
                        live[r] -= 1
                        ops.append(Op.DELETE)
                        rows.append(r)
                    else:
                        v: object = rnd.randint(-20, 20)
                        if kind == "float":
                            v = rnd.choice([float(v) / 4, float("inf"), -0.5])
                        r = (rnd.randint(0, 6), v)
                        live[r] += 1
                        ops.append(Op.INSERT)
                        rows.append(r)
                out = op.step([make_chunk(fields, ops, rows)])
                integrate(view, out)
                assert +view == _expected(+live), f"epoch {epoch}"
            checkpoint(store, op)
            if epoch % 7 == 6:
                op = restart(store, make)
    finally:
        store.close()


def _value_bytes(op: HashAggOp) -> int:
    return sum(state.written_bytes for state in op._blocks.values())  # noqa: SLF001


def test_a_backfill_writes_each_groups_values_once_per_checkpoint(tmp_path: Path) -> None:
    """Many chunks per epoch into the same groups (a backfill): the value blocks are
    encoded and written once per checkpoint, so the bytes written stay within a few
    times the final state, not once per chunk (which grows with chunks x state)."""
    store = StateStore.open(tmp_path / "state")
    try:
        op = agg(DiskAllocator(store, {"groups": 1, "minmax_1": 1, "distinct_3": 1}))
        rng = np.random.default_rng(3)
        n, chunks, epochs = 200_000, 50, 5
        ks = (np.arange(n) % 100).tolist()
        vs = rng.integers(0, 1 << 30, n).tolist()
        rows = list(zip(ks, vs, strict=True))
        size = n // (chunks * epochs)
        for e in range(epochs):
            for c in range(chunks):
                at = (e * chunks + c) * size
                part = rows[at : at + size]
                op.step([make_chunk(F, [Op.INSERT] * len(part), part)])
            checkpoint(store, op)
        final = sum(len(row[0]) for t in op.state_tables()[1:] for row in t.to_dict().values())
        written = _value_bytes(op)
        # epochs of a growing state: about (epochs + 1) / 2 times the final size
        assert written <= 4 * final, (written, final)
    finally:
        store.close()


def test_a_change_to_a_big_group_rewrites_only_its_part(tmp_path: Path) -> None:
    """A group of 100k values is cut into parts; a later insert and delete in it write
    one part's bytes, and its min/max and DISTINCT count stay right."""
    store = StateStore.open(tmp_path / "state")
    try:
        op = agg(DiskAllocator(store, {"groups": 1, "minmax_1": 1, "distinct_3": 1}))
        n = 100_000
        rows = [(1, 3 * i) for i in range(n)]
        op.step([make_chunk(F, [Op.INSERT] * n, rows)])
        checkpoint(store, op)
        parts = op.state_tables()[1].to_dict()
        assert len(parts) >= n // agg_values.PART_MAX
        before = _value_bytes(op)
        out = op.step([make_chunk(F, [Op.INSERT, Op.DELETE], [(1, 1), (1, 3 * 50_000)])])
        assert_chunk(out, None)  # the same count, extremes and distinct values
        checkpoint(store, op)
        # two parts, each of at most PART_MAX values of up to 8 + 8 bytes
        assert _value_bytes(op) - before <= 2 * 16 * (agg_values.PART_MAX + 1) * 2
        out = op.step([make_chunk(F, [Op.DELETE], [(1, 0)])])
        assert_chunk(out, f"U- 1 {n} 0 {3 * (n - 1)} {n}\nU+ 1 {n - 1} 1 {3 * (n - 1)} {n - 1}")
        checkpoint(store, op)
        op2 = restart(
            store, lambda: agg(DiskAllocator(store, {"groups": 1, "minmax_1": 1, "distinct_3": 1}))
        )
        out = op2.step([make_chunk(F, [Op.DELETE], [(1, 1)])])
        assert_chunk(
            out, f"U- 1 {n - 1} 1 {3 * (n - 1)} {n - 1}\nU+ 1 {n - 2} 3 {3 * (n - 1)} {n - 2}"
        )
    finally:
        store.close()


def test_a_value_deleted_too_often_is_an_internal_error(tmp_path: Path) -> None:
    store = StateStore.open(tmp_path / "state")
    try:
        op = agg(DiskAllocator(store))
        op.step([chunk("+ 1 5", F)])
        with pytest.raises(InternalError):
            op.step([chunk("- 1 6", F)])
    finally:
        store.close()
