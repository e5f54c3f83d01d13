"""Aggregation planning: GROUP BY items, aggregate calls and their result types.

A mixin of `Planner`: `_plan_agg` turns the grouped part of one SELECT into an `Agg` node
(pre-projection of group keys and aggregate arguments, then the aggregation), and returns a
binder hook that maps aggregate calls and group expressions in HAVING / the select list /
ORDER BY onto the Agg's output columns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from engine import expr as ex
from engine.errors import (
    AmbiguousFunction,
    EngineError,
    FeatureNotSupported,
    GroupingError,
    InvalidColumnReference,
    SqlSyntaxError,
    UndefinedFunction,
    not_supported,
)
from engine.plan.helpers import (
    _name_of,
    _norm_sql,
    _pos,
    _quoted,
)
from engine.plan.logical import (
    Agg,
    AggSpec,
    PlanNode,
    Project,
)
from engine.plan.plan_ordered_set import ORDERED_SET_CLASSES, is_ordered_set, plan_ordered_set
from engine.plan.plan_udf import UdafNode, plan_udaf
from engine.types import BIGINT, DOUBLE, NUMERIC, Field, SqlType, TypeKind

AGG_CLASSES: dict[type, str] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
    exp.GroupConcat: "string_agg",
    exp.LogicalAnd: "bool_and",
    exp.LogicalOr: "bool_or",
    exp.ArrayAgg: "array_agg",
    exp.Stddev: "stddev_samp",
    exp.StddevSamp: "stddev_samp",
    exp.StddevPop: "stddev_pop",
    exp.Variance: "var_samp",
    exp.VariancePop: "var_pop",
    exp.BitwiseAndAgg: "bit_and",
    exp.BitwiseOrAgg: "bit_or",
    exp.BitwiseXorAgg: "bit_xor",
    exp.Corr: "corr",
    exp.CovarPop: "covar_pop",
    exp.CovarSamp: "covar_samp",
    exp.RegrAvgx: "regr_avgx",
    exp.RegrAvgy: "regr_avgy",
    exp.RegrCount: "regr_count",
    exp.RegrIntercept: "regr_intercept",
    exp.RegrR2: "regr_r2",
    exp.RegrSlope: "regr_slope",
    exp.RegrSxx: "regr_sxx",
    exp.RegrSxy: "regr_sxy",
    exp.RegrSyy: "regr_syy",
    UdafNode: "udaf",  # user-defined aggregates (engine.plan.plan_udf)
}


_VARIANCE_KINDS = ("var_pop", "var_samp", "stddev_pop", "stddev_samp")
#: two-argument statistics kind(Y, X) over double precision (agg_calls.RegrImpl)
_REGR_KINDS = (
    "corr",
    "covar_pop",
    "covar_samp",
    "regr_avgx",
    "regr_avgy",
    "regr_count",
    "regr_intercept",
    "regr_r2",
    "regr_slope",
    "regr_sxx",
    "regr_sxy",
    "regr_syy",
)
_REGR_ARGS = (
    TypeKind.SMALLINT,
    TypeKind.INT,
    TypeKind.BIGINT,
    TypeKind.NUMERIC,
    TypeKind.REAL,
    TypeKind.DOUBLE,
    TypeKind.UNKNOWN,
)
#: aggregates PostgreSQL spells with a name of their own that sqlglot has no class for:
#: `every(x)` is bool_and(x)
_ALIASES = {"every": exp.LogicalAnd}


def agg_result_type(kind: str, arg: SqlType | None) -> SqlType:
    if kind in ("count", "count_star"):
        return BIGINT
    assert arg is not None
    k = arg.kind
    if kind == "sum":
        if k in (TypeKind.SMALLINT, TypeKind.INT):
            return BIGINT
        if k is TypeKind.NUMERIC and arg.scale is not None:
            return NUMERIC.with_mod((None, arg.scale))  # PostgreSQL: a sum keeps the scale
        if k in (TypeKind.BIGINT, TypeKind.NUMERIC):
            return NUMERIC
        if k in (TypeKind.REAL, TypeKind.DOUBLE, TypeKind.INTERVAL):
            return arg
    elif kind == "avg":
        if arg.is_integer or k is TypeKind.NUMERIC:
            return NUMERIC
        if k in (TypeKind.REAL, TypeKind.DOUBLE):
            return DOUBLE
        if k is TypeKind.INTERVAL:
            return arg
    elif (kind in ("min", "max") and k is not TypeKind.JSONB) or (
        kind in ("bool_and", "bool_or") and k is TypeKind.BOOLEAN
    ):
        return arg
    elif kind in ("bool_and", "bool_or") and k in (TypeKind.BOOLEAN, TypeKind.UNKNOWN):
        return SqlType(TypeKind.BOOLEAN)
    elif kind in _VARIANCE_KINDS:
        if arg.is_integer or k is TypeKind.NUMERIC:
            return NUMERIC  # PostgreSQL: exact over integers and numeric
        if k in (TypeKind.REAL, TypeKind.DOUBLE):
            return DOUBLE
    elif kind in ("bit_and", "bit_or", "bit_xor") and arg.is_integer:
        return arg
    elif kind in ("string_agg", "array_agg"):
        from engine.batch.agg_batch import ordered_agg_type

        return ordered_agg_type(kind, arg)
    raise UndefinedFunction(
        f"function {kind}({arg.display}) does not exist",
        hint="No function matches the given name and argument types. "
        "You might need to add explicit type casts.",
    )


class AggPlannerMixin:
    """Aggregation half of `Planner` (see module docstring)."""

    def _collect_aggs(self, nodes: list[exp.Expression]) -> list[exp.Expression]:
        found: list[exp.Expression] = []
        seen: set[str] = set()
        for n in nodes:
            for a in _find_aggs(n):
                key = a.sql()
                if key not in seen:
                    seen.add(key)
                    found.append(a)
        return found

    def _plan_agg(
        self,
        node: PlanNode,
        scope: ex.Scope,
        group: exp.Group | None,
        agg_nodes: list[exp.Expression],
        select_items: list[tuple[str, exp.Expression]],
    ) -> tuple[PlanNode, Callable[[exp.Expression], ex.Expr | None]]:
        pre: list[ex.Expr] = []
        group_sql: list[str] = []
        group_exprs: list[exp.Expression] = []
        if group is not None:
            if (
                group.args.get("grouping_sets")
                or group.args.get("cube")
                or group.args.get("rollup")
            ):
                raise not_supported("GROUPING SETS, CUBE and ROLLUP are not supported yet")
            for g in group.expressions:
                g = self._resolve_group_item(g, select_items, scope)
                group_exprs.append(g)
                pre.append(self._bind(g, scope))
                group_sql.append(_norm_sql(g))
        ng = len(pre)
        specs: list[AggSpec] = []
        agg_index: dict[str, int] = {}
        for a in agg_nodes:
            spec_node = a
            filt = None
            if isinstance(a, exp.Filter):
                filt = a.expression.this if isinstance(a.expression, exp.Where) else a.expression
                spec_node = a.this
            if is_ordered_set(spec_node):
                specs.append(plan_ordered_set(self, spec_node, scope, pre, filt))
                agg_index[_norm_sql(a)] = ng + len(specs) - 1
                continue
            if _is_jsonb_agg(spec_node):
                kind = "jsonb_agg"
                if isinstance(spec_node, exp.Anonymous):
                    if len(spec_node.expressions) != 1:
                        raise UndefinedFunction("function jsonb_agg does not exist")
                    spec_node = exp.JSONArrayAgg(this=spec_node.expressions[0])
            else:
                if isinstance(spec_node, exp.Anonymous):  # every(x)
                    name = str(spec_node.this).lower()
                    if len(spec_node.expressions) != 1:
                        raise UndefinedFunction(f"function {name} does not exist")
                    spec_node = _ALIASES[name](this=spec_node.expressions[0])
                kind = AGG_CLASSES[type(spec_node)]
            arg = spec_node.this
            if kind == "udaf":
                specs.append(plan_udaf(self, spec_node, scope, pre, filt))
                agg_index[_norm_sql(a)] = ng + len(specs) - 1
                continue
            if kind in ("string_agg", "array_agg", "jsonb_agg"):
                from engine.batch.agg_batch import plan_ordered_agg

                spec = plan_ordered_agg(self, kind, spec_node, scope, pre, filt)
                specs.append(spec)
                agg_index[_norm_sql(a)] = ng + len(specs) - 1
                continue
            if kind in _REGR_KINDS:
                specs.append(plan_regr(self, kind, spec_node, scope, pre, filt))
                agg_index[_norm_sql(a)] = ng + len(specs) - 1
                continue
            distinct = False
            if isinstance(arg, exp.Distinct):
                distinct = True
                if len(arg.expressions) != 1:
                    raise not_supported("aggregates over several DISTINCT arguments")
                arg = arg.expressions[0]
                if kind in ("bit_and", "bit_or"):
                    distinct = False  # the same answer over the distinct values
                elif kind in _VARIANCE_KINDS or kind == "bit_xor":
                    raise not_supported(f"{_sql_name(spec_node)}(DISTINCT ...)")
            if kind == "count" and (arg is None or isinstance(arg, exp.Star)):
                if distinct:
                    raise SqlSyntaxError("syntax error: count(DISTINCT *)")
                arg_idx = None
                spec_kind = "count_star"
                arg_type = None
            else:
                bound = self._bind(arg, scope)
                if any(_find_aggs(arg)):
                    raise GroupingError("aggregate function calls cannot be nested")
                pre.append(bound)
                arg_idx = len(pre) - 1
                spec_kind = kind
                arg_type = bound.type
                if arg_type.kind is TypeKind.UNKNOWN or ex.is_untyped(bound):  # NULL, 'x'
                    pre[-1] = ex.cast(bound, _unknown_arg_type(kind, _sql_name(spec_node)))
                    arg_type = pre[-1].type
            filt_idx = None
            if filt is not None:
                fb = self._bind(filt, scope)
                self._check_bool(fb, "FILTER")
                pre.append(fb)
                filt_idx = len(pre) - 1
            rtype = agg_result_type(spec_kind, arg_type)
            specs.append(AggSpec(spec_kind, arg_idx, rtype, distinct, filt_idx))
            agg_index[_norm_sql(a)] = ng + len(specs) - 1
        if not pre:
            # count(*) alone: keep one constant column so the row count survives projection
            pre.append(ex.Literal(value=True, type=SqlType(TypeKind.BOOLEAN)))
        pre_fields = [
            Field(f"_g{i}" if i >= ng else _name_of(group_exprs[i], i), e.type)
            for i, e in enumerate(pre)
        ]
        if self.streaming:
            key = list(range(ng))
        else:
            key = list(range(ng))
        proj = Project(pre_fields, None, input=node, exprs=pre)
        out_fields = pre_fields[:ng] + [Field(f"_a{i}", s.type) for i, s in enumerate(specs)]
        agg = Agg(out_fields, key, input=proj, group_keys=list(range(ng)), aggs=specs)
        agg_fields = out_fields

        def hook(n: exp.Expression) -> ex.Expr | None:
            s = _norm_sql(n)
            if s in agg_index:
                i = agg_index[s]
                return ex.InputRef(index=i, type=agg_fields[i].type, name=agg_fields[i].name)
            for i, gs in enumerate(group_sql):
                if s == gs:
                    return ex.InputRef(index=i, type=agg_fields[i].type, name=agg_fields[i].name)
            if isinstance(n, exp.Column):
                # a bare column that is not a group key
                try:
                    b = scope.resolve(
                        n.name.lower() if not _quoted(n) else n.name, n.table or None, _pos(n)
                    )
                except EngineError:
                    raise
                for i, g in enumerate(group_exprs):
                    if (
                        isinstance(g, exp.Column)
                        and g.name.lower() == n.name.lower()
                        and (not n.table or not g.table or g.table == n.table)
                    ):
                        return ex.InputRef(index=i, type=agg_fields[i].type, name=b.name)
                tbl = f"{b.table}." if b.table else ""
                raise GroupingError(
                    f'column "{tbl}{b.name}" must appear in the GROUP BY clause or be used '
                    "in an aggregate function",
                    position=_pos(n),
                )
            return None

        return agg, hook

    def _resolve_group_item(
        self, g: exp.Expression, select_items: list[tuple[str, exp.Expression]], scope: ex.Scope
    ) -> exp.Expression:
        if isinstance(g, exp.Literal) and not g.is_string:
            n = int(g.this)
            if not 1 <= n <= len(select_items):
                raise InvalidColumnReference(f"GROUP BY position {n} is not in select list")
            return select_items[n - 1][1]
        if isinstance(g, exp.Column) and not g.table:
            try:
                scope.resolve(g.name.lower(), None)
                return g
            except EngineError:
                for name, item in select_items:
                    if name == g.name.lower() or name == g.name:
                        return item
                raise
        return g


def _unknown_arg_type(kind: str, name: str) -> SqlType:
    """The type an untyped argument (`stddev(NULL)`) resolves to, as PostgreSQL resolves
    it: the variances have numeric signatures only, so the preferred numeric type, double
    precision; bool_and/bool_or only boolean; avg, sum and the bit aggregates have
    signatures in several categories (interval, money, bit), so the call is ambiguous;
    min/max/count take it as text."""
    if kind in _VARIANCE_KINDS:
        return DOUBLE
    if kind in ("bool_and", "bool_or"):
        return SqlType(TypeKind.BOOLEAN)
    if kind in ("avg", "sum", "bit_and", "bit_or", "bit_xor"):
        raise AmbiguousFunction(
            f"function {name}(unknown) is not unique",
            hint="Could not choose a best candidate function. "
            "You might need to add explicit type casts.",
        )
    return SqlType(TypeKind.VARCHAR)


def _sql_name(n: exp.Expression) -> str:
    return n.sql(dialect="postgres").split("(", 1)[0].lower()


def _is_alias_agg(n: exp.Expression) -> bool:
    """`every(..)` and the other `_ALIASES`."""
    return isinstance(n, exp.Anonymous) and str(n.this).lower() in _ALIASES


def is_named_aggregate(n: exp.Expression) -> bool:
    """An aggregate call sqlglot parses as a plain function (`every(..)`, `jsonb_agg(..)`):
    rewrites that must not look inside aggregate arguments (grouping sets) ask this too."""
    return _is_alias_agg(n) or _is_jsonb_agg(n)


def _is_jsonb_agg(n: exp.Expression) -> bool:
    """`jsonb_agg(..)` (sqlglot has no class for it) or `json_agg(..)`."""
    if isinstance(n, exp.JSONArrayAgg):
        return True
    return isinstance(n, exp.Anonymous) and str(n.this).lower() == "jsonb_agg"


def _find_aggs(n: exp.Expression) -> list[exp.Expression]:
    out: list[exp.Expression] = []

    def walk(node: exp.Expression) -> None:
        if isinstance(node, exp.Window):  # the call itself is a window function
            fn = node.this.this if isinstance(node.this, exp.Filter) else node.this
            if is_ordered_set(fn):
                name = ORDERED_SET_CLASSES[type(fn.this if isinstance(fn, exp.WithinGroup) else fn)]
                raise FeatureNotSupported(f"OVER is not supported for ordered-set aggregate {name}")
            for child in fn.iter_expressions():
                walk(child)
            for p in node.args.get("partition_by") or []:
                walk(p)
            if node.args.get("order") is not None:
                walk(node.args["order"])
            return
        if isinstance(node, exp.Filter) and (
            isinstance(node.this, tuple(AGG_CLASSES))
            or _is_jsonb_agg(node.this)
            or _is_alias_agg(node.this)
            or is_ordered_set(node.this)
        ):
            out.append(node)
            return
        if (
            isinstance(node, tuple(AGG_CLASSES))
            or _is_jsonb_agg(node)
            or _is_alias_agg(node)
            or is_ordered_set(node)
        ):
            out.append(node)
            return
        if isinstance(node, (exp.Subquery, exp.Select)):
            return
        if isinstance(node, exp.AggFunc) and not isinstance(node, tuple(AGG_CLASSES)):
            name = node.sql(dialect="postgres").split("(", 1)[0].lower()  # not J_S_O_N_B_...
            raise not_supported(
                f"aggregate function {name} is not supported yet",
                hint="Aggregates available: count, sum, avg, min, max, string_agg, array_agg, "
                "jsonb_agg, bool_and, bool_or, every, stddev, stddev_pop, stddev_samp, variance, "
                "var_pop, var_samp, bit_and, bit_or, bit_xor, corr, covar_pop, covar_samp, regr_*, "
                "percentile_cont, percentile_disc, mode (with FILTER; most with DISTINCT).",
            )
        for child in node.iter_expressions():
            walk(child)

    walk(n)
    return out


def plan_regr(
    planner: Any,
    kind: str,
    node: exp.Expression,
    scope: ex.Scope,
    pre: list[ex.Expr],
    filt: exp.Expression | None,
) -> AggSpec:
    """corr / covar_* / regr_*(Y, X): both arguments cast to double precision (the only
    signature PostgreSQL has) into the pre-projection, or both to bigint when both are
    integers (summed exactly over their double precision values, see ExactRegrImpl)."""
    y_node, x_node = node.this, node.args.get("expression")
    if isinstance(y_node, exp.Distinct):
        raise not_supported(f"{kind}(DISTINCT ...)")
    args = [planner._bind(y_node, scope)]
    if x_node is not None:
        args.append(planner._bind(x_node, scope))
    if len(args) != 2 or any(a.type.kind not in _REGR_ARGS for a in args):
        shown = ", ".join(
            "unknown" if a.type.kind is TypeKind.UNKNOWN else a.type.display for a in args
        )
        raise UndefinedFunction(
            f"function {kind}({shown}) does not exist",
            hint="No function matches the given name and argument types. "
            "You might need to add explicit type casts.",
        )
    for n in (y_node, x_node):
        if n is not None and any(_find_aggs(n)):
            raise GroupingError("aggregate function calls cannot be nested")
    # integer arguments stay integers (as bigint): agg_calls.ExactRegrImpl sums them exactly,
    # so a view's retractions leave no float rounding behind
    exact = all(a.type.is_integer for a in args)
    to = BIGINT if exact else DOUBLE
    idx = []
    for a in args:
        pre.append(a if a.type.kind is to.kind else ex.cast(a, to))
        idx.append(len(pre) - 1)
    filt_idx = None
    if filt is not None:
        fb = planner._bind(filt, scope)
        planner._check_bool(fb, "FILTER")
        pre.append(fb)
        filt_idx = len(pre) - 1
    rtype = BIGINT if kind == "regr_count" else DOUBLE
    return AggSpec(kind, idx[0], rtype, False, filt_idx, arg2=idx[1])
