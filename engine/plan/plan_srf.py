"""Set-returning functions in the select list (PostgreSQL's ProjectSet).

`SELECT unnest(i.indkey) AS attnum, generate_subscripts(i.indkey, 1) AS ord FROM pg_index i`
(SQLAlchemy) and `SELECT (information_schema._pg_expandarray(i.indkey)).n,
information_schema._pg_expandarray(i.indkey) AS keys ...` (pgjdbc) expand each input row
into as many rows as its longest set-returning call yields; shorter ones are padded with
NULLs (PostgreSQL 10+ semantics). Identical calls are evaluated once.

The planner calls `plan_select_srfs` after FROM/WHERE: each call is replaced in the select
list by a column of a `ProjectSet` node placed under the projection. `_pg_expandarray`
returns a composite (x, n): it becomes two columns `<name>.x` and `<name>.n`; field access
`(expr).x` binds to them (engine.expr.fn_system), also through a subquery alias
(`(result.keys).x`). In a materialized view (`StreamProjectSet`, engine/stream/operators/
project_set.py) the node also has a hidden `_projected_row_id` (an output row's position
among its input row's outputs) that, with the input's stream key, keys its rows; the
composite `_pg_expandarray` is ad hoc only.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from engine import expr as ex
from engine.errors import not_supported
from engine.expr.fn_regex import TEXT_ARRAY, regexp_matches_args
from engine.expr.series import series_args
from engine.plan.helpers import _Col
from engine.plan.logical import PlanNode, ProjectSet
from engine.plan.plan_udf import select_list_udtf
from engine.types import BIGINT, INT, Field, SqlType, TypeKind

_NAMES = ("unnest", "generate_series", "generate_subscripts", "_pg_expandarray", "regexp_matches")
PROJECTED_ROW_ID = "_projected_row_id"


def _srf_name(n: exp.Expression, udtfs: frozenset[str] = frozenset()) -> str | None:
    if isinstance(n, exp.Anonymous) and str(n.this).lower() in udtfs:
        return str(n.this).lower()  # a user-defined table function (engine.plan.plan_udf)
    if isinstance(n, exp.Explode):
        return "unnest"
    if isinstance(n, (exp.ExplodingGenerateSeries, exp.GenerateSeries)):
        return "generate_series"
    if isinstance(n, exp.Anonymous) and str(n.this).lower() in _NAMES:
        return str(n.this).lower()
    return None


def _srf_args(n: exp.Expression) -> list[exp.Expression]:
    if isinstance(n, (exp.ExplodingGenerateSeries, exp.GenerateSeries)):
        return [a for a in (n.args.get(k) for k in ("start", "end", "step")) if a is not None]
    if isinstance(n, exp.Anonymous):
        return list(n.expressions)
    return ([n.this] if n.this is not None else []) + list(n.expressions)


def _find(
    node: exp.Expression, out: list[exp.Expression], udtfs: frozenset[str] = frozenset()
) -> None:
    if isinstance(node, (exp.Subquery, exp.Select)):
        return
    if _srf_name(node, udtfs) is not None:
        out.append(node)
        return
    for child in node.iter_expressions():
        _find(child, out, udtfs)


def _outer(n: exp.Expression) -> exp.Expression:
    """The node to replace: `information_schema.f(...)` is a Dot around the call."""
    p = n.parent
    if isinstance(p, exp.Dot) and p.expression is n and isinstance(p.this, exp.Identifier):
        return p
    return n


def has_select_srfs(q: exp.Select, udtfs: frozenset[str] = frozenset()) -> bool:
    found: list[exp.Expression] = []
    for item in q.expressions:
        _find(item, found, udtfs)
    return bool(found)


def typed_args(name: str, args: list[ex.Expr]) -> list[ex.Expr]:
    """A built-in call's arguments cast to what it takes (generate_series, regexp_matches)."""
    if name == "generate_series":
        return series_args(args)[0]
    if name == "regexp_matches":
        return regexp_matches_args(args)
    return args


