"""The columnar aggregation path: equal to a from-scratch recompute on every backend.

`HashAggOp` takes the columnar path (`agg_columnar`) for one integer group key and
fixed-width aggregates. The property runs it over a RocksDB disk table (a tiny operator
cache, so rows are trimmed and read back; a checkpoint after every epoch; a restart from
the store; reads through the tuple interface in between, which move the changed rows out
of the columns) and over a resident table, comparing the integrated output with polars.
"""

from __future__ import annotations

import decimal
import tempfile
import zlib
from collections import Counter
from datetime import datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from unit.stream.operators.helpers import integrate, make_chunk

from engine.chunk import Op
from engine.errors import NumericValueOutOfRange
from engine.state import codec, memcmp
from engine.state.disk_table import DiskStateTable, DiskTables, HotCache
from engine.state.fixed_rows import (
    FixedLayout,
    int128_add,
    int128_from_int64,
    int128_from_ints,
    ints_from_int128,
)
from engine.state.store import StateStore
from engine.state.table import StateTable
from engine.stream.operators import AggCall, HashAggOp, LocalStateAllocator, agg_columns
from engine.stream.operators.agg_columns import ColumnarGroups, crc32_rows
from engine.types import BIGINT, BOOLEAN, INT, NUMERIC, TIMESTAMP, Field

F = [Field("k", BIGINT), Field("v", INT), Field("f", BOOLEAN), Field("b", BIGINT)]
AGGS = [
    AggCall("count_star", None, BIGINT),
    AggCall("count", 1, BIGINT),
    AggCall("sum", 1, BIGINT),
    AggCall("sum", 3, NUMERIC),
    AggCall("avg", 1, NUMERIC),
    AggCall("count_star", None, BIGINT, filter=2),
    AggCall("sum", 1, BIGINT, filter=2),
    AggCall("bool_and", 2, BOOLEAN),
    AggCall("bool_or", 2, BOOLEAN),
]
NAMES = ["k"] + [f"a{i}" for i in range(len(AGGS))]
BIG = 2**62
_WIDE = decimal.Context(prec=80)
Row = tuple[Any, ...]
row_st = st.tuples(
    st.one_of(st.none(), st.integers(0, 3), st.just(2**60)),
    st.one_of(st.none(), st.integers(-4, 4)),
    st.one_of(st.none(), st.booleans()),
    st.one_of(st.none(), st.integers(-4, 4), st.just(BIG)),
)


@st.composite
def epochs_st(draw: st.DrawFn, inserts_only: bool = False) -> list[list[tuple[Op, Row]]]:
    live: list[Row] = []
    epochs = []
    for _ in range(draw(st.integers(1, 7))):
        ev: list[tuple[Op, Row]] = []
        for _ in range(draw(st.integers(0, 10))):
            kind = "ins" if inserts_only else draw(st.sampled_from(["ins", "ins", "del", "upd"]))
            if kind == "ins" or not live:
                r = draw(row_st)
                live.append(r)
                ev.append((Op.INSERT, r))
            elif kind == "del":
                ev.append((Op.DELETE, live.pop(draw(st.integers(0, len(live) - 1)))))
            else:
                i = draw(st.integers(0, len(live) - 1))
                new = draw(row_st)
                ev += [(Op.UPDATE_DELETE, live[i]), (Op.UPDATE_INSERT, new)]
                live[i] = new
        epochs.append(ev)
    return epochs


def _avg(s: int | None, n: int) -> Decimal | None:
    if n == 0 or s is None:
        return None
    with decimal.localcontext(_WIDE):
        q = Decimal(s) / Decimal(n)
        return q.quantize(Decimal("1e-10"), rounding=decimal.ROUND_HALF_UP)


def expected(inp: Counter[Row]) -> Counter[Row]:
    rows = [r for r, n in inp.items() for _ in range(n)]
    schema = {"k": pl.Int64, "v": pl.Int64, "f": pl.Boolean, "b": pl.Int64}
    df = pl.DataFrame(rows, schema=schema, orient="row")
    v, f = pl.col("v"), pl.col("f")
    fv = f.fill_null(False)
    res = df.group_by("k").agg(
        pl.len().alias("cs"),
        v.count().alias("c"),
        v.sum().alias("s"),
        pl.col("b").cast(pl.Int128).sum().alias("sb"),
        pl.col("b").count().alias("cb"),
        fv.sum().alias("cf"),
        v.filter(fv).sum().alias("sf"),
        v.filter(fv).count().alias("cvf"),
        f.drop_nulls().all().alias("ba"),
        f.drop_nulls().any().alias("bo"),
        f.count().alias("fc"),
    )
    out: Counter[Row] = Counter()
    for r in res.iter_rows(named=True):
        c, fc = r["c"], r["fc"]
        s = r["s"] if c else None
        sb = Decimal(r["sb"]).quantize(Decimal("1e-10"), context=_WIDE) if r["cb"] else None
        vals = (
            r["cs"],
            c,
            s,
            sb,
            _avg(s, c),
            r["cf"],
            r["sf"] if r["cvf"] else None,
            r["ba"] if fc else None,
            r["bo"] if fc else None,
        )
        out[(r["k"], *vals)] += 1
    return out


