"""TopNOp driven with pretty chunks: deletes of the current top rows, ties broken by the
stream key, offsets, per-group top-N with and without the rank column, NULL ordering,
duplicate rows, and a restart through a real RocksDB store."""

from __future__ import annotations

from pathlib import Path

import pytest
from unit.stream.operators.helpers import assert_chunk, chunk
from unit.stream.operators.join_topn_helpers import checkpoint, restart

from engine.errors import FeatureNotSupported, InternalError
from engine.state.store import StateStore
from engine.stream.operators import LocalStateAllocator
from engine.stream.operators.top_n import TopNOp
from engine.types import INT, VARCHAR, Field, list_of

F = [Field("id", INT), Field("g", INT), Field("v", INT)]


def c(text: str) -> object:
    return chunk(text, F)


def top(
    limit: int,
    offset: int = 0,
    groups: list[int] | None = None,
    desc: bool = True,
    nulls_first: bool = False,
    rank: bool = False,
    key: list[int] | None = None,
    alloc: LocalStateAllocator | None = None,
) -> TopNOp:
    return TopNOp(
        F,
        [(2, desc, nulls_first)],
        limit,
        offset,
        groups or [],
        alloc or LocalStateAllocator(),
        [0] if key is None else key,
        with_rank_column=rank,
    )


def test_schema_and_explain() -> None:
    op = top(3, groups=[1], rank=True)
    assert [f.name for f in op.schema] == ["id", "g", "v", "rn"]
    assert op.stream_key == [0]
    assert op.explain() == (
        "StreamGroupTopN { order: [$2 DESC NULLS LAST], limit: 3, offset: 0, "
        "group_key: [$1], output_rank }"
    )
    assert top(2, 1).explain() == "StreamTopN { order: [$2 DESC NULLS LAST], limit: 2, offset: 1 }"
    assert [t.name for t in op.state_tables()] == ["rows"]
    assert top(1, key=[]).stream_key == [0, 1, 2]


def test_delete_of_top_rows_brings_in_the_next() -> None:
    op = top(2)
    assert_chunk(
        op.step([c("+ 1 0 10\n+ 2 0 30\n+ 3 0 20\n+ 4 0 5")]),
        """
        + 2 0 30
        + 3 0 20
    """,
    )
    assert_chunk(op.step([c("+ 5 0 1")]), None)  # below the window
    assert_chunk(
        op.step([c("- 2 0 30")]),
        """
        - 2 0 30
        + 1 0 10
    """,
    )
    assert_chunk(
        op.step([c("- 3 0 20\n- 1 0 10")]),
        """
        - 3 0 20
        - 1 0 10
        + 4 0 5
        + 5 0 1
    """,
    )
    # an update moves a row into the window and pushes the last one out
    assert_chunk(
        op.step([c("U- 5 0 1\nU+ 5 0 50")]),
        """
        - 5 0 1
        + 5 0 50
    """,
    )
    assert_chunk(
        op.step([c("- 4 0 5\n- 5 0 50")]),
        """
        - 4 0 5
        - 5 0 50
    """,
    )


def test_ties_are_broken_by_stream_key() -> None:
    op = top(2)
    assert_chunk(op.step([c("+ 3 0 7\n+ 1 0 7\n+ 2 0 7")]), "+ 1 0 7\n+ 2 0 7")
    assert_chunk(op.step([c("- 1 0 7")]), "- 1 0 7\n+ 3 0 7")
    assert_chunk(op.step([c("+ 0 0 7")]), "+ 0 0 7\n- 3 0 7")


def test_offset_window() -> None:
    op = top(2, offset=1, desc=False)
    assert_chunk(op.step([c("+ 1 0 1\n+ 2 0 2\n+ 3 0 3\n+ 4 0 4")]), "+ 2 0 2\n+ 3 0 3")
    # a new smallest row shifts the window down by one
    assert_chunk(op.step([c("+ 0 0 0")]), "+ 1 0 1\n- 3 0 3")
    # deleting a row before the window shifts it up again
    assert_chunk(op.step([c("- 0 0 0")]), "- 1 0 1\n+ 3 0 3")


def test_nulls_first_and_last() -> None:
    last = top(1, desc=False)
    first = top(1, desc=False, nulls_first=True)
    rows = c("+ 1 0 .\n+ 2 0 5")
    assert_chunk(last.step([rows]), "+ 2 0 5")
    assert_chunk(first.step([rows]), "+ 1 0 .")