def _fields(name: str, args: list[ex.Expr], base: str) -> list[Field]:
    if name == "generate_series":
        return [Field(base, series_args(args)[1])]
    if name == "regexp_matches":
        return [Field(base, TEXT_ARRAY)]
    if name == "generate_subscripts":
        return [Field(base, INT)]
    if not args or args[0].type.kind is not TypeKind.LIST or args[0].type.elem is None:
        raise not_supported(f"{name} of {args[0].type.display if args else 'nothing'}")
    elem = args[0].type.elem
    if name == "_pg_expandarray":
        return [Field(f"{base}.x", SqlType(elem.kind, elem.elem)), Field(f"{base}.n", INT)]
    return [Field(base, elem)]


def plan_select_srfs(
    planner: Any,
    q: exp.Select,
    node: PlanNode,
    cols: list[_Col],
    udtfs: frozenset[str] = frozenset(),
) -> tuple[exp.Select, PlanNode, list[_Col]]:
    """Rewrite `q`'s select list over a ProjectSet (see module docstring)."""
    q = q.copy()
    calls: list[exp.Expression] = []
    for item in q.expressions:
        _find(item, calls, udtfs)
    scope = planner._scope(cols)
    routines: dict[str, Any] = {}
    srfs: list[tuple[str, list[ex.Expr]]] = []
    new_fields: list[Field] = []
    by_sql: dict[str, str] = {}
    composite: dict[str, str] = {}
    for call in calls:
        key = call.sql()
        base = by_sql.get(key)
        if base is None:
            base = f"__srf{len(by_sql)}"
            by_sql[key] = base
            name = _srf_name(call, udtfs)
            assert name is not None
            args = [planner._bind(a, scope) for a in _srf_args(call)]
            if name in udtfs:
                routine, args, fields = select_list_udtf(planner, name, args, base)
                routines[name] = routine
            else:
                args = typed_args(name, args)
                fields = _fields(name, args, base)
            srfs.append((name, args))
            new_fields.extend(fields)
            if name == "_pg_expandarray":
                composite[base] = name
        target = _outer(call)
        ref: exp.Expression = exp.column(exp.to_identifier(base, quoted=True))
        name = _srf_name(call, udtfs)
        if target.parent is q and name is not None and name not in composite.values():
            ref = exp.Alias(this=ref, alias=exp.to_identifier(name, quoted=True))  # as PostgreSQL
        target.replace(ref)
    # a bare composite in the select list becomes its two fields
    items: list[exp.Expression] = []
    for item in q.expressions:
        inner = item.this if isinstance(item, exp.Alias) else item
        if isinstance(inner, exp.Column) and inner.name in composite:
            alias = item.alias if isinstance(item, exp.Alias) else "_pg_expandarray"
            for f in ("x", "n"):
                col = exp.column(exp.to_identifier(f"{inner.name}.{f}", quoted=True))
                items.append(
                    exp.alias_(col, exp.to_identifier(f"{alias.lower()}.{f}", quoted=True))
                )
            continue
        items.append(item)
    q.set("expressions", items)
    out = cols + [_Col(f.name, f.type, None) for f in new_fields]
    if not planner.streaming:
        ps = ProjectSet(
            list(node.schema) + new_fields, None, input=node, srfs=srfs, routines=routines
        )
        return q, ps, out
    if composite or node.stream_key is None:
        raise not_supported("this set-returning call in a materialized view")
    # streaming: an output row is keyed by its input row's key and its position among
    # that row's outputs (RisingWave's projected_row_id)
    ordinal = Field(PROJECTED_ROW_ID, BIGINT, hidden=True)
    schema = [*node.schema, *new_fields, ordinal]
    skey = [*node.stream_key, len(schema) - 1]
    ps = ProjectSet(schema, skey, input=node, srfs=srfs, routines=routines)
    return q, ps, [*out, _Col(ordinal.name, BIGINT, None, hidden=True)]
