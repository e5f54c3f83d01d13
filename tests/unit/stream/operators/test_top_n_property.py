"""Property: TopNOp's integrated output always equals the top-N recomputed by DuckDB.

Hypothesis draws insert/delete/update streams of `(id, g, v, s)` rows over tiny domains
(many ties and NULLs), with and without a stream key (duplicate rows), overall
(`ORDER BY ... LIMIT n OFFSET m`) and per group (`row_number() OVER (PARTITION BY g ...)
<= n`, with and without the rank column). DuckDB computes the same row_number with the
stream key as the final tie-breaker (ascending, NULLS LAST), as the operator documents.
State is checkpointed to a real RocksDB store every epoch and reloaded at a drawn epoch.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st
from unit.stream.operators.join_topn_helpers import (
    Events,
    Row,
    apply_events,
    arrow_table,
    changes_st,
    checkpoint,
    events_chunk,
    integrate_marked,
    nan_marked,
    restart,
    small,
)

from engine.state.store import StateStore
from engine.stream.operators import LocalStateAllocator
from engine.stream.operators.top_n import OrderSpec, TopNOp
from engine.types import DOUBLE, INT, VARCHAR, Field

F = [Field("id", INT), Field("g", INT), Field("v", DOUBLE), Field("s", VARCHAR)]
payload = st.tuples(
    small(0, 1),
    st.one_of(st.none(), st.sampled_from([0.0, 1.5, -2.0, float("nan")])),
    st.one_of(st.none(), st.sampled_from(["", "a", "ab", "b"])),
)
EPOCHS = 6
order_st = st.lists(
    st.tuples(st.sampled_from([2, 3]), st.booleans(), st.booleans()),
    min_size=1,
    max_size=2,
    unique_by=lambda o: o[0],
)


def reference(
    inp: Counter[Row],
    order: list[OrderSpec],
    limit: int,
    offset: int,
    grouped: bool,
    keyed: bool,
    rank: bool,
) -> Counter[Row]:
    con = duckdb.connect()
    con.register("t", arrow_table(F, inp))
    names = [f.name for f in F]
    keys = ["id"] if keyed else names
    parts = [
        f"{names[c]} {'DESC' if d else 'ASC'} NULLS {'FIRST' if nf else 'LAST'}"
        for c, d, nf in order
    ]
    parts += [f"{k} ASC NULLS LAST" for k in keys]
    part = "PARTITION BY g " if grouped else ""
    sql = f"SELECT *, row_number() OVER ({part}ORDER BY {', '.join(parts)}) AS rn FROM t"
    hi = offset + limit
    rows = con.execute(f"SELECT * FROM ({sql}) WHERE rn > {offset} AND rn <= {hi}").fetchall()
    con.close()
    return Counter(tuple(r) if rank else tuple(r[:-1]) for r in rows)


def norm(c: Counter[Row]) -> Counter[Row]:
    out: Counter[Row] = Counter()
    for r, n in c.items():
        out[nan_marked(r)] += n
    return out


@st.composite
def case_st(
    draw: st.DrawFn,
) -> tuple[list[OrderSpec], int, int, bool, bool, bool, list[Events], int]:
    grouped = draw(st.booleans())
    keyed = draw(st.booleans())
    rank = grouped and draw(st.booleans())
    offset = 0 if grouped else draw(st.integers(0, 2))
    limit = draw(st.integers(1, 3))
    ev = draw(changes_st(EPOCHS, payload, keyed, max_events=10))
    return (draw(order_st), limit, offset, grouped, keyed, rank, ev, draw(st.integers(0, EPOCHS)))


@settings(max_examples=120, deadline=None)
@given(case_st())
def test_top_n_matches_duckdb(
    case: tuple[list[OrderSpec], int, int, bool, bool, bool, list[Events], int],
) -> None:
    order, limit, offset, grouped, keyed, rank, epochs, restart_at = case

    def make() -> TopNOp:
        return TopNOp(
            F,
            order,
            limit,
            offset,
            [1] if grouped else [],
            LocalStateAllocator(),
            [0] if keyed else [],
            with_rank_column=rank,
        )

    with tempfile.TemporaryDirectory() as tmp:
        store = StateStore.open(Path(tmp) / "state")
        try:
            op = make()
            inp: Counter[Row] = Counter()
            got: Counter[Row] = Counter()
            for step, ev in enumerate(epochs):
                if step == restart_at:
                    op = restart(store, make)
                apply_events(inp, ev)
                integrate_marked(got, op.step([events_chunk(F, ev)]))
                checkpoint(store, op)
                want = reference(inp, order, limit, offset, grouped, keyed, rank)
                assert got == norm(want), f"step {step}"
        finally:
            store.close()