def checkpoint(store: StateStore, op: HashAggOp) -> None:
    batch = store.new_batch()
    for t in op.state_tables():
        t.write_dirty(batch)
    store.write(batch, sync=False)


def disk_op(
    store: StateStore,
    aggs: list[AggCall] = AGGS,
    plain: list[int] | None = None,
    cache: int = 0,
) -> Any:
    tables = DiskTables(store, HotCache(cache))  # 0: 1024 rows per table at most
    alloc = _DiskAlloc(tables)
    names = ["k"] + [f"a{i}" for i in range(len(aggs))]
    return HashAggOp(F, [0], aggs, alloc, names, append_only_extremes=plain or ())


class _DiskAlloc:
    def __init__(self, tables: DiskTables) -> None:
        self.tables = tables

    def table(self, name: str, *, disk: bool = False, dist: bool = True) -> StateTable:
        assert disk and name == "groups"
        return self.tables.table(7, name, 1)  # type: ignore[return-value]


def run_disk(epochs: list[list[tuple[Op, Row]]], restart_at: int, peek: list[bool]) -> None:
    with tempfile.TemporaryDirectory() as d, StateStore.open(Path(d)) as store:
        op = disk_op(store)
        assert op._columnar is not None
        groups = op.state_tables()[0]
        assert isinstance(groups, DiskStateTable)
        inp: Counter[Row] = Counter()
        got: Counter[Row] = Counter()
        for step, ev in enumerate(epochs):
            if step == restart_at:
                op = disk_op(store)
                groups = op.state_tables()[0]
            c = make_chunk(F, [o for o, _ in ev], [r for _, r in ev]) if ev else None
            integrate(inp, c)
            integrate(got, op.step([c]))
            want = expected(inp)
            assert got == want, f"step {step}"
            if peek[step % len(peek)]:  # the tuple interface sees the columns' changes
                assert len(groups) == len(want)
                stored = {k for (k,) in groups.keys()}  # noqa: SIM118 (the table API)
                assert stored == {r[0] for r in want}
            checkpoint(store, op)
            assert len(groups) == len(want)


@settings(max_examples=40, deadline=None)
@given(epochs_st(), st.integers(0, 7), st.lists(st.booleans(), min_size=1, max_size=4))
def test_columnar_agg_on_disk_matches_recompute(
    epochs: list[list[tuple[Op, Row]]], restart_at: int, peek: list[bool]
) -> None:
    run_disk(epochs, restart_at, peek)


@settings(max_examples=40, deadline=None)
@given(epochs_st(), st.integers(0, 7), st.lists(st.booleans(), min_size=1, max_size=4))
def test_columnar_agg_checkpointed_in_runs_matches_recompute(
    epochs: list[list[tuple[Op, Row]]], restart_at: int, peek: list[bool]
) -> None:
    """Every checkpoint writes a run (and every third consolidates them); restarts read
    them back and the tuple interface takes them over."""
    saved = agg_columns.RUN_MIN, agg_columns.MAX_RUNS
    agg_columns.RUN_MIN, agg_columns.MAX_RUNS = 1, 2
    try:
        run_disk(epochs, restart_at, peek)
    finally:
        agg_columns.RUN_MIN, agg_columns.MAX_RUNS = saved


@settings(max_examples=40, deadline=None)
@given(epochs_st())
def test_columnar_agg_on_a_resident_table_matches_recompute(
    epochs: list[list[tuple[Op, Row]]],
) -> None:
    op = HashAggOp(F, [0], AGGS, LocalStateAllocator(), NAMES)
    assert op._columnar is not None
    inp: Counter[Row] = Counter()
    got: Counter[Row] = Counter()
    for step, ev in enumerate(epochs):
        c = make_chunk(F, [o for o, _ in ev], [r for _, r in ev]) if ev else None
        integrate(inp, c)
        integrate(got, op.step([c]))
        assert got == expected(inp), f"step {step}"


