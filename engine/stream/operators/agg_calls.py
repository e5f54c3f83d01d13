"""Aggregate calls and their accumulators, as used by `HashAggOp`.

An `AggCall` is the planner's description of one aggregate (`sum(DISTINCT $2) FILTER
(WHERE $3)`); `make_impl` turns it into an `AggImpl`, the object that knows how that
aggregate keeps its accumulator inside the per-group state row.

Every accumulator is a fixed number of *slots* in the group's state tuple. The operator
processes an epoch in columns, never per input row:

1. `delta_exprs` are polars aggregations over the epoch's delta (one per slot), evaluated
   per group in one group-by; they see the Z-set weight `w` (+1/-1) and `ok`, the mask of
   rows this aggregate counts (FILTER true and argument not NULL);
2. for DISTINCT, the operator instead derives the per-group changes of the distinct value
   set and calls `distinct_deltas(dsum, dcount)`;
3. `merge(old_slots, deltas)` returns the new slot columns (a list per slot);
4. `output(slots)` maps slot columns to the output column values.

Additive kinds (count, sum, avg, bool_and, bool_or, the variance family, the bit_*
aggregates) only add deltas, so retractions are
exact (floats aside). Extreme kinds (min, max) are not invertible; their single slot is
the current extreme, maintained by the operator from a per-(group, value) multiset
(`uses_values`). Adding a kind means adding an `AggImpl` subclass and registering it in
`make_impl`.
"""

from __future__ import annotations

import decimal
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import numpy as np
import polars as pl

from engine.chunk import Op
from engine.errors import NumericValueOutOfRange, UndefinedFunction
from engine.numeric import FINITE, FLOAT4_MAX, NAN, NINF, PINF, special_sum
from engine.stream.operators.frames import SPECIAL_SUFFIX, col_name
from engine.types import NUMERIC_SCALE, SqlType, TypeKind

_BIGINT_MIN = -(2**63)
_BIGINT_MAX = 2**63 - 1
_NUMERIC_LIMIT = Decimal(10) ** (38 - NUMERIC_SCALE)
_NUMERIC_QUANTUM = Decimal(1).scaleb(-NUMERIC_SCALE)

#: context for accumulator arithmetic: wide enough that sums of numeric(38,10) are exact
ACC_CONTEXT = decimal.Context(prec=80, Emax=999999, Emin=-999999)

Col = Sequence[Any]


@dataclass(frozen=True)
class AggCall:
    """One aggregate of a GROUP BY: `kind(arg) [DISTINCT] [FILTER (WHERE filter)]`.

    `arg` and `filter` are input column indices; `type` is the result type the planner
    computed (count -> bigint; sum(int2/int4) -> bigint, sum(int8/numeric) -> numeric,
    sum(real) -> real, sum(double) -> double; avg(integers/numeric) -> numeric,
    avg(real/double) -> double; min/max -> the argument type).
    """

    kind: str
    arg: int | None
    type: SqlType
    distinct: bool = False
    filter: int | None = None
    #: kind "udaf": the bound call of the user-defined aggregate (engine.expr.udf.UdfCall)
    udf: Any = field(default=None, compare=False)
    #: the second argument of corr / covar_* / regr_* (`kind(arg, arg2)`: Y, X)
    arg2: int | None = None
    #: sum/avg over floats keep NaN / Infinity / -Infinity counts (`_SumLike`); False for
    #: the plans of views created before they existed (their group rows lack the slots)
    float_specials: bool = True

    def __str__(self) -> str:
        if self.udf is not None:
            s = f"{self.udf.name}({', '.join(f'${r.index}' for r in self.udf.args)})"
        elif self.kind == "count_star":
            s = "count(*)"
        elif self.arg2 is not None:
            s = f"{self.kind}(${self.arg}, ${self.arg2})"
        else:
            s = f"{self.kind}({'distinct ' if self.distinct else ''}${self.arg})"
        if self.filter is not None:
            s += f" filter(${self.filter})"
        return s


class AggImpl(ABC):
    """How one aggregate keeps and merges its slots; see the module docstring."""

    #: initial slot values of a group that has seen no rows
    init: tuple[Any, ...]
    #: True for kinds maintained from a per-(group, value) multiset (min/max)
    uses_values: bool = False

    @property
    def n_slots(self) -> int:
        return len(self.init)

    def delta_exprs(self, ok: pl.Expr, x: pl.Expr | None, w: pl.Expr) -> list[pl.Expr]:
        """Per-group polars aggregations giving each slot's delta (additive kinds)."""
        raise NotImplementedError

    def distinct_deltas(self, dsum: list[Any], dcount: list[int]) -> list[list[Any]]:
        """Slot deltas from the change of the distinct value set (additive kinds)."""
        raise NotImplementedError

    def merge(self, old: list[Col], deltas: list[Col]) -> list[Col]:
        return [
            [a + b for a, b in zip(o, d, strict=True)] for o, d in zip(old, deltas, strict=True)
        ]

    @abstractmethod
    def output(self, slots: list[Col]) -> list[Any]:
        """The aggregate's output value per group."""


def _count_expr(ok: pl.Expr, w: pl.Expr) -> pl.Expr:
    return pl.when(ok).then(w).otherwise(0).sum()


class CountImpl(AggImpl):
    """count(*) / count(x): one slot, the number of counted rows (or distinct values)."""

    init = (0,)

    def delta_exprs(self, ok: pl.Expr, x: pl.Expr | None, w: pl.Expr) -> list[pl.Expr]:
        return [_count_expr(ok, w)]

    def distinct_deltas(self, dsum: list[Any], dcount: list[int]) -> list[list[Any]]:
        return [dcount]

    def output(self, slots: list[Col]) -> list[Any]:
        return list(slots[0])


