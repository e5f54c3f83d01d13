"""HashJoinOp driven with pretty chunks: every join kind with inserts, updates and deletes on
both sides, NULL keys, duplicate keys and rows, self-join data, residual conditions, and
state round-trips through a real RocksDB store."""

from __future__ import annotations

from pathlib import Path

import pytest
from unit.stream.operators.helpers import assert_chunk, chunk
from unit.stream.operators.join_topn_helpers import checkpoint, restart

from engine.errors import InternalError
from engine.expr import InputRef
from engine.expr.ops import bind_compare
from engine.state.store import StateStore
from engine.stream.operators import LocalStateAllocator
from engine.stream.operators.hash_join import HashJoinOp
from engine.types import INT, VARCHAR, Field

L = [Field("id", INT), Field("k", INT), Field("v", VARCHAR)]
R = [Field("rid", INT), Field("rk", INT), Field("w", VARCHAR)]


def join(
    kind: str,
    condition: object = None,
    lkey: list[int] | None = None,
    rkey: list[int] | None = None,
    alloc: LocalStateAllocator | None = None,
) -> HashJoinOp:
    return HashJoinOp(
        L,
        R,
        kind,
        [1],
        [1],
        condition,
        None,
        alloc or LocalStateAllocator(),
        [0] if lkey is None else lkey,
        [0] if rkey is None else rkey,
    )


def l_(text: str) -> object:
    return chunk(text, L)


def r_(text: str) -> object:
    return chunk(text, R)


def test_schema_stream_key_explain_and_tables() -> None:
    op = join("left", bind_compare(">", InputRef(0, INT), InputRef(3, INT)))
    assert [f.name for f in op.schema] == ["id", "k", "v", "rid", "rk", "w"]
    assert op.stream_key == [0, 3]
    assert op.explain() == (
        "StreamHashJoin { type: left, predicate: [$1 = $4], condition: ($0 > $3) }"
    )
    assert [t.name for t in op.state_tables()] == ["left", "right"]
    semi = join("semi")
    assert [f.name for f in semi.schema] == ["id", "k", "v"]
    assert semi.stream_key == [0]
    assert [t.name for t in semi.state_tables()] == ["left", "right"]
    nokey = join("inner", lkey=[], rkey=[])
    assert nokey.stream_key == [0, 1, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="unknown join kind"):
        join("cross")


def test_inner_updates_and_deletes_on_both_sides() -> None:
    op = join("inner")
    assert_chunk(op.step([l_("+ 1 10 a\n+ 2 20 b"), None]), None)
    assert_chunk(
        op.step([None, r_("+ 100 10 x\n+ 101 10 y")]),
        """
        + 1 10 a 100 10 x
        + 1 10 a 101 10 y
    """,
    )
    # left update moves row 1 to key 20 (no right match there)
    assert_chunk(
        op.step([l_("U- 1 10 a\nU+ 1 20 a"), None]),
        """
        - 1 10 a 100 10 x
        - 1 10 a 101 10 y
    """,
    )
    # right update moves 100 to key 20: matches both left rows
    assert_chunk(
        op.step([None, r_("U- 100 10 x\nU+ 100 20 x2")]),
        """
        + 1 20 a 100 20 x2
        + 2 20 b 100 20 x2
    """,
    )
    # both sides change in one epoch: left 2 deleted, right 100 deleted, new pair
    assert_chunk(
        op.step([l_("- 2 20 b\n+ 3 10 c"), r_("- 100 20 x2")]),
        """
        - 1 20 a 100 20 x2
        - 2 20 b 100 20 x2
        + 3 10 c 101 10 y
    """,
    )


def test_same_epoch_insert_on_both_sides_counts_each_pair_once() -> None:
    op = join("inner")
    assert_chunk(op.step([l_("+ 1 10 a"), r_("+ 100 10 x")]), "+ 1 10 a 100 10 x")
    # a pair whose rows are both deleted in the same epoch is retracted once
    assert_chunk(op.step([l_("- 1 10 a"), r_("- 100 10 x")]), "- 1 10 a 100 10 x")
    assert op.side_rows(0) == 0 and op.side_rows(1) == 0


def test_update_of_non_key_column_keeps_matches() -> None:
    op = join("inner")
    op.step([l_("+ 1 10 a"), r_("+ 100 10 x")])
    assert_chunk(
        op.step([l_("U- 1 10 a\nU+ 1 10 b"), None]),
        """
        - 1 10 a 100 10 x
        + 1 10 b 100 10 x
    """,
    )


