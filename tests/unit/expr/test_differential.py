"""Differential property test: our kernels vs DuckDB on random small tables.

DuckDB's semantics match Postgres for the expressions below once spelled the DuckDB way
(integer division is `//`, both truncate toward zero; `%` takes the dividend's sign).
Where Postgres and DuckDB differ on errors (DuckDB returns NULL for x // 0, Postgres raises
22012), the expected behaviour is encoded here directly.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa
import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.errors import DivisionByZero, NumericValueOutOfRange
from engine.expr import ColumnBinding, EvalContext, ExprBinder, Scope
from engine.types import BIGINT, INT, VARCHAR

INT32 = st.one_of(
    st.none(),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-20, 20),
    st.sampled_from([0, 1, -1, 2**31 - 1, -(2**31)]),
)
INT64 = st.one_of(st.none(), st.integers(-(2**63), 2**63 - 1), st.integers(-50, 50))
TEXT = st.one_of(st.none(), st.text(alphabet="aAbé _%x", max_size=6))

ROWS = st.lists(st.tuples(INT32, INT32, INT64, TEXT, TEXT), min_size=1, max_size=8)

# (ours, duckdb)
NUMERIC_EXPRS = [
    ("a + b", "a + b"),
    ("a - b", "a - b"),
    ("a * b", "a * b"),
    ("x + a", "x + a"),
    ("x * b", "x * b"),
    ("-a", "-a"),
    ("abs(a)", "abs(a)"),
    ("a < b", "a < b"),
    ("a = b", "a = b"),
    ("a <> b", "a <> b"),
    ("x >= a", "x >= a"),
    ("a IS DISTINCT FROM b", "a IS DISTINCT FROM b"),
    ("coalesce(a, b)", "coalesce(a, b)"),
    ("greatest(a, b)", "greatest(a, b)"),
    ("least(a, x)", "least(a, x)"),
    ("a BETWEEN b AND 10", "a BETWEEN b AND 10"),
    ("a IN (b, 1, NULL)", "a IN (b, 1, NULL)"),
    ("a > 0 AND b > 0", "a > 0 AND b > 0"),
    ("a > 0 OR b > 0", "a > 0 OR b > 0"),
    ("CASE WHEN a > b THEN a ELSE b END", "CASE WHEN a > b THEN a ELSE b END"),
]
DIV_EXPRS = [("a / b", "a // b"), ("a % b", "a % b"), ("x / a", "x // a")]
STRING_EXPRS = [
    ("upper(s)", "upper(s)"),
    ("lower(s)", "lower(s)"),
    ("length(s)", "length(s)"),
    ("s || t", "s || t"),
    ("substr(s, 2, 3)", "substr(s, 2, 3)"),
    ("s < t", "s < t"),
    ("s = t", "s = t"),
    ("replace(s, 'a', 'xy')", "replace(s, 'a', 'xy')"),
    ("position('a' IN s)", "position('a' IN s)"),
    ("s LIKE 'a%'", "s LIKE 'a%'"),
    ("s LIKE t", "s LIKE t ESCAPE '\\'"),
    ("left(s, 2)", "left(s, 2)"),
    ("right(s, 2)", "right(s, 2)"),
    ("lpad(s, 4, '*')", "lpad(s, 4, '*')"),
    ("rpad(s, 4, '*')", "rpad(s, 4, '*')"),
    ("reverse(s)", "reverse(s)"),
    ("split_part(s, 'a', 2)", "split_part(s, 'a', 2)"),
    ("concat(s, a, t)", "concat(s, a, t)"),
    ("s || a", "s || a::VARCHAR"),
    ("starts_with(s, 'a')", "starts_with(s, 'a')"),
    ("strpos(s, t)", "strpos(s, t)"),
    ("coalesce(s, t, 'z')", "coalesce(s, t, 'z')"),
]

SCOPE = Scope(
    [
        ColumnBinding("a", INT, 0),
        ColumnBinding("b", INT, 1),
        ColumnBinding("x", BIGINT, 2),
        ColumnBinding("s", VARCHAR, 3),
        ColumnBinding("t", VARCHAR, 4),
    ]
)
SCHEMA = pa.schema(
    [
        ("a", pa.int32()),
        ("b", pa.int32()),
        ("x", pa.int64()),
        ("s", pa.string()),
        ("t", pa.string()),
    ]
)


def _ours(sql: str, batch: pa.RecordBatch) -> list[Any]:
    e = ExprBinder(SCOPE).bind(sqlglot.parse_one("SELECT " + sql, read="risingwave").expressions[0])
    return e.eval(batch, EvalContext()).to_pylist()


def _duck(sql: str, table: pa.Table) -> list[Any]:
    con = duckdb.connect()
    con.register("t_in", table)
    rows = con.execute(f"SELECT {sql} FROM t_in").fetchall()
    return [r[0] for r in rows]


def _check(ours_sql: str, duck_sql: str, rows: list[tuple[Any, ...]]) -> None:
    table = pa.Table.from_pylist(
        [dict(zip(SCHEMA.names, r, strict=True)) for r in rows], schema=SCHEMA
    )
    batch = table.to_batches()[0]
    try:
        expected: list[Any] | type[Exception] = _duck(duck_sql, table)
    except (duckdb.OutOfRangeException, duckdb.ConversionException):
        expected = NumericValueOutOfRange
    if expected is NumericValueOutOfRange:
        with pytest.raises(NumericValueOutOfRange):
            _ours(ours_sql, batch)
        return
    assert _ours(ours_sql, batch) == expected, (ours_sql, rows)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=ROWS, which=st.sampled_from(NUMERIC_EXPRS))
def test_numeric_matches_duckdb(rows: list[tuple[Any, ...]], which: tuple[str, str]) -> None:
    _check(*which, rows)


@settings(max_examples=60, deadline=None)
@given(rows=ROWS, which=st.sampled_from(STRING_EXPRS))
def test_strings_match_duckdb(rows: list[tuple[Any, ...]], which: tuple[str, str]) -> None:
    _check(*which, rows)


@settings(max_examples=40, deadline=None)
@given(rows=ROWS, which=st.sampled_from(DIV_EXPRS))
def test_division_matches_postgres(rows: list[tuple[Any, ...]], which: tuple[str, str]) -> None:
    """Postgres raises 22012 when a non-NULL dividend meets a zero divisor."""
    col = {"a": 0, "b": 1, "x": 2}
    num, den = which[0].split()[0], which[0].split()[2]
    if any(r[col[num]] is not None and r[col[den]] == 0 for r in rows):
        table = pa.Table.from_pylist(
            [dict(zip(SCHEMA.names, r, strict=True)) for r in rows], schema=SCHEMA
        )
        with pytest.raises(DivisionByZero):
            _ours(which[0], table.to_batches()[0])
        return
    _check(*which, rows)


def test_int_min_modulo_minus_one_is_zero() -> None:
    """PostgreSQL: INT_MIN % -1 = 0 (no overflow), while INT_MIN / -1 overflows."""
    batch = pa.RecordBatch.from_pylist(
        [{"a": -(2**31), "b": -1, "x": -(2**63), "s": None, "t": None}], schema=SCHEMA
    )
    assert _ours("a % b", batch) == [0]
    assert _ours("x % b", batch) == [0]
    with pytest.raises(NumericValueOutOfRange):
        _ours("a / b", batch)
