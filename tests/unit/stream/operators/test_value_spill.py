"""Value state past its budget (`engine.stream.operators.value_spill`): min/max multisets
and DISTINCT counts of cold groups move to their spill tables and come back when a step
touches them; outputs stay those of a recompute, also across checkpoints and restarts."""

from __future__ import annotations

import math
import random
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from unit.stream.operators.helpers import make_chunk

from engine.chunk import Op, StreamChunk
from engine.state import codec
from engine.state.disk_table import DiskStateTable, DiskTables, HotCache
from engine.state.store import StateStore
from engine.state.table import StateTable
from engine.stream.operators import AggCall, HashAggOp
from engine.stream.operators.value_spill import ValueSpill, pack, unpack
from engine.types import BIGINT, DOUBLE, INT, VARCHAR, Field

F = [Field("k", INT), Field("v", INT), Field("f", DOUBLE), Field("s", VARCHAR)]
AGGS = [
    AggCall("min", 1, INT),
    AggCall("max", 1, INT),
    AggCall("count", 1, BIGINT, distinct=True),
    AggCall("max", 2, DOUBLE),
    AggCall("sum", 2, DOUBLE, distinct=True),
    AggCall("min", 3, VARCHAR),
    AggCall("count_star", None, BIGINT),
]
Row = tuple[Any, ...]


