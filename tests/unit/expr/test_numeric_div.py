"""numeric_div.pg_quotient against a plain Decimal transcription of PostgreSQL's
select_div_scale (base-10000 weights and leading digits), on random and boundary values."""

from __future__ import annotations

import random
from decimal import ROUND_DOWN, ROUND_HALF_UP, Context, Decimal

import pyarrow as pa
import pyarrow.compute as pc

from engine.expr.numeric_div import _weight_and_first, pg_quotient
from engine.expr.ops import _dec_back, _to256

NUM = pa.decimal128(38, 10)
CTX = Context(prec=80)


def _pg_weight_first(x: Decimal) -> tuple[int, int]:
    x = abs(x)
    if x == 0:
        return 0, 0
    e = x.adjusted()  # decimal exponent of the leading digit
    w = e // 4
    return w, int(CTX.divide(x, CTX.power(Decimal(10000), w)).to_integral_value(ROUND_DOWN))


def _own_scale(x: Decimal) -> int:
    t = x.normalize(CTX).as_tuple()
    return max(0, -int(t.exponent))


def _expected(a: Decimal, b: Decimal) -> Decimal:
    w1, f1 = _pg_weight_first(a)
    w2, f2 = _pg_weight_first(b)
    qweight = w1 - w2 - (1 if f1 <= f2 else 0)
    rscale = max(16 - 4 * qweight, _own_scale(a), _own_scale(b), 0)
    q = CTX.divide(a, b)
    return q.quantize(Decimal(1).scaleb(-min(rscale, 10)), ROUND_HALF_UP, CTX)


def _values(rng: random.Random, n: int) -> list[Decimal]:
    out = []
    for _ in range(n):
        digits = rng.randint(1, 18)  # operands the division kernel takes together
        frac = rng.randint(0, 10)
        v = Decimal(rng.randint(1, 10**digits - 1)).scaleb(-frac)
        if v.adjusted() >= 28:
            v = v.scaleb(-(v.adjusted() - 27))
        out.append(
            CTX.multiply(v.quantize(Decimal(1).scaleb(-10), ROUND_DOWN, CTX), rng.choice((1, -1)))
        )
    edges = ["9999.9999999999", "10000", "0.0001", "0.00009999", "99999999", "1", "0.5"]
    return out + [Decimal(e) for e in edges] + [Decimal(10) ** k for k in range(-10, 27)]


def test_weights_and_leading_digits_are_exact() -> None:
    vals = _values(random.Random(7), 2000) + [Decimal(0)]
    w, f = _weight_and_first(pa.array(vals, NUM))
    assert [(int(a), int(b)) for a, b in zip(w, f, strict=True)] == [
        _pg_weight_first(v) for v in vals
    ]


def test_quotients_round_as_postgresql_where_it_keeps_fewer_than_10_digits() -> None:
    rng = random.Random(11)
    a_vals = _values(rng, 3000)
    b_vals = [v for v in _values(rng, 3000) if v != 0][: len(a_vals)]
    a_vals = a_vals[: len(b_vals)]
    pairs = []
    for a, b in zip(a_vals, b_vals, strict=True):
        small = abs(a) < Decimal(10) ** 18 and abs(b) < Decimal(10) ** 18
        if small and abs(CTX.divide(a, b)) < Decimal(10) ** 27:  # in numeric's range
            pairs.append((a, b))
    a = pa.array([p[0] for p in pairs], NUM)
    b = pa.array([p[1] for p in pairs], NUM)
    exact = pc.divide_checked(_to256(a, 10), _to256(b))
    got = pg_quotient(_dec_back(exact), exact, a, b).to_pylist()
    want = [_expected(x, y) for x, y in pairs]
    assert got == want
    ten = [CTX.divide(x, y).quantize(Decimal(1).scaleb(-10), ROUND_HALF_UP, CTX) for x, y in pairs]
    assert sum(w != t for w, t in zip(want, ten, strict=True)) > len(pairs) // 10