def test_left_join_padding_comes_and_goes() -> None:
    op = join("left")
    assert_chunk(
        op.step([l_("+ 1 10 a\n+ 2 . b"), None]),
        """
        + 1 10 a . . .
        + 2 . b . . .
    """,
    )
    assert_chunk(
        op.step([None, r_("+ 100 10 x")]),
        """
        - 1 10 a . . .
        + 1 10 a 100 10 x
    """,
    )
    # a second match: no padding change
    assert_chunk(op.step([None, r_("+ 101 10 y")]), "+ 1 10 a 101 10 y")
    assert_chunk(op.step([None, r_("- 100 10 x")]), "- 1 10 a 100 10 x")
    # last match gone: padded row returns
    assert_chunk(
        op.step([None, r_("- 101 10 y")]),
        """
        - 1 10 a 101 10 y
        + 1 10 a . . .
    """,
    )
    # NULL-key rows are always padded and leave as padded
    assert_chunk(op.step([l_("- 2 . b"), r_("+ 102 . z")]), "- 2 . b . . .")


def test_left_join_new_row_and_new_match_same_epoch() -> None:
    op = join("left")
    # the padded row of 1 is emitted by the first probe and retracted by the second
    assert_chunk(op.step([l_("+ 1 10 a"), r_("+ 100 10 x")]), "+ 1 10 a 100 10 x")
    assert_chunk(op.step([l_("- 1 10 a"), r_("- 100 10 x")]), "- 1 10 a 100 10 x")


def test_right_join() -> None:
    op = join("right")
    assert_chunk(
        op.step([None, r_("+ 100 10 x\n+ 101 . y")]),
        """
        + . . . 100 10 x
        + . . . 101 . y
    """,
    )
    assert_chunk(
        op.step([l_("+ 1 10 a\n+ 2 10 b"), None]),
        """
        - . . . 100 10 x
        + 1 10 a 100 10 x
        + 2 10 b 100 10 x
    """,
    )
    assert_chunk(
        op.step([l_("- 1 10 a\n- 2 10 b"), None]),
        """
        - 1 10 a 100 10 x
        - 2 10 b 100 10 x
        + . . . 100 10 x
    """,
    )


def test_full_join_both_sides_padded() -> None:
    op = join("full")
    assert_chunk(
        op.step([l_("+ 1 10 a\n+ 2 . b"), r_("+ 100 20 x\n+ 101 . y")]),
        """
        + 1 10 a . . .
        + 2 . b . . .
        + . . . 100 20 x
        + . . . 101 . y
    """,
    )
    assert_chunk(
        op.step([l_("U- 1 10 a\nU+ 1 20 a"), None]),
        """
        - 1 10 a . . .
        - . . . 100 20 x
        + 1 20 a 100 20 x
    """,
    )
    assert_chunk(
        op.step([None, r_("- 100 20 x")]),
        """
        - 1 20 a 100 20 x
        + 1 20 a . . .
    """,
    )


def test_duplicate_keys_and_duplicate_rows_without_stream_key() -> None:
    op = join("left", lkey=[], rkey=[])
    assert_chunk(
        op.step([l_("+ 1 10 a\n+ 1 10 a"), None]),
        """
        + 1 10 a . . .
        + 1 10 a . . .
    """,
    )
    assert_chunk(
        op.step([None, r_("+ 100 10 x\n+ 100 10 x\n+ 101 10 y")]),
        """
        - 1 10 a . . .
        - 1 10 a . . .
        + 1 10 a 100 10 x
        + 1 10 a 100 10 x
        + 1 10 a 100 10 x
        + 1 10 a 100 10 x
        + 1 10 a 101 10 y
        + 1 10 a 101 10 y
    """,
    )
    # one copy of the left row leaves: its matches and only its matches are retracted
    assert_chunk(
        op.step([l_("- 1 10 a"), None]),
        """
        - 1 10 a 100 10 x
        - 1 10 a 100 10 x
        - 1 10 a 101 10 y
    """,
    )
    assert op.side_rows(0) == 1 and op.stored_rows(0, l_("+ 1 10 a").data).tolist() == [True]


