"""Math functions: abs, round, ceil/floor/trunc, sqrt, power, exp, ln, log10, mod, sign, random.

Overloads follow Postgres: integer arguments to float-only functions resolve to the
`double precision` overload (the preferred numeric type), numeric stays numeric.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import DataError, DivisionByZero, NumericValueOutOfRange
from engine.expr.coerce import implicit_cast, is_untyped
from engine.expr.core import (
    Datum,
    EvalContext,
    Expr,
    Func,
    Literal,
    as_array,
    is_scalar,
    out_of_range,
)
from engine.expr.ops import arith_kernel
from engine.expr.registry import coerce_to, no_function, register, simple
from engine.expr.typmod import numeric_with_scale
from engine.numeric import as_floats, finite_only, has_special, special_masks, with_specials
from engine.types import BIGINT, DOUBLE, INT, NUMERIC, SqlType, TypeKind

K = TypeKind
NUMERIC_LIMIT = 1e28  # numeric is decimal128(38, 10): 28 digits before the point


class InvalidArgumentForSqrt(DataError):
    sqlstate = "2201F"


class InvalidArgumentForLog(DataError):
    sqlstate = "2201E"


def _num_arg(name: str, args: list[Expr], keep_int: bool = False) -> tuple[Expr, SqlType]:
    """numeric stays numeric, floats/ints (and unknown) resolve to double precision."""
    if len(args) != 1:
        raise no_function(name, args)
    a = args[0]
    if is_untyped(a):
        a = implicit_cast(a, DOUBLE) or a
    t = a.type
    if keep_int and t.is_integer:
        return a, t
    if t.kind is K.NUMERIC or t.kind is K.REAL and keep_int:
        return a, t
    c = implicit_cast(a, DOUBLE)
    if c is None:
        raise no_function(name, args)
    return c, DOUBLE


@register("abs")
def _abs(args: list[Expr]) -> Expr:
    a, t = _num_arg("abs", args, keep_int=True)

    def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
        try:
            return pc.abs_checked(x[0])
        except pa.ArrowInvalid as e:
            raise out_of_range(t) from e

    return Func("abs", (a,), t, kernel)


def _rounding(name: str, mode: str) -> None:
    def resolve(args: list[Expr]) -> Expr:
        if len(args) == 2:
            base = args[0]
            if base.type.is_float and not is_untyped(base):
                # PostgreSQL (and RisingWave) round/trunc to n digits only numerics
                raise no_function(name, args)
            a = coerce_to(name, args, [NUMERIC, INT])
            digits = args[1]
            const = isinstance(digits, Literal) and isinstance(digits.value, int)
            t = numeric_with_scale(digits.value if const else None)  # type: ignore[attr-defined]

            def k2(x: list[Datum], n: int, c: EvalContext) -> Datum:
                v, d = x
                if is_scalar(d):
                    if not d.is_valid:
                        return (
                            pa.nulls(n, t.arrow) if not is_scalar(v) else pa.scalar(None, t.arrow)
                        )
                    nd = d.as_py()
                    if t.kind is K.NUMERIC:
                        nd = min(nd, 10)
                        w = v.cast(pa.decimal256(76, 10))
                        return pc.round(w, nd, round_mode=mode).cast(t.arrow)
                    return pc.round(
                        v,
                        nd,
                        round_mode=mode if mode != "half_towards_infinity" else "half_to_even",
                    )
                vals = [
                    None if a is None or b is None else round(a, b)
                    for a, b in zip(v.to_pylist(), d.to_pylist(), strict=True)
                ]
                return pa.array(vals, t.arrow)

            return Func(name, tuple(a), t, _keep_specials(k2))
        a1, t1 = _num_arg(name, args)
        if t1.kind is K.NUMERIC:
            t1 = numeric_with_scale(0)
        fmode = "half_to_even" if (name == "round" and t1.kind is K.DOUBLE) else mode

        def k1(x: list[Datum], n: int, c: EvalContext) -> Datum:
            if t1.kind is K.NUMERIC:
                return pc.round(x[0].cast(pa.decimal256(76, 10)), 0, round_mode=mode).cast(
                    NUMERIC.arrow
                )
            return pc.round(x[0], 0, round_mode=fmode)

        return Func(name, (a1,), t1, _keep_specials(k1) if t1.kind is K.NUMERIC else k1)

    register(name)(resolve)


Kernel = Callable[[list[Datum], int, EvalContext], Datum]


def _keep_specials(kernel: Kernel) -> Kernel:
    """A numeric kernel whose first argument's NaN / Infinity / -Infinity pass through
    unchanged (round, trunc, ceil, floor of them are themselves)."""

    def k(x: list[Datum], n: int, c: EvalContext) -> Datum:
        if not pa.types.is_decimal128(x[0].type) or not has_special(x[0]):
            return kernel(x, n, c)
        v = as_array(x[0], n)
        m = special_masks(v)
        if m is None:  # a special constant over no rows
            return kernel([finite_only(v), *x[1:]], n, c)
        out = as_array(kernel([finite_only(v), *x[1:]], n, c), n)
        return with_specials(out, *m)

    return k


def _float_to_numeric(r: Datum, n: int) -> Datum:
    """A float64 result as numeric: nan / inf become NaN / Infinity, finite values round
    to 10 fraction digits."""
    a = as_array(r, n)
    nan = pc.fill_null(pc.is_nan(a), False).to_numpy(zero_copy_only=False)
    inf = pc.fill_null(pc.is_inf(a), False).to_numpy(zero_copy_only=False)
    if not (nan.any() or inf.any()):
        return pc.round(r, 10).cast(NUMERIC.arrow, safe=False)
    neg = pc.fill_null(pc.less(a, 0.0), False).to_numpy(zero_copy_only=False)
    finite = pc.if_else(pa.array(nan | inf), pa.scalar(0.0), a)
    out = pc.round(finite, 10).cast(NUMERIC.arrow, safe=False)
    return with_specials(out, nan, inf & ~neg, inf & neg)


_rounding("round", "half_towards_infinity")
_rounding("trunc", "towards_zero")
_rounding("ceil", "up")
_rounding("floor", "down")
register("ceiling")(lambda args: _call("ceil", args))


def _call(name: str, args: list[Expr]) -> Expr:
    from engine.expr.registry import call

    return call(name, args)


def _float_fn(name: str, fn: object, check: str | None = None) -> None:
    def resolve(args: list[Expr]) -> Expr:
        a, t = _num_arg(name, args)
        if t.kind is K.NUMERIC:
            a = implicit_cast(a, DOUBLE) or a
            ret: SqlType = NUMERIC
        else:
            ret = DOUBLE

        def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
            v = x[0]
            if check == "sqrt" and _any(pc.less(v, 0)):
                raise InvalidArgumentForSqrt("cannot take square root of a negative number")
            if check == "log":
                if _any(pc.equal(v, 0)):
                    raise InvalidArgumentForLog("cannot take logarithm of zero")
                if _any(pc.less(v, 0)):
                    raise InvalidArgumentForLog("cannot take logarithm of a negative number")
            r = fn(v)  # type: ignore[operator]
            if check == "exp" and _any(pc.is_inf(r)) and not _any(pc.is_inf(v)):
                raise out_of_range(DOUBLE)
            if ret.kind is K.NUMERIC:
                return _float_to_numeric(r, n)
            return r

        return Func(name, (a,), ret, kernel)

    register(name)(resolve)


def _any(b: Datum) -> bool:
    if is_scalar(b):
        return bool(b.as_py())
    return bool(pc.any(b).as_py())


_float_fn("sqrt", pc.sqrt, "sqrt")
_float_fn("exp", pc.exp, "exp")
_float_fn("ln", pc.ln, "log")
_float_fn("log10", pc.log10, "log")
_float_fn("cbrt", lambda v: _cbrt(v))


def _cbrt(v: Datum) -> Datum:
    if is_scalar(v):
        return pa.scalar(None if not v.is_valid else float(np.cbrt(v.as_py())), pa.float64())
    return pa.array(
        np.cbrt(v.to_numpy(zero_copy_only=False)), mask=v.is_null().to_numpy(zero_copy_only=False)
    )


@register("log")
def _log(args: list[Expr]) -> Expr:
    """log(x) is log10; log(b, x) the logarithm of x to base b, numeric as in PostgreSQL
    (computed as ln(x) / ln(b) in double precision, then rounded to numeric's digits, so
    log(2, 8) is exactly 3)."""
    if len(args) == 1:
        return _call("log10", args)
    a = coerce_to("log", args, [NUMERIC, NUMERIC])

    def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
        cols = [as_array(v, n) for v in x]
        mask = np.zeros(n, dtype=bool)
        for col in cols:
            mask |= pc.is_null(col).to_numpy(zero_copy_only=False)
        b, v = (as_floats(col) for col in cols)
        live = ~mask
        if bool(((b == 0) | (v == 0))[live].any()):
            raise InvalidArgumentForLog("cannot take logarithm of zero")
        if bool(((b < 0) | (v < 0))[live].any()):
            raise InvalidArgumentForLog("cannot take logarithm of a negative number")
        if bool((b == 1)[live].any()):
            raise DivisionByZero("division by zero")
        with np.errstate(all="ignore"):
            r = np.log(np.where(live, v, 1.0)) / np.log(np.where(live, b, 2.0))
        return _float_to_numeric(pa.array(r, pa.float64(), mask=mask if mask.any() else None), n)

    return Func("log", tuple(a), NUMERIC, kernel)


@register("power", "pow")
def _power(args: list[Expr]) -> Expr:
    if len(args) == 2 and any(a.type.kind is K.NUMERIC and not is_untyped(a) for a in args):
        a = coerce_to("power", args, [DOUBLE, DOUBLE])
        ret: SqlType = NUMERIC
    else:
        a = coerce_to("power", args, [DOUBLE, DOUBLE])
        ret = DOUBLE

    def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
        b, e = x
        if _any(pc.and_(pc.equal(b, 0), pc.less(e, 0))):
            raise InvalidArgumentForLog("zero raised to a negative power is undefined")
        if _any(pc.and_(pc.less(b, 0), pc.not_equal(e, pc.floor(e)))):
            raise InvalidArgumentForSqrt(
                "a negative number raised to a non-integer power yields a complex result"
            )
        r = pc.power(b, e)
        finite_in = pc.and_(pc.is_finite(b), pc.is_finite(e))
        if ret.kind is K.NUMERIC:
            big = pc.greater_equal(pc.abs(r), NUMERIC_LIMIT)
            if _any(pc.and_(big, finite_in)):
                raise NumericValueOutOfRange("value overflows numeric format")
            return _float_to_numeric(r, n)
        if _any(pc.and_(pc.is_inf(r), finite_in)):
            raise NumericValueOutOfRange("value out of range: overflow")
        return r

    return Func("power", tuple(a), ret, kernel)


@register("mod")
def _mod(args: list[Expr]) -> Expr:
    from engine.expr.ops import unfolded_arith

    if len(args) != 2:
        raise no_function("mod", args)
    e = unfolded_arith("%", args[0], args[1])
    assert isinstance(e, Func)
    return Func("mod", e.args, e.type, arith_kernel("%", e.type))


@register("sign")
def _sign(args: list[Expr]) -> Expr:
    a, t = _num_arg("sign", args)

    def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
        if t.kind is K.NUMERIC:
            v = as_array(x[0], n)
            if has_special(v):  # sign(NaN) is NaN, sign(+-Infinity) is +-1
                f = pa.array(as_floats(v), mask=pc.is_null(v).to_numpy(zero_copy_only=False))
                return _float_to_numeric(pc.sign(f), n)
            return pc.sign(x[0].cast(pa.float64())).cast(NUMERIC.arrow)
        s = pc.sign(x[0]).cast(pa.float64())
        # PostgreSQL's float sign is 0 for NaN (neither > 0 nor < 0); numeric's is NaN
        return pc.if_else(pc.is_nan(s), pa.scalar(0.0), s)

    return Func("sign", (a,), t, kernel)


@register("random")
def _random(args: list[Expr]) -> Expr:
    if args:
        raise no_function("random", args)
    return Func(
        "random",
        (),
        DOUBLE,
        lambda x, n, c: pa.array(np.random.default_rng().random(n)),
        volatile=True,
    )


@register("pi")
def _pi(args: list[Expr]) -> Expr:
    return simple("pi", args, [], DOUBLE, lambda x, n, c: pa.scalar(np.pi))


# -- trigonometry: double precision in and out, as PostgreSQL --------------------------------
def _trig(name: str, fn: object, arity: int = 1) -> None:
    """Register `name` over float8 arguments; a domain error (asin(2), sin('inf')) is
    PostgreSQL's 22003 `input is out of range`."""

    def kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
        try:
            return fn(*a)  # type: ignore[operator]
        except pa.ArrowInvalid:
            raise NumericValueOutOfRange("input is out of range") from None

    @register(name)
    def resolve(args: list[Expr]) -> Expr:
        return simple(name, args, [DOUBLE] * arity, DOUBLE, kernel)


