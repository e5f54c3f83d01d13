"""Binder: name resolution, literals, parameter inference, hook, tree utilities."""

from __future__ import annotations

from decimal import Decimal

import pytest
import sqlglot

from engine.errors import (
    AmbiguousColumn,
    DatatypeMismatch,
    FeatureNotSupported,
    UndefinedColumn,
    UndefinedFunction,
    UndefinedTable,
)
from engine.expr import (
    ColumnBinding,
    ExprBinder,
    InputRef,
    Literal,
    ParamContext,
    Scope,
    assign_cast,
    common_type,
    evaluate_constant,
    parse_data_type,
)
from engine.types import (
    BIGINT,
    BOOLEAN,
    DATE,
    INT,
    NUMERIC,
    TIMESTAMP,
    UNKNOWN,
    VARCHAR,
    list_of,
)


def P(sql: str) -> sqlglot.exp.Expression:  # noqa: N802
    return sqlglot.parse_one("SELECT " + sql, read="risingwave").expressions[0]


SCOPE = Scope(
    [
        ColumnBinding("a", INT, 0, "t"),
        ColumnBinding("b", VARCHAR, 1, "t"),
        ColumnBinding("a", BIGINT, 2, "u"),
        ColumnBinding("_row_id", BIGINT, 3, "t", hidden=True),
        ColumnBinding("Mixed", INT, 4, "u"),
    ]
)


def test_column_resolution_qualified_and_not() -> None:
    b = ExprBinder(SCOPE)
    e = b.bind(P("t.a"))
    assert isinstance(e, InputRef) and e.index == 0 and e.type == INT
    assert b.bind(P("u.a")).index == 2  # type: ignore[attr-defined]
    assert b.bind(P("b")).index == 1  # type: ignore[attr-defined]
    assert b.bind(P("B")).index == 1  # type: ignore[attr-defined]  # unquoted folds
    assert b.bind(P('"Mixed"')).index == 4  # type: ignore[attr-defined]
    assert b.bind(P("_row_id")).index == 3  # type: ignore[attr-defined]  # hidden, explicit


def test_resolution_errors_carry_sqlstate_and_position() -> None:
    b = ExprBinder(SCOPE)
    with pytest.raises(AmbiguousColumn) as e1:
        b.bind(P("a"))
    assert e1.value.sqlstate == "42702" and str(e1.value) == 'column reference "a" is ambiguous'
    assert e1.value.position == 8
    with pytest.raises(UndefinedColumn) as e2:
        b.bind(P("1 + zz"))
    assert str(e2.value) == 'column "zz" does not exist' and e2.value.position == 12
    with pytest.raises(UndefinedColumn, match=r"column t\.zz does not exist"):
        b.bind(P("t.zz"))
    with pytest.raises(UndefinedTable) as e3:
        b.bind(P("q.a"))
    assert e3.value.sqlstate == "42P01"
    assert str(e3.value) == 'missing FROM-clause entry for table "q"'
    with pytest.raises(UndefinedColumn):
        b.bind(P('"mixed"'))  # quoted names are case-sensitive


def test_star_skips_hidden_columns() -> None:
    assert [c.index for c in SCOPE.star()] == [0, 1, 2, 4]
    assert [c.index for c in SCOPE.star("u")] == [2, 4]
    with pytest.raises(UndefinedTable):
        SCOPE.star("zz")


@pytest.mark.parametrize(
    "sql,typ,value",
    [
        ("1", INT, 1),
        ("2147483648", BIGINT, 2147483648),
        ("-2147483648", INT, -2147483648),
        ("99999999999999999999", NUMERIC, Decimal("99999999999999999999")),
        ("1.5", NUMERIC, Decimal("1.5")),
        ("TRUE", BOOLEAN, True),
        ("DATE '2024-01-02'", DATE, __import__("datetime").date(2024, 1, 2)),
        (
            "TIMESTAMP '2024-01-02 03:04:05'",
            TIMESTAMP,
            __import__("datetime").datetime(2024, 1, 2, 3, 4, 5),
        ),
    ],
)
def test_literal_types(sql: str, typ: object, value: object) -> None:
    e = ExprBinder(SCOPE).bind(P(sql))
    assert e.type == typ
    assert evaluate_constant(e) == value


def test_string_literal_is_unknown_until_context() -> None:
    b = ExprBinder(SCOPE)
    assert b.bind(P("'x'")).type == VARCHAR
    e = b.bind(P("t.a = '5'"))
    assert str(e) == "(a = 5:Int32)"
    assert b.bind(P("NULL")).type == UNKNOWN