def test_group_top_n_with_rank_column() -> None:
    op = top(2, groups=[1], rank=True)
    assert_chunk(
        op.step([c("+ 1 1 10\n+ 2 1 20\n+ 3 1 5\n+ 4 2 7")]),
        """
        + 2 1 20 1
        + 1 1 10 2
        + 4 2 7 1
    """,
    )
    # deleting rank 1 promotes rank 2 (U-/U+) and brings in the next row
    assert_chunk(
        op.step([c("- 2 1 20")]),
        """
        - 2 1 20 1
        U- 1 1 10 2
        U+ 1 1 10 1
        + 3 1 5 2
    """,
    )
    # an update that changes nothing consolidates away
    assert_chunk(
        op.step(
            [
                c("U- 4 2 7\nU+ 4 2 7"),
            ]
        ),
        None,
    )
    assert_chunk(
        op.step([c("+ 9 2 8")]),
        """
        + 9 2 8 1
        U- 4 2 7 1
        U+ 4 2 7 2
    """,
    )


def test_update_of_non_order_column_inside_window() -> None:
    fields = [Field("id", INT), Field("v", INT), Field("name", VARCHAR)]
    op = TopNOp(fields, [(1, True, False)], 1, 0, [], LocalStateAllocator(), [0])
    op.step([chunk("+ 1 10 a\n+ 2 5 b", fields)])
    assert_chunk(
        op.step([chunk("U- 1 10 a\nU+ 1 10 z", fields)]),
        """
        U- 1 10 a
        U+ 1 10 z
    """,
    )


def test_duplicate_rows_without_stream_key() -> None:
    op = top(3, key=[])
    assert_chunk(
        op.step([c("+ 1 0 9\n+ 1 0 9\n+ 2 0 5\n+ 3 0 1")]),
        """
        + 1 0 9
        + 1 0 9
        + 2 0 5
    """,
    )
    assert_chunk(op.step([c("- 1 0 9")]), "- 1 0 9\n+ 3 0 1")


def test_zero_limit_and_errors() -> None:
    op = top(0)
    assert_chunk(op.step([c("+ 1 0 1")]), None)
    with pytest.raises(InternalError, match="top-n state row count became negative"):
        top(1).step([c("- 1 0 1")])
    arr = [Field("id", INT), Field("a", list_of(INT))]
    with pytest.raises(FeatureNotSupported, match=r"ORDER BY a value of type integer\[\]"):
        TopNOp(arr, [(1, False, False)], 1, 0, [], LocalStateAllocator(), [0])


def test_restart_from_store(tmp_path: Path) -> None:
    store = StateStore.open(tmp_path / "state")
    try:
        op = top(2, groups=[1], rank=True)
        op.step([c("+ 1 1 10\n+ 2 1 20\n+ 3 1 5")])
        checkpoint(store, op)
        op = restart(store, lambda: top(2, groups=[1], rank=True))
        assert_chunk(
            op.step([c("- 2 1 20")]),
            """
            - 2 1 20 1
            U- 1 1 10 2
            U+ 1 1 10 1
            + 3 1 5 2
        """,
        )
    finally:
        store.close()


def test_rows_below_full_windows_come_in_after_deletes() -> None:
    # epochs 2-3 are insert-only with full windows: rows below them are only stored
    op = top(2, groups=[1], key=[])
    assert_chunk(
        op.step([c("+ 1 0 10\n+ 2 0 20\n+ 3 1 10\n+ 4 1 20")]),
        """
        + 1 0 10
        + 2 0 20
        + 3 1 10
        + 4 1 20
    """,
    )
    assert_chunk(op.step([c("+ 5 0 3\n+ 6 0 7\n+ 7 1 1\n+ 6 0 7")]), None)
    assert_chunk(op.step([c("+ 8 0 15\n+ 9 1 2")]), "- 1 0 10\n+ 8 0 15")
    assert_chunk(
        op.step([c("- 2 0 20\n- 8 0 15\n- 4 1 20")]),
        """
        - 2 0 20
        - 8 0 15
        + 1 0 10
        + 6 0 7
        - 4 1 20
        + 9 1 2
    """,
    )
    assert_chunk(op.step([c("- 1 0 10\n- 6 0 7")]), "- 1 0 10\n+ 5 0 3")  # one 7 stays
