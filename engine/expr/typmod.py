"""Type modifiers: varchar(n), numeric(p, s) and numeric display scales.

PostgreSQL enforces a modifier where a value takes the type: an explicit cast truncates
text to n characters (`'abcdef'::varchar(2)` is `ab`) while storing a too-long value in a
varchar(n) column is an error (22001); numeric(p, s) rounds to s digits and refuses values
with more than p - s digits before the point (22003), in casts and stores alike. A numeric
also prints with its scale: `round(x, 2)` gives `5727.60`, a numeric(10,2) column `1.50`.

The engine computes with the base type (`SqlType.mod` takes no part in type equality), so
only two places look at modifiers: `enforce` here, called by the explicit and assignment
casts of `engine.expr.coerce`, and the output formatting in pgwire (`SqlType.scale`).
Scales of results follow PostgreSQL where they are simple to know (literals, round/trunc
with a constant, + - * of known scales); elsewhere the scale is unknown and the value
prints as computed without trailing zeros.

Lifecycle: pure functions used while binding; kernels run per chunk with Arrow compute.
"""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from engine.errors import (
    NumericValueOutOfRange,
    SqlSyntaxError,
    StringDataRightTruncation,
    not_supported,
)
from engine.expr.core import Datum, EvalContext, Expr, Func, Literal, as_array, is_scalar
from engine.numeric import finite_only, special_masks, with_specials
from engine.types import NUMERIC, NUMERIC_PRECISION, NUMERIC_SCALE, SqlType, TypeKind

K = TypeKind


def modifier_of(dt: exp.DataType, base: SqlType) -> SqlType:
    """`base` with the modifier written in `dt` (`varchar(2)`, `numeric(10, 2)`)."""
    params = [p.this if isinstance(p, exp.DataTypeParam) else p for p in dt.expressions]
    if not params or base.kind not in (K.VARCHAR, K.NUMERIC):
        return base
    if dt.this == exp.DataType.Type.CHAR or dt.this == exp.DataType.Type.NCHAR:
        return base  # char(n) pads; stored as varchar without a length
    nums: list[int] = []
    for p in params:
        if not isinstance(p, exp.Literal) or p.is_string:
            raise SqlSyntaxError(f'syntax error at or near "{p.sql()}"')
        nums.append(int(p.this))
    if base.kind is K.VARCHAR:
        if len(nums) != 1:
            raise SqlSyntaxError("invalid type modifier")
        if nums[0] < 1:
            raise SqlSyntaxError("length for type varchar must be at least 1")
        return base.with_mod((nums[0],))
    if len(nums) > 2:
        raise SqlSyntaxError("invalid NUMERIC type modifier")
    precision = nums[0]
    scale = nums[1] if len(nums) == 2 else 0
    if not 1 <= precision <= 1000:
        raise SqlSyntaxError(f"NUMERIC precision {precision} must be between 1 and 1000")
    if not 0 <= scale <= precision:
        raise SqlSyntaxError(f"NUMERIC scale {scale} must be between 0 and precision {precision}")
    if scale > NUMERIC_SCALE or precision - scale > NUMERIC_PRECISION - NUMERIC_SCALE:
        raise not_supported(
            f"numeric({precision},{scale})",
            hint=f"numeric keeps at most {NUMERIC_PRECISION - NUMERIC_SCALE} digits before "
            f"and {NUMERIC_SCALE} after the decimal point.",
        )
    return base.with_mod((precision, scale))


def numeric_with_scale(scale: int | None) -> SqlType:
    """numeric printing `scale` digits after the point (None: unknown)."""
    if scale is None:
        return NUMERIC
    return NUMERIC.with_mod((None, max(0, min(scale, NUMERIC_SCALE))))


def scale_of(t: SqlType) -> int | None:
    """Known display scale of a numeric operand (integers: 0)."""
    if t.is_integer:
        return 0
    return t.scale


def literal_scale(d: Decimal) -> int | None:
    exp_ = d.as_tuple().exponent
    if not isinstance(exp_, int):
        return None
    return min(max(-exp_, 0), NUMERIC_SCALE)


def enforce(expr: Expr, target: SqlType, explicit: bool) -> Expr:
    """`expr` (already of `target`'s base type) held to `target`'s modifier."""
    if target.mod is None:
        return expr
    if target.max_length is not None:
        n = target.max_length
        if isinstance(expr, Literal):
            v = expr.value
            if isinstance(v, str) and len(v) > n:
                if not explicit and v[n:].strip(" "):
                    raise _too_long(target)
                v = v[:n]
            return Literal(v, target)

        def kernel(args: list[Datum], rows: int, c: EvalContext) -> Datum:
            x = args[0]
            too_long = pc.greater(pc.utf8_length(x), n)
            if not _any(too_long):
                return x
            if not explicit:
                # PostgreSQL: an assignment may drop trailing spaces past the length only
                excess = pc.utf8_slice_codeunits(x, n)
                if _any(pc.invert(pc.match_substring_regex(excess, "^ *$"))):
                    raise _too_long(target)
            return pc.utf8_slice_codeunits(x, 0, n)

        return Func("varchar_len", (expr,), target, kernel)
    if target.kind is K.NUMERIC and target.mod[0] is not None:
        precision, scale = target.mod[0], target.mod[1] or 0
        limit = Decimal(10) ** (precision - scale)

        def nkernel(args: list[Datum], rows: int, c: EvalContext) -> Datum:
            x = args[0]
            m = special_masks(as_array(x, rows) if is_scalar(x) else x)
            if m is not None:
                if m[1].any() or m[2].any():
                    raise NumericValueOutOfRange(
                        "numeric field overflow",
                        detail=f"A field with precision {precision}, scale {scale} cannot "
                        "hold an infinite value.",
                    )
                return with_specials(nkernel([finite_only(as_array(x, rows))], rows, c), *m)
            r = pc.round(
                x.cast(pa.decimal256(NUMERIC_PRECISION + 1, NUMERIC_SCALE)),
                scale,
                round_mode="half_towards_infinity",
            )
            over = pc.greater_equal(pc.abs(r), pa.scalar(limit).cast(r.type))
            if _any(over):
                raise NumericValueOutOfRange(
                    "numeric field overflow",
                    detail=f"A field with precision {precision}, scale {scale} must round to "
                    f"an absolute value less than 10^{precision - scale}.",
                )
            return r.cast(NUMERIC.arrow)

        return Func("numeric_mod", (expr,), target, nkernel)
    return _retyped(expr, target)


def _retyped(expr: Expr, target: SqlType) -> Expr:
    """The same values under a type with another display modifier."""
    if isinstance(expr, Literal):
        return Literal(expr.value, target)
    return Func("retype", (expr,), target, lambda a, n, c: a[0])


def _too_long(t: SqlType) -> StringDataRightTruncation:
    return StringDataRightTruncation(f"value too long for type character varying({t.max_length})")


def _any(b: Datum) -> bool:
    if is_scalar(b):
        return bool(b.as_py())
    return bool(pc.any(b).as_py())
