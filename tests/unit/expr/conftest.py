"""Fixtures for expression tests: a small typed table and helpers to bind/evaluate SQL.

`ev("a + 1")` binds the expression against table `t` (columns below) and returns the
evaluated column as Python values; `ev1("1 + 1")` evaluates a constant to one value;
`bind("...")` returns the bound Expr.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
import sqlglot

from engine.expr import ColumnBinding, EvalContext, Expr, ExprBinder, ParamContext, Scope
from engine.types import (
    BIGINT,
    BOOLEAN,
    DATE,
    DOUBLE,
    INT,
    JSONB,
    NUMERIC,
    TIMESTAMP,
    TIMESTAMPTZ,
    VARCHAR,
)

COLUMNS = [
    ("i", INT, [1, -7, None, 2147483647]),
    ("l", BIGINT, [10, 3, 5, None]),
    ("f", DOUBLE, [1.5, -2.5, None, 0.0]),
    ("n", NUMERIC, [Decimal("1.50"), Decimal("-2.25"), None, Decimal("0")]),
    ("s", VARCHAR, ["hello", "Wörld", None, ""]),
    ("b", BOOLEAN, [True, False, None, True]),
    ("d", DATE, [dt.date(2024, 1, 31), dt.date(2020, 2, 29), None, dt.date(1969, 12, 31)]),
    (
        "ts",
        TIMESTAMP,
        [
            dt.datetime(2024, 1, 31, 10, 30, 15, 250000),
            None,
            dt.datetime(2020, 2, 29),
            dt.datetime(1969, 12, 31, 23, 59, 59),
        ],
    ),
    ("tz", TIMESTAMPTZ, [dt.datetime(2024, 3, 10, 12, 0, tzinfo=dt.UTC), None, None, None]),
    (
        "j",
        JSONB,
        ['{"a": 1, "b": [1, 2.50, "x"], "c": {"d": null}}', '[1, "x", true]', None, '"str"'],
    ),
]

NOW = dt.datetime(2024, 5, 1, 12, 0, tzinfo=dt.UTC)


def make_batch() -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays(
        [pa.array(v, t.arrow) for _, t, v in COLUMNS], names=[c[0] for c in COLUMNS]
    )


def make_scope() -> Scope:
    return Scope([ColumnBinding(name, t, i, "t") for i, (name, t, _) in enumerate(COLUMNS)])


def parse(sql: str) -> sqlglot.exp.Expression:
    return sqlglot.parse_one("SELECT " + sql, read="risingwave").expressions[0]


@pytest.fixture
def bind() -> Callable[..., Expr]:
    def f(sql: str, params: ParamContext | None = None) -> Expr:
        return ExprBinder(make_scope(), params).bind(parse(sql))

    return f


@pytest.fixture
def ev() -> Callable[..., list[Any]]:
    def f(sql: str, tz: str = "UTC") -> list[Any]:
        e = ExprBinder(make_scope()).bind(parse(sql))
        out = e.eval(make_batch(), EvalContext(timezone=tz, now=NOW))
        assert out.type == e.type.arrow or e.type.kind.value == "unknown"
        assert len(out) == 4
        return out.to_pylist()

    return f


@pytest.fixture
def ev1() -> Callable[..., Any]:
    def f(sql: str, tz: str = "UTC") -> Any:
        e = ExprBinder(Scope([])).bind(parse(sql))
        batch = pa.RecordBatch.from_arrays([pa.nulls(1)], names=["_"])
        out = e.eval(batch, EvalContext(timezone=tz, now=NOW))
        assert out.type == e.type.arrow or e.type.kind.value == "unknown"
        return out[0].as_py()

    return f