def test_many_groups_past_the_cache_and_append_only_extremes() -> None:
    """5000 groups through a 1024-row cache; min/max kept without a multiset."""
    aggs = [AggCall("count_star", None, BIGINT), AggCall("min", 1, INT), AggCall("max", 3, BIGINT)]
    rng = np.random.default_rng(5)
    want: dict[int, list[int]] = {}
    got: Counter[Row] = Counter()
    with tempfile.TemporaryDirectory() as d, StateStore.open(Path(d)) as store:
        op = disk_op(store, aggs, plain=[1, 2])
        assert op._columnar is not None
        for _ in range(4):
            ks = rng.integers(0, 5000, 3000).tolist()
            vs = rng.integers(-100, 100, 3000).tolist()
            rows = [(k, v, None, 3 * v) for k, v in zip(ks, vs, strict=True)]
            for k, v, _, _ in rows:
                want.setdefault(k, []).append(v)
            integrate(got, op.step([make_chunk(F, [Op.INSERT] * len(rows), rows)]))
            checkpoint(store, op)
            op = disk_op(store, aggs, plain=[1, 2])
    assert got == Counter({(k, len(v), min(v), 3 * max(v)): 1 for k, v in want.items()})


@pytest.mark.parametrize("restart", [False, True])
def test_fresh_groups_skip_store_reads_until_rows_leave_the_cache(restart: bool) -> None:
    """A table seen empty is answered from the cache alone (no multi-get for new groups)
    until the 1024-row cache evicts live rows; from then on misses read the store, and
    the results stay exact with or without a restart in between."""
    aggs = [AggCall("count_star", None, BIGINT), AggCall("sum", 1, BIGINT)]
    rng = np.random.default_rng(11)
    want: dict[int, list[int]] = {}
    got: Counter[Row] = Counter()
    with tempfile.TemporaryDirectory() as d, StateStore.open(Path(d)) as store:
        reads: list[int] = []
        real = store.multi_get
        store.multi_get = lambda keys: (reads.append(len(keys)), real(keys))[1]  # type: ignore[method-assign]
        op = disk_op(store, aggs)
        for step, (n_keys, n_rows) in enumerate(
            [(500, 800), (900, 800), (5000, 3000), (5000, 3000)]
        ):
            ks = rng.integers(0, n_keys, n_rows).tolist()
            vs = rng.integers(-100, 100, n_rows).tolist()
            rows = [(k, v, None, v) for k, v in zip(ks, vs, strict=True)]
            for k, v, _, _ in rows:
                want.setdefault(k, []).append(v)
            integrate(got, op.step([make_chunk(F, [Op.INSERT] * len(rows), rows)]))
            if step < 2 and not restart:  # under the cache's 1024 rows: nothing evicted
                assert not reads, f"step {step}"
            checkpoint(store, op)
            if restart:
                op = disk_op(store, aggs)
        assert reads  # past the cache (or restarted): the committed rows were read
    assert got == Counter({(k, len(v), sum(v)): 1 for k, v in want.items()})


def test_rows_of_the_older_marshal_form_are_read_and_rewritten() -> None:
    aggs = [AggCall("count_star", None, BIGINT), AggCall("sum", 1, BIGINT)]
    with tempfile.TemporaryDirectory() as d, StateStore.open(Path(d)) as store:
        old = DiskTables(store, HotCache(0)).table(7, "groups", 1)
        old.put_many([(1,), (2,)], [(2, 2, 10, 2), (1, 1, -3, 1)])  # (rows, n, sum, count)
        batch = store.new_batch()
        old.write_dirty(batch)
        store.write(batch)
        op = disk_op(store, aggs)
        rows = [(1, 5, None, 0), (3, 1, None, 0)]
        out = op.step([make_chunk(F, [Op.INSERT, Op.INSERT], rows)])
        assert out is not None
        assert sorted(out.to_rows()) == sorted(
            [(Op.INSERT, (3, 1, 1)), (Op.UPDATE_DELETE, (1, 2, 10)), (Op.UPDATE_INSERT, (1, 3, 15))]
        )
        checkpoint(store, op)
        t = op.state_tables()[0]
        raw = store.get(t.encoded_full_keys([codec_key(1)])[0])
        assert raw is not None and raw[0] == 0x02
        assert codec.decode_value(raw) == (3, 3, 15, 3)
        assert dict(t.items()) == {(1,): (3, 3, 15, 3), (2,): (1, 1, -3, 1), (3,): (1, 1, 1, 1)}


