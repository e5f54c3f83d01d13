"""Subqueries and joins in views equal recomputation: semi/anti joins from IN / EXISTS /
NOT EXISTS (correlated or not), scalar subqueries (uncorrelated and correlated with an
aggregate), outer joins with residual ON conditions, three-way and self joins.

See differential.py for the harness.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property.differential import batches, run_differential

VIEWS = {
    "s_in": "SELECT id, v FROM t WHERE k IN (SELECT k FROM u WHERE v > 0)",
    "s_exists": "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k AND u.v >= t.v)",
    "s_not_exists": "SELECT id, k FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.v = t.v)",
    "s_exists_unc": "SELECT id FROM t WHERE v > 1 AND EXISTS (SELECT 1 FROM u WHERE v = 3)",
    "s_scalar": "SELECT id, v - (SELECT max(v) FROM u) AS d FROM t",
    "s_scalar_where": "SELECT id FROM t WHERE v > (SELECT min(v) FROM u)",
    "s_corr_scalar": "SELECT id, (SELECT sum(v) FROM u WHERE u.k = t.k) AS s, "
    "(SELECT count(*) FROM u WHERE u.k = t.k) AS c FROM t",
    "s_corr_cmp": "SELECT id FROM t WHERE v > (SELECT avg(v) FROM u WHERE u.k = t.k)",
    "s_any": "SELECT id FROM t WHERE v + 1 = ANY (SELECT v FROM u)",
    "j_left_cond": "SELECT t.id, u.id AS uid FROM t LEFT JOIN u ON t.k = u.k AND t.v > u.v",
    "j_full_cond": "SELECT t.id, u.id AS uid FROM t FULL JOIN u ON t.k = u.k AND t.v <> u.v",
    "j_three": "SELECT a.id, b.id AS bid, c.id AS cid FROM t a JOIN u b ON a.k = b.k "
    "LEFT JOIN t c ON b.v = c.v",
    "j_self": "SELECT a.id, b.id AS bid FROM t a JOIN t b ON a.k = b.k AND a.id < b.id",
}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=batches, early=st.booleans())
def test_subquery_views_equal_recompute(ops: list[list[tuple[Any, ...]]], early: bool) -> None:
    run_differential(VIEWS, ops, early)
