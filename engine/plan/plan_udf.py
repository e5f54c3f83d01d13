"""User-defined functions in queries: overload resolution, SQL inlining, Python calls.

The planner meets a call `f(...)` whose name is a catalog function
(`engine.catalog.functions.UserFunction`) and turns it into:

* a Python scalar function: a `UdfCall` (engine.expr.udf) over the coerced arguments,
  evaluated per chunk like any other function;
* a SQL function: its body's expression bound with the call's arguments in place of its
  parameters (`$1` or the parameter names), then cast to the declared result type:
  inlined, so a SQL function costs nothing at run time and views see plain expressions;
* a Python aggregate (`CREATE AGGREGATE`): the SELECT's calls are rewritten, before the
  SELECT is planned, into `UdafNode` (a sqlglot aggregate node) so the aggregation
  planner treats them like built-in aggregates; each becomes an `AggSpec("udaf")`;
* a Python table function in FROM: a `TableFunction` node running the generator.

Overloads are resolved as PostgreSQL does for implicit casts: candidates with the call's
arity whose parameter types every argument reaches by an implicit cast; the one with
the most exact matches wins, a tie is ambiguous (42725). Built-in functions keep their
names: CREATE FUNCTION refuses a built-in's name.

`functions_used` lists the functions a query's text calls, recorded on views and sinks
(`extra["functions"]`) so DROP FUNCTION can refuse while they exist.
"""

from __future__ import annotations

from typing import Any

import sqlglot
from sqlglot import exp

from engine import expr as ex
from engine.catalog.functions import UserFunction, functions_named
from engine.errors import (
    AmbiguousFunction,
    FeatureNotSupported,
    InvalidFunctionDefinition,
    SqlSyntaxError,
    not_supported,
)
from engine.expr.registry import no_function
from engine.expr.udf import UdfCall, routine, udf_call
from engine.plan.helpers import _Col
from engine.plan.logical import AggSpec, PlanNode, TableFunction
from engine.types import VARCHAR, Field, SqlType

_MAX_DEPTH = 32  # SQL functions calling SQL functions


class UdafNode(exp.Expression, exp.AggFunc):
    """A call of a user-defined aggregate: `this` the function name, `expressions` its
    arguments (what `_find_aggs` and the aggregation planner look for)."""

    arg_types = {"this": True, "expressions": False}
    is_var_len_args = True

    def sql_name(self) -> str:  # type: ignore[override]
        """The function's own name: what the output column is named after (`sumsq`), as
        PostgreSQL names a call's column."""
        return str(self.this.name if isinstance(self.this, exp.Identifier) else self.this).upper()


def _call_name(n: exp.Expression) -> str | None:
    if isinstance(n, exp.Anonymous):
        return str(n.this).lower()
    return None


def resolve(
    cands: list[UserFunction], name: str, args: list[ex.Expr]
) -> tuple[UserFunction, list[ex.Expr]]:
    """The overload of `name` the arguments select, and the arguments coerced to it."""
    best: list[tuple[int, UserFunction, list[ex.Expr]]] = []
    for fn in cands:
        if len(fn.arg_types) != len(args):
            continue
        coerced: list[ex.Expr] = []
        exact = 0
        for a, t in zip(args, fn.arg_types, strict=True):
            c = ex.implicit_cast(a, t)
            if c is None:
                break
            exact += int(not ex.is_untyped(a) and a.type.kind is t.kind)
            coerced.append(c)
        else:
            best.append((exact, fn, coerced))
    if not best:
        raise no_function(name, args)
    best.sort(key=lambda b: -b[0])
    if len(best) > 1 and best[0][0] == best[1][0]:
        sig = ", ".join(a.type.display for a in args)
        raise AmbiguousFunction(
            f"function {name}({sig}) is not unique",
            hint="Could not choose a best candidate function. You might need to add explicit "
            "type casts.",
        )
    return best[0][1], best[0][2]