def test_self_join_data() -> None:
    # the same stream fed to both inputs (employees joined to their managers)
    emp = "+ 1 . boss\n+ 2 1 ann\n+ 3 1 bob"
    mgr = "+ 1 . boss\n+ 2 1 ann\n+ 3 1 bob"
    op = HashJoinOp(L, R, "inner", [1], [0], None, None, LocalStateAllocator(), [0], [0])
    assert_chunk(
        op.step([l_(emp), r_(mgr)]),
        """
        + 2 1 ann 1 . boss
        + 3 1 bob 1 . boss
    """,
    )
    assert_chunk(
        op.step([l_("U- 3 1 bob\nU+ 3 2 bob"), r_("U- 3 1 bob\nU+ 3 2 bob")]),
        """
        - 3 1 bob 1 . boss
        + 3 2 bob 2 1 ann
    """,
    )


def test_residual_condition_and_degrees() -> None:
    # ON l.k = r.rk AND l.id > r.rid
    cond = bind_compare(">", InputRef(0, INT), InputRef(3, INT))
    op = join("left", cond)
    assert_chunk(op.step([l_("+ 5 10 a"), None]), "+ 5 10 a . . .")
    # rid 7 has the key but fails the condition: still padded
    assert_chunk(op.step([None, r_("+ 7 10 x")]), None)
    assert_chunk(
        op.step([None, r_("+ 3 10 y")]),
        """
        - 5 10 a . . .
        + 5 10 a 3 10 y
    """,
    )
    # the left row's update makes the condition fail for 3 and hold for 7
    assert_chunk(
        op.step([l_("U- 5 10 a\nU+ 9 10 a"), None]),
        """
        - 5 10 a 3 10 y
        + 9 10 a 3 10 y
        + 9 10 a 7 10 x
    """,
    )
    assert_chunk(
        op.step([None, r_("- 3 10 y\n- 7 10 x")]),
        """
        - 9 10 a 3 10 y
        - 9 10 a 7 10 x
        + 9 10 a . . .
    """,
    )


def test_condition_null_means_no_match() -> None:
    cond = bind_compare(">", InputRef(2, VARCHAR), InputRef(5, VARCHAR))
    op = join("inner", cond)
    assert_chunk(
        op.step([l_("+ 1 10 b\n+ 2 10 ."), r_("+ 100 10 a\n+ 101 10 .")]), "+ 1 10 b 100 10 a"
    )


def test_semi_and_anti() -> None:
    semi, anti = join("semi"), join("anti")
    left = "+ 1 10 a\n+ 2 20 b\n+ 3 . c"
    assert_chunk(semi.step([l_(left), None]), None)
    assert_chunk(anti.step([l_(left), None]), "+ 1 10 a\n+ 2 20 b\n+ 3 . c")
    right = "+ 100 10 x\n+ 101 10 y\n+ 102 . z"
    assert_chunk(semi.step([None, r_(right)]), "+ 1 10 a")
    assert_chunk(anti.step([None, r_(right)]), "- 1 10 a")
    assert_chunk(semi.step([None, r_("- 100 10 x")]), None)
    assert_chunk(anti.step([None, r_("- 100 10 x")]), None)
    assert_chunk(semi.step([l_("+ 4 10 d"), r_("- 101 10 y")]), "- 1 10 a")
    assert_chunk(anti.step([l_("+ 4 10 d"), r_("- 101 10 y")]), "+ 1 10 a\n+ 4 10 d")


def test_delete_of_unknown_row_is_an_internal_error() -> None:
    op = join("inner")
    with pytest.raises(InternalError, match="join state row count became negative"):
        op.step([l_("- 1 10 a"), None])


@pytest.mark.parametrize("cond", [False, True])
def test_restart_from_store_keeps_degrees(tmp_path: Path, cond: bool) -> None:
    condition = bind_compare(">", InputRef(0, INT), InputRef(3, INT)) if cond else None

    def make() -> HashJoinOp:
        return join("full", condition)

    store = StateStore.open(tmp_path / "state")
    try:
        op = make()
        op.step([l_("+ 5 10 a\n+ 6 20 b"), r_("+ 1 10 x\n+ 2 30 y")])
        checkpoint(store, op)
        op = restart(store, make)
        # 5 matches 1: deleting 1 must pad 5 again; 2 (unmatched) gains a match
        assert_chunk(
            op.step([l_("+ 7 30 c"), r_("- 1 10 x")]),
            """
            - 5 10 a 1 10 x
            + 5 10 a . . .
            - . . . 2 30 y
            + 7 30 c 2 30 y
        """,
        )
        checkpoint(store, op)
        op = restart(store, make)
        assert_chunk(
            op.step([l_("- 7 30 c"), None]),
            """
            - 7 30 c 2 30 y
            + . . . 2 30 y
        """,
        )
    finally:
        store.close()