class _SumLike(AggImpl):
    """Slots (sum, non-null count); the sum is NULL while the count is 0.

    Over numeric and floats, three more slots count the NaN, Infinity and -Infinity
    values, which the sum slot leaves out: the result is NaN / an infinity while they are
    counted and the finite sum again once they are retracted (`engine.numeric.special_sum`;
    a float sum that had added an infinity would stay NaN after the retraction).

    A float sum has a sixth slot, the compensation of Neumaier's summation: each step's
    delta is added to the kept sum with the rounding error carried in it, so retracting a
    large value gives back the small ones it had absorbed (1e20 + 1 - 1e20 is 1, not 0),
    and both restart from exactly 0 whenever no finite value is counted. Float sums of
    views created before these slots existed keep the two (`AggCall.float_specials`)."""

    def __init__(self, arg_type: SqlType, result: SqlType, float_specials: bool = True) -> None:
        self.result = result
        self.numeric = arg_type.kind is TypeKind.NUMERIC
        if arg_type.is_integer:
            self._cast = pl.Int128 if arg_type.kind is TypeKind.BIGINT else pl.Int64
            self.init = (0, 0)
        elif arg_type.is_float:
            self._cast = pl.Float64
            self.init = (0.0, 0, 0, 0, 0, 0.0) if float_specials else (0.0, 0)
        elif arg_type.kind is TypeKind.NUMERIC:
            self._cast = None
            self.init = (Decimal(0), 0, 0, 0, 0)
        else:
            raise UndefinedFunction(
                f"function {type(self).kind_name}({arg_type.display}) does not exist"
            )

    kind_name = "sum"

    @property
    def special_slots(self) -> bool:
        """Whether the slots count NaN / Infinity / -Infinity (see the class)."""
        return len(self.init) >= 5

    @property
    def compensated(self) -> bool:
        """Whether a sixth slot holds the float sum's compensation (see the class)."""
        return len(self.init) == 6

    def delta_exprs(self, ok: pl.Expr, x: pl.Expr | None, w: pl.Expr) -> list[pl.Expr]:
        assert x is not None
        xv = x if self._cast is None else x.cast(self._cast)
        zero = 0.0 if self._cast is pl.Float64 else 0
        if not self.special_slots:
            return [pl.when(ok).then(xv * w).otherwise(zero).sum(), _count_expr(ok, w)]
        if self.numeric:
            # the frame's companion column of special-value codes (frames.SPECIAL_SUFFIX)
            sp = pl.col(x.meta.output_name() + SPECIAL_SUFFIX)
            finite, nan = ok & (sp == FINITE), ok & (sp == NAN)
            pinf, ninf = ok & (sp == PINF), ok & (sp == NINF)
        else:
            inf = float("inf")
            finite, nan = ok & xv.is_finite(), ok & xv.is_nan()
            pinf, ninf = ok & (xv == inf), ok & (xv == -inf)
        vals = pl.when(finite).then(xv).otherwise(zero) * w
        counts = [_count_expr(ok, w), _count_expr(nan, w), _count_expr(pinf, w)]
        counts.append(_count_expr(ninf, w))
        if not self.compensated:
            return [vals.sum(), *counts]
        s, err = _neumaier_sum(vals)  # the delta's sum and its compensation
        return [s, *counts, err]

    def merge(self, old: list[Col], deltas: list[Col]) -> list[Col]:
        if not self.compensated:
            return super().merge(old, deltas)
        s1: list[float] = []
        c1: list[float] = []
        n1: list[int] = []
        sp: list[list[int]] = [[], [], []]
        for s, n, a, b, k, c, ds, dn, da, db, dk, dc in zip(*old, *deltas, strict=True):
            t = s + ds
            # Neumaier: the low-order part lost by the larger operand's rounding
            c += dc + ((s - t) + ds if abs(s) >= abs(ds) else (ds - t) + s)
            # renormalized: the sum carries the value, the compensation only what lies
            # below its last digit (a sum that cancelled to 0 would keep it all in c)
            s, t = t, t + c
            c = (s - t) + c if abs(s) >= abs(c) else (c - t) + s
            n, a, b, k = n + dn, a + da, b + db, k + dk
            if n - a - b - k == 0:  # no finite value left: exactly 0, no residue
                t = c = 0.0
            s1.append(t)
            c1.append(c)
            n1.append(n)
            for lst, v in zip(sp, (a, b, k), strict=True):
                lst.append(v)
        return [s1, n1, *sp, c1]

    def distinct_deltas(self, dsum: list[Any], dcount: list[int]) -> list[list[Any]]:
        return [dsum, dcount]

    def distinct_special_deltas(
        self,
        dsum: list[Any],
        dcount: list[int],
        dspecial: list[list[int]],
        dcomp: list[float] | None = None,
    ) -> list[list[Any]]:
        """distinct_deltas with the per-group changes of the NaN / Infinity / -Infinity
        counts (`dspecial[code - 1]`), the specials left out of `dsum`, and (compensated
        float sums) what the rounding of `dsum` left out."""
        if self.compensated:
            return [dsum, dcount, *dspecial, dcomp or [0.0] * len(dcount)]
        return [dsum, dcount, *dspecial]

    def _finite_sums(self, slots: list[Col]) -> list[Any]:
        """The sum slot with the specials applied, or the sum slot itself."""
        if not self.special_slots:
            return list(slots[0])
        rows = zip(slots[0], slots[2], slots[3], slots[4], strict=True)
        if self.numeric:
            return [special_sum(s, a, b, c) for s, a, b, c in rows]
        comp = slots[5] if self.compensated else [0.0] * len(slots[0])
        return [
            _checked_float_sum(s + e, a, b, c) for (s, a, b, c), e in zip(rows, comp, strict=True)
        ]