for _name in ("sin", "cos", "tan", "asin", "acos"):
    _trig(_name, getattr(pc, _name + "_checked"))
for _name in ("atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh"):
    _trig(_name, getattr(pc, _name))
_trig("atan2", pc.atan2, 2)
_trig("cot", lambda v: pc.divide(1.0, pc.tan_checked(v)))
_trig("degrees", lambda v: pc.multiply(v, 180.0 / np.pi))
_trig("radians", lambda v: pc.multiply(v, np.pi / 180.0))


def _gcd_lcm(name: str) -> Callable[[list[Expr]], Expr]:
    """gcd / lcm over integer or bigint (smallint promotes to integer), in numpy over the
    whole column. As PostgreSQL: results are non-negative, lcm(0, x) is 0, and a result
    outside the type (gcd(-2147483648, 0), a too large lcm) is 22003."""

    def resolve(args: list[Expr]) -> Expr:
        if len(args) != 2:
            raise no_function(name, args)
        kinds = {a.type.kind for a in args if not is_untyped(a)}
        t = BIGINT if K.BIGINT in kinds else INT
        if kinds - {K.SMALLINT, K.INT, K.BIGINT}:
            raise no_function(name, args)
        a = coerce_to(name, args, [t, t])
        label = "bigint" if t is BIGINT else "integer"
        lo, hi = (-(2**63), 2**63 - 1) if t is BIGINT else (-(2**31), 2**31 - 1)

        def kernel(d: list[Datum], n: int, ctx: EvalContext) -> Datum:
            x, y = (as_array(v, n, t) for v in d)
            valid = pc.and_(pc.is_valid(x), pc.is_valid(y)).to_numpy(zero_copy_only=False)
            xs = pc.fill_null(x, 0).to_numpy(zero_copy_only=False).astype(object)
            ys = pc.fill_null(y, 0).to_numpy(zero_copy_only=False).astype(object)
            g = np.gcd(xs, ys)  # exact Python ints: |min| does not wrap
            if name == "lcm":
                nz = g != 0
                g = np.where(nz, np.abs(xs * ys) // np.where(nz, g, 1), 0)
            g = np.where(valid, g, 0)
            if g.size and (g.max() > hi or g.min() < lo):
                raise NumericValueOutOfRange(f"{label} out of range")
            return pa.array(g.astype(np.int64), t.arrow, mask=~valid)

        return Func(name, tuple(a), t, kernel)

    return resolve


register("gcd")(_gcd_lcm("gcd"))
register("lcm")(_gcd_lcm("lcm"))
