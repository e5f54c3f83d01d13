"""Multi-row INSERT ... VALUES builds its columns a column at a time
(`engine.handlers.dml.values_columns`); it must give exactly the values (or the error) of
binding and evaluating the rows one by one, as INSERT did before."""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa
import pytest
import sqlglot
from sqlglot import exp

from engine import expr as ex
from engine.errors import EngineError
from engine.handlers.dml import _bind_row, _evaluate_rows, values_columns
from engine.types import (
    BIGINT,
    BOOLEAN,
    DATE,
    DOUBLE,
    INT,
    INTERVAL,
    JSONB,
    NUMERIC,
    REAL,
    SMALLINT,
    TIMESTAMP,
    TIMESTAMPTZ,
    VARCHAR,
    Field,
    SqlType,
)


def _values(sql_rows: list[str]) -> exp.Values:
    ast = sqlglot.parse_one("INSERT INTO t VALUES " + ", ".join(sql_rows), dialect="postgres")
    assert isinstance(ast.expression, exp.Values)
    return ast.expression


def _norm(col: list[Any]) -> list[Any]:
    return ["NaN" if isinstance(v, float) and math.isnan(v) else v for v in col]


def both(sql_rows: list[str], types: list[SqlType], tz: str = "UTC") -> None:
    fields = [Field(f"c{i}", t) for i, t in enumerate(types)]
    ctx = ex.EvalContext(timezone=tz)
    src = _values(sql_rows)
    try:
        items = [t.expressions if isinstance(t, exp.Tuple) else [t] for t in src.expressions]
        old: Any = [
            _norm(c.to_pylist())
            for c in _evaluate_rows([_bind_row(i, fields, None) for i in items], fields, ctx)
        ]
    except EngineError as e:
        old = (e.sqlstate, e.message)
    try:
        cols = values_columns(src, fields, None, ctx)
        assert [c.type for c in cols] == [t.arrow for t in types]
        new: Any = [_norm(c.to_pylist()) for c in cols]
    except EngineError as e:
        new = (e.sqlstate, e.message)
    assert new == old, sql_rows


LITERALS = [
    "1", "-1", "0", "2147483647", "2147483648", "-2147483648", "9223372036854775807",
    "1.5", "-2.5", "0.1", "1e3", "1.23456789012", "NULL", "true", "false", "DEFAULT",
    "'7'", "' 8 '", "'x'", "''", "'1.5'", "'t'", "'2024-05-01'", "'2024-05-01 10:00:00'",
    "'2024-05-01 10:00:00+02'", "'2024-03-31 02:30:00'", "'1 day'", "'{\"b\": 1, \"a\": 2}'",
    "'é'", "1 + 2", "CAST('3' AS INT)", "'5'::BIGINT", "-'1'",
]  # fmt: skip

TYPES = [SMALLINT, INT, BIGINT, REAL, DOUBLE, NUMERIC, BOOLEAN, VARCHAR, DATE, TIMESTAMP,
         TIMESTAMPTZ, INTERVAL, JSONB]  # fmt: skip


@pytest.mark.parametrize("t", TYPES, ids=[t.kind.value for t in TYPES])
def test_each_literal_alone_and_all_that_work_together(t: SqlType) -> None:
    fields = [Field("c0", t)]
    good = []
    for lit in LITERALS:
        both([f"({lit})"], [t])
        try:
            _evaluate_rows([_bind_row(_values([f"({lit})"]).expressions[0].expressions,
                                      fields, None)], fields, ex.EvalContext())  # fmt: skip
            good.append(lit)
        except EngineError:
            pass
    rows = [f"({lit})" for lit in good * 2]
    if rows:
        both(rows, [t])
        both(rows, [t], tz="Europe/Berlin")


def test_mixed_rows_and_errors_in_row_order() -> None:
    both(["(1, 'a', '2024-05-01 10:00:00+02')", "(2, NULL, '2024-05-02')"],
         [BIGINT, VARCHAR, TIMESTAMPTZ])  # fmt: skip
    # the second row's first column fails before the third row's second column
    both(["(1, 'x')", "('bad', 'y')", "(3, 'not a date')"], [INT, DATE])
    both(["(1, '2024-05-01')", "(2, 'not a date')", "('bad', '2024-05-01')"], [INT, DATE])
    both(["(1, 2)", "(3)"], [INT, INT])
    both(["(1)", "(2, 3)"], [INT])
    both(["(40000)"], [SMALLINT])


def test_varchar_n_and_numeric_p_s_columns_keep_their_checks() -> None:
    short = SqlType(VARCHAR.kind, mod=(3,))
    both(["('abc')", "('abcd')"], [short])
    both(["('ab')", "('abc')"], [short])


def test_a_thousand_rows() -> None:
    rows = [f"({i}, 'n{i}', {i}.25, '2024-05-01 10:{i % 60:02d}:00+02', {str(i % 2 == 0)})"
            for i in range(1000)]  # fmt: skip
    both(rows, [BIGINT, VARCHAR, DOUBLE, TIMESTAMPTZ, BOOLEAN])
    cols = values_columns(_values(rows), [Field("a", BIGINT)] * 0 + [
        Field("a", BIGINT), Field("b", VARCHAR), Field("c", DOUBLE), Field("d", TIMESTAMPTZ),
        Field("e", BOOLEAN)], None, ex.EvalContext())  # fmt: skip
    assert isinstance(cols[3], pa.Array) and cols[3].null_count == 0
