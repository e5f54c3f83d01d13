"""Ordered-set aggregates: `percentile_cont`, `percentile_disc` and `mode()` with their
`WITHIN GROUP (ORDER BY x)` clause.

PostgreSQL's semantics: the value aggregated is the ORDER BY expression (its NULLs are
skipped), its direction decides which end a fraction counts from (and which of several
equally frequent values `mode()` returns: the first in that order); `percentile_cont`
interpolates over double precision, `percentile_disc` returns an input value of any
sortable type, and an array of fractions gives an array of results. The fraction is a
direct argument that must be a constant here (as RisingWave requires: "variable as
direct argument of ordered-set aggregate"); it is checked to lie in [0, 1] (22003) and
kept in the `AggSpec` (`direct`: a float or None, or a tuple of them).

Lifecycle: the planner's aggregation mixin calls `plan_ordered_set` for every
`WITHIN GROUP` aggregate; the grouped rows are aggregated by the polars kernel of
`engine.batch.agg_batch` (ad hoc) and per touched group by `CollectAggOp` in materialized
views, as RisingWave keeps them (materialized input state).
"""

from __future__ import annotations

import math
from typing import Any

from sqlglot import exp

from engine import expr as ex
from engine.errors import (
    AmbiguousFunction,
    DatatypeMismatch,
    NumericValueOutOfRange,
    SqlSyntaxError,
    UndefinedFunction,
    WrongObjectType,
    not_supported,
)
from engine.plan.logical import ORDERED_SET_KINDS, AggSpec
from engine.types import DOUBLE, SqlType, TypeKind, list_of

ORDERED_SET_CLASSES: dict[type, str] = {
    exp.PercentileCont: "percentile_cont",
    exp.PercentileDisc: "percentile_disc",
    exp.Mode: "mode",
}
assert tuple(ORDERED_SET_CLASSES.values()) == ORDERED_SET_KINDS

_NO_MATCH = (
    "No function matches the given name and argument types. "
    "You might need to add explicit type casts."
)
_NUMBERS = (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT, TypeKind.NUMERIC)


def is_ordered_set(n: exp.Expression) -> bool:
    """`percentile_cont(..) WITHIN GROUP (..)` and the like, or one used without it."""
    if isinstance(n, exp.WithinGroup):
        return isinstance(n.this, tuple(ORDERED_SET_CLASSES))
    return isinstance(n, tuple(ORDERED_SET_CLASSES))


def plan_ordered_set(
    planner: Any,
    node: exp.Expression,
    scope: ex.Scope,
    pre: list[ex.Expr],
    filt: exp.Expression | None,
) -> AggSpec:
    """The `AggSpec` of one ordered-set aggregate; its argument (and FILTER) go into the
    pre-projection `pre`."""
    if not isinstance(node, exp.WithinGroup):
        kind = ORDERED_SET_CLASSES[type(node)]
        if kind == "mode" or node.this is None:
            raise WrongObjectType(f"WITHIN GROUP is required for ordered-set aggregate {kind}")
        t = planner._bind(node.this, scope).type
        raise UndefinedFunction(
            f"function {kind}({'unknown' if t.kind is TypeKind.UNKNOWN else t.display}) "
            "does not exist",
            hint=_NO_MATCH,
        )
    call = node.this
    kind = ORDERED_SET_CLASSES[type(call)]
    order = node.expression
    keys = list(order.expressions) if isinstance(order, exp.Order) else []
    if len(keys) != 1:
        raise SqlSyntaxError(f"{kind} takes exactly one ORDER BY expression in WITHIN GROUP")
    key = keys[0]
    arg = planner._bind(key.this, scope)
    unknown_key = ex.is_untyped(arg)
    if unknown_key and kind != "percentile_cont":  # PostgreSQL: anyelement cannot be unknown
        raise DatatypeMismatch(
            "could not determine polymorphic type because input has type unknown"
        )
    direct: Any = None
    fraction_type = ""
    fraction = None
    if kind != "mode":
        fraction = _resolve_fraction(kind, planner._bind(call.this, scope), unknown_key)
    if unknown_key:  # read as double precision once the candidate is chosen
        arg = ex.cast(arg, DOUBLE)
    if fraction is not None:
        fraction_type = fraction.type.display
        direct, is_array = _fraction(kind, fraction, arg.type)
        rtype = _result_type(kind, arg, fraction_type)
        if kind == "percentile_cont":
            arg = ex.cast(arg, DOUBLE)
        if is_array:
            rtype = list_of(rtype)
    else:
        rtype = arg.type
    if arg.type.kind in (TypeKind.JSONB, TypeKind.LIST):
        raise UndefinedFunction(
            f"function {kind}({_sig(fraction_type, arg.type)}) does not exist", hint=_NO_MATCH
        )
    pre.append(arg)
    arg_idx = len(pre) - 1
    filt_idx = None
    if filt is not None:
        fb = planner._bind(filt, scope)
        planner._check_bool(fb, "FILTER")
        pre.append(fb)
        filt_idx = len(pre) - 1
    desc = bool(key.args.get("desc"))
    return AggSpec(
        kind, arg_idx, rtype, False, filt_idx, order=((arg_idx, desc, desc),), direct=direct
    )


