"""MaterializeOp: effective change per pk, overwrite on conflict, snapshot, restart, property."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from unit.stream.operators.helpers import DictStore, assert_chunk, chunk, integrate, make_chunk

from engine.chunk import Op
from engine.errors import InternalError
from engine.stream.operators import LocalStateAllocator, MaterializeOp
from engine.types import INT, VARCHAR, Field

F = [Field("id", INT), Field("name", VARCHAR), Field("v", INT)]


def mat(alloc: LocalStateAllocator | None = None, strict: bool = False) -> MaterializeOp:
    return MaterializeOp(F, [0], alloc or LocalStateAllocator(), strict=strict)


def snapshot_rows(op: MaterializeOp) -> list[tuple[Any, ...]]:
    t = op.snapshot()
    assert t.schema.names == ["id", "name", "v"]
    return sorted(zip(*[c.to_pylist() for c in t.columns], strict=True), key=repr)


def test_consistent_delta_passes_through() -> None:
    op = mat()
    assert op.stream_key == [0]
    assert op.explain() == "StreamMaterialize { columns: [id, name, v], pk_columns: [id] }"
    assert_chunk(op.step([chunk("+ 1 a 10\n+ 2 b 20\n+ 3 c .", F)]), "+ 1 a 10\n+ 2 b 20\n+ 3 c .")
    assert_chunk(
        op.step([chunk("U- 1 a 10\nU+ 1 a 11\n- 2 b 20", F)]), "U- 1 a 10\nU+ 1 a 11\n- 2 b 20"
    )
    assert snapshot_rows(op) == [(1, "a", 11), (3, "c", None)]


def test_insert_on_existing_pk_overwrites() -> None:
    op = mat()
    op.step([chunk("+ 1 a 10", F)])
    assert_chunk(op.step([chunk("+ 1 b 20", F)]), "U- 1 a 10\nU+ 1 b 20")
    # several inserts of one pk in an epoch: the last one wins
    assert_chunk(
        op.step([chunk("+ 2 x 1\n+ 2 y 2\n+ 1 c 30\n+ 1 d 40", F)]), "+ 2 y 2\nU- 1 b 20\nU+ 1 d 40"
    )
    # re-inserting the stored row changes nothing
    assert op.step([chunk("+ 2 y 2", F)]) is None
    assert snapshot_rows(op) == [(1, "d", 40), (2, "y", 2)]


def test_order_within_epoch_does_not_matter_for_consistent_input() -> None:
    op = mat()
    op.step([chunk("+ 1 a 10", F)])
    # insert of the new row listed before the delete of the old one
    assert_chunk(op.step([chunk("+ 1 b 11\n- 1 a 10", F)]), "U- 1 a 10\nU+ 1 b 11")
    # a row inserted and deleted in one epoch never shows
    assert op.step([chunk("+ 5 e 1\n- 5 e 1", F)]) is None


def test_delete_of_missing_pk() -> None:
    op = mat()
    op.step([chunk("+ 1 a 10", F)])
    assert op.step([chunk("- 7 z 1", F)]) is None
    # a delete carrying stale values still removes the stored row of its pk
    assert_chunk(op.step([chunk("- 1 old 0", F)]), "- 1 a 10")
    strict = mat(strict=True)
    with pytest.raises(InternalError, match="does not exist"):
        strict.step([chunk("- 7 z 1", F)])


def test_snapshot_empty_and_restart() -> None:
    op = mat()
    assert op.snapshot().num_rows == 0
    op.step([chunk("+ 1 a 10\n+ 2 b .", F)])
    store = DictStore()
    store.checkpoint(op.state_tables())
    op2 = mat(LocalStateAllocator())
    for t in op2.state_tables():
        t.load(store)
    assert snapshot_rows(op2) == [(1, "a", 10), (2, "b", None)]
    assert_chunk(op2.step([chunk("- 2 b .", F)]), "- 2 b .")


def test_composite_pk() -> None:
    op = MaterializeOp(F, [1, 0], LocalStateAllocator())
    op.step([chunk("+ 1 a 1\n+ 1 b 2", F)])
    assert_chunk(op.step([chunk("+ 1 a 3", F)]), "U- 1 a 1\nU+ 1 a 3")
    assert op.get(("b", 1)) == (1, "b", 2)


Row = tuple[Any, ...]


@st.composite
def epochs_st(draw: st.DrawFn) -> list[list[tuple[Op, Row]]]:
    live: dict[int, Row] = {}
    epochs = []
    for _ in range(draw(st.integers(1, 8))):
        ev: list[tuple[Op, Row]] = []
        for _ in range(draw(st.integers(0, 10))):
            kind = draw(st.sampled_from(["ins", "del", "upd"]))
            new = (
                draw(st.sampled_from(["a", "b", None])),
                draw(st.one_of(st.none(), st.integers(0, 3))),
            )
            if kind == "ins" or not live:
                pk = draw(st.integers(0, 12))
                if pk in live:
                    continue
                live[pk] = (pk, *new)
                ev.append((Op.INSERT, live[pk]))
            elif kind == "del":
                pk = draw(st.sampled_from(sorted(live)))
                ev.append((Op.DELETE, live.pop(pk)))
            else:
                pk = draw(st.sampled_from(sorted(live)))
                ev += [(Op.UPDATE_DELETE, live[pk]), (Op.UPDATE_INSERT, (pk, *new))]
                live[pk] = (pk, *new)
        if draw(st.booleans()):
            # Z-set: order within an epoch must not matter (pairs become plain D/I)
            plain = {Op.UPDATE_DELETE: Op.DELETE, Op.UPDATE_INSERT: Op.INSERT}
            ev = [(plain.get(o, o), r) for o, r in reversed(ev)]
        epochs.append(ev)
    return epochs


@settings(max_examples=80, deadline=None)
@given(epochs_st())
def test_materialize_matches_input(epochs: list[list[tuple[Op, Row]]]) -> None:
    op = mat(strict=True)
    inp: Counter[Row] = Counter()
    got: Counter[Row] = Counter()
    for ev in epochs:
        c = make_chunk(F, [o for o, _ in ev], [r for _, r in ev]) if ev else None
        for o, r in ev:
            inp[r] += o.sign
        inp = +inp
        integrate(got, op.step([c]))
        assert got == inp
        assert Counter(snapshot_rows(op)) == inp
