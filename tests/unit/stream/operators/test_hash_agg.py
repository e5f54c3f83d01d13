"""HashAggOp driven with pretty chunks: groups appearing, updating, disappearing; NULLs;
min/max retraction; DISTINCT and FILTER; global aggregation and state round-trips."""

from __future__ import annotations

from decimal import Decimal

import pytest
from unit.stream.operators.helpers import DictStore, assert_chunk, chunk, make_chunk

from engine.chunk import Op
from engine.errors import InternalError, NumericValueOutOfRange
from engine.stream.operators import AggCall, HashAggOp, LocalStateAllocator
from engine.types import (
    BIGINT,
    BOOLEAN,
    DOUBLE,
    INT,
    NUMERIC,
    REAL,
    VARCHAR,
    Field,
)

F = [Field("k", INT), Field("v", INT)]
CNT = AggCall("count_star", None, BIGINT)


def agg(
    aggs: list[AggCall],
    keys: list[int] | None = None,
    fields: list[Field] = F,
    alloc: LocalStateAllocator | None = None,
) -> HashAggOp:
    keys = [0] if keys is None else keys
    names = [fields[k].name for k in keys] + [f"a{i}" for i in range(len(aggs))]
    return HashAggOp(fields, keys, aggs, alloc or LocalStateAllocator(), names)


def full(alloc: LocalStateAllocator | None = None) -> HashAggOp:
    return agg(
        [
            CNT,
            AggCall("count", 1, BIGINT),
            AggCall("sum", 1, BIGINT),
            AggCall("min", 1, INT),
            AggCall("max", 1, INT),
            AggCall("avg", 1, NUMERIC),
        ],
        alloc=alloc,
    )


def test_schema_stream_key_and_explain() -> None:
    op = full()
    assert [f.name for f in op.schema] == ["k", "a0", "a1", "a2", "a3", "a4", "a5"]
    assert [f.type for f in op.schema] == [INT, BIGINT, BIGINT, BIGINT, INT, INT, NUMERIC]
    assert op.stream_key == [0]
    assert op.explain() == (
        "StreamHashAgg { group_key: [$0], aggs: [count(*), count($1), sum($1), min($1), "
        "max($1), avg($1)] }"
    )
    # min($1) and max($1) share one multiset
    assert [t.name for t in op.state_tables()] == ["groups", "minmax_3"]


def test_groups_appear_update_and_disappear() -> None:
    op = full()
    assert_chunk(
        op.step([chunk("+ 1 5\n+ 1 7\n+ 2 4", F)]),
        """
        + 1 2 2 12 5 7 6.0000000000
        + 2 1 1 4 4 4 4.0000000000
    """,
    )
    assert_chunk(
        op.step([chunk("+ 1 8\n- 2 4", F)]),
        """
        U- 1 2 2 12 5 7 6.0000000000
        U+ 1 3 3 20 5 8 6.6666666667
        - 2 1 1 4 4 4 4.0000000000
    """,
    )
    # the group reappears as a fresh insert
    assert_chunk(op.step([chunk("+ 2 9", F)]), "+ 2 1 1 9 9 9 9.0000000000")


def test_update_pair_input() -> None:
    op = full()
    op.step([chunk("+ 1 5\n+ 1 7", F)])
    assert_chunk(
        op.step([chunk("U- 1 7\nU+ 1 1", F)]),
        """
        U- 1 2 2 12 5 7 6.0000000000
        U+ 1 2 2 6 1 5 3.0000000000
    """,
    )


def test_no_output_when_nothing_changes() -> None:
    op = agg([CNT, AggCall("sum", 1, BIGINT)])
    op.step([chunk("+ 1 5", F)])
    # a row inserted and deleted within one epoch nets to nothing
    assert op.step([chunk("+ 1 3\n- 1 3", F)]) is None
    # values change but the outputs do not: (5) -> (2, 3) keeps count? no: count changes
    assert_chunk(op.step([chunk("- 1 5\n+ 1 2\n+ 1 3", F)]), "U- 1 1 5\nU+ 1 2 5")
    # swapping two values within a group leaves count and sum as they are
    assert op.step([chunk("U- 1 2\nU+ 1 4\nU- 1 3\nU+ 1 1", F)]) is None
    assert op.state_tables()[0].get((1,)) == (2, 2, 5, 2)


