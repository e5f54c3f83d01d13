"""PostgreSQL's scale of a numeric quotient, applied per row to a decimal128 column.

Why: Swell keeps every numeric with 10 fractional digits (`decimal128(38, 10)`), while
PostgreSQL gives a quotient as many fractional digits as its `select_div_scale` chooses:
about 16 significant digits, but never fewer than either operand's display scale. For a
large quotient that is fewer than 10 fractional digits (`12345678901 / 7` has 8,
`-9223372036854775806 / -4` none), so PostgreSQL rounds digits Swell kept, and the two
disagreed in value, not only in display: ORDER BY, equality and GROUP BY over such a
quotient saw different numbers. This rounds each such row as PostgreSQL does; quotients
that PostgreSQL gives 10 or more fractional digits are unchanged (Swell's 10 digits are
then PostgreSQL's value rounded, the documented display limit).

The rule (PostgreSQL's numeric.c, in base-10000 digits): with `w` the weight (position
of the leading base-10000 digit) and `f` that leading digit of each operand (0 and 0
for zero), the quotient's weight is `w1 - w2`, one less when `f1 <= f2`; its scale is
`16 - 4 * qweight`, raised to each operand's display scale and to 0. Swell keeps no
display scale per value, so an operand's is taken as the fractional digits its value
needs; not its type's (a numeric(p, s) column's s): a view's stored plan keeps no type
modifiers, and a view must compute the same quotient as the query run ad hoc. So a
quotient of a numeric(p, s) value whose trailing zeros PostgreSQL counts can keep fewer
digits than PostgreSQL's (`12345678901.100000000 / 7`: 8 instead of 9).

Everything is vectorized: decimal comparisons against a table of powers of ten, one
rounding pass per distinct scale below 10 (at most 10).
"""

from __future__ import annotations

from decimal import ROUND_DOWN, Context, Decimal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.types import NUMERIC_SCALE

_MIN_SIG_DIGITS = 16  # PostgreSQL's NUMERIC_MIN_SIG_DIGITS
_WIDE = pa.decimal256(76, NUMERIC_SCALE)
_LOW = -NUMERIC_SCALE  # the smallest decimal exponent a non-zero value can have
_POW10 = pa.array([Decimal(10) ** k for k in range(_LOW, 40)], _WIDE)
_UNIT_LOW = -12  # 10000 ** weight for weights -3 .. 7 (narrow, so products stay in range)
_UNITS = pa.array([Decimal(10) ** k for k in range(_UNIT_LOW, 29)], pa.decimal256(42, 12))