def test_unknown_function_and_operator() -> None:
    b = ExprBinder(SCOPE)
    with pytest.raises(UndefinedFunction) as e:
        b.bind(P("foo(t.a)"))
    assert str(e.value) == "function foo(integer) does not exist"
    assert e.value.hint == (
        "No function matches the given name and argument types. "
        "You might need to add explicit type casts."
    )
    assert e.value.position == 8
    with pytest.raises(UndefinedFunction, match=r"function upper\(integer\) does not exist"):
        b.bind(P("upper(t.a)"))
    with pytest.raises(UndefinedFunction, match="operator does not exist: integer \\+ boolean"):
        b.bind(P("t.a + true"))


def test_param_inference_in_describe_mode() -> None:
    params = ParamContext([None, None])
    b = ExprBinder(SCOPE, params)
    b.bind(P("t.a = $1"))
    b.bind(P("$2 || 'x'"))
    b.bind(P("$3::bigint"))
    b.bind(P("$5"))
    b.bind(P("u.a + $6"))
    assert params.types[:3] == [INT, VARCHAR, BIGINT]
    assert len(params.types) == 6
    assert params.finalize() == [INT, VARCHAR, BIGINT, VARCHAR, VARCHAR, BIGINT]


def test_declared_param_type_wins() -> None:
    params = ParamContext([BIGINT])
    e = ExprBinder(SCOPE, params).bind(P("t.a = $1"))
    assert params.types == [BIGINT]
    assert e.children()[1].type == BIGINT


def test_params_with_values_become_literals() -> None:
    params = ParamContext([INT, None, None], [5, "7", None])
    e = ExprBinder(SCOPE, params).bind(P("t.a + $1 + $2"))
    assert str(e) == "((a + 5:Int32) + 7:Int32)"
    assert e.input_refs() == {0}


def test_hook_is_consulted_first() -> None:
    seen: list[str] = []

    def hook(node: sqlglot.exp.Expression) -> Literal | None:
        seen.append(type(node).__name__)
        return Literal(42, BIGINT) if isinstance(node, sqlglot.exp.Count) else None

    e = ExprBinder(SCOPE, hook=hook).bind(P("count(*) + 1"))
    assert seen[0] == "Add"
    assert evaluate_constant(e) == 43 and e.type == BIGINT


def test_remap_constant_now_and_str() -> None:
    b = ExprBinder(SCOPE)
    e = b.bind(P("t.a + u.a"))
    assert e.input_refs() == {0, 2}
    r = e.remap({0: 5, 2: 7})
    assert r.input_refs() == {5, 7} and e.input_refs() == {0, 2}
    assert str(e) == "(a::Int64 + a)"
    assert b.bind(P("1 + 2")).is_constant()
    assert not b.bind(P("random()")).is_constant()
    assert not b.bind(P("t.a + 1")).is_constant()
    n = b.bind(P("now() - INTERVAL '1 hour'"))
    assert n.has_now() and not n.is_constant()
    assert not b.bind(P("t.a")).has_now()


def test_case_result_type_mismatch() -> None:
    with pytest.raises(DatatypeMismatch) as e:
        ExprBinder(SCOPE).bind(P("CASE WHEN t.a > 1 THEN 1 ELSE t.b END"))
    assert e.value.sqlstate == "42804"


def test_common_type_rules() -> None:
    assert common_type([INT, BIGINT]) == BIGINT
    assert common_type([INT, NUMERIC, UNKNOWN]) == NUMERIC
    assert common_type([UNKNOWN]) == VARCHAR
    assert common_type([DATE, TIMESTAMP]) == TIMESTAMP
    with pytest.raises(DatatypeMismatch, match="UNION types integer and boolean cannot be"):
        common_type([INT, BOOLEAN], "UNION")


def test_assign_cast() -> None:
    b = ExprBinder(SCOPE)
    assert evaluate_constant(assign_cast(b.bind(P("'12'")), INT)) == 12
    assert evaluate_constant(assign_cast(b.bind(P("2.5")), INT)) == 3
    assert assign_cast(b.bind(P("t.a")), VARCHAR).type == VARCHAR
    assert assign_cast(b.bind(P("NULL")), INT).type == INT
    with pytest.raises(DatatypeMismatch) as e:
        assign_cast(b.bind(P("t.b")), INT, column="x")
    assert (
        str(e.value) == 'column "x" is of type integer but expression is of type character varying'
    )


@pytest.mark.parametrize(
    "name,typ",
    [
        ("int", INT),
        ("varchar(10)", VARCHAR),
        ("numeric(10,2)", NUMERIC),
        ("int[]", list_of(INT)),
        ("text[][]", list_of(list_of(VARCHAR))),
        ("timestamp", TIMESTAMP),
        ("bigint", BIGINT),
    ],
)
def test_parse_data_type(name: str, typ: object) -> None:
    assert parse_data_type(sqlglot.exp.DataType.build(name, dialect="risingwave")) == typ


def test_parse_data_type_unsupported() -> None:
    with pytest.raises(FeatureNotSupported, match="Not supported: type"):
        parse_data_type(sqlglot.exp.DataType.build("struct<a int>", dialect="risingwave"))
