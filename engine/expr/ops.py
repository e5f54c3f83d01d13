"""Operators: arithmetic, comparison, boolean logic, LIKE, IN, IS [NOT] DISTINCT FROM.

Each `bind_*` function takes bound operands, applies Postgres operator resolution (implicit
casts, unknown literals adopting the other side's type) and returns a `Func` whose kernel
runs one pyarrow/numpy kernel over the column. Integer arithmetic uses the `*_checked`
kernels so overflow raises 22003; division by zero raises 22012 for every number type.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import civil
from engine.errors import (
    DataError,
    DatetimeFieldOverflow,
    DivisionByZero,
    EngineError,
    NumericValueOutOfRange,
    UndefinedFunction,
)
from engine.expr import temporal
from engine.expr.coerce import (
    common_type,
    implicit_cast,
    is_untyped,
    operator_type,
    resolve_unknown,
)
from engine.expr.core import (
    Datum,
    EvalContext,
    Expr,
    Func,
    Literal,
    as_array,
    evaluate_constant,
    is_scalar,
    out_of_range,
)
from engine.expr.nonstrict import RowErrors, row_failure
from engine.expr.numeric_div import pg_quotient, wide_quotient
from engine.expr.typmod import numeric_with_scale, scale_of
from engine.numeric import (
    array_of,
    as_floats,
    finite_only,
    has_special,
    special_masks,
    with_specials,
)
from engine.types import (
    BOOLEAN,
    DATE,
    DOUBLE,
    INT,
    INTERVAL,
    NUMERIC,
    TIME,
    TIMESTAMP,
    UNKNOWN,
    VARCHAR,
    SqlType,
    TypeKind,
)

K = TypeKind
_OP_HINT = (
    "No operator matches the given name and argument types. "
    "You might need to add explicit type casts."
)


def no_operator(op: str, *types: SqlType) -> UndefinedFunction:
    if len(types) == 1:
        return UndefinedFunction(f"operator does not exist: {op} {types[0].display}", hint=_OP_HINT)
    return UndefinedFunction(
        f"operator does not exist: {types[0].display} {op} {types[1].display}", hint=_OP_HINT
    )


def _unify(op: str, left: Expr, right: Expr) -> tuple[Expr, Expr]:
    """Cast both operands to one type (unknown adopts the other side's type)."""
    if is_untyped(left) and is_untyped(right):
        return resolve_unknown(left), resolve_unknown(right)
    if is_untyped(left):
        return implicit_cast(left, right.type) or left, right
    if is_untyped(right):
        return left, implicit_cast(right, left.type) or right
    try:
        t = operator_type([left.type, right.type])
    except Exception as e:
        raise no_operator(op, left.type, right.type) from e
    lc, rc = implicit_cast(left, t), implicit_cast(right, t)
    if lc is None or rc is None:
        raise no_operator(op, left.type, right.type)
    return lc, rc


# -- numeric kernels -----------------------------------------------------------------------------


def _dec_digits(d: Datum) -> int:
    m = pc.max(pc.abs(d)) if not is_scalar(d) else pc.abs(d)
    v = m.as_py() if m.is_valid else None
    if v is None:
        return 1
    return max(1, len(str(int(v))))


def _to256(d: Datum, extra_scale: int = 0) -> Datum:
    p = min(76, _dec_digits(d) + 10 + extra_scale + 1)
    return d.cast(pa.decimal256(p, 10 + extra_scale))


def _dec_back(d: Datum) -> Datum:
    d = pc.round(d, 10, round_mode="half_towards_infinity")
    try:
        return d.cast(NUMERIC.arrow)
    except pa.ArrowInvalid as e:
        raise NumericValueOutOfRange("numeric field overflow") from e


def _quotient(a: Datum, b: Datum) -> Datum:
    """a / b of finite numerics with more than 20 fractional digits, truncated; operands
    whose digits together are past what Arrow's decimal division holds go through
    `numeric_div.wide_quotient`."""
    try:
        return pc.divide_checked(_to256(a, 10), _to256(b))
    except pa.ArrowInvalid as e:
        if "precision out of range" not in str(e):
            raise
        return wide_quotient(a, b)


def _check_zero(a: Datum, b: Datum) -> None:
    """Raise 22012 when a non-NULL dividend meets a zero divisor (NULL / 0 is NULL)."""
    z = pc.equal(
        b, pa.scalar(0, b.type) if not pa.types.is_decimal(b.type) else pa.scalar(0).cast(b.type)
    )
    z = pc.and_(z, pc.is_valid(a))
    if z.as_py() if is_scalar(z) else pc.any(z).as_py():
        raise DivisionByZero("division by zero")


_INT_BOUNDS = {
    K.SMALLINT: (-(2**15), 2**15 - 1),
    K.INT: (-(2**31), 2**31 - 1),
    K.BIGINT: (-(2**63), 2**63 - 1),
}


def _int64_values(d: Datum, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(values as int64 with NULLs as 0, validity) of an integer Datum over n rows."""
    a = as_array(d, n)
    valid = pc.is_valid(a).to_numpy(zero_copy_only=False)
    return pc.fill_null(a.cast(pa.int64()), 0).to_numpy(zero_copy_only=False), valid


def _zero_mask(a: Datum, b: Datum, n: int) -> np.ndarray:
    zero = pa.scalar(0).cast(b.type) if pa.types.is_decimal(b.type) else pa.scalar(0, b.type)
    z = pc.and_(pc.equal(b, zero), pc.is_valid(a))
    mask = pc.fill_null(as_array(z, n), False).to_numpy(zero_copy_only=False)
    if pa.types.is_decimal(a.type) and has_special(a):  # NaN / 0 is NaN
        m = special_masks(as_array(a, n))
        if m is not None:
            mask = mask & ~m[0]
    return mask


def arith_row_errors(op: str, t: SqlType) -> RowErrors | None:
    """Which rows `a op b` fails on, vectorised: division by zero (every number type) and
    integer overflow (computed in int64, with the sign rules for bigint)."""
    if op not in ("+", "-", "*", "/", "%") or t.kind is K.NUMERIC and op in ("+", "-", "*"):
        return None
    if t.is_float and op not in ("/", "%"):
        return None

    def row_errors(args: list[Datum], n: int) -> list[tuple[np.ndarray, EngineError]]:
        a, b = args
        out: list[tuple[np.ndarray, EngineError]] = []
        if op in ("/", "%"):
            out.append((_zero_mask(a, b, n), DivisionByZero("division by zero")))
        if t.kind not in _INT_BOUNDS or op == "%":
            return out
        lo, hi = _INT_BOUNDS[t.kind]
        if op == "/":  # only MIN / -1 overflows
            ovf = pc.and_(pc.equal(a, pa.scalar(lo, a.type)), pc.equal(b, pa.scalar(-1, b.type)))
            out.append(
                (
                    pc.fill_null(as_array(ovf, n), False).to_numpy(zero_copy_only=False),
                    out_of_range(t),
                )
            )
            return out
        x, xv = _int64_values(a, n)
        y, yv = _int64_values(b, n)
        with np.errstate(all="ignore"):
            if t.kind is not K.BIGINT:  # no int64 overflow for 32-bit operands
                r = x + y if op == "+" else x - y if op == "-" else x * y
                ovf = (r < lo) | (r > hi)
            elif op == "+":
                r = x + y
                ovf = ((x ^ r) & (y ^ r)) < 0
            elif op == "-":
                r = x - y
                ovf = ((x ^ y) & (x ^ r)) < 0
            else:
                r = x * y
                ovf = (x != 0) & (r // np.where(x == 0, 1, x) != y)
                ovf |= (x == -1) & (y == lo)
        out.append((ovf & xv & yv, out_of_range(t)))
        return out

    return row_errors


def arith_kernel(op: str, t: SqlType) -> Callable[[list[Datum], int, EvalContext], Datum]:
    """The kernel of `op` with result type `t` (a numeric quotient is rounded to
    PostgreSQL's scale where that is below 10 digits: `numeric_div.pg_quotient`)."""
    fname = {
        "+": "add_checked",
        "-": "subtract_checked",
        "*": "multiply_checked",
        "/": "divide_checked",
    }.get(op)

    def finite_numeric(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
        a, b = args
        if op in ("/", "%"):
            _check_zero(a, b)
        if op in ("+", "-"):
            r = getattr(pc, fname)(a.cast(pa.decimal256(40, 10)), b.cast(pa.decimal256(40, 10)))
            return _dec_back(r)
        if op == "*":
            return _dec_back(pc.multiply_checked(_to256(a), _to256(b)))
        if op == "/":
            exact = _quotient(a, b)  # over 20 digits, truncated
            q = _dec_back(exact)
            if is_scalar(q):  # constant operands: one row
                one = [as_array(x, 1) for x in (q, exact, a, b)]
                return pg_quotient(*one)[0]
            return pg_quotient(q, as_array(exact, n), as_array(a, n), as_array(b, n))
        q = pc.trunc(_quotient(a, b)).cast(pa.decimal256(76, 10))
        prod = pc.multiply_checked(_to256(q.cast(NUMERIC.arrow)), _to256(b))
        return _dec_back(
            pc.subtract_checked(
                a.cast(pa.decimal256(40, 10)), _dec_back(prod).cast(pa.decimal256(40, 10))
            )
        )

    numeric = _numeric_specials(op, finite_numeric)

    def kernel(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
        a, b = args
        if t.kind is K.NUMERIC:
            return numeric(args, n, ctx)
        if op in ("/", "%"):
            _check_zero(a, b)
        if op == "%":
            if t.is_float:
                raise no_operator("%", t, t)
            # x % -1 is 0 for every x (PostgreSQL special-cases it: INT_MIN / -1 overflows)
            b = pc.if_else(pc.equal(b, pa.scalar(-1, b.type)), pa.scalar(1, b.type), b)
            q = pc.divide_checked(a, b)
            return pc.subtract_checked(a, pc.multiply_checked(q, b))
        if t.is_float:
            fn = {"+": pc.add, "-": pc.subtract, "*": pc.multiply, "/": pc.divide}[op]
            r = fn(a, b)
            _check_float_overflow(r, a, b)
            return r
        try:
            return getattr(pc, fname)(a, b)
        except pa.ArrowInvalid as e:
            if "overflow" in str(e).lower():
                raise out_of_range(t) from e
            raise

    return kernel


def _check_float_overflow(r: Datum, a: Datum, b: Datum) -> None:
    """PostgreSQL's float8/float4 arithmetic: a finite pair giving infinity overflows (22003)
    instead of printing Infinity."""
    bad = pc.and_(pc.is_inf(r), pc.and_(pc.is_finite(a), pc.is_finite(b)))
    if bad.as_py() if is_scalar(bad) else pc.any(bad).as_py():
        raise NumericValueOutOfRange("value out of range: overflow")


def _neg_kernel(t: SqlType) -> Callable[[list[Datum], int, EvalContext], Datum]:
    def kernel(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
        if t.kind is K.INTERVAL:
            a = as_array(args[0], n)
            m, d, ns = temporal.interval_parts(a)
            return temporal.make_interval_array(
                -m, -d, -ns, pc.is_null(a).to_numpy(zero_copy_only=False)
            )
        if t.kind is K.NUMERIC and has_special(args[0]):
            a = as_array(args[0], n)
            nan, pinf, ninf = special_masks(a) or _no_specials(n)
            return with_specials(pc.negate(finite_only(a)), nan, ninf, pinf)
        try:
            return pc.negate_checked(args[0])
        except pa.ArrowInvalid as e:
            raise out_of_range(t) from e

    return kernel


def _no_specials(n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    z = np.zeros(n, dtype=bool)
    return z, z, z


def _numeric_specials(
    op: str, finite: Callable[[list[Datum], int, EvalContext], Datum]
) -> Callable[[list[Datum], int, EvalContext], Datum]:
    """`finite` (a numeric `op` kernel) extended to NaN and the infinities with
    PostgreSQL's rules: NaN propagates, Inf - Inf and Inf * 0 are NaN, x / Inf is 0,
    x % Inf is x, Inf % x is NaN, and a zero divisor stays 22012 except for NaN / 0."""

    def kernel(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
        a, b = args
        if not (has_special(a) or has_special(b)):
            return finite(args, n, ctx)
        A, B = as_array(a, n, NUMERIC), as_array(b, n, NUMERIC)
        ma, mb = special_masks(A) or _no_specials(n), special_masks(B) or _no_specials(n)
        valid = pc.and_(pc.is_valid(A), pc.is_valid(B)).to_numpy(zero_copy_only=False)
        raw = ma[0] | ma[1] | ma[2] | mb[0] | mb[1] | mb[2]
        sp = raw & valid  # rows whose result is special (a NULL operand keeps it NULL)
        # every row with a special operand computes 0 op 1 (NULLs kept) in the finite kernel
        ra = pa.array(raw & pc.is_valid(A).to_numpy(zero_copy_only=False))
        rb = pa.array(raw & pc.is_valid(B).to_numpy(zero_copy_only=False))
        zero = pa.scalar(Decimal(0)).cast(NUMERIC.arrow)
        one = pa.scalar(Decimal(1)).cast(NUMERIC.arrow)
        r = as_array(finite([pc.if_else(ra, zero, A), pc.if_else(rb, one, B)], n, ctx), n)
        x, y = as_floats(A), as_floats(B)
        if op in ("/", "%") and (sp & (y == 0) & ~np.isnan(x)).any():
            raise DivisionByZero("division by zero")
        with np.errstate(all="ignore"):
            if op == "+":
                f = x + y
            elif op == "-":
                f = x - y
            elif op == "*":
                f = x * y
            elif op == "/":
                f = x / y
            else:
                f = np.where(np.isinf(y) & np.isfinite(x), 0.0, np.fmod(x, y))
        if op == "%":  # x % Inf is x exactly
            r = pc.if_else(pa.array(sp & np.isfinite(x) & np.isinf(y)), A, r)
        elif op == "/":  # x / Inf is 0
            r = pc.if_else(pa.array(sp & np.isfinite(f)), zero, r)
        return with_specials(r, sp & np.isnan(f), sp & (f == np.inf), sp & (f == -np.inf))

    return kernel


def bind_neg(arg: Expr) -> Expr:
    arg = resolve_unknown(arg) if is_untyped(arg) else arg
    if not (arg.type.is_numeric or arg.type.kind is K.INTERVAL):
        raise no_operator("-", arg.type)
    return Func("neg", (arg,), arg.type, _neg_kernel(arg.type), op="-")


# -- temporal arithmetic ----------------------------------------------------------------------


def _ts_plus_interval(sign: int, t: SqlType) -> Callable[[list[Datum], int, EvalContext], Datum]:
    def kernel(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
        ts, iv = as_array(args[0], n), as_array(args[1], n)
        if t.kind is K.TIMESTAMP and pa.types.is_date32(ts.type):
            ts = ts.cast(pa.timestamp("us"))
        us = pc.fill_null(ts.cast(pa.int64()), 0).to_numpy(zero_copy_only=False)
        m, d, ns = temporal.interval_parts(iv)
        out = temporal.add_interval_us(us, sign * m, sign * d, sign * ns)
        mask = pc.or_(pc.is_null(ts), pc.is_null(iv)).to_numpy(zero_copy_only=False)
        # 22008 past the range, also where int64 microseconds wrapped around: a float
        # estimate (months of 30.44 days, off by at most 1.5 days each) is then far off
        day = float(temporal.US_PER_DAY)
        est = us.astype(np.float64) + sign * (m * 30.436875 * day + d * day + ns / 1000.0)
        slack = np.abs(m) * 1.5 * day + day
        bad = (np.abs(est - out.astype(np.float64)) > slack) | (est > civil.TS_MAX + slack)
        civil.check_us(np.where(bad | (est < civil.TS_MIN - slack), civil.TS_MIN - 1, out), ~mask)
        return pa.array(out, pa.int64(), mask=mask if mask.any() else None).cast(t.arrow)

    return kernel


def _ts_minus_ts(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
    a, b = as_array(args[0], n), as_array(args[1], n)
    diff = pc.subtract(a.cast(pa.int64()), b.cast(pa.int64()))
    mask = pc.is_null(diff).to_numpy(zero_copy_only=False)
    v = pc.fill_null(diff, 0).to_numpy(zero_copy_only=False)
    days = np.trunc(v / temporal.US_PER_DAY).astype(np.int64)
    rest = v - days * temporal.US_PER_DAY
    return temporal.make_interval_array(np.zeros(len(v), np.int64), days, rest * 1000, mask)


def _date_minus_date(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
    return pc.subtract(args[0].cast(pa.int32()), args[1].cast(pa.int32()))


def _date_plus_int(sign: int) -> Callable[[list[Datum], int, EvalContext], Datum]:
    def kernel(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
        days = as_array(args[0], n).cast(pa.int32()).cast(pa.int64())
        off = as_array(args[1], n).cast(pa.int64())
        r = pc.add(days, off) if sign > 0 else pc.subtract(days, off)
        raw = pc.fill_null(r, 0).to_numpy(zero_copy_only=False)
        civil.check_days(raw)  # PostgreSQL's range (5874897 AD), not int32's
        return r.cast(pa.int32()).cast(pa.date32())

    return kernel


def _iv_binop(sign: int) -> Callable[[list[Datum], int, EvalContext], Datum]:
    def kernel(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
        a, b = as_array(args[0], n), as_array(args[1], n)
        m1, d1, n1 = temporal.interval_parts(a)
        m2, d2, n2 = temporal.interval_parts(b)
        mask = pc.or_(pc.is_null(a), pc.is_null(b)).to_numpy(zero_copy_only=False)
        return temporal.make_interval_array(m1 + sign * m2, d1 + sign * d2, n1 + sign * n2, mask)

    return kernel


def _iv_mul(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
    a = as_array(args[0], n)
    f = as_array(args[1], n).cast(pa.float64())
    m, d, ns = temporal.interval_parts(a)
    fv = pc.fill_null(f, 0).to_numpy(zero_copy_only=False)
    mf = m * fv
    mi = np.trunc(mf)
    df = d * fv + (mf - mi) * 30
    di = np.trunc(df)
    nf = ns * fv + (df - di) * 86_400e9
    mask = pc.or_(pc.is_null(a), pc.is_null(f)).to_numpy(zero_copy_only=False)
    live = ~mask
    if live.any() and (
        temporal.out_of_i32(mi[live])
        or temporal.out_of_i32(di[live])
        or np.abs(nf[live]).max() >= 2**63
        or not np.isfinite(nf[live]).all()
    ):
        raise DatetimeFieldOverflow("interval out of range")
    return temporal.make_interval_array(
        mi.astype(np.int64), di.astype(np.int64), np.round(nf).astype(np.int64), mask
    )


def _null_constant(e: Expr) -> bool:
    return isinstance(e, Literal) and e.value is None


def _folded_if_null(e: Expr, left: Expr, right: Expr) -> Expr:
    """A strict operator with a NULL constant operand is NULL without evaluating the other
    one (PostgreSQL folds it at plan time, so `(a + b) + NULL` cannot overflow)."""
    if (_null_constant(left) or _null_constant(right)) and not e.has_now():
        other = right if _null_constant(left) else left
        if other.is_constant() and not isinstance(other, Literal):
            evaluate_constant(other)  # folded bottom-up first: `(2147483647 + 1) + NULL` fails
        return Literal(None, e.type)
    return e


def bind_arith(op: str, left: Expr, right: Expr) -> Expr:
    return _folded_if_null(unfolded_arith(op, left, right), left, right)


def unfolded_arith(op: str, left: Expr, right: Expr) -> Expr:
    """`bind_arith` without NULL folding: always the operator's Func."""
    lt, rt = left.type, right.type
    # temporal forms first (unknown literals take the interval/date type they need)
    if lt.is_temporal or rt.is_temporal:
        return _bind_temporal_arith(op, left, right)
    if is_untyped(left) and rt.is_numeric or is_untyped(right) and lt.is_numeric:
        left, right = _unify(op, left, right)
    elif is_untyped(left) and is_untyped(right):
        raise no_operator(op, UNKNOWN, UNKNOWN)
    if not (left.type.is_numeric and right.type.is_numeric):
        raise no_operator(op, left.type, right.type)
    scales = (scale_of(left.type), scale_of(right.type))
    types = (left.type, right.type)
    left, right = _unify(op, left, right)
    t = left.type
    if op == "%" and t.is_float:  # no float modulus: at bind time, even over no rows
        raise no_operator(op, *types)
    if t.kind is K.NUMERIC:
        t = numeric_with_scale(_result_scale(op, *scales))
    return Func(
        _OP_NAMES[op],
        (left, right),
        t,
        arith_kernel(op, t),
        op=op,
        row_errors=arith_row_errors(op, t),
    )


def _result_scale(op: str, a: int | None, b: int | None) -> int | None:
    """PostgreSQL's display scale of a numeric result: + - % the larger, * the sum; a
    quotient's scale depends on the values, so it stays unknown."""
    if a is None or b is None or op == "/":
        return None
    return a + b if op == "*" else max(a, b)


_OP_NAMES = {"+": "add", "-": "subtract", "*": "multiply", "/": "divide", "%": "modulus"}


def _bind_temporal_arith(op: str, left: Expr, right: Expr) -> Expr:
    lt, rt = left.type, right.type
    ts_kinds = (K.TIMESTAMP, K.TIMESTAMPTZ, K.DATE)
    if is_untyped(right) and lt.kind in ts_kinds and op in "+-":
        c = implicit_cast(right, INTERVAL if op == "+" else lt)
        assert c is not None
        right, rt = c, c.type
    if is_untyped(left) and rt.kind is K.INTERVAL and op in "+-":
        # an unknown operand takes the other side's type (PostgreSQL: interval + interval
        # is the exact match, so NULL + interval is an interval and '2024-01-01' + interval
        # is an invalid interval)
        c = implicit_cast(left, INTERVAL)
        assert c is not None
        left, lt = c, c.type
    if op in "*/" and (
        is_untyped(left)
        and rt.kind is K.INTERVAL
        and op == "*"
        or is_untyped(right)
        and lt.kind is K.INTERVAL
    ):
        # interval * double precision (and double * interval, interval / double) are the
        # only such operators: NULL * interval '1 hour' is a NULL interval
        if is_untyped(left):
            left = implicit_cast(left, DOUBLE) or left
        else:
            right = implicit_cast(right, DOUBLE) or right
        lt, rt = left.type, right.type
    if is_untyped(left) and is_untyped(right) is False and lt.kind is K.UNKNOWN:
        c = implicit_cast(left, rt)
        assert c is not None
        left, lt = c, c.type
    name = _OP_NAMES[op]
    if lt.kind is K.TIME or rt.kind is K.TIME:
        return _bind_time_arith(op, left, right)
    if op == "+" and lt.kind is K.INTERVAL and rt.kind in ts_kinds:
        left, right, lt, rt = right, left, rt, lt
    if op in "+-" and lt.kind in ts_kinds and rt.kind is K.INTERVAL:
        out = TIMESTAMP if lt.kind is K.DATE else lt
        return Func(name, (left, right), out, _ts_plus_interval(1 if op == "+" else -1, out), op=op)
    if op == "-" and lt.kind in (K.TIMESTAMP, K.TIMESTAMPTZ) and rt.kind in ts_kinds:
        t = common_type([lt, rt])
        lc, rc = implicit_cast(left, t), implicit_cast(right, t)
        assert lc is not None and rc is not None
        return Func(name, (lc, rc), INTERVAL, _ts_minus_ts, op=op)
    if op == "-" and lt.kind is K.DATE and rt.kind is K.DATE:
        return Func(name, (left, right), INT, _date_minus_date, op=op)
    if op == "-" and lt.kind is K.DATE and rt.kind in (K.TIMESTAMP, K.TIMESTAMPTZ):
        lc = implicit_cast(left, rt)
        assert lc is not None
        return Func(name, (lc, right), INTERVAL, _ts_minus_ts, op=op)
    if op in "+-" and lt.kind is K.DATE and (rt.is_integer or is_untyped(right)):
        rc = implicit_cast(right, INT) if rt.kind is not K.BIGINT else right
        if rc is not None:
            return Func(name, (left, rc), DATE, _date_plus_int(1 if op == "+" else -1), op=op)
    if op == "+" and lt.is_integer and rt.kind is K.DATE:
        return Func(name, (right, left), DATE, _date_plus_int(1), op=op)
    if op in "+-" and lt.kind is K.INTERVAL and rt.kind in (K.INTERVAL, K.UNKNOWN):
        rc = implicit_cast(right, INTERVAL)
        assert rc is not None
        return Func(name, (left, rc), INTERVAL, _iv_binop(1 if op == "+" else -1), op=op)
    if op == "*" and lt.kind is K.INTERVAL and rt.is_numeric:
        return Func(name, (left, right), INTERVAL, _iv_mul, op=op)
    if op == "*" and rt.kind is K.INTERVAL and lt.is_numeric:
        return Func(name, (right, left), INTERVAL, _iv_mul, op=op)
    if op == "/" and lt.kind is K.INTERVAL and rt.is_numeric:
        inv = bind_arith("/", _one_double(), implicit_cast(right, DOUBLE) or right)
        return Func(name, (left, inv), INTERVAL, _iv_mul, op=op)
    raise no_operator(op, lt, rt)


def _bind_time_arith(op: str, left: Expr, right: Expr) -> Expr:
    """time + interval, interval + time, time - interval (time), time - time (interval);
    an unknown literal beside a time is the interval (or, for `-`, the time) it needs."""
    lt, rt = left.type, right.type
    if lt.kind is K.TIME and is_untyped(right) and op in "+-":
        right = implicit_cast(right, INTERVAL if op == "+" else TIME) or right
    elif rt.kind is K.TIME and is_untyped(left) and op == "+":
        left = implicit_cast(left, INTERVAL) or left
    lt, rt = left.type, right.type
    name = _OP_NAMES[op]
    if op == "+" and lt.kind is K.INTERVAL and rt.kind is K.TIME:
        left, right, lt, rt = right, left, rt, lt
    if op in "+-" and lt.kind is K.TIME and rt.kind is K.INTERVAL:
        sign = 1 if op == "+" else -1

        def plus(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
            return temporal.time_plus_interval(as_array(args[0], n), as_array(args[1], n), sign)

        return Func(name, (left, right), TIME, plus, op=op)
    if op == "-" and lt.kind is K.TIME and rt.kind is K.TIME:

        def minus(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
            return temporal.time_minus_time(as_array(args[0], n), as_array(args[1], n))

        return Func(name, (left, right), INTERVAL, minus, op=op)
    raise no_operator(op, lt, rt)


def _one_double() -> Expr:

    return Literal(1.0, DOUBLE)


# -- comparisons -----------------------------------------------------------------------------

_CMP = {
    "=": pc.equal,
    "<>": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def _interval_key(d: Datum, n: int) -> Datum:
    a = as_array(d, n)
    m, dd, ns = temporal.interval_parts(a)
    span = (m * 30 + dd) * temporal.US_PER_DAY + ns // 1000
    mask = pc.is_null(a).to_numpy(zero_copy_only=False)
    return pa.array(span, pa.int64(), mask=mask if mask.any() else None)


def cmp_kernel(op: str, t: SqlType) -> Callable[[list[Datum], int, EvalContext], Datum]:
    fn = _CMP[op]

    def kernel(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
        a, b = args
        if t.kind is K.INTERVAL:
            a, b = _interval_key(a, n), _interval_key(b, n)
        if t.is_float and (_has_nan(a) or _has_nan(b)):
            return _float_nan_compare(op, a, b)
        if t.kind is K.LIST:
            return _array_compare(op, as_array(a, n), as_array(b, n))
        return fn(a, b)

    return kernel


_PY_CMP: dict[str, Callable[[Any, Any], bool]] = {
    "=": lambda x, y: x == y,
    "<>": lambda x, y: x != y,
    "<": lambda x, y: x < y,
    "<=": lambda x, y: x <= y,
    ">": lambda x, y: x > y,
    ">=": lambda x, y: x >= y,
}


def _array_key(v: list[Any] | None) -> list[tuple[int, Any]] | None:
    """PostgreSQL's array order: element by element, a NULL element above every value,
    then the shorter array first (Python's list order over these pairs)."""
    return None if v is None else [(1, None) if x is None else (0, x) for x in v]


def _array_compare(op: str, a: pa.Array, b: pa.Array) -> pa.Array:
    """Array comparisons (Arrow has no kernel for lists): per row in Python, as arrays
    are compared rarely and their elements are Python values anyway."""
    f = _PY_CMP[op]
    out = []
    for x, y in zip(a.to_pylist(), b.to_pylist(), strict=True):
        kx, ky = _array_key(x), _array_key(y)
        out.append(None if kx is None or ky is None else f(kx, ky))
    return pa.array(out, pa.bool_())


def _has_nan(d: Datum) -> bool:
    m = pc.is_nan(d)
    return bool(m.as_py()) if is_scalar(m) else bool(pc.any(m).as_py())


def _float_nan_compare(op: str, a: Datum, b: Datum) -> Datum:
    """PostgreSQL's float order: NaN equals NaN and is greater than every other value
    (IEEE comparisons with NaN are all false)."""
    an, bn = pc.is_nan(a), pc.is_nan(b)
    av = pc.if_else(an, pa.scalar(0.0, a.type), a)
    bv = pc.if_else(bn, pa.scalar(0.0, b.type), b)
    if op in ("=", "<>"):
        eq = pc.and_(pc.equal(an, bn), pc.or_(an, pc.equal(av, bv)))
        return eq if op == "=" else pc.invert(eq)
    if op in (">", ">="):
        an, bn, av, bv = bn, an, bv, av
    if op in ("<", ">"):
        return pc.or_(
            pc.and_(pc.invert(an), bn),
            pc.and_(pc.and_(pc.invert(an), pc.invert(bn)), pc.less(av, bv)),
        )
    return pc.or_(bn, pc.and_(pc.invert(an), pc.less_equal(av, bv)))


def bind_compare(op: str, left: Expr, right: Expr) -> Expr:
    return _folded_if_null(unfolded_compare(op, left, right), left, right)


def unfolded_compare(op: str, left: Expr, right: Expr) -> Expr:
    """`bind_compare` without NULL folding: always the operator's Func."""
    if op == "!=":
        op = "<>"
    left, right = _unify(op, left, right)
    t = left.type
    if t.kind is K.LIST and op not in ("=", "<>"):
        raise no_operator(op, t, t)
    return Func(_CMP[op].__name__, (left, right), BOOLEAN, cmp_kernel(op, t), op=op)


def _distinct_kernel(negate: bool, t: SqlType) -> Callable[[list[Datum], int, EvalContext], Datum]:
    def kernel(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
        a, b = as_array(args[0], n), as_array(args[1], n)
        if t.kind is K.INTERVAL:
            a, b = _interval_key(a, n), _interval_key(b, n)
        if t.is_float and (_has_nan(a) or _has_nan(b)):
            eq = _float_nan_compare("=", a, b)  # NaN is not distinct from NaN
        else:
            eq = pc.equal(a, b)
        an, bn = pc.is_null(a), pc.is_null(b)
        same = pc.if_else(pc.or_(an, bn), pc.and_(an, bn), eq)
        return same if negate else pc.invert(same)

    return kernel


def bind_distinct(left: Expr, right: Expr, not_distinct: bool) -> Expr:
    left, right = _unify("IS DISTINCT FROM", left, right)
    name = "is_not_distinct_from" if not_distinct else "is_distinct_from"
    op = "IS NOT DISTINCT FROM" if not_distinct else "IS DISTINCT FROM"
    return Func(name, (left, right), BOOLEAN, _distinct_kernel(not_distinct, left.type), op=op)


# -- boolean logic ----------------------------------------------------------------------------


def _as_bool(e: Expr, what: str) -> Expr:
    if e.type == BOOLEAN:
        return e
    c = implicit_cast(e, BOOLEAN) if is_untyped(e) else None
    if c is None:
        from engine.errors import DatatypeMismatch

        raise DatatypeMismatch(
            f"argument of {what} must be type boolean, not type {e.type.display}"
        )
    return c


@dataclass(frozen=True, eq=False, repr=False)
class AndOr(Func):
    """AND / OR evaluated column-wise, but when the right operand raises a data error
    (`x <> 0 AND 10 / x > 1`), it is evaluated again on the rows the left one leaves
    undecided (not FALSE for AND, not TRUE for OR), as PostgreSQL's short-circuit
    evaluation never evaluates it for the others. The common case costs nothing extra."""

    def _eval(self, batch: pa.RecordBatch, ctx: EvalContext) -> Datum:
        left = self.args[0]._eval(batch, ctx)
        if getattr(ctx, "errors", None) is not None:
            return self._eval_nonstrict(left, batch, ctx)
        try:
            right = self.args[1]._eval(batch, ctx)
        except DataError as e:
            right = self._right_where_undecided(left, batch, ctx, e)
        return self._apply([left, right], batch.num_rows, ctx)

    def _eval_nonstrict(self, left: Datum, batch: pa.RecordBatch, ctx: EvalContext) -> Datum:
        """Streaming (engine.expr.nonstrict): the right side first strictly; only if it
        fails, again non-strictly on the undecided rows, so the failures reported are the
        ones PostgreSQL's short-circuit would meet (`b <> 0 AND a / b > 1` reports none)."""
        try:
            right = self.args[1]._eval(batch, replace(ctx, errors=None))
        except Exception as e:
            if row_failure(e) is None:
                raise
            right = self._right_where_undecided(left, batch, ctx, None)
        return self._apply([left, right], batch.num_rows, ctx)

    def _right_where_undecided(
        self, left: Datum, batch: pa.RecordBatch, ctx: EvalContext, err: DataError | None
    ) -> Datum:
        n = batch.num_rows
        decided = pc.fill_null(pc.equal(as_array(left, n, BOOLEAN), self.op == "OR"), False)
        keep = pc.invert(decided).to_numpy(zero_copy_only=False)
        rows = np.flatnonzero(keep)
        if len(rows) == n:
            if err is None:  # non-strict: failing rows become NULL and are reported
                return self.args[1]._eval(batch, ctx)
            raise err  # every row needs the right side: the error stands
        sub = as_array(self.args[1]._eval(batch.filter(pa.array(keep)), ctx), len(rows), BOOLEAN)
        # decided rows get NULL, which cannot change a decided AND/OR
        idx = np.full(n, len(rows), dtype=np.int64)
        idx[rows] = np.arange(len(rows), dtype=np.int64)
        return pa.concat_arrays([sub, pa.nulls(1, pa.bool_())]).take(pa.array(idx))

    def with_children(self, children: list[Expr]) -> Expr:
        return AndOr(self.name, tuple(children), self.type, self.kernel, self.op)


def bind_and_or(op: str, left: Expr, right: Expr) -> Expr:
    left, right = _as_bool(left, op), _as_bool(right, op)
    fn = pc.and_kleene if op == "AND" else pc.or_kleene
    return AndOr(op.lower(), (left, right), BOOLEAN, lambda a, n, c: fn(a[0], a[1]), op=op)


def bind_not(arg: Expr) -> Expr:
    arg = _as_bool(arg, "NOT")
    return Func("not", (arg,), BOOLEAN, lambda a, n, c: pc.invert(a[0]), op="NOT")


def bind_is_null(arg: Expr, negate: bool) -> Expr:
    arg = resolve_unknown(arg)
    if negate:
        return Func("is_not_null", (arg,), BOOLEAN, lambda a, n, c: pc.is_valid(as_array(a[0], n)))
    return Func("is_null", (arg,), BOOLEAN, lambda a, n, c: pc.is_null(as_array(a[0], n)))


def bind_is_bool(arg: Expr, value: bool, negate: bool) -> Expr:
    arg = _as_bool(arg, "IS TRUE")

    def kernel(a: list[Datum], n: int, c: EvalContext) -> Datum:
        x = as_array(a[0], n)
        r = pc.fill_null(pc.equal(x, value), False)
        return pc.invert(r) if negate else r

    name = f"is_{'not_' if negate else ''}{str(value).lower()}"
    return Func(name, (arg,), BOOLEAN, kernel)


# -- LIKE / IN -------------------------------------------------------------------------------


def _like_pattern_to_regex(p: str, escape: str | None) -> str:
    out = ["^"]
    i = 0
    while i < len(p):
        c = p[i]
        if escape and c == escape and i + 1 < len(p):
            out.append(re.escape(p[i + 1]))
            i += 2
            continue
        out.append(".*" if c == "%" else "." if c == "_" else re.escape(c))
        i += 1
    out.append("$")
    return "".join(out)


def _to_backslash_escape(p: str, escape: str | None) -> str:
    if escape == "\\":
        return p
    out = []
    i = 0
    while i < len(p):
        c = p[i]
        if escape and c == escape and i + 1 < len(p):
            out.append("\\" + p[i + 1])
            i += 2
            continue
        out.append("\\\\" if c == "\\" else c)
        i += 1
    return "".join(out)


def bind_like(arg: Expr, pattern: Expr, escape: str | None, ilike: bool, negate: bool) -> Expr:
    arg = implicit_cast(arg, VARCHAR) if is_untyped(arg) else arg
    pattern = implicit_cast(pattern, VARCHAR) if is_untyped(pattern) else pattern
    assert arg is not None and pattern is not None
    if arg.type.kind is not K.VARCHAR or pattern.type.kind is not K.VARCHAR:
        raise no_operator("~~", arg.type, pattern.type)
    esc = "\\" if escape is None else escape

    def kernel(a: list[Datum], n: int, c: EvalContext) -> Datum:
        s, p = a
        if is_scalar(p):
            if not p.is_valid:
                return pa.nulls(n, pa.bool_()) if not is_scalar(s) else pa.scalar(None, pa.bool_())
            r = pc.match_like(s, _to_backslash_escape(p.as_py(), esc or None), ignore_case=ilike)
        else:
            sv = as_array(s, n).to_pylist()
            flags = re.S | (re.I if ilike else 0)
            r = pa.array(
                [
                    None
                    if x is None or y is None
                    else re.match(_like_pattern_to_regex(y, esc or None), x, flags) is not None
                    for x, y in zip(sv, p.to_pylist(), strict=True)
                ],
                pa.bool_(),
            )
        return pc.invert(r) if negate else r

    name = ("not_" if negate else "") + ("ilike" if ilike else "like")
    op = ("NOT " if negate else "") + ("ILIKE" if ilike else "LIKE")
    return Func(name, (arg, pattern), BOOLEAN, kernel, op=op)


def float_key(col: Any) -> Any:
    """A float column as equality compares it, for hashing kernels (joins, IN lists): -0
    equals 0 and every NaN every other NaN (PostgreSQL's float equality), while Arrow's
    hashes compare the bits. Columns of other types are returned as they are."""
    if not pa.types.is_floating(col.type):
        return col
    zero = pa.scalar(0.0, col.type)
    return pc.if_else(pc.is_nan(col), pa.scalar(float("nan"), col.type), pc.add(col, zero))


def bind_in(arg: Expr, items: list[Expr], negate: bool) -> Expr:

    types = [arg.type if not is_untyped(arg) else UNKNOWN] + [
        i.type if not is_untyped(i) else UNKNOWN for i in items
    ]
    try:
        t = common_type(types, "IN")
    except Exception as e:
        bad = next(i.type for i in items if not is_untyped(i) and i.type != arg.type)
        raise no_operator("=", arg.type, bad) from e
    arg_c = implicit_cast(arg, t)
    cast_items = [implicit_cast(i, t) for i in items]
    if arg_c is None or any(c is None for c in cast_items):
        raise no_operator("=", arg.type, next(i.type for i in items))
    consts = [c for c in cast_items if isinstance(c, Literal)]
    if len(consts) == len(cast_items) and t.kind is not K.INTERVAL:
        values = [c.value for c in consts if c.value is not None]
        has_null = len(values) < len(consts)
        vset = float_key(array_of(values, t.arrow))

        def kernel(a: list[Datum], n: int, c: EvalContext) -> Datum:
            x = as_array(a[0], n)
            hit = pc.is_in(float_key(x), value_set=vset)
            if has_null:
                hit = pc.if_else(hit, True, pa.scalar(None, pa.bool_()))
            hit = pc.if_else(pc.is_null(x), pa.scalar(None, pa.bool_()), hit)
            return pc.invert(hit) if negate else hit

        label = "NOT IN" if negate else "IN"
        # the constant items are baked into the kernel; the name shows them for EXPLAIN
        name = label.lower().replace(" ", "_") + "[" + ", ".join(str(i) for i in cast_items) + "]"
        listed = None if negate else tuple[Expr, ...](consts)
        return Func(name, (arg_c,), BOOLEAN, kernel, in_items=listed)
    # non-constant list: OR of equalities (AND of inequalities for NOT IN)
    out: Expr | None = None
    for c in cast_items:
        assert c is not None
        eq = bind_compare("<>" if negate else "=", arg_c, c)
        out = eq if out is None else bind_and_or("AND" if negate else "OR", out, eq)
    assert out is not None
    return out