def test_delete_current_min_and_max() -> None:
    op = agg([AggCall("min", 1, INT), AggCall("max", 1, INT)])
    op.step([chunk("+ 1 5\n+ 1 1\n+ 1 9\n+ 1 1\n+ 1 9\n+ 1 7", F)])
    # one copy of each extreme goes: extremes stay
    assert op.step([chunk("- 1 1\n- 1 9", F)]) is None
    # the last copies go: recomputed from the multiset
    assert_chunk(op.step([chunk("- 1 1\n- 1 9", F)]), "U- 1 1 9\nU+ 1 5 7")
    # a new extreme arrives while the old one leaves
    assert_chunk(op.step([chunk("- 1 5\n+ 1 6\n+ 1 20", F)]), "U- 1 5 7\nU+ 1 6 20")
    assert_chunk(op.step([chunk("- 1 6\n- 1 7\n- 1 20", F)]), "- 1 6 20")
    assert len(op.state_tables()) == 2  # min and max share one multiset
    assert len(op.state_tables()[1]) == 0


def test_nulls() -> None:
    op = full()
    # NULL values: counted by count(*), ignored by the others; NULL group key is a group
    assert_chunk(
        op.step([chunk("+ 1 .\n+ 1 .\n+ . 3\n+ . .", F)]),
        """
        + 1 2 0 . . . .
        + . 2 1 3 3 3 3.0000000000
    """,
    )
    assert_chunk(
        op.step([chunk("+ 1 4\n- . 3", F)]),
        """
        U- 1 2 0 . . . .
        U+ 1 3 1 4 4 4 4.0000000000
        U- . 2 1 3 3 3 3.0000000000
        U+ . 1 0 . . . .
    """,
    )
    # back to no non-null values: sum/min/max/avg are NULL again
    assert_chunk(
        op.step([chunk("- 1 4", F)]),
        """
        U- 1 3 1 4 4 4 4.0000000000
        U+ 1 2 0 . . . .
    """,
    )


def test_filter_clause_and_distinct() -> None:
    fields = [Field("k", INT), Field("v", INT), Field("f", BOOLEAN)]
    op = agg(
        [
            AggCall("count_star", None, BIGINT, filter=2),
            AggCall("sum", 1, BIGINT, filter=2),
            AggCall("count", 1, BIGINT, distinct=True),
            AggCall("sum", 1, BIGINT, distinct=True),
            AggCall("avg", 1, NUMERIC, distinct=True, filter=2),
            AggCall("max", 1, INT, filter=2),
        ],
        fields=fields,
    )
    assert_chunk(
        op.step([chunk("+ 1 2 t\n+ 1 2 f\n+ 1 3 .\n+ 1 5 t\n+ 1 2 t", fields)]),
        "+ 1 3 9 3 10 3.5000000000 5",
    )
    assert_chunk(
        op.step([chunk("- 1 2 t\n- 1 5 t", fields)]),
        "U- 1 3 9 3 10 3.5000000000 5\nU+ 1 1 2 2 5 2.0000000000 2",
    )
    assert_chunk(
        op.step([chunk("- 1 2 t\n- 1 2 f", fields)]),
        "U- 1 1 2 2 5 2.0000000000 2\nU+ 1 0 . 1 3 . .",
    )
    assert op.explain().endswith(
        "aggs: [count(*) filter($2), sum($1) filter($2), count(distinct $1), "
        "sum(distinct $1), avg(distinct $1) filter($2), max($1) filter($2)] }"
    )


def test_result_types_and_exact_sums() -> None:
    fields = [
        Field("k", INT),
        Field("b", BIGINT),
        Field("r", REAL),
        Field("d", DOUBLE),
        Field("n", NUMERIC),
        Field("s", VARCHAR),
    ]
    op = agg(
        [
            AggCall("sum", 1, NUMERIC),
            AggCall("avg", 1, NUMERIC),
            AggCall("sum", 2, REAL),
            AggCall("avg", 3, DOUBLE),
            AggCall("sum", 4, NUMERIC),
            AggCall("avg", 4, NUMERIC),
            AggCall("min", 5, VARCHAR),
            AggCall("max", 4, NUMERIC),
        ],
        fields=fields,
    )
    big = 2**62
    out = op.step(
        [chunk(f"+ 1 {big} 1.5 0.5 1.25 b\n+ 1 {big} 2 1 2.5 a\n+ 1 {big} . . . .", fields)]
    )
    assert out is not None
    [(_, row)] = out.to_rows()
    assert row == (
        1,
        Decimal(3 * big),
        Decimal(big),
        3.5,
        0.75,
        Decimal("3.75"),
        Decimal("1.875"),
        "a",
        Decimal("2.5"),
    )
    # avg of integers rounds to the numeric scale
    op2 = agg([AggCall("avg", 1, NUMERIC)])
    assert_chunk(op2.step([chunk("+ 1 1\n+ 1 2\n+ 1 4", F)]), "+ 1 2.3333333333")


