"""The append-only path of HashJoinOp (both inputs never retract) with pretty chunks: pairs
come out as inserts only, duplicate rows and keys on both sides, a residual condition, a
retraction refused as an internal error, and state in RocksDB round-tripping a restart."""

from __future__ import annotations

from pathlib import Path

import pytest
from unit.stream.operators.helpers import assert_chunk, chunk
from unit.stream.operators.join_topn_helpers import DiskAllocator, checkpoint, restart

from engine.errors import InternalError
from engine.expr import InputRef
from engine.expr.ops import bind_compare
from engine.state.store import StateStore
from engine.stream.operators import LocalStateAllocator
from engine.stream.operators.base import StateAllocator
from engine.stream.operators.hash_join import HashJoinOp
from engine.types import INT, VARCHAR, Field

L = [Field("id", INT), Field("k", INT), Field("v", VARCHAR)]
R = [Field("rid", INT), Field("rk", INT), Field("w", VARCHAR)]


def join(alloc: StateAllocator | None = None, condition: object = None) -> HashJoinOp:
    return HashJoinOp(
        L,
        R,
        "inner",
        [1],
        [1],
        condition,
        None,
        alloc or LocalStateAllocator(),
        [],  # append-only inputs without a stream key: identical rows are distinct copies
        [],
        append_only=True,
    )


def l_(text: str) -> object:
    return chunk(text, L)


def r_(text: str) -> object:
    return chunk(text, R)


def test_explain_and_only_inner() -> None:
    assert join().explain() == "StreamHashJoin [append_only] { type: inner, predicate: [$1 = $4] }"
    with pytest.raises(ValueError, match="only an inner join"):
        HashJoinOp(L, R, "left", [1], [1], None, None, LocalStateAllocator(), [0], [0], True)


def _steps(op: HashJoinOp) -> None:
    assert_chunk(op.step([l_("+ 1 10 a\n+ 2 20 b\n+ 2 20 b"), None]), None)
    # both sides in one step: the new right rows meet the old and the new left rows once
    assert_chunk(
        op.step([l_("+ 3 10 c"), r_("+ 100 10 x\n+ 101 20 y\n+ 102 30 z")]),
        """
        + 1 10 a 100 10 x
        + 3 10 c 100 10 x
        + 2 20 b 101 20 y
        + 2 20 b 101 20 y
    """,
    )
    assert_chunk(
        op.step([l_("+ 4 30 d\n+ 5 40 e"), r_("+ 101 20 y")]),
        """
        + 4 30 d 102 30 z
        + 2 20 b 101 20 y
        + 2 20 b 101 20 y
    """,
    )


def test_inserts_only_resident_sides() -> None:
    _steps(join())


def test_inserts_only_rocksdb_sides_survive_restart(tmp_path: Path) -> None:
    store = StateStore.open(tmp_path / "state")
    try:
        op = join(DiskAllocator(store, {"left": 1, "right": 1}))
        _steps(op)
        checkpoint(store, op)
        op = restart(store, lambda: join(DiskAllocator(store, {"left": 1, "right": 1})))
        assert_chunk(
            op.step([None, r_("+ 103 40 q\n+ 104 10 p")]),
            """
            + 5 40 e 103 40 q
            + 1 10 a 104 10 p
            + 3 10 c 104 10 p
        """,
        )
        assert op.side_rows(0) == 6
        assert op.side_rows(1) == 6
    finally:
        store.close()


def test_residual_condition() -> None:
    op = join(condition=bind_compare("<", InputRef(0, INT), InputRef(3, INT)))
    assert_chunk(op.step([l_("+ 1 10 a\n+ 200 10 b"), r_("+ 100 10 x")]), "+ 1 10 a 100 10 x")
    assert_chunk(op.step([l_("+ 50 10 c"), r_("+ 300 10 y")]),
                 "+ 50 10 c 100 10 x\n+ 1 10 a 300 10 y\n+ 200 10 b 300 10 y\n+ 50 10 c 300 10 y")  # fmt: skip


def test_a_retraction_is_an_internal_error() -> None:
    op = join()
    op.step([l_("+ 1 10 a"), None])
    with pytest.raises(InternalError, match="append-only join input retracted"):
        op.step([l_("- 1 10 a"), None])