class SumImpl(_SumLike):
    kind_name = "sum"

    def output(self, slots: list[Col]) -> list[Any]:
        k = self.result.kind
        if k is TypeKind.BIGINT:
            out = [None if n == 0 else s for s, n in zip(slots[0], slots[1], strict=True)]
            for v in out:
                if v is not None and not _BIGINT_MIN <= v <= _BIGINT_MAX:
                    raise NumericValueOutOfRange("bigint out of range")
            return out
        if k is TypeKind.NUMERIC:
            pairs = zip(self._finite_sums(slots), slots[1], strict=True)
            return [None if n == 0 else _to_numeric(s) for s, n in pairs]
        sums = self._finite_sums(slots)
        out = [None if n == 0 else float(s) for s, n in zip(sums, slots[1], strict=True)]
        if k is TypeKind.REAL:
            for v in out:
                if v is not None and math.isfinite(v) and abs(v) > FLOAT4_MAX:
                    raise NumericValueOutOfRange("value out of range: overflow")
        return out


def float_special_sum(finite: float, nan: int, pinf: int, ninf: int) -> float:
    """A float sum over `nan` NaNs, `pinf` Infinities, `ninf` -Infinities and finite
    values summing to `finite`, as adding them all up gives."""
    if nan > 0 or (pinf > 0 and ninf > 0):
        return float("nan")
    if pinf > 0:
        return float("inf")
    if ninf > 0:
        return float("-inf")
    return finite


def _checked_float_sum(finite: float, nan: int, pinf: int, ninf: int) -> float:
    """`float_special_sum`, raising 22003 where the finite values alone sum past the
    double range (PostgreSQL's float8pl: finite operands giving an infinity overflow; the
    sum slot then holds an infinity or NaN that no input was)."""
    if not math.isfinite(finite) and nan == pinf == ninf == 0:
        raise NumericValueOutOfRange("value out of range: overflow")
    return float_special_sum(finite, nan, pinf, ninf)


def _pivot(v: pl.Expr, finite: pl.Expr) -> pl.Expr:
    """A step's pivot for deviation sums: its finite value nearest zero (not its first:
    deviations from an outlier, 3 - 1e20, lose the values they measure for good)."""
    f = v.filter(finite)
    return f.sort_by(f.abs()).first()


