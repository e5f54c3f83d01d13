"""The stored-plan encoding of values and expressions (engine/expr/codec.py): JSON only,
and a decoded expression looks its kernels up by name and evaluates exactly like the one
that was stored; calls whose kernels hide parameters are left to the fallback."""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest

from engine.expr import EvalContext, Expr, Func
from engine.expr.codec import (
    PlanDecodeError,
    expr_from_json,
    expr_to_json,
    type_from_json,
    type_to_json,
    value_from_json,
    value_to_json,
)
from engine.types import INT, SqlType, TypeKind, list_of

VALUES = [
    None,
    True,
    0,
    -(2**70),
    "x'y",
    1.5,
    -0.0,
    Decimal("-12.3400"),
    b"\x00\xff",
    dt.date(1969, 12, 31),
    dt.time(23, 59, 59, 999999),
    dt.datetime(2024, 1, 2, 3, 4, 5, 6),
    dt.datetime(2024, 1, 2, tzinfo=dt.UTC),
    pa.MonthDayNano([1, -2, 3000]),
    [1, None, [2]],
    (1, "a"),
]


@pytest.mark.parametrize("v", VALUES, ids=[repr(v)[:30] for v in VALUES])
def test_values_round_trip_through_json(v: Any) -> None:
    again = value_from_json(json.loads(json.dumps(value_to_json(v))))
    assert again == v and type(again) is type(v)
    if isinstance(v, float):
        assert math.copysign(1, again) == math.copysign(1, v)


def test_special_floats_and_types() -> None:
    for v in (math.inf, -math.inf):
        assert value_from_json(value_to_json(v)) == v
    assert math.isnan(value_from_json(value_to_json(math.nan)))
    for t in (INT, list_of(list_of(SqlType(TypeKind.VARCHAR))), SqlType(TypeKind.INT, pg="oid")):
        back = type_from_json(json.loads(json.dumps(type_to_json(t))))
        assert back == t and back.pg == t.pg


NOW = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)


def make_batch() -> pa.RecordBatch:
    """The expression tests' table `t` (tests/unit/expr/conftest.py binds against it)."""
    cols: dict[str, pa.Array] = {
        "i": pa.array([1, -7, None, 100], pa.int32()),
        "l": pa.array([10, 3, 5, None], pa.int64()),
        "f": pa.array([1.5, -2.5, None, 0.0]),
        "n": pa.array([Decimal("1.5"), Decimal("-2.25"), None, Decimal(0)], pa.decimal128(38, 10)),
        "s": pa.array(["hello", "Wörld", None, ""]),
        "b": pa.array([True, False, None, True]),
        "d": pa.array([dt.date(2024, 1, 31), None, dt.date(2020, 2, 29), dt.date(1969, 12, 31)]),
        "ts": pa.array(
            [
                dt.datetime(2024, 1, 31, 10, 30),
                None,
                dt.datetime(2020, 2, 29),
                dt.datetime(1969, 12, 31, 23, 59),
            ],
            pa.timestamp("us"),
        ),
        "tz": pa.array(
            [dt.datetime(2024, 3, 10, 12, 0), None, None, None], pa.timestamp("us", tz="UTC")
        ),
        "j": pa.array(['{"a": 1, "b": [1, 2.50, "x"]}', '[1, "x", true]', None, '"str"']),
    }
    return pa.RecordBatch.from_arrays(list(cols.values()), names=list(cols))


EXPRS = [
    "i + 1",
    "l * 2 - i",
    "n / 2",
    "f::INT",
    "-i",
    "i % 3 = 1 AND NOT b",
    "b OR i IS NULL",
    "s || '!'",
    "upper(s)",
    "length(s) > 2",
    "coalesce(i, 0) + 1",
    "nullif(i, 1)",
    "CASE WHEN i > 0 THEN 'p' WHEN i < 0 THEN 'n' ELSE 'z' END",
    "ts + INTERVAL '1' DAY",
    "date_trunc('hour', ts)",
    "extract(year from d)",
    "d + 1",
    "j ->> 'a'",
    "j -> 'b'",
    "j ? 'a'",
    "i IS DISTINCT FROM l",
    "abs(n)",
    "round(f)",
    "substr(s, 2, 2)",
    "tz - INTERVAL '1' HOUR",
    "b IS TRUE",
    "l BETWEEN 1 AND 5",
]


@pytest.mark.parametrize("sql", EXPRS)
def test_expressions_restore_by_name_and_evaluate_the_same(
    sql: str, bind: Callable[..., Expr]
) -> None:
    e = bind(sql)
    data = json.loads(json.dumps(expr_to_json(e)))
    back = expr_from_json(data)  # no fallback: every call found by name
    assert back == e and expr_to_json(back) == data
    ctx = EvalContext(now=NOW)
    assert back.eval(make_batch(), ctx).to_pylist() == e.eval(make_batch(), ctx).to_pylist()


@pytest.mark.parametrize("sql", ["s IN ('hello', 'x')", "s LIKE 'h%'", "s LIKE 'h!%' ESCAPE '!'"])
def test_calls_with_hidden_parameters_need_the_fallback(
    sql: str, bind: Callable[..., Expr]
) -> None:
    e = bind(sql)
    data = expr_to_json(e)
    with pytest.raises(PlanDecodeError, match="no function"):
        expr_from_json(data)
    known = {f: f for f in [e] if isinstance(f, Func)}
    back = expr_from_json(data, lambda f: known.get(f))
    ctx = EvalContext(now=NOW)
    assert back.eval(make_batch(), ctx).to_pylist() == e.eval(make_batch(), ctx).to_pylist()
