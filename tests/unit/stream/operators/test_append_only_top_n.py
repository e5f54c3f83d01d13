"""AppendOnlyTopNOp: its integrated output always equals the top-N recomputed by DuckDB.

Hypothesis draws insert-only streams of `(id, g, v, s)` rows over tiny domains (many ties
and NULLs), with and without a stream key (duplicate rows), overall (`ORDER BY ... LIMIT
n OFFSET m`) and per group (with and without the rank column), over the resident table
and over a RocksDB-first table (`DiskAllocator`, distributed by the group key). State is
checkpointed every epoch and the operator is rebuilt from the store at a drawn epoch. A
readable case pins the changelog (rank updates as `U-`/`U+`), and a delete is refused.
"""

from __future__ import annotations

import tempfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from unit.stream.operators.join_topn_helpers import (
    DiskAllocator,
    Events,
    Row,
    apply_events,
    checkpoint,
    events_chunk,
    integrate_marked,
    restart,
    small,
)
from unit.stream.operators.test_top_n_property import F, norm, order_st, payload, reference

from engine.chunk import Op
from engine.errors import InternalError
from engine.state.store import StateStore
from engine.stream.operators import LocalStateAllocator
from engine.stream.operators.append_only_top_n import AppendOnlyTopNOp
from engine.stream.operators.base import StateAllocator
from engine.stream.operators.top_n import OrderSpec
from engine.types import BIGINT, INT, Field

EPOCHS = 6


@st.composite
def inserts_st(draw: st.DrawFn, keyed: bool) -> list[Events]:
    out: list[Events] = []
    next_id = 0
    for _ in range(EPOCHS):
        ev: Events = []
        for _ in range(draw(st.integers(0, 10))):
            if keyed:
                rid, next_id = next_id, next_id + 1
            else:
                rid = draw(small(0, 1))
            ev.append((Op.INSERT, (rid, *draw(payload))))
        out.append(ev)
    return out


@st.composite
def case_st(
    draw: st.DrawFn,
) -> tuple[list[OrderSpec], int, int, bool, bool, bool, list[Events], int, bool]:
    grouped = draw(st.booleans())
    keyed = draw(st.booleans())
    rank = grouped and draw(st.booleans())
    offset = 0 if grouped else draw(st.integers(0, 2))
    limit = draw(st.integers(1, 3))
    ev = draw(inserts_st(keyed))
    restart_at = draw(st.integers(0, EPOCHS))
    return (
        draw(order_st),
        limit,
        offset,
        grouped,
        keyed,
        rank,
        ev,
        restart_at,
        draw(st.booleans()),
    )


@settings(max_examples=40, deadline=None)
@given(case_st())
def test_append_only_top_n_matches_duckdb(
    case: tuple[list[OrderSpec], int, int, bool, bool, bool, list[Events], int, bool],
) -> None:
    order, limit, offset, grouped, keyed, rank, epochs, restart_at, disk = case
    with tempfile.TemporaryDirectory() as tmp:
        store = StateStore.open(Path(tmp) / "state")

        def make() -> AppendOnlyTopNOp:
            alloc: StateAllocator = (
                DiskAllocator(store, {"top": 1}) if disk else LocalStateAllocator()
            )
            return AppendOnlyTopNOp(
                F,
                order,
                limit,
                offset,
                [1] if grouped else [],
                alloc,
                [0] if keyed else [],
                with_rank_column=rank,
            )

        try:
            op = make()
            inp: Counter[Row] = Counter()
            got: Counter[Row] = Counter()
            for step, ev in enumerate(epochs):
                if step == restart_at:
                    op = restart(store, make)  # type: ignore[assignment]
                apply_events(inp, ev)
                integrate_marked(got, op.step([events_chunk(F, ev)]))
                checkpoint(store, op)
                want = reference(inp, order, limit, offset, grouped, keyed, rank)
                assert got == norm(want), f"step {step}"
        finally:
            store.close()


G = [Field("id", INT), Field("g", INT), Field("v", BIGINT)]


def _op(rank: bool = True) -> AppendOnlyTopNOp:
    return AppendOnlyTopNOp(
        G, [(2, True, False)], 2, 0, [1], LocalStateAllocator(), [0], with_rank_column=rank
    )


def _rows(out: object) -> list[tuple[str, tuple[object, ...]]]:
    assert out is not None
    ops = out.ops.to_pylist()  # type: ignore[attr-defined]
    rows = [tuple(r.values()) for r in out.data.to_pylist()]  # type: ignore[attr-defined]
    names = {Op.INSERT: "+", Op.DELETE: "-", Op.UPDATE_DELETE: "U-", Op.UPDATE_INSERT: "U+"}
    return [(names[Op(o)], r) for o, r in zip(ops, rows, strict=True)]


def test_a_better_row_shifts_ranks_and_pushes_out_the_last() -> None:
    op = _op()
    first = op.step([events_chunk(G, [(Op.INSERT, (1, 0, 10)), (Op.INSERT, (2, 0, 5))])])
    assert _rows(first) == [("+", (1, 0, 10, 1)), ("+", (2, 0, 5, 2))]
    out = op.step([events_chunk(G, [(Op.INSERT, (3, 0, 20)), (Op.INSERT, (4, 1, 1))])])
    assert _rows(out) == [
        ("-", (2, 0, 5, 2)),
        ("U-", (1, 0, 10, 1)),
        ("U+", (1, 0, 10, 2)),
        ("+", (3, 0, 20, 1)),
        ("+", (4, 1, 1, 1)),
    ]
    # a row below the group's window changes nothing (and is not kept)
    assert op.step([events_chunk(G, [(Op.INSERT, (5, 0, 0))])]) is None
    assert len(op.state_tables()[0]) == 2


def test_a_delete_is_refused() -> None:
    op = _op()
    op.step([events_chunk(G, [(Op.INSERT, (1, 0, 10))])])
    with pytest.raises(InternalError, match="append-only"):
        op.step([events_chunk(G, [(Op.DELETE, (1, 0, 10))])])


def test_fixed_width_records_round_trip_nulls_and_temporal_types() -> None:
    import datetime as dt

    import pyarrow as pa

    from engine.stream.operators.append_only_top_n import FixedRecords

    schema = pa.schema(
        [
            ("i", pa.int32()),
            ("f", pa.float64()),
            ("b", pa.bool_()),
            ("d", pa.date32()),
            ("ts", pa.timestamp("us", "UTC")),
        ]
    )
    rows = pa.RecordBatch.from_pylist(
        [
            {"i": 1, "f": float("nan"), "b": True, "d": dt.date(2024, 1, 2), "ts": None},
            {"i": None, "f": -0.5, "b": None, "d": None, "ts": dt.datetime(2024, 1, 1, 3)},
            {"i": 3, "f": None, "b": False, "d": dt.date(1, 1, 1), "ts": None},
        ],
        schema=schema,
    )
    assert FixedRecords.fits(schema)
    rec = FixedRecords(schema)
    import numpy as np

    blobs = rec.encode(rows, np.array([0, 2]))
    back, sizes = rec.decode(blobs)
    assert sizes.tolist() == [2, 1]
    assert str(back.to_pylist()) == str(rows.to_pylist())
    assert not FixedRecords.fits(pa.schema([("s", pa.string())]))