def _resolve_fraction(kind: str, fraction: ex.Expr, unknown_key: bool) -> ex.Expr:
    """The fraction as PostgreSQL resolves percentile_cont's candidates (double precision
    or an array of them, over double precision or interval values): with an unknown
    ORDER BY value (`ORDER BY NULL`) an array or unknown fraction matches the
    double precision and the interval candidate alike (42725); an unknown fraction is
    otherwise read as double precision (`'0.5'`)."""
    untyped = ex.is_untyped(fraction)
    t = fraction.type
    numeric_array = (
        t.kind is TypeKind.LIST
        and t.elem is not None
        and (t.elem.kind in _NUMBERS or t.elem.is_float)
    )
    if kind == "percentile_cont" and unknown_key and (untyped or numeric_array):
        shown = "unknown" if untyped else t.display
        raise AmbiguousFunction(
            f"function {kind}({shown}, unknown) is not unique",
            hint="Could not choose a best candidate function. "
            "You might need to add explicit type casts.",
        )
    return ex.cast(fraction, DOUBLE) if untyped else fraction


def _sig(fraction_type: str, arg: SqlType) -> str:
    return f"{fraction_type}, {arg.display}" if fraction_type else arg.display


def _result_type(kind: str, arg: ex.Expr, fraction_type: str) -> SqlType:
    t = arg.type
    if kind == "percentile_disc":
        return t
    if t.kind in _NUMBERS or t.is_float:
        return DOUBLE
    if t.kind is TypeKind.INTERVAL:
        raise not_supported("percentile_cont over interval values")
    raise UndefinedFunction(
        f"function {kind}({_sig(fraction_type, t)}) does not exist", hint=_NO_MATCH
    )


def _fraction(kind: str, fraction: ex.Expr, arg: SqlType) -> tuple[Any, bool]:
    """The constant fraction(s) of a percentile and whether they are an array."""
    t = fraction.type
    is_array = t.kind is TypeKind.LIST
    elem = t.elem if is_array else t
    if elem is None or not (
        elem.kind in _NUMBERS or elem.is_float or elem.kind is TypeKind.UNKNOWN
    ):
        raise UndefinedFunction(
            f"function {kind}({_sig(t.display, arg)}) does not exist", hint=_NO_MATCH
        )
    if not fraction.is_constant() or fraction.has_now():
        raise not_supported(
            "variable as direct argument of ordered-set aggregate",
            hint="The fraction of percentile_cont / percentile_disc must be a constant.",
        )
    target = list_of(DOUBLE) if is_array else DOUBLE
    value = ex.evaluate_constant(ex.cast(fraction, target))
    if value is None:
        return None, is_array
    values = [None if v is None else float(v) for v in value] if is_array else [float(value)]
    for v in values:
        if v is not None and (math.isnan(v) or not 0.0 <= v <= 1.0):
            raise NumericValueOutOfRange(f"percentile value {v:g} is not between 0 and 1")
    return (tuple(values) if is_array else values[0]), is_array
