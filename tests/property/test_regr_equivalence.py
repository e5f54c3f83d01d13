"""corr / covar_* / regr_* (HashAggOp, incremental sums) and percentile_cont /
percentile_disc / mode() (CollectAggOp, per touched group) in views equal recomputation
through inserts, updates, deletes and a restart. See differential.py for the harness;
DuckDB, the oracle, has every one of them with PostgreSQL's NULL rules.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property.differential import batches, run_differential

_REGR = (
    "corr(v, id) AS c, covar_pop(v, id) AS cp, covar_samp(v, id) AS cs, "
    "regr_avgx(v, id) AS ax, regr_avgy(v, id) AS ay, regr_count(v, id) AS n, "
    "regr_intercept(v, id) AS i, regr_r2(v, id) AS r2, regr_slope(v, id) AS sl, "
    "regr_sxx(v, id) AS sxx, regr_sxy(v, id) AS sxy, regr_syy(v, id) AS syy"
)

VIEWS = {
    "r_group": f"SELECT k, {_REGR} FROM t GROUP BY k",
    "r_global": f"SELECT {_REGR} FROM t",
    "r_filter": "SELECT k, corr(v * 1.5, id + 100) FILTER (WHERE v > 0) AS c, "
    "CASE WHEN regr_sxx(id, v) = 0 THEN NULL ELSE regr_slope(id, v) END AS s FROM t GROUP BY k",
    "p_group": "SELECT k, percentile_cont(0.5) WITHIN GROUP (ORDER BY v) AS pc, "
    "percentile_disc(0.25) WITHIN GROUP (ORDER BY v DESC) AS pd, "
    "mode() WITHIN GROUP (ORDER BY v) AS m, count(*) AS n FROM t GROUP BY k",
    "p_global": "SELECT percentile_cont(0.9) WITHIN GROUP (ORDER BY v DESC) AS pc, "
    "mode() WITHIN GROUP (ORDER BY v DESC) AS m FROM t",
}


def _pg_nulls(y: str, x: str) -> dict[str, str]:
    """DuckDB's corr / regr_r2 / regr_slope / regr_intercept answer NaN where PostgreSQL answers NULL (a constant X or
    Y); PostgreSQL's rule spelled in DuckDB."""
    sxx, syy = f"regr_sxx({y}, {x})", f"regr_syy({y}, {x})"
    return {
        f"corr({y}, {x})": f"CASE WHEN {sxx} = 0 OR {syy} = 0 THEN NULL ELSE corr({y}, {x}) END",
        f"regr_r2({y}, {x})": f"CASE WHEN {sxx} = 0 THEN NULL WHEN {syy} = 0 THEN 1.0 "
        f"ELSE regr_r2({y}, {x}) END",
        f"regr_slope({y}, {x})": f"CASE WHEN {sxx} = 0 THEN NULL ELSE regr_slope({y}, {x}) END",
        f"regr_intercept({y}, {x})": f"CASE WHEN {sxx} = 0 THEN NULL "
        f"ELSE regr_intercept({y}, {x}) END",
    }


def _duck(q: str) -> str:
    for a, b in _pg_nulls("v", "id").items():
        q = q.replace(a, b)
    return q


DUCK = {
    "r_group": _duck(VIEWS["r_group"]),
    "r_global": _duck(VIEWS["r_global"]),
    "r_filter": "SELECT k, CASE WHEN regr_sxx(v * 1.5, id + 100) FILTER (WHERE v > 0) = 0 "
    "OR regr_syy(v * 1.5, id + 100) FILTER (WHERE v > 0) = 0 THEN NULL "
    "ELSE corr(v * 1.5, id + 100) FILTER (WHERE v > 0) END AS c, "
    "CASE WHEN regr_sxx(id, v) = 0 THEN NULL ELSE regr_slope(id, v) END AS s FROM t GROUP BY k",
    # DuckDB's mode picks any of the most frequent values: PostgreSQL's first in order
    "p_global": "SELECT quantile_cont(v, 0.1) AS pc, "
    "(SELECT v FROM t WHERE v IS NOT NULL GROUP BY v ORDER BY count(*) DESC, v DESC LIMIT 1) "
    "AS m FROM t",
    "p_group": "SELECT k, quantile_cont(v, 0.5) AS pc, "
    "percentile_disc(0.25) WITHIN GROUP (ORDER BY v DESC) AS pd, "
    "(SELECT x.v FROM t x WHERE x.k IS NOT DISTINCT FROM t.k AND x.v IS NOT NULL "
    "GROUP BY x.v ORDER BY count(*) DESC, x.v LIMIT 1) AS m, count(*) AS n FROM t GROUP BY k",
}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=batches, early=st.booleans())
def test_regression_and_ordered_set_views_equal_recompute(
    ops: list[list[tuple[Any, ...]]], early: bool
) -> None:
    run_differential(VIEWS, ops, early, duck=DUCK)