def _neumaier_sum(vals: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """(sum, compensation) of a column by Neumaier's summation in row order: the running
    sum and the rounding error of each of its additions."""
    run = vals.cum_sum()
    prev = run.shift(1, fill_value=0.0)
    big = prev.abs() >= vals.abs()
    err = pl.when(big).then((prev - run) + vals).otherwise((vals - run) + prev)
    return run.last().fill_null(0.0), err.sum()


def _neumaier_add(s: float, c: float, v: float) -> tuple[float, float]:
    """s + v with its rounding error added to the compensation c, renormalized."""
    t = s + v
    c += (s - t) + v if abs(s) >= abs(v) else (v - t) + s
    s, t = t, t + c
    return t, (s - t) + c if abs(s) >= abs(c) else (c - t) + s


class AvgImpl(_SumLike):
    kind_name = "avg"

    def output(self, slots: list[Col]) -> list[Any]:
        if self.result.kind is TypeKind.NUMERIC:
            return [
                None
                if n == 0
                else s
                if isinstance(s, Decimal) and not s.is_finite()
                else _to_numeric(ACC_CONTEXT.divide(Decimal(s), Decimal(n)))
                for s, n in zip(self._finite_sums(slots), slots[1], strict=True)
            ]
        sums = self._finite_sums(slots)
        return [None if n == 0 else float(s) / n for s, n in zip(sums, slots[1], strict=True)]


class BoolImpl(AggImpl):
    """bool_and / bool_or: slots (true count, non-null count)."""

    init = (0, 0)

    def __init__(self, is_and: bool) -> None:
        self.is_and = is_and

    def delta_exprs(self, ok: pl.Expr, x: pl.Expr | None, w: pl.Expr) -> list[pl.Expr]:
        assert x is not None
        return [_count_expr(ok & x, w), _count_expr(ok, w)]

    def distinct_deltas(self, dsum: list[Any], dcount: list[int]) -> list[list[Any]]:
        return [dsum, dcount]

    def output(self, slots: list[Col]) -> list[Any]:
        if self.is_and:
            return [None if n == 0 else t == n for t, n in zip(slots[0], slots[1], strict=True)]
        return [None if n == 0 else t > 0 for t, n in zip(slots[0], slots[1], strict=True)]


class ExtremeImpl(AggImpl):
    """min / max: one slot, the current extreme (NULL when the group has no values).

    The operator keeps every counted value in a multiset state table and replaces the
    slot from it; `merge` is not used.
    """

    init = (None,)
    uses_values = True

    def __init__(self, is_min: bool) -> None:
        self.is_min = is_min

    def merge(self, old: list[Col], deltas: list[Col]) -> list[Col]:
        raise NotImplementedError("extremes are maintained from the value multiset")

    def output(self, slots: list[Col]) -> list[Any]:
        return list(slots[0])


class AppendOnlyExtremeImpl(AggImpl):
    """min / max over an input that never retracts: one slot, the current extreme, and
    no multiset; each step's best counted value (one polars min/max per group) replaces
    the slot when it is better (the planner picks these: `engine.plan.append_only`)."""

    init = (None,)

    def __init__(self, is_min: bool, floats: bool = False) -> None:
        self.is_min = is_min
        self.floats = floats  # NaN is above every float (PostgreSQL's order)

    def delta_exprs(self, ok: pl.Expr, x: pl.Expr | None, w: pl.Expr) -> list[pl.Expr]:
        assert x is not None
        v = x.filter(ok)
        # polars' max skips NaN (its min takes NaN only when all are)
        return [v.min() if self.is_min else v.nan_max() if self.floats else v.max()]

    def merge(self, old: list[Col], deltas: list[Col]) -> list[Col]:
        pick: Any = min if self.is_min else max
        if self.floats:

            def pick(a: float, b: float) -> float:
                if a != a or b != b:  # NaN: the max, the min only of NaN alone
                    return a if (a != a) != self.is_min else b
                return min(a, b) if self.is_min else max(a, b)

        return [
            [
                o if d is None else d if o is None else pick(o, d)
                for o, d in zip(old[0], deltas[0], strict=True)
            ]
        ]

    def output(self, slots: list[Col]) -> list[Any]:
        return list(slots[0])


_LIMB = 2**43
_NAN = Decimal("NaN")


def _limbs(u: pl.Expr) -> list[pl.Expr]:
    """Per-row pieces of u² by limb degree: with u = h·2^86 + m·2^43 + l (h signed,
    m and l in [0, 2^43)) u² = Σ_d q_d·2^(43d), and every q_d of one row stays below
    2^88, so int128 sums of them are exact for up to 2^39 rows of a group."""
    b = pl.lit(_LIMB, pl.Int128)
    h = u // b // b
    m = (u // b) % b
    lo = u % b
    two = pl.lit(2, pl.Int128)
    return [lo * lo, two * lo * m, m * m + two * h * lo, two * h * m, h * h]


class VarianceImpl(AggImpl):
    """var_pop / var_samp / stddev_pop / stddev_samp (variance and stddev are the _samp
    ones). Every slot is a sum over the counted rows, so retractions are exact.

    Integer and numeric arguments (numeric result, exact as PostgreSQL's): slots
    (n, Σu, q0..q4, specials) over the unscaled value u (x·10^scale in int128); Σu²
    is kept by limb degree (`_limbs`) so no int128 sum can wrap; `specials` counts numeric
    NaN / Infinity values, which make the result NaN while they are counted.
    The result is (n·Σu² - (Σu)²) / (n·(n - 1)) (or n²), computed exactly.

    Float arguments (double precision result): slots (pivot, n, Σ(x - pivot),
    Σ(x - pivot)², specials). The pivot is the finite value nearest zero of the group's
    first step (it stays fixed), which keeps the sum of squares free of the cancellation
    a plain Σx² suffers on values far from zero; each step's deltas are taken around the
    chunk's own such value (`_pivot`) and shifted onto the pivot in `merge`. Infinity and NaN are
    counted apart (result NaN while counted), so retracting them restores the finite
    answer. Σ(x - pivot) and Σ(x - pivot)² carry Neumaier compensations (two more
    slots, as `_SumLike` keeps its sum), so retracting a value far larger than the ones
    that remain gives back what it had absorbed (a view over 1.5, 2.5, 1e20 that then
    deletes 1e20 answers 0.5); a group without finite values drops its pivot and
    restarts from exactly 0. Views created before the compensations existed keep the
    five slots (`AggCall.float_specials`), with a rounding error of the retracted value's
    magnitude.
    """

    def __init__(self, kind: str, arg_type: SqlType, compensated: bool = True) -> None:
        self.kind = kind
        self.pop = kind.endswith("_pop")
        self.root = kind.startswith("stddev")
        self.exact = arg_type.is_integer or arg_type.kind is TypeKind.NUMERIC
        self.numeric = arg_type.kind is TypeKind.NUMERIC
        if self.exact:
            self.init = (0, 0, 0, 0, 0, 0, 0, 0)
        elif arg_type.is_float:
            self.init = (None, 0, 0.0, 0.0, 0, 0.0, 0.0) if compensated else (None, 0, 0.0, 0.0, 0)
        else:
            raise UndefinedFunction(
                f"function {kind}({arg_type.display}) does not exist",
                hint="No function matches the given name and argument types. "
                "You might need to add explicit type casts.",
            )

    def delta_exprs(self, ok: pl.Expr, x: pl.Expr | None, w: pl.Expr) -> list[pl.Expr]:
        assert x is not None
        if self.exact:
            if self.numeric:
                sp = pl.col(x.meta.output_name() + SPECIAL_SUFFIX)
                finite = ok & (sp == FINITE)
                u = x.cast(pl.Decimal(38, NUMERIC_SCALE)).to_physical()
            else:
                finite = ok
                u = x.cast(pl.Int128)
            u = pl.when(finite).then(u).otherwise(pl.lit(0, pl.Int128))
            wi = w.cast(pl.Int128)
            return [
                _count_expr(ok, w),
                (u * wi).sum(),
                *[(q * wi).sum() for q in _limbs(u)],
                _count_expr(ok & ~finite, w),
            ]
        xv = x.cast(pl.Float64)
        finite = ok & xv.is_finite()
        c = _pivot(xv, finite)
        d = pl.when(finite).then(xv - c).otherwise(0.0)
        n = _count_expr(ok, w)
        if len(self.init) == 5:
            return [c, n, (d * w).sum(), (d * d * w).sum(), _count_expr(ok & ~finite, w)]
        s1, e1 = _neumaier_sum(d * w)
        s2, e2 = _neumaier_sum(d * d * w)
        return [c, n, s1, s2, _count_expr(ok & ~finite, w), e1, e2]

    def distinct_deltas(self, dsum: list[Any], dcount: list[int]) -> list[list[Any]]:
        raise NotImplementedError("the planner refuses DISTINCT for variance aggregates")

    def merge(self, old: list[Col], deltas: list[Col]) -> list[Col]:
        if self.exact:
            return super().merge(old, deltas)
        if len(self.init) == 7:
            return self._merge_compensated(old, deltas)
        piv: list[Any] = []
        n1: list[int] = []
        s1: list[float] = []
        s2: list[float] = []
        sp: list[int] = []
        for p, n, a, b, k, c, dn, da, db, dk in zip(*old, *deltas, strict=True):
            nf = dn - dk  # finite rows of the delta
            if p is None:
                p = c
            elif c is not None:
                t = c - p  # shift the delta's sums from its pivot c onto p
                db = db + 2.0 * t * da + nf * t * t
                da = da + nf * t
            piv.append(p)
            n1.append(n + dn)
            s1.append(a + da)
            s2.append(b + db)
            sp.append(k + dk)
        return [piv, n1, s1, s2, sp]

    def _merge_compensated(self, old: list[Col], deltas: list[Col]) -> list[Col]:
        """`merge` with the compensated sums: the delta's sums (around its pivot c) and
        the terms shifting them onto the group's pivot p are added with Neumaier's
        error terms."""
        out: list[Any] = [[] for _ in range(7)]
        for p, n, a, b, k, ea, eb, c, dn, da, db, dk, dea, deb in zip(*old, *deltas, strict=True):
            nf = dn - dk  # finite rows of the delta
            n, k = n + dn, k + dk
            if p is None:
                p = c
            terms_a, terms_b = [da], [db]
            if c is not None and c != p:
                t = c - p  # shift the delta's sums from its pivot c onto p
                terms_b += [2.0 * t * da, nf * t * t]
                terms_a.append(nf * t)
            ea, eb = ea + dea, eb + deb
            for v in terms_a:
                a, ea = _neumaier_add(a, ea, v)
            for v in terms_b:
                b, eb = _neumaier_add(b, eb, v)
            if n - k == 0:  # no finite value left: a fresh pivot, exactly 0
                p, a, b, ea, eb = None, 0.0, 0.0, 0.0, 0.0
            for col, v in zip(out, (p, n, a, b, k, ea, eb), strict=True):
                col.append(v)
        return out

    def output(self, slots: list[Col]) -> list[Any]:
        if self.exact:
            return [self._exact(*g) for g in zip(*slots, strict=True)]
        if len(self.init) == 7:
            return [
                self._float(p, n, a + ea, b + eb, k)
                for p, n, a, b, k, ea, eb in zip(*slots, strict=True)
            ]
        return [self._float(*g) for g in zip(*slots, strict=True)]

    def _exact(self, n: int, s: int, *rest: int) -> Decimal | None:
        if n == 0 or (n == 1 and not self.pop):
            return None
        if rest[5] > 0:
            return _NAN
        q = sum(v << (43 * d) for d, v in enumerate(rest[:5]))
        den = n * n if self.pop else n * (n - 1)
        scale = 2 * NUMERIC_SCALE if self.numeric else 0
        ctx = ACC_CONTEXT
        var = ctx.divide(Decimal(n * q - s * s), Decimal(den)).scaleb(-scale, ctx)
        return _to_numeric(ctx.sqrt(var) if self.root else var)

    def _float(self, p: Any, n: int, a: float, b: float, k: int) -> float | None:
        if n == 0 or (n == 1 and not self.pop):
            return None
        if k > 0:
            return float("nan")
        m2 = max(b - a * (a / n), 0.0)
        var = m2 / (n if self.pop else n - 1)
        if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(var)):
            # finite inputs whose sums pass the double range: PostgreSQL's float8_accum
            raise NumericValueOutOfRange("value out of range: overflow")
        return var**0.5 if self.root else var


#: corr, covar_pop/covar_samp and the regr_* family: kind(Y, X) over double precision
REGR_KINDS = (
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


class RegrImpl(AggImpl):
    """The two-argument statistics `kind(Y, X)` over double precision (the planner casts
    both arguments), counting the rows where neither is NULL, with PostgreSQL's finals
    (float8_regr_*: NULL for no rows, for a vertical line, and so on). Every slot is a sum
    over the counted rows, so retractions are exact (floats aside).

    Slots: (px, py, n, nx, Σdx, Σdx², ny, Σdy, Σdy², nb, Σbx, Σby, Σdxdy, Σx, Σy, x+inf,
    x-inf, xNaN, y+inf, y-inf, yNaN). `d` are deviations from the group's fixed pivots px
    (py), the finite X (Y) nearest zero of its first step (`_pivot`), summed over the nx
    rows with a finite X (ny, finite Y), as VarianceImpl keeps them (free of the
    cancellation of a plain Σx²; each step's sums are around its own such values and shifted
    onto the pivots in `merge`); the cross sums (nb, Σbx, Σby, Σdxdy) are over the rows with
    both finite. Σx / Σy are the plain sums PostgreSQL's Sx / Sy are (regr_avgx,
    regr_intercept). The infinity / NaN counts make Sxx (Syy) NaN while an infinite or NaN X
    (Y) is counted and Sxy NaN while either is, Sx (Sy) infinite or NaN as a float sum would
    be, and restore the finite answers when those rows are retracted. Finite inputs whose
    sums overflow are 22003, as in PostgreSQL."""

    init = (None, None, 0, 0, 0.0, 0.0, 0, 0.0, 0.0, 0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, 0, 0, 0, 0, 0)
    _INTS = frozenset((2, 3, 6, 9))  # the count slots

    def __init__(self, kind: str, x_col: str) -> None:
        self.kind = kind
        self.x_col = x_col  # the input column of X (`AggCall.arg2`)

    def delta_exprs(self, ok: pl.Expr, x: pl.Expr | None, w: pl.Expr) -> list[pl.Expr]:
        assert x is not None
        yv = x.cast(pl.Float64)
        xv = pl.col(self.x_col).cast(pl.Float64)
        fx = ok & xv.is_finite()
        fy = ok & yv.is_finite()
        fb = fx & fy
        cx = _pivot(xv, fx)
        cy = _pivot(yv, fy)
        dx = pl.when(fx).then(xv - cx).otherwise(0.0)
        dy = pl.when(fy).then(yv - cy).otherwise(0.0)
        bx = pl.when(fb).then(dx).otherwise(0.0)
        by = pl.when(fb).then(dy).otherwise(0.0)
        wf = w.cast(pl.Float64)
        inf = float("inf")
        return [
            cx,
            cy,
            _count_expr(ok, w),
            _count_expr(fx, w),
            (dx * wf).sum(),
            (dx * dx * wf).sum(),
            _count_expr(fy, w),
            (dy * wf).sum(),
            (dy * dy * wf).sum(),
            _count_expr(fb, w),
            (bx * wf).sum(),
            (by * wf).sum(),
            (bx * by * wf).sum(),
            (pl.when(fx).then(xv).otherwise(0.0) * wf).sum(),
            (pl.when(fy).then(yv).otherwise(0.0) * wf).sum(),
            _count_expr(ok & (xv == inf), w),
            _count_expr(ok & (xv == -inf), w),
            _count_expr(ok & xv.is_nan(), w),
            _count_expr(ok & (yv == inf), w),
            _count_expr(ok & (yv == -inf), w),
            _count_expr(ok & yv.is_nan(), w),
        ]

    def distinct_deltas(self, dsum: list[Any], dcount: list[int]) -> list[list[Any]]:
        raise NotImplementedError("the planner refuses DISTINCT for regression aggregates")

    def merge(self, old: list[Col], deltas: list[Col]) -> list[Col]:
        px, py = _pivots(old[0]), _pivots(old[1])
        cx, cy = _pivots(deltas[0]), _pivots(deltas[1])
        o = [np.asarray(c, dtype=np.float64) for c in old[2:15]]
        d = [np.asarray(c, dtype=np.float64) for c in deltas[2:15]]
        npx = np.where(np.isnan(px), cx, px)
        npy = np.where(np.isnan(py), cy, py)
        # shift the delta's sums from its own pivots (cx, cy) onto the group's
        tx = np.where(np.isnan(cx), 0.0, cx - npx)
        ty = np.where(np.isnan(cy), 0.0, cy - npy)
        n, nx, sx, sxx, ny, sy, syy, nb, bx, by, sxy, rx, ry = d
        shifted = [
            n,
            nx,
            sx + nx * tx,
            sxx + 2.0 * tx * sx + nx * tx * tx,
            ny,
            sy + ny * ty,
            syy + 2.0 * ty * sy + ny * ty * ty,
            nb,
            bx + nb * tx,
            by + nb * ty,
            sxy + tx * by + ty * bx + nb * tx * ty,
            rx,
            ry,
        ]
        out: list[Col] = [_pivot_list(npx), _pivot_list(npy)]
        for j, (a, b) in enumerate(zip(o, shifted, strict=True), start=2):
            v = a + b
            out.append(v.astype(np.int64).tolist() if j in self._INTS else v.tolist())
        out.extend(super().merge(old[15:], deltas[15:]))
        return out

    def output(self, slots: list[Col]) -> list[Any]:
        n = np.asarray(slots[2], dtype=np.int64)
        if self.kind == "regr_count":
            return list(n.tolist())
        f = [np.asarray(c, dtype=np.float64) for c in slots[3:15]]
        nx, dx, dxx, ny, dy, dyy, nb, bx, by, dxy, rx, ry = f
        xp, xm, xn, yp, ym, yn = (np.asarray(c, dtype=np.int64) for c in slots[15:21])
        xs = (xp + xm + xn) > 0
        ys = (yp + ym + yn) > 0
        nan = float("nan")
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            sxx = np.where(xs, nan, np.maximum(dxx - dx * dx / np.maximum(nx, 1.0), 0.0))
            syy = np.where(ys, nan, np.maximum(dyy - dy * dy / np.maximum(ny, 1.0), 0.0))
            sxy = np.where(xs | ys, nan, dxy - bx * by / np.maximum(nb, 1.0))
            sx = _special_sum(rx, xp, xm, xn)
            sy = _special_sum(ry, yp, ym, yn)
            inputs_finite = (n > 0) & ~(xs | ys)
            sums = np.stack([sxx, syy, sxy, sx, sy])
            if bool((inputs_finite & ~np.isfinite(sums).all(axis=0)).any()):
                raise NumericValueOutOfRange("value out of range: overflow")
        return regr_final(self.kind, n, sxx, syy, sxy, sx, sy)


def regr_final(
    kind: str,
    n: np.ndarray,
    sxx: np.ndarray,
    syy: np.ndarray,
    sxy: np.ndarray,
    sx: np.ndarray,
    sy: np.ndarray,
) -> list[Any]:
    """PostgreSQL's float8_regr_* finals from N, Sxx, Syy, Sxy, Sx, Sy per group."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        nn = n.astype(np.float64)
        null = n < 1
        k = kind
        if k == "regr_sxx":
            r = sxx
        elif k == "regr_syy":
            r = syy
        elif k == "regr_sxy":
            r = sxy
        elif k == "regr_avgx":
            r = sx / nn
        elif k == "regr_avgy":
            r = sy / nn
        elif k == "covar_pop":
            r = sxy / nn
        elif k == "covar_samp":
            r = sxy / (nn - 1.0)
            null = n < 2
        elif k == "corr":
            r = sxy / np.sqrt(sxx * syy)
            null = null | (sxx == 0) | (syy == 0)
        elif k == "regr_r2":
            r = np.where(syy == 0, 1.0, (sxy * sxy) / (sxx * syy))
            null = null | (sxx == 0)
        elif k == "regr_slope":
            r = sxy / sxx
            null = null | (sxx == 0)
        else:  # regr_intercept
            r = (sy - sx * sxy / sxx) / nn
            null = null | (sxx == 0)
    return [None if z else v for v, z in zip(r.tolist(), null.tolist(), strict=True)]


def _cross_limbs(u: pl.Expr, v: pl.Expr) -> list[pl.Expr]:
    """Per-row pieces of u·v by limb degree, as `_limbs` splits u² (int128 sums of them
    are exact for up to 2^39 rows of a group)."""
    b = pl.lit(_LIMB, pl.Int128)
    hu, mu, lu = u // b // b, (u // b) % b, u % b
    hv, mv, lv = v // b // b, (v // b) % b, v % b
    return [
        lu * lv,
        lu * mv + mu * lv,
        lu * hv + mu * mv + hu * lv,
        mu * hv + hu * mv,
        hu * hv,
    ]


class ExactRegrImpl(AggImpl):
    """corr / covar_* / regr_*(Y, X) over integer arguments (the planner passes them as
    bigint): every slot is an exact integer sum, so retractions leave no rounding behind
    (a float Σx² that saw 2^31 and lost it again would). The sums are over the arguments
    rounded to double precision, as PostgreSQL's float8 signature sees them. Slots: (n, Σx,
    Σy, Σx² by limb degree ×5, Σy² ×5, Σxy ×5), int128 sums as VarianceImpl keeps Σu².
    Sxx, Syy and Sxy are computed exactly from them and rounded once to double precision,
    then PostgreSQL's float finals apply (`regr_final`), so a group whose X are all equal
    has Sxx exactly 0 (NULL slope) however it got there."""

    init = (0,) * 18

    def __init__(self, kind: str, x_col: str) -> None:
        self.kind = kind
        self.x_col = x_col

    def delta_exprs(self, ok: pl.Expr, x: pl.Expr | None, w: pl.Expr) -> list[pl.Expr]:
        assert x is not None
        zero = pl.lit(0, pl.Int128)
        # the values PostgreSQL computes with: the arguments rounded to double precision
        # (an integer still: beyond 2^53 doubles are integers), then summed exactly
        yv = pl.when(ok).then(x.cast(pl.Float64).cast(pl.Int128)).otherwise(zero)
        xr = pl.col(self.x_col).cast(pl.Float64).cast(pl.Int128)
        xv = pl.when(ok).then(xr).otherwise(zero)
        wi = w.cast(pl.Int128)
        return [
            _count_expr(ok, w),
            (xv * wi).sum(),
            (yv * wi).sum(),
            *[(q * wi).sum() for q in _cross_limbs(xv, xv)],
            *[(q * wi).sum() for q in _cross_limbs(yv, yv)],
            *[(q * wi).sum() for q in _cross_limbs(xv, yv)],
        ]

    def distinct_deltas(self, dsum: list[Any], dcount: list[int]) -> list[list[Any]]:
        raise NotImplementedError("the planner refuses DISTINCT for regression aggregates")

    def merge(self, old: list[Col], deltas: list[Col]) -> list[Col]:
        # Python ints: slots read back from Arrow (decimal128, the batch kernel's) are
        # Decimals, and Decimal addition rounds to the caller's context (28 digits by
        # default), which a Σy² of some 70 negative values already exceeds
        return [
            [int(a) + int(b) for a, b in zip(o, d, strict=True)]
            for o, d in zip(old, deltas, strict=True)
        ]

    def output(self, slots: list[Col]) -> list[Any]:
        n = np.asarray([int(v) for v in slots[0]], dtype=np.int64)  # ints or Decimals
        if self.kind == "regr_count":
            return list(n.tolist())
        m = len(n)
        sxx, syy, sxy, sx, sy = (np.zeros(m) for _ in range(5))
        for g, row in enumerate(zip(*slots, strict=True)):
            k, ax, ay = int(row[0]), int(row[1]), int(row[2])
            if k == 0:
                continue
            qxx, qyy, qxy = (
                sum(int(v) << (43 * d) for d, v in enumerate(row[i : i + 5])) for i in (3, 8, 13)
            )
            # S = Σuv - Σu·Σv / n, exact, rounded once
            sxx[g] = (k * qxx - ax * ax) / k
            syy[g] = (k * qyy - ay * ay) / k
            sxy[g] = (k * qxy - ax * ay) / k
            sx[g], sy[g] = float(ax), float(ay)
        return regr_final(self.kind, n, sxx, syy, sxy, sx, sy)


def _pivots(col: Col) -> np.ndarray:
    """A pivot slot (None while unset) as floats with NaN for unset."""
    return np.array([np.nan if v is None else v for v in col], dtype=np.float64)


def _pivot_list(a: np.ndarray) -> list[Any]:
    return [None if v != v else v for v in a.tolist()]


def _special_sum(s: np.ndarray, pinf: np.ndarray, ninf: np.ndarray, nan: np.ndarray) -> np.ndarray:
    """A float sum with its infinities and NaNs put back (as summing them would)."""
    out = np.where(pinf > 0, np.inf, s)
    out = np.where(ninf > 0, -np.inf, out)
    return np.where((nan > 0) | ((pinf > 0) & (ninf > 0)), np.nan, out)


#: bits of the integer types bit_and / bit_or / bit_xor accept
_INT_BITS = {TypeKind.SMALLINT: 16, TypeKind.INT: 32, TypeKind.BIGINT: 64}


class BitImpl(AggImpl):
    """bit_and / bit_or / bit_xor over smallint / int / bigint: slots (n, c_0..c_{B-1}),
    the number of counted values and, per bit b, how many of them have bit b set (two's
    complement). Counts add and subtract, so retractions are exact: the AND has bit b
    where c_b == n, the OR where c_b > 0, the XOR where c_b is odd."""

    def __init__(self, kind: str, arg_type: SqlType) -> None:
        bits = _INT_BITS.get(arg_type.kind)
        if bits is None:
            raise UndefinedFunction(
                f"function {kind}({arg_type.display}) does not exist",
                hint="No function matches the given name and argument types. "
                "You might need to add explicit type casts.",
            )
        self.kind = kind
        self.bits = bits
        self.init = (0,) * (bits + 1)

    def delta_exprs(self, ok: pl.Expr, x: pl.Expr | None, w: pl.Expr) -> list[pl.Expr]:
        assert x is not None
        xi = x.cast(pl.Int64)
        masks = [1 << b for b in range(self.bits)]
        if self.bits == 64:
            masks[63] = -(1 << 63)
        return [_count_expr(ok, w)] + [
            _count_expr(ok & ((xi & pl.lit(m, pl.Int64)) != 0), w) for m in masks
        ]

    def distinct_deltas(self, dsum: list[Any], dcount: list[int]) -> list[list[Any]]:
        raise NotImplementedError("the planner refuses DISTINCT for bit aggregates")

    def output(self, slots: list[Col]) -> list[Any]:
        n = np.asarray(slots[0], dtype=np.int64)
        c = np.asarray(slots[1:], dtype=np.int64)  # (bits, groups)
        if self.kind == "bit_and":
            on = c == n
        elif self.kind == "bit_or":
            on = c > 0
        else:
            on = (c % 2) == 1
        out: list[Any] = []
        for g in range(n.size):
            if n[g] == 0:
                out.append(None)
                continue
            v = sum(1 << b for b in np.flatnonzero(on[:, g]).tolist())
            out.append(v - (1 << self.bits) if v >> (self.bits - 1) else v)
        return out


def _to_numeric(v: Any) -> Decimal:
    d = v if isinstance(v, Decimal) else Decimal(v)
    if not d.is_finite():
        return d
    d = d.quantize(_NUMERIC_QUANTUM, rounding=decimal.ROUND_HALF_UP, context=ACC_CONTEXT)
    if abs(d) >= _NUMERIC_LIMIT:
        raise NumericValueOutOfRange("numeric field overflow")
    return d


VARIANCE_KINDS = ("var_pop", "var_samp", "stddev_pop", "stddev_samp")
BIT_KINDS = ("bit_and", "bit_or", "bit_xor")
KINDS = (
    "count_star",
    "count",
    "sum",
    "avg",
    "min",
    "max",
    "bool_and",
    "bool_or",
    *VARIANCE_KINDS,
    *BIT_KINDS,
    *REGR_KINDS,
)


def make_impl(call: AggCall, arg_type: SqlType | None) -> AggImpl:
    k = call.kind
    if k == "count_star" or k == "count":
        return CountImpl()
    if arg_type is None:
        raise ValueError(f"aggregate {k} needs an argument")
    if k == "sum":
        return SumImpl(arg_type, call.type, call.float_specials)
    if k == "avg":
        return AvgImpl(arg_type, call.type, call.float_specials)
    if k == "min" or k == "max":
        if arg_type.kind is TypeKind.LIST:
            raise UndefinedFunction(f"function {k}({arg_type.display}) does not exist")
        return ExtremeImpl(k == "min")
    if k == "bool_and" or k == "bool_or":
        if arg_type.kind is not TypeKind.BOOLEAN:
            raise UndefinedFunction(f"function {k}({arg_type.display}) does not exist")
        return BoolImpl(k == "bool_and")
    if k in VARIANCE_KINDS:
        return VarianceImpl(k, arg_type, call.float_specials)
    if k in BIT_KINDS:
        return BitImpl(k, arg_type)
    if k in REGR_KINDS:
        if call.arg2 is None:
            raise ValueError(f"aggregate {k} needs two arguments")
        if arg_type.is_integer:  # the planner passes integer arguments as bigint
            return ExactRegrImpl(k, col_name(call.arg2))
        return RegrImpl(k, col_name(call.arg2))
    raise UndefinedFunction(f"function {k} does not exist")


def emission(
    ins_i: np.ndarray, del_i: np.ndarray, upd_i: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Where each output row of an aggregation step comes from, and its op.

    Both aggregation paths compute every changed group's outputs before (rows 0..n-1) and
    after (rows n..2n-1) the step; from the groups that appeared (`ins_i`), vanished
    (`del_i`) and changed an output (`upd_i`) this gives the index of each emitted row in
    that concatenation, with `+` for new groups, `-` for emptied ones and a `U-`/`U+`
    pair per changed one.
    """
    idx = np.concatenate([ins_i + n, del_i, np.stack([upd_i, upd_i + n], axis=1).ravel()])
    ops = np.concatenate(
        [
            np.full(ins_i.size, Op.INSERT, dtype=np.int8),
            np.full(del_i.size, Op.DELETE, dtype=np.int8),
            np.tile(np.array([Op.UPDATE_DELETE, Op.UPDATE_INSERT], dtype=np.int8), upd_i.size),
        ]
    )
    return idx, ops