def test_bigint_sum_overflow_raises() -> None:
    fields = [Field("k", INT), Field("v", INT)]
    op = agg([AggCall("sum", 1, BIGINT)], fields=fields)
    big = 2**31 - 1
    # force the accumulator over the bigint range without billions of rows
    op.step([chunk(f"+ 1 {big}", fields)])
    groups = op.state_tables()[0]
    groups.put((1,), (1, 2**63 - big, 1))
    with pytest.raises(NumericValueOutOfRange, match="bigint out of range"):
        op.step([chunk(f"+ 1 {big}", fields)])


def test_bool_and_or() -> None:
    fields = [Field("k", INT), Field("b", BOOLEAN)]
    op = agg([AggCall("bool_and", 1, BOOLEAN), AggCall("bool_or", 1, BOOLEAN)], fields=fields)
    assert_chunk(op.step([chunk("+ 1 t\n+ 1 .", fields)]), "+ 1 t t")
    assert_chunk(op.step([chunk("+ 1 f", fields)]), "U- 1 t t\nU+ 1 f t")
    assert_chunk(op.step([chunk("- 1 t", fields)]), "U- 1 f t\nU+ 1 f f")


def test_negative_count_is_an_internal_error() -> None:
    op = agg([CNT])
    with pytest.raises(InternalError):
        op.step([chunk("- 1 1", F)])


def test_global_agg_initial_row_once_and_restart() -> None:
    store = DictStore()
    alloc = LocalStateAllocator()
    op = agg([CNT, AggCall("sum", 1, BIGINT), AggCall("min", 1, INT)], keys=[], alloc=alloc)
    assert op.stream_key == []
    assert op.explain() == "StreamSimpleAgg { aggs: [count(*), sum($1), min($1)] }"
    assert_chunk(op.step([None]), "+ 0 . .")
    assert op.step([None]) is None
    assert_chunk(op.step([chunk("+ 1 4\n+ 2 3", F)]), "U- 0 . .\nU+ 2 7 3")
    store.checkpoint(op.state_tables())

    # restart: fresh tables with the same ids, loaded from the store
    alloc2 = LocalStateAllocator()
    op2 = agg([CNT, AggCall("sum", 1, BIGINT), AggCall("min", 1, INT)], keys=[], alloc=alloc2)
    for t in op2.state_tables():
        t.load(store)
    assert op2.step([None]) is None
    assert_chunk(op2.step([chunk("- 2 3", F)]), "U- 2 7 3\nU+ 1 4 4")
    # all rows gone: the row stays, back at its initial values
    assert_chunk(op2.step([chunk("- 1 4", F)]), "U- 1 4 4\nU+ 0 . .")
    assert op2.state_tables()[0].get(()) is not None


def test_global_agg_first_step_with_data_emits_insert() -> None:
    op = agg([CNT], keys=[])
    assert_chunk(op.step([chunk("+ 1 4", F)]), "+ 1")


def test_min_max_survive_restart() -> None:
    store = DictStore()
    op = full()
    op.step([chunk("+ 1 5\n+ 1 1\n+ 1 9\n+ 2 3", F)])
    store.checkpoint(op.state_tables())
    op2 = full(LocalStateAllocator())
    for t in op2.state_tables():
        t.load(store)
    assert_chunk(
        op2.step([chunk("- 1 1\n- 1 9", F)]),
        """
        U- 1 3 3 15 1 9 5.0000000000
        U+ 1 1 1 5 5 5 5.0000000000
    """,
    )
    store.checkpoint(op2.state_tables())
    assert sorted(op2.state_tables()[1].keys()) == [(1, 5), (2, 3)]


