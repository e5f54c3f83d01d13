"""Time operators driven with pretty chunks: TUMBLE/HOP windows, EMIT ON WINDOW CLOSE with
watermarks (out-of-order and late rows, restart), and temporal filters with a fixed clock.

Times are BIGINT microseconds here (the operators work on the int64 behind timestamps)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pyarrow.compute as pc
from unit.stream.operators.helpers import assert_chunk, chunk

from engine import expr as ex
from engine.expr import EvalContext
from engine.plan.time_nodes import TimeBound
from engine.stream.operators import LocalStateAllocator
from engine.stream.operators.agg_calls import AggCall
from engine.stream.operators.eowc import EowcAggOp
from engine.stream.operators.temporal_filter import TemporalFilterOp
from engine.stream.operators.time_window import TimeWindowOp
from engine.stream.operators.watermark import propagate
from engine.types import BIGINT, BOOLEAN, Field

F = [Field("id", BIGINT), Field("ts", BIGINT)]
W = [*F, Field("window_start", BIGINT), Field("window_end", BIGINT)]


def test_tumble_keeps_ops_and_nulls() -> None:
    op = TimeWindowOp(F, W, 1, "tumble", 10, 10, 0, [0])
    out = op.step([chunk("+ 1 5\n+ 2 -1\nU- 3 19\nU+ 3 20\n+ 4 .", F)])
    assert_chunk(out, "+ 1 5 0 10\n+ 2 -1 -10 0\nU- 3 19 10 20\nU+ 3 20 20 30\n+ 4 . . .")


def test_tumble_offset() -> None:
    op = TimeWindowOp(F, W, 1, "tumble", 10, 10, 3, [0])
    assert_chunk(op.step([chunk("+ 1 5\n+ 2 2", F)]), "+ 1 5 3 13\n+ 2 2 -7 3")


def test_hop_expands_rows_and_splits_update_pairs() -> None:
    op = TimeWindowOp(F, W, 1, "hop", 5, 15, 0, [0, 2])
    out = op.step([chunk("U- 1 7\nU+ 1 12\n+ 2 .", F)])
    assert_chunk(
        out,
        "- 1 7 5 20\n+ 1 12 10 25\n- 1 7 0 15\n+ 1 12 5 20\n- 1 7 -5 10\n+ 1 12 0 15",
    )
    assert op.window_start_watermark(12) == 10 - 15 + 5


A = [Field("ws", BIGINT), Field("v", BIGINT)]


def eowc(alloc: LocalStateAllocator) -> EowcAggOp:
    calls = [AggCall("count_star", None, BIGINT), AggCall("sum", 1, BIGINT)]
    return EowcAggOp(A, [0], calls, alloc, ["ws", "n", "s"], 0)


def step(op: EowcAggOp, text: str | None, wm: int | None) -> object:
    op.input_watermarks = [{} if wm is None else {0: wm}]
    return op.step([None if text is None else chunk(text, A)])


def test_eowc_emits_each_window_once_when_watermark_passes() -> None:
    alloc = LocalStateAllocator()
    op = eowc(alloc)
    assert step(op, "+ 0 1\n+ 10 2\n+ 0 4", None) is None
    assert step(op, "+ 10 8", 10) is not None
    assert step(op, None, 10) is None  # no new watermark, nothing again
    # a retraction inside an open window, then the window closes
    assert step(op, "- 10 2\n+ 20 16", None) is None
    assert_chunk(step(op, None, 30), "+ 10 1 8\n+ 20 1 16")
    # closed windows' state is gone
    assert len(alloc.table("buffer")) == 0


def test_eowc_drops_late_rows_and_survives_restart() -> None:
    alloc = LocalStateAllocator()
    op = eowc(alloc)
    assert_chunk(step(op, "+ 0 1\n+ 10 2", 10), "+ 0 1 1")
    assert step(op, "+ 0 100\n+ 10 4\n+ . 5", None) is None
    assert op.late_rows == 2  # window 0 is closed, NULL windows never close
    # a new operator over the same state (as after a restart): open rows and the emitted
    # watermark come back
    op2 = eowc(alloc)
    assert step(op2, "+ 5 9", None) is None
    assert op2.late_rows == 1
    assert_chunk(step(op2, None, 20), "+ 10 2 6")


def test_watermark_propagation_takes_min_of_sources_and_maps() -> None:
    transfer = [(0, [(0, 1), (1, 0)], None), (1, [(0, 1)], lambda v: v - 5)]
    assert propagate(transfer, [{1: 30}, {0: 20}]) == {0: 20, 1: 25}
    assert propagate(transfer, [{1: 30}, {}]) == {1: 25}


class Clock(EvalContext):
    pass


T0 = datetime(2024, 1, 1, tzinfo=UTC)
US = 1_000_000


def test_temporal_filter_rows_expire_and_enter_with_time() -> None:
    ctx = Clock()
    ts = ex.InputRef(1, BIGINT, "ts")
    # visible while now - 10s < ts <= now
    bounds = [TimeBound(ts, ">", -10 * US), TimeBound(ts, "<=", 0)]
    op = TemporalFilterOp(F, bounds, ctx, [0], LocalStateAllocator())
    base = int(T0.timestamp()) * US

    def at(sec: int, text: str | None) -> object:
        ctx.now = T0 + timedelta(seconds=sec)
        return op.step([None if text is None else chunk(text, F)])

    rows = "\n".join([f"+ 1 {base}", f"+ 2 {base + 5 * US}", f"+ 3 {base - 20 * US}", "+ 4 ."])
    assert_chunk(at(0, rows), f"+ 1 {base}")
    assert_chunk(at(5, None), f"+ 2 {base + 5 * US}")  # 2 enters
    assert at(9, None) is None
    assert_chunk(at(10, None), f"- 1 {base}")  # 1 expires
    assert_chunk(at(11, f"- 2 {base + 5 * US}"), f"- 2 {base + 5 * US}")
    assert at(100, None) is None


def test_temporal_filter_state_survives_restart() -> None:
    ctx = Clock()
    ts = ex.InputRef(1, BIGINT, "ts")
    bounds = [TimeBound(ts, ">=", -10 * US), TimeBound(ts, "<", 0)]
    alloc = LocalStateAllocator()
    base = int(T0.timestamp()) * US
    op = TemporalFilterOp(F, bounds, ctx, [0], alloc)
    ctx.now = T0
    rows = f"+ 1 {base - US}\n+ 2 {base + 3 * US}"
    assert_chunk(op.step([chunk(rows, F)]), f"+ 1 {base - US}")
    # a new operator over the same state tables (as after a restart) rebuilds its heaps
    op2 = TemporalFilterOp(F, bounds, ctx, [0], alloc)
    ctx.now = T0 + timedelta(seconds=4)
    assert_chunk(op2.step([None]), f"+ 2 {base + 3 * US}")
    ctx.now = T0 + timedelta(seconds=10)  # 1 leaves once now - 10s > its ts (>= is inclusive)
    assert_chunk(op2.step([None]), f"- 1 {base - US}")


def test_interval_join_cleans_state_by_watermark() -> None:
    from engine.stream.operators import HashJoinOp
    from engine.stream.operators.interval_join import IntervalJoinOp

    fields = [Field("id", BIGINT), Field("k", BIGINT), Field("t", BIGINT)]
    cond = ex.Func(  # left.t >= right.t  (lo = 0, no upper bound)
        "greater_equal",
        (ex.InputRef(2, BIGINT, "t"), ex.InputRef(5, BIGINT, "t")),
        BOOLEAN,
        lambda a, n, c: pc.greater_equal(a[0], a[1]),
    )
    alloc = LocalStateAllocator()
    join = HashJoinOp(fields, fields, "inner", [1], [1], cond, EvalContext(), alloc, [0], [0])
    op = IntervalJoinOp(join, (2, 2), 0, None, ([1], [1]), ([0], [0]), alloc)
    out = op.step([chunk("+ 1 7 10\n+ 2 7 30", fields), chunk("+ 9 7 20", fields)])
    assert_chunk(out, "+ 2 7 30 9 7 20")
    # the right watermark reaches 25: left rows with t < 25 can never match again
    op.input_watermarks = [{}, {2: 25}]
    assert op.step([None, None]) is None
    assert op.cleaned == [1, 0]
    assert join.side_rows(0) == 1 and join.side_rows(1) == 1


def test_eowc_sort_emits_rows_once_in_watermark_order() -> None:
    from engine.stream.operators.eowc import EowcSortOp

    op = EowcSortOp(A, [1], LocalStateAllocator(), 0)
    op.input_watermarks = [{}]
    assert op.step([chunk("+ 5 1\n+ 2 2\n+ 9 3\n+ 3 4", A)]) is None
    op.input_watermarks = [{0: 6}]
    assert_chunk(op.step([chunk("- 3 4", A)]), "+ 2 2\n+ 5 1")
    assert op.step([chunk("+ 1 5", A)]) is None  # late: dropped
    assert op.late_rows == 1


def test_dynamic_filter_moves_only_rows_between_thresholds() -> None:
    from engine.stream.operators.dynamic_filter import DynamicFilterOp

    fields = [Field("id", BIGINT), Field("v", BIGINT)]
    thr = [Field("m", BIGINT)]
    pred = ex.Func(
        "greater",
        (ex.InputRef(1, BIGINT, "v"), ex.InputRef(2, BIGINT, "m")),
        BOOLEAN,
        lambda a, n, c: pc.greater(a[0], a[1]),
    )
    op = DynamicFilterOp(
        fields, pred, BIGINT, 0, EvalContext(), [0], LocalStateAllocator(), ex.InputRef(1, BIGINT)
    )
    rows = "\n".join(f"+ {i} {i * 10}" for i in range(100))
    op.step([chunk(rows, fields), chunk("+ 500", thr)])
    op.step([None, chunk("U- 500\nU+ 520", thr)])  # builds the index: one full pass
    op.scanned = 0
    out = op.step([chunk("- 52 520\n+ 200 535", fields), chunk("U- 520\nU+ 550", thr)])
    # 200 passes the old threshold, then leaves with the new one (nets out downstream)
    assert_chunk(out, "+ 200 535\n- 200 535\n- 53 530\n- 54 540\n- 55 550")
    assert op.scanned <= 4  # the rows between 520 and 550 (and the deleted one is skipped)