def _candidates(catalog: Any, name: str, kinds: tuple[str, ...]) -> list[UserFunction]:
    fns: dict[int, UserFunction] = getattr(catalog, "functions", {}) or {}
    if not fns:
        return []
    return [f for f in functions_named(fns, name) if f.kind in kinds]


# -- scalar calls ---------------------------------------------------------------------------------
def bind_scalar(planner: Any, n: exp.Expression, binder: ex.ExprBinder) -> ex.Expr | None:
    """The bound call when `n` calls a scalar user-defined function, else None."""
    name = _call_name(n)
    if name is None:
        return None
    cands = _candidates(planner.catalog, name, ("scalar", "table", "aggregate"))
    if not cands:
        return None
    scalar = [f for f in cands if f.kind == "scalar"]
    if not scalar:
        kind = cands[0].kind
        if kind == "table":
            raise not_supported(
                f"table function {name} here",
                hint=f"Call it in FROM: SELECT * FROM {name}(...).",
            )
        return None  # an aggregate outside an aggregation context: the planner refuses it
    args = [binder._bind(a) for a in n.expressions]
    fn, coerced = resolve(scalar, name, args)
    return call_function(planner, fn, coerced)


def call_function(planner: Any, fn: UserFunction, args: list[ex.Expr]) -> ex.Expr:
    if fn.language == "sql":
        return inline_sql(planner, fn, args)
    return udf_call(fn, args)


def sql_body(fn: UserFunction) -> exp.Expression:
    """The expression a SQL function's body computes (`SELECT expr` or `RETURN expr`)."""
    text = fn.body.strip().rstrip(";").strip()
    if text[:6].upper() == "RETURN":
        text = "SELECT " + text[6:]
    try:
        tree = sqlglot.parse_one(text, read="risingwave")
    except sqlglot.errors.ParseError as e:
        raise InvalidFunctionDefinition(
            f'could not parse the body of SQL function "{fn.name}"', detail=str(e)
        ) from None
    if not isinstance(tree, exp.Select) or len(tree.expressions) != 1:
        raise FeatureNotSupported(
            "Not supported: SQL functions other than one expression",
            hint="Write the body as SELECT <expression> or RETURN <expression>.",
        )
    if any(tree.args.get(k) for k in ("from", "from_", "where", "group", "having", "joins")):
        raise FeatureNotSupported(
            "Not supported: SQL functions that read tables",
            hint="Write the body as one expression over the parameters.",
        )
    body: exp.Expression = tree.expressions[0]
    if isinstance(body, exp.Alias):
        body = body.this
    return body


def inline_sql(planner: Any, fn: UserFunction, args: list[ex.Expr]) -> ex.Expr:
    """The SQL function's body with `args` in place of its parameters."""
    depth = getattr(planner, "_udf_depth", 0)
    if depth >= _MAX_DEPTH:
        raise FeatureNotSupported(
            f'Not supported: SQL function "{fn.name}" calls itself (directly or not)'
        )
    body = sql_body(fn)
    by_name = {n: a for n, a in zip(fn.arg_names, args, strict=True) if n}

    def hook(node: exp.Expression) -> ex.Expr | None:
        if isinstance(node, exp.Column) and not node.table:
            got = by_name.get(node.name.lower())
            if got is not None:
                return got
        if isinstance(node, (exp.Parameter, exp.Placeholder)):
            raw = node.this
            text = raw.this if isinstance(raw, (exp.Literal, exp.Var, exp.Identifier)) else raw
            try:
                i = int(str(text))
            except ValueError:
                return None
            if not 1 <= i <= len(args):
                raise InvalidFunctionDefinition(
                    f'SQL function "{fn.name}" refers to ${i}, but it has {len(args)} parameters'
                )
            return args[i - 1]
        return inner_hook(node)

    inner: list[ex.ExprBinder] = []

    def inner_hook(node: exp.Expression) -> ex.Expr | None:
        return bind_scalar(planner, node, inner[0])

    binder = ex.ExprBinder(ex.Scope([]), None, hook)
    inner.append(binder)
    planner._udf_depth = depth + 1
    try:
        out = binder.bind(body)
    finally:
        planner._udf_depth = depth
    if ex.is_untyped(out) or out.type != fn.return_type:
        out = ex.cast(out, fn.return_type)
    return out