def test_nan_values_and_group_keys_survive_restart() -> None:
    """min/max and DISTINCT over double precision keep NaN values counted in their value
    tables; after a restart the loaded NaN keys are the operator's own NaN object, so
    deleting the NaN rows finds them (it used to fail the epoch with 'aggregation value
    count became negative')."""
    fields = [Field("k", DOUBLE), Field("v", DOUBLE)]
    nan = float("nan")
    calls = [CNT, AggCall("min", 1, DOUBLE), AggCall("max", 1, DOUBLE)]
    calls.append(AggCall("count", 1, BIGINT, distinct=True))
    rows = [(1.0, nan), (1.0, 2.0), (1.0, nan), (nan, nan), (nan, 4.0)]
    store = DictStore()
    op = agg(calls, fields=fields)
    op.step([make_chunk(fields, [Op.INSERT] * 5, rows)])
    store.checkpoint(op.state_tables())
    op2 = agg(calls, fields=fields, alloc=LocalStateAllocator())
    for t in op2.state_tables():
        t.load(store)
    out = op2.step([make_chunk(fields, [Op.DELETE] * 3, [rows[0], rows[2], rows[3]])])
    assert out is not None
    got = sorted(((int(o), repr(r)) for o, r in out.to_rows()), key=repr)
    assert got == sorted(
        [
            (int(Op.UPDATE_DELETE), repr((1.0, 3, 2.0, nan, 2))),
            (int(Op.UPDATE_INSERT), repr((1.0, 1, 2.0, 2.0, 1))),
            (int(Op.UPDATE_DELETE), repr((nan, 2, 4.0, nan, 2))),
            (int(Op.UPDATE_INSERT), repr((nan, 1, 4.0, 4.0, 1))),
        ],
        key=repr,
    )


def test_multiple_and_unusual_group_keys() -> None:
    fields = [Field("a", VARCHAR), Field("b", INT), Field("v", INT)]
    op = agg([CNT, AggCall("max", 2, INT)], keys=[1, 0], fields=fields)
    assert [f.name for f in op.schema] == ["b", "a", "a0", "a1"]
    assert op.stream_key == [0, 1]
    assert_chunk(
        op.step([chunk("+ x 1 3\n+ y 1 4\n+ x 1 5\n+ x . 1", fields)]),
        """
        + 1 x 2 5
        + 1 y 1 4
        + . x 1 1
    """,
    )


def test_interval_list_and_timestamptz_group_keys() -> None:
    import pyarrow as pa

    from engine.chunk import StreamChunk
    from engine.types import INTERVAL, TIMESTAMPTZ, arrow_schema, list_of

    fields = [
        Field("i", INTERVAL),
        Field("l", list_of(INT)),
        Field("t", TIMESTAMPTZ),
        Field("v", INT),
    ]
    iv = pa.MonthDayNano([1, 2, 3])
    rows = [
        {"i": iv, "l": [1, 2], "t": None, "v": 1},
        {"i": iv, "l": [1, 2], "t": None, "v": 5},
        {"i": None, "l": None, "t": None, "v": 2},
    ]
    batch = pa.RecordBatch.from_pylist(rows, schema=arrow_schema(fields))
    op = agg(
        [CNT, AggCall("max", 3, INT), AggCall("min", 0, INTERVAL)], keys=[0, 1, 2], fields=fields
    )
    out = op.step([StreamChunk.inserts(batch)])
    assert out is not None and out.data.schema == arrow_schema(op.schema)
    assert sorted(out.to_rows(), key=repr) == sorted(
        [
            (Op.INSERT, (iv, [1, 2], None, 2, 5, iv)),
            (Op.INSERT, (None, None, None, 1, 2, None)),
        ],
        key=repr,
    )
    out = op.step([StreamChunk.deletes(batch.slice(1, 1))])
    assert out is not None
    assert out.to_rows() == [
        (Op.UPDATE_DELETE, (iv, [1, 2], None, 2, 5, iv)),
        (Op.UPDATE_INSERT, (iv, [1, 2], None, 1, 1, iv)),
    ]


def test_numeric_sum_rows_of_the_older_layout_are_widened_as_read() -> None:
    """Group rows stored before numeric sum/avg counted NaN and the infinities (sum and
    count only) keep their values, and the group goes on in the wider layout."""
    fields = [Field("k", INT), Field("n", NUMERIC)]
    op = agg([CNT, AggCall("sum", 1, NUMERIC), AggCall("avg", 1, NUMERIC)], fields=fields)
    groups = op.state_tables()[0]
    # rows count, count(*), then sum's (sum, count) and avg's (sum, count): 6 slots, not 12
    groups.put((1,), (2, 2, Decimal("3.5"), 2, Decimal("3.5"), 2))
    assert_chunk(
        op.step([chunk("+ 1 1.5", fields)]),
        "U- 1 2 3.5000000000 1.7500000000\nU+ 1 3 5.0000000000 1.6666666667",
    )
    assert groups.get_many([(1,)])[0] == (3, 3, Decimal(5), 3, 0, 0, 0, Decimal(5), 3, 0, 0, 0)
    with pytest.raises(InternalError, match="unknown layout"):
        groups.put((2,), (1, 1, Decimal(1)))
        op.step([chunk("+ 2 1", fields)])
