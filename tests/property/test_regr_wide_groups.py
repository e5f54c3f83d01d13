"""corr / covar_* / regr_* over integers in groups of hundreds of rows, through inserts and
deletes, equal the exact statistics of the rows left.

Over integer arguments the regression sums are kept exactly (int128 pieces of Σx², Σy²,
Σxy, see agg_calls.ExactRegrImpl) by both view operators: `HashAggOp` (the aggregates
alone) and `CollectAggOp` (next to an ordered-set aggregate or string_agg, recomputed per
touched group with the batch kernel that ad-hoc queries use too). Those pieces of a
negative value are near 2^86, so a group of some 70 rows holds sums of 29 digits and
more: past the 28 digits of Python's default Decimal context. The oracle here is exact
arithmetic in fractions over the table's current rows, with PostgreSQL's finals (NULL for
a vertical line, regr_r2 1 for a horizontal one); every value must agree to 1e-9.
regr_intercept's final, `(Sy - Sx * Sxy / Sxx) / N`, is float8 arithmetic in PostgreSQL
too: where Sx * slope nearly cancels Sy it keeps only their float precision (x = -5 and
-2^31 with y = -1 and -2^31: exactly 4.0000000093, 4.0 in PostgreSQL), so it must agree
to the rounding of those two terms.
"""

from __future__ import annotations

import math
import sys
import tempfile
from fractions import Fraction
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property.differential import open_db, select

EPS = sys.float_info.epsilon
_KINDS = ("corr", "covar_pop", "covar_samp", "regr_intercept", "regr_r2", "regr_slope")
_KINDS += ("regr_sxx", "regr_syy", "regr_sxy", "regr_avgx", "regr_avgy", "regr_count")
_AGGS = ", ".join(f"{k}(coalesce(y, -1), x) AS {k}" for k in _KINDS)

VIEWS = {
    "w_hash": f"SELECT g, {_AGGS} FROM w GROUP BY g",
    "w_collect": "SELECT g, percentile_cont(0.5) WITHIN GROUP (ORDER BY x) AS p, "
    f"{_AGGS} FROM w GROUP BY g",
    "w_global": f"SELECT string_agg(g::varchar, ',' ORDER BY id) IS NULL AS e, {_AGGS} FROM w",
}

# values whose int128 pieces are large (negatives, 2^31-ish, 10^12) next to small ones
_Y = st.one_of(
    st.none(), st.sampled_from([-1, -2, -13, 0, 1, 7, 2**31 - 1, -(2**31), 10**12, -(10**12)])
)
_X = st.sampled_from([-5, -1, 0, 1, 2, 3, 100, 2**31 - 1, -(2**31)])
#: a run of `count` rows of group g with y and x = x0 + i * step
_run = st.tuples(st.integers(0, 2), _Y, _X, st.integers(0, 3), st.integers(1, 120))
#: delete the rows whose id % m == r
_delete = st.tuples(st.integers(2, 5), st.integers(0, 4))
_batch = st.tuples(st.lists(_run, min_size=0, max_size=3), st.lists(_delete, max_size=2))


def _exact(rows: list[tuple[int, int | None, int]]) -> dict[str, Any]:
    """PostgreSQL's float8_regr_* finals over (g, y, x) rows, from exact sums."""
    pts = [(Fraction(-1 if y is None else y), Fraction(x)) for _, y, x in rows]
    n = len(pts)
    out: dict[str, Any] = dict.fromkeys(_KINDS)
    out["regr_count"] = n
    if n == 0:
        return out
    sx = sum((x for _, x in pts), Fraction(0))
    sy = sum((y for y, _ in pts), Fraction(0))
    sxx = sum((x * x for _, x in pts), Fraction(0)) - sx * sx / n
    syy = sum((y * y for y, _ in pts), Fraction(0)) - sy * sy / n
    sxy = sum((x * y for y, x in pts), Fraction(0)) - sx * sy / n
    out.update(regr_sxx=sxx, regr_syy=syy, regr_sxy=sxy, regr_avgx=sx / n, regr_avgy=sy / n)
    out["covar_pop"] = sxy / n
    out["covar_samp"] = sxy / (n - 1) if n > 1 else None
    if sxx != 0:
        out["regr_slope"] = sxy / sxx
        out["regr_intercept"] = (sy - sx * sxy / sxx) / n
        out["tol_regr_intercept"] = 8 * EPS * (abs(float(sx * sxy / sxx)) + abs(float(sy))) / n
        out["regr_r2"] = 1 if syy == 0 else sxy * sxy / (sxx * syy)
        if syy != 0:
            out["corr"] = float(sxy) / math.sqrt(float(sxx) * float(syy))
    return out


def _agree(got: Any, want: Any, tol: float = 0.0) -> bool:
    if got is None or want is None:
        return got is None and want is None
    return math.isclose(float(got), float(want), rel_tol=1e-9, abs_tol=max(1e-9, tol))


def _check(s: Any) -> None:
    rows = select(s, "SELECT id, g, y, x FROM w")
    groups: dict[int, list[tuple[int, int | None, int]]] = {}
    for _, g, y, x in rows:
        groups.setdefault(g, []).append((g, y, x))
    expected = {g: _exact(rs) for g, rs in groups.items()}
    for name, q in VIEWS.items():
        for source, got in (("view", select(s, f"SELECT * FROM {name}")), ("ad hoc", select(s, q))):
            if name == "w_global":
                want = {None: _exact([r for rs in groups.values() for r in rs])}
                by_key = {None: got[0][1:]}
            else:
                want = expected
                by_key = {r[0]: r[2:] if name == "w_collect" else r[1:] for r in got}
            assert set(by_key) == set(want), f"{name} ({source}): groups {set(by_key)}"
            for g, vals in by_key.items():
                for k, v in zip(_KINDS, vals, strict=True):
                    assert _agree(v, want[g][k], want[g].get(f"tol_{k}", 0.0)), (
                        f"{name} ({source}), group {g}: {k} = {v}, exactly {want[g][k]}"
                    )


def _create(s: Any) -> None:
    for name, q in VIEWS.items():
        s.execute_simple(f"CREATE MATERIALIZED VIEW {name} AS {q}")


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(_batch, min_size=1, max_size=4), early=st.booleans())
def test_integer_regression_views_equal_exact_statistics(
    batches: list[tuple[list[tuple[int, int | None, int, int, int]], list[tuple[int, int]]]],
    early: bool,
) -> None:
    with tempfile.TemporaryDirectory() as d:
        db = open_db(Path(d))
        try:
            s = db.connect("root", "dev")
            s.execute_simple("CREATE TABLE w (id INT PRIMARY KEY, g INT, y BIGINT, x INT)")
            next_id = 1
            for i, (runs, deletes) in enumerate(batches):
                if early and i == 0:  # views before the data: purely incremental
                    _create(s)
                for g, y, x0, step, count in runs:
                    vals = ", ".join(
                        f"({next_id + j}, {g}, {'NULL' if y is None else y}, "
                        f"{max(-(2**31), min(2**31 - 1, x0 + j * step))})"
                        for j in range(count)
                    )
                    next_id += count
                    s.execute_simple(f"INSERT INTO w VALUES {vals}")
                if not early and i == 0:  # views over existing data: backfill
                    _create(s)
                for m, r in deletes:
                    s.execute_simple(f"DELETE FROM w WHERE id % {m} = {r % m}")
                s.execute_simple("FLUSH")
                _check(s)
        finally:
            db.close()