def pg_quotient(q: pa.Array, exact: pa.Array, a: pa.Array, b: pa.Array) -> pa.Array:
    """`q` (= a / b rounded to 10 fractional digits) with each row whose PostgreSQL scale
    is below 10 replaced by `exact` (the quotient truncated past 10 digits: the side of a
    tie it is on is the true quotient's) rounded to that scale; `a`, `b` are the finite
    operands (b != 0 where q is valid)."""
    if len(q) == 0 or q.null_count == len(q):
        return q
    w1, f1 = _weight_and_first(a)
    w2, f2 = _weight_and_first(b)
    qweight = w1 - w2 - (f1 <= f2)
    rscale = _MIN_SIG_DIGITS - 4 * qweight
    few = rscale < NUMERIC_SCALE
    if not few.any():
        return q
    for col in (a, b):
        rscale = np.maximum(rscale, _own_scale(col, few))
    rscale = np.maximum(rscale, 0)
    out = q
    valid = np.asarray(q.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    for r in np.unique(rscale[valid & (rscale < NUMERIC_SCALE)]).tolist():
        mask = pa.array(valid & (rscale == r))
        rounded = pc.round(exact, int(r), round_mode="half_towards_infinity")
        out = pc.if_else(mask, rounded.cast(q.type), out)
    return out


def wide_quotient(a: pa.Array | pa.Scalar, b: pa.Array | pa.Scalar) -> pa.Array | pa.Scalar:
    """a / b truncated to 23 fractional digits for operands Arrow's decimal division
    cannot take together (their digits add up past its 76: two numbers of 20 digits and
    more), in Python's decimal arithmetic row by row: a rare path, never taken by
    operands of ordinary size. NULLs stay NULL; a zero divisor has a NULL dividend (the
    kernel raised 22012 before)."""
    ctx = Context(prec=100)
    unit = Decimal(1).scaleb(-23)
    t = pa.decimal256(76, 23)
    scalars = isinstance(a, pa.Scalar) and isinstance(b, pa.Scalar)
    xs = [a.as_py()] if isinstance(a, pa.Scalar) else a.to_pylist()
    ys = [b.as_py()] if isinstance(b, pa.Scalar) else b.to_pylist()
    if len(xs) == 1 and len(ys) > 1:
        xs = xs * len(ys)
    if len(ys) == 1 and len(xs) > 1:
        ys = ys * len(xs)
    out = [
        None
        if x is None or y is None or y == 0
        else ctx.divide(x, y).quantize(unit, ROUND_DOWN, ctx)
        for x, y in zip(xs, ys, strict=True)
    ]
    return pa.scalar(out[0], t) if scalars else pa.array(out, t)


def _weight_and_first(x: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the base-10000 weight of |x| and its leading base-10000 digit (0, 0 for
    zero and NULL), exactly: float estimates, checked with decimal comparisons only for
    the rows whose estimate lies near a boundary (a power of ten, an integer)."""
    xf = np.abs(np.asarray(pc.fill_null(x.cast(pa.float64()), 0.0).to_numpy(), dtype=np.float64))
    zero = xf == 0.0
    with np.errstate(divide="ignore"):
        lg = np.log10(np.where(zero, 1.0, xf))
    e = np.clip(np.floor(lg).astype(np.int64), _LOW, len(_POW10) + _LOW - 2)
    ax: pa.Array | None = None
    near = np.flatnonzero(~zero & (np.abs(lg - np.round(lg)) < 1e-9))
    if len(near):  # off by at most one there
        ax = pc.abs(x).cast(pa.decimal256(40, NUMERIC_SCALE))
        sub, en = ax.take(pa.array(near)), e[near]
        low = _true(pc.less(sub, pc.take(_POW10, pa.array(en - _LOW))))
        high = _true(pc.greater_equal(sub, pc.take(_POW10, pa.array(en + 1 - _LOW))))
        e[near] = en - low + high
    weight = np.floor_divide(e, 4)
    k = np.clip(4 * weight, _UNIT_LOW, len(_UNITS) + _UNIT_LOW - 1)
    fq = xf / np.power(10.0, k)
    first = np.clip(np.floor(fq), 0, 9999).astype(np.int64)
    near = np.flatnonzero(~zero & (np.abs(fq - np.round(fq)) < 1e-9 * np.maximum(fq, 1.0)))
    if len(near):  # exact there: first * unit <= |x| < (first + 1) * unit
        if ax is None:
            ax = pc.abs(x).cast(pa.decimal256(40, NUMERIC_SCALE))
        sub, fn = ax.take(pa.array(near)), first[near]
        unit = pc.take(_UNITS, pa.array(k[near] - _UNIT_LOW))
        below = _true(pc.less(sub, pc.multiply(_digits(fn), unit)))
        above = _true(pc.greater_equal(sub, pc.multiply(_digits(fn + 1), unit)))
        first[near] = fn - below + above
    weight[zero] = 0
    first[zero] = 0
    return weight, first


def _digits(v: np.ndarray) -> pa.Array:
    return pa.array(v).cast(pa.decimal256(19, 0))


def _own_scale(x: pa.Array, rows: np.ndarray) -> np.ndarray:
    """Per row the number of fractional digits its value needs (0..10), for `rows` (0
    elsewhere): only those rows are rounded, once per candidate digit count."""
    out = np.zeros(len(x), dtype=np.int64)
    idx = np.flatnonzero(rows)
    sub = x.take(pa.array(idx))
    need = np.zeros(len(idx), dtype=np.int64)
    settled = np.zeros(len(idx), dtype=bool)
    for d in range(NUMERIC_SCALE + 1):
        exact = _true(
            pc.equal(pc.round(sub, d, round_mode="half_towards_infinity").cast(sub.type), sub)
        )
        need[exact & ~settled] = d
        settled |= exact
        if settled.all():
            break
    out[idx] = need
    return out


def _true(mask: pa.Array) -> np.ndarray:
    return np.asarray(pc.fill_null(mask, False).to_numpy(zero_copy_only=False), dtype=bool)
