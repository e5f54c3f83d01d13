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
from engine.types import BIGINT, INT, Field

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
        # integer values: packed blocks (values in order, then counts) in the group rows,
        # after the aggregates' slots; the value tables are empty
        groups = tables[0].to_dict()
        for slot in (-2, -1):
            blocks = {k: unpack(row[slot]) for k, row in groups.items()}
            assert blocks == {(1,): ([5, 9], [1, 1]), (2,): ([3], [1])}
        assert not tables[1].to_dict() and not tables[2].to_dict()
        assert_chunk(op3.step([chunk("- 1 9", F)]), "U- 1 2 5 9 2\nU+ 1 1 5 5 1")
    finally:
        store.close()


def _expected(live: Counter[tuple[int, int]]) -> Counter[tuple[object, ...]]:
    groups: dict[int, list[int]] = {}
    for (k, v), n in live.items():
        groups.setdefault(k, []).extend([v] * n)
    return Counter((k, len(vs), min(vs), max(vs), len(set(vs))) for k, vs in groups.items() if vs)


@pytest.mark.parametrize("big", [False, True])
def test_random_retractions_through_restarts_match_a_recompute(
    tmp_path: Path, big: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if big:  # every block merged on its own (binary search and insert)
        monkeypatch.setattr(agg_values, "BIG_BLOCK", 1)
        monkeypatch.setattr(agg_values, "BIG_RATIO", 0)
    rnd = random.Random(11)
    store = StateStore.open(tmp_path / "state")
    try:

        def make() -> Operator:
            return agg(DiskAllocator(store, {"groups": 1, "minmax_1": 1, "distinct_3": 1}))

        op = make()
        live: Counter[tuple[int, int]] = Counter()
        view: Counter[tuple[object, ...]] = Counter()
        for epoch in range(40):
            ops: list[Op] = []
            rows: list[tuple[int, int]] = []
            for _ in range(rnd.randint(1, 60)):
                present = [r for r, n in live.items() if n > 0]
                if present and rnd.random() < 0.4:
                    r = rnd.choice(present)
                    live[r] -= 1
                    ops.append(Op.DELETE)
                    rows.append(r)
                else:
                    r = (rnd.randint(0, 6), rnd.randint(-20, 20))
                    live[r] += 1
                    ops.append(Op.INSERT)
                    rows.append(r)
            out = op.step([make_chunk(F, ops, rows)])
            integrate(view, out)
            assert +view == _expected(+live), f"epoch {epoch}"
            checkpoint(store, op)
            if epoch % 7 == 6:
                op = restart(store, make)
    finally:
        store.close()


@pytest.mark.parametrize("big", [False, True])
def test_packed_merges_agree_with_a_dict_model(big: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Packed blocks through random chunks of changes, every group merged in the chunk's
    one sort or (big) each on its own by binary search, agree with value -> count dicts."""
    if big:
        monkeypatch.setattr(agg_values, "BIG_BLOCK", 1)
        monkeypatch.setattr(agg_values, "BIG_RATIO", 0)
    rnd = np.random.default_rng(5)
    model: dict[int, Counter[int]] = {g: Counter() for g in range(12)}
    blocks: dict[int, bytes | None] = dict.fromkeys(model)
    for _ in range(60):
        groups = sorted(rnd.choice(12, rnd.integers(1, 12), replace=False).tolist())
        vals: list[int] = []
        dws: list[int] = []
        bounds = [0]
        for g in groups:
            scale = int(rnd.choice([1, 300, 70_000, 5 * 10**9, 2**57]))  # every width
            for v in sorted(set((rnd.integers(-30, 30, rnd.integers(1, 8)) * scale).tolist())):
                have = model[g][v]
                w = int(rnd.integers(-have, 4)) or 1
                if rnd.random() < 0.1:  # a count past one byte
                    w = 200
                model[g][v] += w
                vals.append(v)
                dws.append(w)
            bounds.append(len(vals))
        res = agg_values.merge_packed(
            [blocks[g] for g in groups],
            np.asarray(bounds),
            np.asarray(vals, np.int64),
            np.asarray(dws, np.int64),
            False,
            "test",
        )
        assert res.news is not None
        for j, g in enumerate(groups):
            blocks[g] = res.blocks[j]
            live = {v: c for v, c in model[g].items() if c}
            got = unpack(res.blocks[j]) if res.blocks[j] is not None else ([], [])
            assert got == (sorted(live), [live[v] for v in sorted(live)])
            at = slice(bounds[j], bounds[j + 1])
            assert res.news[at].tolist() == [model[g][v] for v in vals[at]]
        ext = agg_values.merge_packed(
            [blocks[g] for g in groups],
            np.asarray([0] * (len(groups) + 1)),
            np.zeros(0, np.int64),
            np.zeros(0, np.int64),
            True,
            "test",
        )
        for j, g in enumerate(groups):
            live = [v for v, c in model[g].items() if c]
            assert (ext.lo and ext.lo[j], ext.hi and ext.hi[j]) == (
                (min(live), max(live)) if live else (None, None)
            )
    with pytest.raises(InternalError):
        g = next(g for g in model if not model[g][99])
        agg_values.merge_packed(
            [blocks[g]], np.asarray([0, 1]), np.asarray([99]), np.asarray([-1]), True, "t"
        )
