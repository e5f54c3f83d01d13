"""UNION ALL, UNION, INTERSECT, EXCEPT, DISTINCT and DISTINCT ON in views equal recomputation.

See differential.py for the harness.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property.differential import batches, run_differential

VIEWS = {
    "u_all": "SELECT k, v FROM t UNION ALL SELECT k, v FROM u WHERE v > 0",
    "u_all3": "SELECT id, v FROM t UNION ALL SELECT id, v FROM u UNION ALL SELECT id, v + 1 "
    "FROM t WHERE k = 'a'",
    "u_distinct": "SELECT k, v FROM t UNION SELECT k, v FROM u",
    "u_agg": "SELECT k, count(*) AS n, sum(v) AS s FROM (SELECT k, v FROM t UNION ALL "
    "SELECT k, v FROM u) x GROUP BY k",
    "d_on": "SELECT DISTINCT ON (k) k, id, v FROM t ORDER BY k, v DESC NULLS LAST, id",
    "d_on_expr": "SELECT DISTINCT ON (v % 2) id, v FROM t WHERE v IS NOT NULL ORDER BY v % 2, id",
    "x_intersect": "SELECT k, v FROM t INTERSECT SELECT k, v FROM u",
    "x_except": "SELECT k, v FROM t EXCEPT SELECT k, v FROM u WHERE v > 0",
    "d_plain": "SELECT DISTINCT k, v IS NULL AS nv FROM t",
}
# DuckDB computes v % 2 of negatives like PostgreSQL; DISTINCT ON is DuckDB syntax too


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=batches, early=st.booleans())
def test_setop_views_equal_recompute(ops: list[list[tuple[Any, ...]]], early: bool) -> None:
    run_differential(VIEWS, ops, early)