def codec_key(k: int) -> bytes:
    return memcmp.encode_key((k,))


def test_a_bigint_sum_out_of_range_raises_without_an_error_sink() -> None:
    """sum(int) keeps an exact int128; only the bigint output is range-checked."""
    aggs = [AggCall("sum", 1, BIGINT)]
    alloc = LocalStateAllocator()
    op = HashAggOp(F, [0], aggs, alloc, ["k", "s"])
    alloc.tables["groups"].put((1,), (1, 2**63 - 10, 1))
    with pytest.raises(NumericValueOutOfRange):
        op.step([make_chunk(F, [Op.INSERT], [(1, 100, None, 0)])])
    op = HashAggOp(F, [0], aggs, LocalStateAllocator(), ["k", "s"])
    rows = [(1, 2**31 - 1, None, 0)] * 3
    out = Counter[Row]()
    integrate(out, op.step([make_chunk(F, [Op.INSERT] * 3, rows)]))
    assert out == Counter({(1, 3 * (2**31 - 1)): 1})


def test_fixed_rows_round_trip_and_int128_arithmetic() -> None:
    lay = FixedLayout("qodQD")
    ints = [0, -1, 2**100, -(2**90) + 7]
    cols = [
        np.array([1, -2, 3, 2**63 - 1], np.int64),
        int128_from_ints(ints),
        np.array([0.5, -0.0, 1e300, 2.0]),
        np.array([5, 0, -7, 1], np.int64),
        np.array([1.5, 0.0, -2.5, 3.0]),
    ]
    valids = [None, None, None, np.array([1, 0, 1, 0], bool), np.array([0, 1, 1, 0], bool)]
    raws = lay.encode(cols, valids)
    assert all(lay.matches(r) and r[0] == 0x02 for r in raws)
    assert lay.encode_joined(cols, valids) == b"".join(raws)  # a run blob's rows
    rows = [codec.decode_value(r) for r in raws]
    assert rows[0] == (1, 0, 0.5, 5, None)
    assert rows[2] == (3, 2**100, 1e300, -7, -2.5)
    assert lay.to_rows(*lay.decode(raws)) == rows
    assert lay.to_rows(*lay.from_rows(rows)) == rows
    assert ints_from_int128(
        int128_add(int128_from_ints(ints), int128_from_int64(np.array([1, 1, -1, 2])))
    ) == [
        1,
        0,
        2**100 - 1,
        -(2**90) + 9,
    ]


# -- several key columns (integers and timestamps: GROUP BY auction, window_start) ----------
F2 = [Field("k", BIGINT), Field("ts", TIMESTAMP), Field("v", INT)]
AGGS2 = [
    AggCall("count_star", None, BIGINT),
    AggCall("sum", 2, BIGINT),
    AggCall("count", 2, BIGINT),
]
_T0 = datetime(2026, 1, 1)
row2_st = st.tuples(
    st.one_of(st.none(), st.integers(0, 3)),
    st.one_of(st.none(), st.integers(0, 2).map(lambda s: _T0 + timedelta(seconds=s))),
    st.one_of(st.none(), st.integers(-4, 4)),
)


def _two_key_op(alloc: Any) -> HashAggOp:
    return HashAggOp(F2, [0, 1], AGGS2, alloc, ["k", "ts", "a0", "a1", "a2"])


class _DiskAlloc2(_DiskAlloc):
    def table(self, name: str, *, disk: bool = False, dist: bool = True) -> StateTable:
        return self.tables.table(8, name, 2)  # type: ignore[return-value]


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.lists(row2_st, max_size=10), min_size=1, max_size=6),
    st.integers(0, 6),
    st.booleans(),
)
def test_two_key_columns_on_disk_equal_the_tuple_path(
    epochs: list[list[Row]], restart_at: int, collide: bool
) -> None:
    """Inserts and deletes of earlier rows, restart from the store; `collide` makes every
    key hash to one of two codes, so lookups go through the collision dict."""
    rng = np.random.default_rng(len(epochs))
    with tempfile.TemporaryDirectory() as d, StateStore.open(Path(d)) as store:
        mk = lambda: _two_key_op(_DiskAlloc2(DiskTables(store, HotCache(0))))  # noqa: E731
        op = mk()
        assert op._columnar is not None and op._columnar.groups.kinds == "it"
        if collide:
            real = op._columnar.groups._codes
            op._columnar.groups._codes = lambda k, n: (real(k, n)[0] & 1, real(k, n)[1])  # type: ignore[method-assign]
        ref = _two_key_op(LocalStateAllocator())
        ref._columnar = None  # the tuple path
        live: list[Row] = []
        got: Counter[Row] = Counter()
        want: Counter[Row] = Counter()
        for step, rows in enumerate(epochs):
            if step == restart_at:
                op = mk()
            dels = [live.pop(int(rng.integers(len(live)))) for _ in range(min(2, len(live)))]
            live += rows
            ops = [Op.DELETE] * len(dels) + [Op.INSERT] * len(rows)
            c = make_chunk(F2, ops, dels + rows) if ops else None
            integrate(got, op.step([c]))
            integrate(want, ref.step([c]))
            assert got == want, f"step {step}"
            checkpoint(store, op)


