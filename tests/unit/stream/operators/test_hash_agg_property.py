"""Property: HashAggOp's integrated output always equals the query recomputed with polars.

Hypothesis generates consistent insert/delete/update streams over (k, v, f) rows and
splits them into epochs; after every step the multiset obtained by applying all output
deltas must equal GROUP BY recomputed from scratch over the integrated input.
"""

from __future__ import annotations

import decimal
import functools
import operator
from collections import Counter
from decimal import Decimal
from typing import Any

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from unit.stream.operators.helpers import DictStore, integrate, make_chunk

from engine.chunk import Op
from engine.stream.operators import AggCall, HashAggOp, LocalStateAllocator
from engine.types import BIGINT, BOOLEAN, INT, NUMERIC, Field

F = [Field("k", INT), Field("v", INT), Field("f", BOOLEAN)]
AGGS = [
    AggCall("count_star", None, BIGINT),
    AggCall("count", 1, BIGINT),
    AggCall("sum", 1, BIGINT),
    AggCall("min", 1, INT),
    AggCall("max", 1, INT),
    AggCall("avg", 1, NUMERIC),
    AggCall("count_star", None, BIGINT, filter=2),
    AggCall("max", 1, INT, filter=2),
    AggCall("count", 1, BIGINT, distinct=True),
    AggCall("sum", 1, BIGINT, distinct=True),
    AggCall("var_pop", 1, NUMERIC),
    AggCall("stddev_samp", 1, NUMERIC),
    AggCall("bit_and", 1, INT),
    AggCall("bit_or", 1, INT),
    AggCall("bit_xor", 1, INT),
]

Row = tuple[Any, ...]
row_st = st.tuples(
    st.one_of(st.none(), st.integers(0, 3)),
    st.one_of(st.none(), st.integers(-4, 4)),
    st.one_of(st.none(), st.booleans()),
)


@st.composite
def epochs_st(draw: st.DrawFn) -> list[list[tuple[Op, Row]]]:
    live: list[Row] = []
    epochs = []
    for _ in range(draw(st.integers(1, 8))):
        ev: list[tuple[Op, Row]] = []
        for _ in range(draw(st.integers(0, 10))):
            kind = draw(st.sampled_from(["ins", "ins", "del", "upd"]))
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
    q = Decimal(s) / Decimal(n)
    return q.quantize(Decimal("1e-10"), rounding=decimal.ROUND_HALF_UP)


_CTX = decimal.Context(prec=80)


def _var(vals: list[int], pop: bool, root: bool) -> Decimal | None:
    """var_pop / stddev_samp as PostgreSQL defines them, at numeric's 10 decimals."""
    n = len(vals)
    if n == 0 or (n == 1 and not pop):
        return None
    num = n * sum(x * x for x in vals) - sum(vals) ** 2
    q = _CTX.divide(Decimal(num), Decimal(n * n if pop else n * (n - 1)))
    q = _CTX.sqrt(q) if root else q
    return q.quantize(Decimal("1e-10"), rounding=decimal.ROUND_HALF_UP, context=_CTX)


def _bits(vals: list[int], op: Any) -> int | None:
    return functools.reduce(op, vals) if vals else None


def expected(inp: Counter[Row], grouped: bool) -> Counter[Row]:
    rows = [r for r, n in inp.items() for _ in range(n)]
    df = pl.DataFrame(rows, schema={"k": pl.Int64, "v": pl.Int64, "f": pl.Boolean}, orient="row")
    v = pl.col("v")
    fv = pl.col("f").fill_null(False)
    aggs = [
        pl.len().alias("cs"),
        v.count().alias("c"),
        v.sum().alias("s"),
        v.min().alias("mn"),
        v.max().alias("mx"),
        fv.sum().alias("cf"),
        v.filter(fv).max().alias("mxf"),
        v.drop_nulls().n_unique().alias("cd"),
        v.drop_nulls().unique().sum().alias("sd"),
        v.drop_nulls().implode().alias("vals"),
    ]
    res = df.group_by("k").agg(aggs) if grouped else df.select(aggs)
    out: Counter[Row] = Counter()
    for r in res.iter_rows(named=True):
        c = r["c"]
        s = r["s"] if c else None
        cd = r["cd"]
        vals = (
            r["cs"],
            c,
            s,
            r["mn"],
            r["mx"],
            _avg(s, c),
            r["cf"],
            r["mxf"],
            cd,
            r["sd"] if cd else None,
        )
        xs = list(r["vals"] or [])
        vals += (
            _var(xs, True, False),
            _var(xs, False, True),
            _bits(xs, operator.and_),
            _bits(xs, operator.or_),
            _bits(xs, operator.xor),
        )
        out[((r["k"],) if grouped else ()) + vals] += 1
    return out


def run(epochs: list[list[tuple[Op, Row]]], grouped: bool, restart_at: int) -> None:
    keys = [0] if grouped else []
    names = (["k"] if grouped else []) + [f"a{i}" for i in range(len(AGGS))]
    alloc = LocalStateAllocator()
    op = HashAggOp(F, keys, AGGS, alloc, names)
    store = DictStore()
    inp: Counter[Row] = Counter()
    got: Counter[Row] = Counter()
    for step, ev in enumerate(epochs):
        if step == restart_at:
            store.checkpoint(op.state_tables())
            op = HashAggOp(F, keys, AGGS, LocalStateAllocator(), names)
            for t in op.state_tables():
                t.load(store)
        c = make_chunk(F, [o for o, _ in ev], [r for _, r in ev]) if ev else None
        integrate(inp, c)
        integrate(got, op.step([c]))
        want = expected(inp, grouped)
        assert got == want, f"step {step}"


@settings(max_examples=80, deadline=None)
@given(epochs_st(), st.integers(0, 8))
def test_hash_agg_matches_recompute(epochs: list[list[tuple[Op, Row]]], restart_at: int) -> None:
    run(epochs, grouped=True, restart_at=restart_at)


@settings(max_examples=40, deadline=None)
@given(epochs_st(), st.integers(0, 8))
def test_simple_agg_matches_recompute(epochs: list[list[tuple[Op, Row]]], restart_at: int) -> None:
    run(epochs, grouped=False, restart_at=restart_at)
