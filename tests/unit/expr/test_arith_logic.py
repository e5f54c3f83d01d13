"""Arithmetic, comparison and boolean operators: Postgres typing, NULLs and errors."""

from __future__ import annotations

from decimal import Decimal

import pytest

from engine.errors import DivisionByZero, NumericValueOutOfRange, UndefinedFunction

D = Decimal


def test_integer_arithmetic(ev) -> None:
    assert ev("i - 1") == [0, -8, None, 2147483646]
    assert ev("l * 2") == [20, 6, 10, None]
    assert ev("i - l") == [-9, -10, None, None]
    assert ev("l / 4") == [2, 0, 1, None]
    assert ev("-l / 2") == [-5, -1, -2, None]  # truncates toward zero
    assert ev("l % 3") == [1, 0, 2, None]
    assert ev("-l % 3") == [-1, 0, -2, None]  # sign of the dividend


def test_integer_overflow_and_division_by_zero(ev, ev1) -> None:
    with pytest.raises(NumericValueOutOfRange, match="^integer out of range$"):
        ev("i + 1")
    with pytest.raises(NumericValueOutOfRange, match="^bigint out of range$"):
        ev1("9223372036854775807 + 1")
    with pytest.raises(NumericValueOutOfRange, match="^smallint out of range$"):
        ev1("32767::smallint + 1::smallint")
    with pytest.raises(DivisionByZero, match="^division by zero$") as e:
        ev("l / 0")
    assert e.value.sqlstate == "22012"
    with pytest.raises(DivisionByZero):
        ev("f / 0")
    with pytest.raises(DivisionByZero):
        ev("n / 0")
    with pytest.raises(DivisionByZero):
        ev("l % 0")


def test_mixed_types(bind, ev) -> None:
    assert bind("i + l").type.display == "bigint"
    assert bind("i + n").type.display == "numeric"
    assert bind("l * f").type.display == "double precision"
    assert bind("n + f").type.display == "double precision"
    assert ev("n * 2") == [D("3.00"), D("-4.50"), None, D(0)]
    assert ev("n / 3") == [D("0.5"), D("-0.75"), None, D(0)]
    assert ev("l / 3.0") == [D("3.3333333333"), D(1), D("1.6666666667"), None]
    assert ev("f * 2") == [3.0, -5.0, None, 0.0]
    assert ev("-n") == [D("-1.5"), D("2.25"), None, D(0)]


def test_comparisons(ev) -> None:
    assert ev("i < l") == [True, True, None, None]
    assert ev("i = 1") == [True, False, None, False]
    assert ev("i <> 1") == [False, True, None, True]
    assert ev("i != 1") == [False, True, None, True]
    assert ev("n >= 0") == [True, False, None, True]
    assert ev("f > n") == [False, False, None, False]
    assert ev("f >= n") == [True, False, None, True]
    assert ev("s = 'hello'") == [True, False, None, False]
    assert ev("s < 'i'") == [True, True, None, True]  # bytewise: 'W' < 'i'
    assert ev("s > 'Z'") == [True, False, None, False]
    assert ev("d < '2021-01-01'") == [False, True, None, True]
    assert ev("ts >= d") == [True, None, None, True]


def test_comparison_type_error(bind) -> None:
    with pytest.raises(UndefinedFunction, match="operator does not exist: integer = boolean"):
        bind("i = b")


def test_null_predicates(ev) -> None:
    assert ev("i IS NULL") == [False, False, True, False]
    assert ev("i IS NOT NULL") == [True, True, False, True]
    assert ev("b IS TRUE") == [True, False, False, True]
    assert ev("b IS NOT TRUE") == [False, True, True, False]
    assert ev("b IS FALSE") == [False, True, False, False]
    assert ev("i IS DISTINCT FROM 1") == [False, True, True, True]
    assert ev("i IS NOT DISTINCT FROM NULL") == [False, False, True, False]


def test_three_valued_logic(ev) -> None:
    assert ev("b AND NULL") == [None, False, None, None]
    assert ev("b OR NULL") == [True, None, None, True]
    assert ev("NOT b") == [False, True, None, False]
    assert ev("b AND i > 0") == [True, False, None, True]


def test_between_in(ev) -> None:
    assert ev("l BETWEEN 3 AND 5") == [False, True, True, None]
    assert ev("l NOT BETWEEN 3 AND 5") == [True, False, False, None]
    assert ev("l IN (3, 10)") == [True, True, False, None]
    assert ev("l NOT IN (3, 10)") == [False, False, True, None]
    assert ev("l IN (3, NULL)") == [None, True, None, None]
    assert ev("l NOT IN (3, NULL)") == [None, False, None, None]
    assert ev("l IN (i, 3)") == [False, True, None, None]
    assert ev("s IN ('hello', 'x')") == [True, False, None, False]


def test_like(ev) -> None:
    assert ev("s LIKE 'h%'") == [True, False, None, False]
    assert ev("s LIKE '_ello'") == [True, False, None, False]
    assert ev("s ILIKE 'W%'") == [False, True, None, False]
    assert ev("s NOT LIKE '%l%'") == [False, False, None, True]
    assert ev("'a%b' LIKE 'a!%b' ESCAPE '!'") == [True] * 4
    assert ev("'axb' LIKE 'a!%b' ESCAPE '!'") == [False] * 4
    assert ev("'a_b' LIKE 'a\\_b'") == [True] * 4
    assert ev("s LIKE s") == [True, True, None, True]


def test_case_coalesce_nullif_greatest(ev) -> None:
    assert ev("CASE WHEN i > 0 THEN 'pos' WHEN i < 0 THEN 'neg' END") == ["pos", "neg", None, "pos"]
    assert ev("CASE l WHEN 10 THEN 1 WHEN 3 THEN 2 ELSE 0 END") == [1, 2, 0, 0]
    assert ev("CASE WHEN l = 3 THEN 0 ELSE 30 / (l - 3) END") == [4, 0, 15, None]
    assert ev("CASE WHEN b THEN 1.5 ELSE 1 END") == [D("1.5"), D(1), D(1), D("1.5")]
    assert ev("coalesce(i, l, 0)") == [1, -7, 5, 2147483647]
    assert ev("coalesce(s, 'none')") == ["hello", "Wörld", "none", ""]
    assert ev("nullif(l, 3)") == [10, None, 5, None]
    assert ev("greatest(i, l)") == [10, 3, 5, 2147483647]
    assert ev("least(i, l, 0)") == [0, -7, 0, 0]
    assert ev("greatest(s, 'm')") == ["m", "m", "m", "m"]