@pytest.mark.parametrize(("kinds", "dist"), [("i", 1), ("it", 2), ("i", 0), ("ti", 0)])
def test_store_keys_built_as_a_byte_matrix_equal_the_tables_own(kinds: str, dist: int) -> None:
    """The columnar cache encodes its rows' store keys itself (one numpy pass, cached per
    row); they must be the bytes the disk table's tuple interface reads and writes."""
    rng = np.random.default_rng(5)
    n = 300
    keys = rng.integers(-(10**6), 10**6, (n, len(kinds)))
    keys[:5, 0] = [2**60, -(2**60), 2**53 + 1, 0, -1]  # past 2**53: other lengths
    knull = rng.random((n, len(kinds))) < 0.05
    keys[knull] = 0
    with tempfile.TemporaryDirectory() as d, StateStore.open(Path(d)) as store:
        table = DiskTables(store, HotCache(0)).table(9, "groups", dist)
        g = ColumnarGroups(table, FixedLayout("qq"), kinds)
        got = g._full_keys(keys, knull).tolist()
        want = table.encoded_full_keys(g._encoded(keys, knull))
        assert got == want
    m = rng.integers(0, 256, (50, 11)).astype(np.uint8)
    assert crc32_rows(m).tolist() == [zlib.crc32(r.tobytes()) for r in m]


@pytest.mark.parametrize("max_runs", [8, 2])
def test_runs_survive_restarts_and_pass_to_the_row_range_past_their_share(max_runs: int) -> None:
    """Checkpoints of many changed groups write runs, not a key per group; a restart
    reads them back; once they hold more than half the cache's rows they are written a
    key per group and deleted. Results, `len` and the tuple interface stay exact."""
    aggs = [AggCall("count_star", None, BIGINT), AggCall("sum", 1, BIGINT)]
    rng = np.random.default_rng(7)
    want: dict[int, list[int]] = {}
    got: Counter[Row] = Counter()
    saved = agg_columns.MAX_RUNS
    agg_columns.MAX_RUNS = max_runs
    try:
        with tempfile.TemporaryDirectory() as d, StateStore.open(Path(d)) as store:
            op = disk_op(store, aggs, cache=1 << 20)
            t = op.state_tables()[0]
            limit = t.cache_rows(op._columnar.groups.layout.width + 96) // 2
            lo, hi = t.column_runs()
            for step in range(11):
                ks = rng.integers(0, 1000, 2000).tolist()
                if step >= 8:  # past the runs' share: the checkpoint writes rows
                    ks += list(range(1000, 1000 + limit))
                vs = rng.integers(-100, 100, len(ks)).tolist()
                rows = [(k, v, None, v) for k, v in zip(ks, vs, strict=True)]
                for k, v, _, _ in rows:
                    want.setdefault(k, []).append(v)
                integrate(got, op.step([make_chunk(F, [Op.INSERT] * len(rows), rows)]))
                checkpoint(store, op)
                runs = list(store.scan_range(lo, hi))
                row_range = store.last_key_in(lo[:4] + b"\x00", lo) is not None
                if step < 8:
                    assert runs and not row_range, step
                if step % 3 == 1:  # restart
                    op = disk_op(store, aggs, cache=1 << 20)
                    t = op.state_tables()[0]
                    assert len(t) == len(want)
            assert row_range
            assert got == Counter({(k, len(v), sum(v)): 1 for k, v in want.items()})
            # the tuple interface sees the same rows (the runs move to the row range)
            items = dict(t.items())
            assert {k for (k,) in items} == set(want)
            assert all(items[(k,)][:1] == (len(v),) for k, v in want.items())
            checkpoint(store, op)
            assert not list(store.scan_range(lo, hi))
            op = disk_op(store, aggs, cache=1 << 20)
            assert len(op.state_tables()[0]) == len(want)
    finally:
        agg_columns.MAX_RUNS = saved
