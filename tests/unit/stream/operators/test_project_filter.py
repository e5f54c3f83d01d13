"""ProjectOp, FilterOp and UnionOp: stateless operators driven with pretty chunks."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from unit.stream.operators.helpers import (
    ColRef,
    Ctx,
    Gt,
    Mul,
    assert_chunk,
    chunk,
    integrate,
    make_chunk,
)

from engine.chunk import Op
from engine.errors import DatatypeMismatch
from engine.stream.operators import FilterOp, ProjectOp, UnionOp
from engine.types import BIGINT, INT, VARCHAR, Field

F = [Field("k", INT), Field("v", INT), Field("s", VARCHAR)]


def test_project_keeps_ops_and_computes_columns() -> None:
    op = ProjectOp(F, [ColRef(2, VARCHAR), Mul(ColRef(1, INT), 2, BIGINT)], ["s", "v2"], Ctx(), [])
    assert [f.type for f in op.schema] == [VARCHAR, BIGINT]
    out = op.step([chunk("+ 1 2 a\nU- 1 2 a\nU+ 1 . b\n- 3 4 c", F)])
    assert out is not None
    assert out.to_pretty() == "+ a 4\nU- a 4\nU+ b .\n- c 8"
    assert op.step([None]) is None


def test_filter_null_is_false_and_broken_pairs_become_plain_ops() -> None:
    op = FilterOp(F, Gt(ColRef(1, INT), 2), Ctx(), [0])
    out = op.step(
        [chunk("+ 1 3 a\n+ 2 . b\nU- 3 1 c\nU+ 3 5 c\nU- 4 5 d\nU+ 4 0 d\nU- 5 7 e\nU+ 5 8 e", F)]
    )
    assert out is not None
    assert out.to_pretty() == "+ 1 3 a\n+ 3 5 c\n- 4 5 d\nU- 5 7 e\nU+ 5 8 e"


def test_filter_all_rows_dropped_gives_none() -> None:
    op = FilterOp(F, Gt(ColRef(1, INT), 100), Ctx(), [0])
    assert op.step([chunk("+ 1 3 a\n- 2 4 b", F)]) is None


def test_filter_rejects_non_boolean_predicate() -> None:
    with pytest.raises(DatatypeMismatch):
        FilterOp(F, ColRef(0, INT), Ctx(), [0])


def test_union_concatenates_inputs() -> None:
    op = UnionOp(F, 3, [0])
    out = op.step([chunk("+ 1 1 a", F), None, chunk("- 2 2 b\n+ 3 3 c", F)])
    assert_chunk(out, "+ 1 1 a\n- 2 2 b\n+ 3 3 c")
    assert op.step([None, None, None]) is None


rows = st.tuples(st.integers(0, 5), st.one_of(st.none(), st.integers(-3, 3)))


@st.composite
def update_streams(draw: st.DrawFn) -> list[list[tuple[Op, tuple[int, int | None]]]]:
    """Random epochs of consistent inserts/deletes/updates over (k, v) rows."""
    live: list[tuple[int, int | None]] = []
    epochs = []
    for _ in range(draw(st.integers(1, 6))):
        ev: list[tuple[Op, tuple[int, int | None]]] = []
        for _ in range(draw(st.integers(0, 8))):
            kind = draw(st.sampled_from(["ins", "del", "upd"]))
            if kind == "ins" or not live:
                r = draw(rows)
                live.append(r)
                ev.append((Op.INSERT, r))
            elif kind == "del":
                r = live.pop(draw(st.integers(0, len(live) - 1)))
                ev.append((Op.DELETE, r))
            else:
                i = draw(st.integers(0, len(live) - 1))
                new = (live[i][0], draw(rows)[1])
                ev += [(Op.UPDATE_DELETE, live[i]), (Op.UPDATE_INSERT, new)]
                live[i] = new
        epochs.append(ev)
    return epochs


F2 = [Field("k", INT), Field("v", INT)]


@settings(max_examples=60, deadline=None)
@given(update_streams())
def test_filter_project_property(epochs: list[list[tuple[Op, tuple[int, int | None]]]]) -> None:
    filt = FilterOp(F2, Gt(ColRef(1, INT), 0), Ctx(), [0])
    proj = ProjectOp(F2, [ColRef(0, INT), Mul(ColRef(1, INT), 3, BIGINT)], ["k", "v3"], Ctx(), [])
    inp: Counter[tuple[object, ...]] = Counter()
    got_f: Counter[tuple[object, ...]] = Counter()
    got_p: Counter[tuple[object, ...]] = Counter()
    for ev in epochs:
        c = make_chunk(F2, [o for o, _ in ev], [r for _, r in ev]) if ev else None
        integrate(inp, c)
        integrate(got_f, filt.step([c]))
        integrate(got_p, proj.step([c]))
        want_f = Counter({r: n for r, n in inp.items() if r[1] is not None and r[1] > 0})
        want_p: Counter[tuple[object, ...]] = Counter()
        for (k, v), n in inp.items():
            want_p[(k, None if v is None else v * 3)] += n
        assert got_f == want_f
        assert got_p == want_p