class StoreAlloc:
    """The runtime's way: value tables resident and loaded from the store, the groups and
    spill tables disk tables over it; a small operator cache (1,024 rows a table)."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.disk = DiskTables(store, HotCache(0))
        self.ids: dict[str, int] = {}

    def table(self, name: str, *, disk: bool = False, dist: bool = True) -> StateTable:
        tid = self.ids.setdefault(name, 100 + len(self.ids))
        if disk:
            return self.disk.table(tid, name, 1)  # type: ignore[return-value]
        t = StateTable(tid, name)
        t.load(self.store)
        return t

    def declares(self, name: str) -> bool:
        return True


def make_op(alloc: StoreAlloc, keys: list[int] | None = None) -> HashAggOp:
    keys = [0] if keys is None else keys
    names = [F[k].name for k in keys] + [f"a{i}" for i in range(len(AGGS))]
    return HashAggOp(F, keys, AGGS, alloc, names)


def checkpoint(store: StateStore, op: HashAggOp) -> None:
    batch = store.new_batch()
    for t in op.state_tables():
        t.write_dirty(batch)
    store.write(batch, sync=False)


def expected(rows: Counter[Row], keys: list[int]) -> Counter[Row]:
    """GROUP BY recomputed from the live rows (NaN above every float, as PostgreSQL)."""
    groups: dict[Row, list[Row]] = {}
    for r, n in rows.items():
        groups.setdefault(tuple(r[k] for k in keys), []).extend([r] * n)
    out: Counter[Row] = Counter()
    for g, rs in groups.items():
        vs = [r[1] for r in rs if r[1] is not None]
        fs = [r[2] for r in rs if r[2] is not None]
        ss = [r[3] for r in rs if r[3] is not None]
        order = lambda x: (True, 0.0) if x != x else (False, x)  # noqa: E731
        fmax = max(fs, key=order) if fs else None
        dist = {(True, 0.0) if x != x else (False, x) for x in fs}
        fsum = None
        if dist:
            fsum = math.nan if any(n for n, _ in dist) else math.fsum(x for _, x in dist)
        out[
            (
                *g,
                min(vs, default=None),
                max(vs, default=None),
                len(set(vs)),
                fmax,
                fsum,
                min(ss, default=None),
                len(rs),
            )
        ] += 1
    return out


def _key(r: Row) -> Row:
    """Rows compared with NaN equal to itself and floats to 9 digits."""
    return tuple(
        "NaN" if isinstance(x, float) and x != x else round(x, 9) if isinstance(x, float) else x
        for x in r
    )


def same(a: Counter[Row], b: Counter[Row]) -> bool:
    return a == Counter({_key(r): n for r, n in b.items()})


def integrate(acc: Counter[Row], out: StreamChunk | None) -> None:
    """Apply an output delta to the multiset of `_key` rows; it never goes negative."""
    if out is None:
        return
    for op, row in out.to_rows():
        k = _key(row)
        acc[k] += op.sign
        assert acc[k] >= 0, f"row {row} retracted below zero"
        if not acc[k]:
            del acc[k]


def stream(seed: int, steps: int, groups: int, spread: int = 500) -> list[list[tuple[Op, Row]]]:
    """Steps of inserts and deletes over many groups (deletes of current extremes too)."""
    rng = random.Random(seed)
    live: list[Row] = []
    out = []
    for _ in range(steps):
        ev: list[tuple[Op, Row]] = []
        for _ in range(rng.randrange(50, 400)):
            if live and rng.random() < 0.35:
                r = live.pop(rng.randrange(len(live)))
                ev.append((Op.DELETE, r))
                continue
            f = rng.choice([math.nan, rng.randrange(40) / 4, None, -0.5])
            r = (
                rng.randrange(groups),
                rng.choice([None, rng.randrange(-spread, spread)]),
                f,
                rng.choice([None, f"s{rng.randrange(60)}"]),
            )
            live.append(r)
            ev.append((Op.INSERT, r))
        out.append(ev)
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_spilled_groups_come_back_and_outputs_equal_a_recompute(seed: int) -> None:
    """With 1,024 cached rows a table, hundreds of groups of tens of values each pass the
    value tables' shares: groups are evicted and re-hydrated step after step, with a
    checkpoint after every step and a restart (a new operator over the same store) every
    few steps, and the integrated output always equals the recompute."""
    steps = stream(seed, 30, 400)
    with tempfile.TemporaryDirectory() as d, StateStore.open(Path(d)) as store:
        op = make_op(StoreAlloc(store))
        rows: Counter[Row] = Counter()
        got: Counter[Row] = Counter()
        evicted = hydrated = 0
        for n, ev in enumerate(steps):
            for o, r in ev:
                rows[r] += o.sign
                if not rows[r]:
                    del rows[r]
            integrate(got, op.step([make_chunk(F, [o for o, _ in ev], [r for _, r in ev])]))
            assert same(got, expected(rows, [0])), f"step {n}"
            checkpoint(store, op)
            spills = list(op._spills.values())
            assert len(spills) == 5  # one per value table
            for sp in spills:
                assert len(sp.table) <= sp.cap()
            evicted += sum(sp.evicted for sp in spills)
            hydrated += sum(sp.hydrated + sp.updated for sp in spills)
            if n % 7 == 6:  # restart: the value tables load, the spill tables stay on disk
                op = make_op(StoreAlloc(store))  # same names asked in order: same ids
        assert evicted and hydrated


def test_a_global_aggregate_over_more_values_than_its_share_stays_right() -> None:
    """One group holding every value (no GROUP BY) is evicted and read back whole each
    step once it passes the share; memory stays bounded and the result right."""
    steps = stream(5, 60, 1, spread=50_000)
    with tempfile.TemporaryDirectory() as d, StateStore.open(Path(d)) as store:
        op = make_op(StoreAlloc(store), keys=[])
        rows: Counter[Row] = Counter()
        got: Counter[Row] = Counter()
        for ev in steps:
            for o, r in ev:
                rows[r] += o.sign
                if not rows[r]:
                    del rows[r]
            integrate(got, op.step([make_chunk(F, [o for o, _ in ev], [r for _, r in ev])]))
            checkpoint(store, op)
        assert same(got, expected(rows, []))
        assert sum(sp.evicted for sp in op._spills.values())


def test_pack_round_trips_values_as_the_objects_deletes_look_for() -> None:
    """Blobs give back equal values of the same types, NaN as the one NaN object, and
    values `codec.encode_rows` would change (numpy datetime64 of dates past year 9999,
    tuples) as they were."""
    import datetime as dt
    from decimal import Decimal

    import numpy as np

    vals: list[Any] = [1, "a", Decimal("1.50"), dt.date(2020, 1, 2), float("nan"), None]
    back, counts = unpack(pack(vals, [1, 2, 3, 4, 5, 6]))
    assert counts == [1, 2, 3, 4, 5, 6]
    assert back[:4] == vals[:4] and str(back[2]) == "1.50" and back[5] is None
    assert back[4] is codec.NAN
    wide = [np.datetime64(300000, "D"), np.datetime64(-800000, "D")]
    back, _ = unpack(pack(wide, [1, 1]))
    assert back == wide and all(isinstance(v, np.datetime64) for v in back)
    back, _ = unpack(pack([(1, 2), (3,)], [1, 1]))
    assert back == [(1, 2), (3,)]


def test_old_plans_without_spill_tables_keep_value_state_resident() -> None:
    """A plan stored before spill tables existed declares none: the operator asks for
    none and keeps its value tables resident, as before."""

    class OldAlloc(StoreAlloc):
        def declares(self, name: str) -> bool:
            return not name.endswith("_spill")

    with tempfile.TemporaryDirectory() as d, StateStore.open(Path(d)) as store:
        op = make_op(OldAlloc(store))
        assert not op._spills
        assert [t.name for t in op.state_tables()] == [
            "groups",
            "minmax_0",
            "distinct_2",
            "minmax_3",
            "distinct_4",
            "minmax_5",
        ]
        assert isinstance(op.state_tables()[0], DiskStateTable)
        assert all(isinstance(sp, ValueSpill) for sp in op._spills.values())