def check_sql_function(planner: Any, fn: UserFunction) -> None:
    """Bind the body once at CREATE, with the parameters as columns: errors now, not later."""
    args: list[ex.Expr] = [
        ex.InputRef(i, t, n or f"${i + 1}")
        for i, (n, t) in enumerate(zip(fn.arg_names, fn.arg_types, strict=True))
    ]
    out = inline_sql(planner, fn, args)
    if out.type != fn.return_type:
        raise InvalidFunctionDefinition(
            f"return type mismatch in function declared to return {fn.return_type.display}"
        )


# -- aggregates -----------------------------------------------------------------------------------
def rewrite_udaf_calls(catalog: Any, q: exp.Expression) -> exp.Expression:
    """`q` with calls of user-defined aggregates as `UdafNode`s (a copy when any)."""
    fns = getattr(catalog, "functions", None)
    if not fns or not any(f.kind == "aggregate" for f in fns.values()):
        return q
    names = {f.name for f in fns.values() if f.kind == "aggregate" and f.schema_name == "public"}

    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Anonymous) and str(node.this).lower() in names:
            return UdafNode(
                this=exp.to_identifier(str(node.this).lower()), expressions=list(node.expressions)
            )
        return node

    found = any(isinstance(n, exp.Anonymous) and str(n.this).lower() in names for n in q.walk())
    return q.transform(swap) if found else q


def plan_udaf(
    planner: Any,
    node: exp.Expression,
    scope: ex.Scope,
    pre: list[ex.Expr],
    filt: exp.Expression | None,
) -> AggSpec:
    """One user-defined aggregate call: its arguments go into the pre-projection; the spec
    carries a `UdfCall` over those columns (the stored plan keeps its name and types)."""
    name = str(node.this.name if isinstance(node.this, exp.Identifier) else node.this).lower()
    arg_nodes = list(node.expressions)
    if any(isinstance(a, exp.Distinct) for a in arg_nodes):
        raise not_supported("DISTINCT in a user-defined aggregate")
    bound = [planner._bind(a, scope) for a in arg_nodes]
    cands = _candidates(planner.catalog, name, ("aggregate",))
    fn, coerced = resolve(cands, name, bound)
    refs: list[ex.Expr] = []
    for c in coerced:
        if ex.is_untyped(c):
            c = ex.cast(c, VARCHAR)
        pre.append(c)
        refs.append(ex.InputRef(len(pre) - 1, c.type, f"_u{len(pre) - 1}"))
    filt_idx = None
    if filt is not None:
        fb = planner._bind(filt, scope)
        planner._check_bool(fb, "FILTER")
        pre.append(fb)
        filt_idx = len(pre) - 1
    call = udf_call(fn, refs)
    first = refs[0].input_refs().pop() if refs else None
    return AggSpec("udaf", first, fn.return_type, False, filt_idx, udf=call)


