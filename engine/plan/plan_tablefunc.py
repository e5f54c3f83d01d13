"""Set-returning functions in FROM: unnest, generate_series, information_schema._pg_expandarray.

`SELECT ... FROM generate_series(1, array_upper(current_schemas(false), 1)) AS s(r)` and
`FROM unnest(arr) WITH ORDINALITY AS u(x, n)` are what client catalog queries use. The
arguments are bound in an empty scope (constants, parameters, or columns of an enclosing
query inside a correlated subquery; LATERAL references to earlier FROM items are not
supported) and evaluated when the batch executor reaches the `TableFunction` node, so a
correlated subquery re-evaluates them for each outer row.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from engine import expr as ex
from engine.errors import not_supported
from engine.expr.fn_regex import TEXT_ARRAY
from engine.expr.series import series_args
from engine.plan.helpers import _Col
from engine.plan.logical import PlanNode, TableFunction
from engine.plan.plan_srf import typed_args
from engine.types import BIGINT, INT, Field, SqlType, TypeKind

TABLE_FUNCTIONS = (
    "unnest",
    "generate_series",
    "_pg_expandarray",
    "pg_options_to_table",
    "regexp_matches",
)


def _fn_name(fn: exp.Expression) -> str:
    if isinstance(fn, exp.Explode):
        return "unnest"
    if isinstance(fn, (exp.ExplodingGenerateSeries, exp.GenerateSeries)):
        return "generate_series"
    if isinstance(fn, exp.Anonymous):
        return str(fn.this).lower()
    if isinstance(fn, exp.StringToArray):
        return "string_to_array"
    return fn.sql_name().lower() if isinstance(fn, exp.Func) else ""


def _fn_args(fn: exp.Expression) -> list[exp.Expression]:
    if isinstance(fn, (exp.ExplodingGenerateSeries, exp.GenerateSeries)):
        return [a for a in (fn.args.get(k) for k in ("start", "end", "step")) if a is not None]
    if isinstance(fn, exp.Anonymous):
        return list(fn.expressions)
    out = [fn.this] if fn.this is not None else []
    return out + list(fn.expressions)


def is_table_function(item: exp.Expression) -> bool:
    if isinstance(item, exp.Unnest):
        return True
    if not isinstance(item, exp.Table) or not isinstance(item.this, (exp.Func, exp.Anonymous)):
        return False
    name = _fn_name(item.this)
    if name in TABLE_FUNCTIONS:
        return True
    # a scalar function in FROM is a one-row table (string_to_array(...) AS s)
    from engine.expr.registry import FUNCTIONS

    return name in FUNCTIONS or isinstance(item.this, exp.StringToArray)


def plan_table_function(planner: Any, item: exp.Expression) -> tuple[PlanNode, list[_Col]]:
    ordinality = False
    if isinstance(item, exp.Unnest):
        name, arg_nodes = "unnest", list(item.expressions)
        ordinality = item.args.get("offset") not in (None, False)
    else:
        name, arg_nodes = _fn_name(item.this), _fn_args(item.this)
        ordinality = bool(item.args.get("ordinality"))
    if name not in TABLE_FUNCTIONS:
        value = planner._bind(item.this, ex.Scope([]))
        alias_node = item.args.get("alias")
        has_alias = isinstance(alias_node, exp.TableAlias) and bool(alias_node.name)
        names = [alias_node.name if has_alias else name, "ordinality"]
        if isinstance(alias_node, exp.TableAlias) and alias_node.columns:
            for i, c in enumerate(alias_node.columns[:2]):
                names[i] = c.name
        sfields = [Field(names[0], value.type)]
        if ordinality:  # one row, numbered 1 (WITH ORDINALITY)
            sfields.append(Field(names[1], BIGINT))
        node = TableFunction(sfields, None, name="scalar", args=[value], ordinality=ordinality)
        table = alias_node.name if alias_node else name
        return node, [_Col(f.name, f.type, table) for f in sfields]
    args = [planner._bind(a, ex.Scope([])) for a in arg_nodes]
    args = typed_args(name, args)
    fields = _result_fields(name, args)
    alias_node = item.args.get("alias")
    alias = alias_node.name if isinstance(alias_node, exp.TableAlias) and alias_node.name else None
    if alias and len(fields) == 1 and name != "_pg_expandarray":
        fields = [Field(alias, fields[0].type)]
    if ordinality:
        fields.append(Field("ordinality", BIGINT))
    if isinstance(alias_node, exp.TableAlias) and alias_node.columns:
        names = [c.name for c in alias_node.columns]
        if isinstance(item.args.get("offset"), exp.Identifier):
            names.append(item.args["offset"].name)
        fields = [
            Field(names[i] if i < len(names) else f.name, f.type) for i, f in enumerate(fields)
        ]
    node = TableFunction(fields, None, name=name, args=args, ordinality=ordinality)
    table = alias or name
    return node, [_Col(f.name, f.type, table) for f in fields]


def _result_fields(name: str, args: list[ex.Expr]) -> list[Field]:
    if name == "generate_series":
        return [Field("generate_series", series_args(args)[1])]
    if name == "regexp_matches":
        return [Field(name, TEXT_ARRAY)]
    if len(args) != 1 or args[0].type.kind is not TypeKind.LIST or args[0].type.elem is None:
        raise not_supported(f"{name} of {args[0].type.display if args else 'nothing'}")
    elem = args[0].type.elem
    if name == "pg_options_to_table":
        from engine.types import pg_alias

        text = pg_alias(elem, "text")
        return [Field("option_name", text), Field("option_value", text)]
    if name == "_pg_expandarray":
        return [Field("x", SqlType(elem.kind, elem.elem)), Field("n", INT)]
    return [Field(name, elem)]
