"""Property: ColumnarMaterializeOp behaves exactly like MaterializeOp on arbitrary input.

Random epochs of arbitrary chunks (inserts of new and existing pks, duplicate pks, deletes
with stale values or of missing pks, update pairs, rows cancelling within a chunk) are
fed to both operators. The columnar one runs with tiny segment thresholds so that
splitting, rewrites of sparse segments and small-segment merges happen all the time, and
it is restarted from a real RocksDB `StateStore` after random epochs. After every chunk
the effective changes and the snapshots must agree; before every epoch `apply_preview`
of the epoch's chunks must equal the snapshot after stepping them.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from unit.stream.operators.helpers import make_chunk

from engine.chunk import Op, StreamChunk
from engine.state.store import StateStore
from engine.stream.operators import LocalStateAllocator, MaterializeOp
from engine.stream.operators import keyed_segments as cm
from engine.stream.operators.columnar_materialize import ColumnarMaterializeOp
from engine.types import INT, VARCHAR, Field

F = [Field("id", INT), Field("name", VARCHAR), Field("v", INT)]
Row = tuple[Any, ...]
Chunk = list[tuple[Op, Row]]


@contextmanager
def tiny_segments() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(cm, "SMALL_SEGMENT_ROWS", 4)
        mp.setattr(cm, "MAX_SMALL_SEGMENTS", 3)
        mp.setattr(cm, "MAX_SEGMENT_ROWS", 6)
        yield


rows_st = st.tuples(
    st.integers(0, 15),
    st.sampled_from(["a", "b", None]),
    st.one_of(st.none(), st.integers(0, 3)),
)


@st.composite
def chunk_st(draw: st.DrawFn) -> Chunk:
    out: Chunk = []
    for _ in range(draw(st.integers(0, 12))):
        kind = draw(st.sampled_from(["ins", "ins", "del", "upd", "fresh"]))
        row = draw(rows_st)
        if kind == "ins":
            out.append((Op.INSERT, row))
        elif kind == "del":
            out.append((Op.DELETE, row))
        elif kind == "upd":
            new = (row[0], *draw(rows_st)[1:])
            out += [(Op.UPDATE_DELETE, row), (Op.UPDATE_INSERT, new)]
        else:  # a block of keys that are usually not stored yet (the fast path)
            base = draw(st.integers(100, 140))
            out += [(Op.INSERT, (k, "f", 0)) for k in range(base, base + draw(st.integers(1, 9)))]
    return out


epochs_st = st.lists(
    st.tuples(st.lists(chunk_st(), min_size=1, max_size=3), st.booleans()), min_size=1, max_size=8
)


def to_chunk(c: Chunk) -> StreamChunk:
    return make_chunk(F, [o for o, _ in c], [r for _, r in c])


def units(c: StreamChunk | None) -> list[str]:
    if c is None:
        return []
    rows = c.to_rows()
    out, i = [], 0
    while i < len(rows):
        op, row = rows[i]
        if op is Op.UPDATE_DELETE:
            assert rows[i + 1][0] is Op.UPDATE_INSERT, "unpaired U-"
            assert rows[i + 1][1][0] == row[0], "pair of different pks"
            out.append(f"{row!r} -> {rows[i + 1][1]!r}")
            i += 2
        else:
            assert op in (Op.INSERT, Op.DELETE), "unpaired U+"
            out.append(f"{op.name} {row!r}")
            i += 1
    return sorted(out)


def rows_of(t: Any) -> list[Row]:
    return sorted(zip(*[c.to_pylist() for c in t.columns], strict=True), key=repr)


def restart(op: ColumnarMaterializeOp, store: StateStore, pk: list[int]) -> ColumnarMaterializeOp:
    batch = store.new_batch()
    for t in op.state_tables():
        t.write_dirty(batch)
    store.write(batch)
    alloc = LocalStateAllocator()
    alloc.table("segments").load(store)
    return ColumnarMaterializeOp(F, pk, alloc)


@settings(max_examples=150, deadline=None)
@given(epochs=epochs_st, pk=st.sampled_from([[0], [1, 0]]))
def test_columnar_matches_row_operator(
    epochs: list[tuple[list[Chunk], bool]], pk: list[int]
) -> None:
    with tiny_segments(), tempfile.TemporaryDirectory() as d:
        store = StateStore.open(Path(d) / "db")
        try:
            row_op = MaterializeOp(F, pk, LocalStateAllocator())
            col_op = ColumnarMaterializeOp(F, pk, LocalStateAllocator())
            for chunks, do_restart in epochs:
                sc = [to_chunk(c) for c in chunks if c]
                before = rows_of(col_op.snapshot())
                preview = rows_of(col_op.apply_preview(sc))
                assert rows_of(col_op.snapshot()) == before
                for c in sc:
                    assert units(col_op.step([c])) == units(row_op.step([c]))
                    assert rows_of(col_op.snapshot()) == rows_of(row_op.snapshot())
                    assert len(col_op) == len(row_op)
                assert preview == rows_of(col_op.snapshot())
                if do_restart:
                    col_op = restart(col_op, store, pk)
                    assert rows_of(col_op.snapshot()) == rows_of(row_op.snapshot())
            for row in rows_of(row_op.snapshot()):
                key = tuple(row[i] for i in pk)
                assert col_op.get(key) == row_op.get(key) == row
        finally:
            store.close()