# -- table functions in FROM ------------------------------------------------------------------
def plan_udtf(planner: Any, item: exp.Expression) -> tuple[PlanNode, list[_Col]] | None:
    """`FROM f(args) [AS alias (cols)]` for a Python table function; None otherwise."""
    if not isinstance(item, exp.Table) or not isinstance(item.this, exp.Anonymous):
        return None
    name = str(item.this.this).lower()
    cands = _candidates(planner.catalog, name, ("table",))
    if not cands:
        return None
    if planner.streaming:
        raise not_supported(
            "table functions in FROM of a materialized view",
            hint=f"Join it laterally to a table (FROM t, LATERAL {name}(t.col)), or INSERT "
            "its rows into a table and build the view on that.",
        )
    args = [planner._bind(a, ex.Scope([])) for a in item.this.expressions]
    fn, coerced = resolve(cands, name, args)
    fields = [Field(c.name, c.type) for c in fn.return_columns]
    alias_node = item.args.get("alias")
    alias = alias_node.name if isinstance(alias_node, exp.TableAlias) and alias_node.name else None
    if alias and len(fields) == 1:
        fields = [Field(alias, fields[0].type)]
    if isinstance(alias_node, exp.TableAlias) and alias_node.columns:
        names = [c.name for c in alias_node.columns]
        fields = [
            Field(names[i] if i < len(names) else f.name, f.type) for i, f in enumerate(fields)
        ]
    node = TableFunction(fields, None, name=name, args=coerced, udf=routine(fn))
    table = alias or name
    return node, [_Col(f.name, f.type, table) for f in fields]


def table_function_names(catalog: Any) -> frozenset[str]:
    fns: dict[int, UserFunction] = getattr(catalog, "functions", {}) or {}
    return frozenset(f.name for f in fns.values() if f.kind == "table")


def select_list_udtf(
    planner: Any, name: str, args: list[ex.Expr], base: str
) -> tuple[Any, list[ex.Expr], list[Field]]:
    """A table function in the select list (a ProjectSet call): its routine, the coerced
    arguments and its output column (one column only, as a set-returning scalar)."""
    fn, coerced = resolve(_candidates(planner.catalog, name, ("table",)), name, args)
    if len(fn.return_columns) != 1:
        raise not_supported(
            f"table function {name} with several columns in the select list",
            hint=f"Call it in FROM: SELECT * FROM {name}(...).",
        )
    return routine(fn), coerced, [Field(base, fn.return_columns[0].type)]


def lateral_udtf(
    planner: Any, name: str, args: list[ex.Expr]
) -> tuple[Any, list[ex.Expr], list[Field]]:
    """A table function joined laterally in FROM (engine.plan.plan_lateral): its routine,
    the coerced arguments and its columns (any number)."""
    fn, coerced = resolve(_candidates(planner.catalog, name, ("table",)), name, args)
    return routine(fn), coerced, [Field(c.name, c.type) for c in fn.return_columns]


def udtf_calls(p: Any, schema: list[Field]) -> list[Any]:
    """Per set-returning call of ProjectSet `p`: a UdfCall of its Python table function
    (its routine, arguments and output type; what a stored stream plan records and binds
    again from the catalog at recovery), or None for a built-in one."""
    out: list[Any] = []
    at = len(p.input.schema)
    for name, args in p.srfs:
        r = p.routines.get(name)
        out.append(
            None
            if r is None
            else UdfCall(name, tuple(args), schema[at].type, _no_kernel, routine=r)
        )
        at += 1 if r is None else max(1, len(r.columns))
    return out


def _no_kernel(vals: Any, n: int, ctx: Any) -> Any:
    raise AssertionError("a table function's call is run by ProjectSetOp")


# -- dependencies -------------------------------------------------------------------------------
def functions_used(catalog: Any, sql: str) -> list[int]:
    """Oids of the catalog functions `sql` calls (every overload of each called name)."""
    fns: dict[int, UserFunction] = getattr(catalog, "functions", {}) or {}
    if not fns:
        return []
    try:
        tree = sqlglot.parse_one(sql, read="risingwave")
    except sqlglot.errors.ParseError as e:
        raise SqlSyntaxError(str(e)) from None
    names = {str(n.this).lower() for n in tree.walk() if isinstance(n, exp.Anonymous)}
    return sorted(f.oid for f in fns.values() if f.name in names)


def type_list(types: list[SqlType]) -> str:
    return ", ".join(t.display for t in types)
