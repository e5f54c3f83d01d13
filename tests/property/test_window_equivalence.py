"""Window functions in views (OverWindowOp, group top-N on TopNOp) equal recomputation.

See differential.py for the harness: random DML over small key domains, and after every
FLUSH each view equals its query run ad hoc and by DuckDB.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property.differential import batches, run_differential

VIEWS = {
    "w_rank": "SELECT id, k, v, row_number() OVER (PARTITION BY k ORDER BY v DESC NULLS LAST, "
    "id) AS rn, rank() OVER (PARTITION BY k ORDER BY v NULLS FIRST) AS r, "
    "dense_rank() OVER (PARTITION BY k ORDER BY v NULLS FIRST) AS dr FROM t",
    "w_lag": "SELECT id, lag(v) OVER (PARTITION BY k ORDER BY id) AS l, "
    "lead(v, 2, -1) OVER (PARTITION BY k ORDER BY id) AS ld FROM t",
    "w_agg": "SELECT id, sum(v) OVER (PARTITION BY k ORDER BY id) AS s, "
    "count(v) OVER (PARTITION BY k) AS c, count(*) OVER () AS n, "
    "min(v) OVER (PARTITION BY k ORDER BY id ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING) AS mn, "
    "max(v) OVER (PARTITION BY k ORDER BY v NULLS FIRST, id) AS mx, "
    "avg(v) OVER (ORDER BY id ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) AS a FROM t",
    "w_top2": "SELECT * FROM (SELECT id, k, v, row_number() OVER (PARTITION BY k "
    "ORDER BY v DESC NULLS LAST, id) AS rn FROM t) x WHERE rn <= 2",
    "w_dedup": "SELECT id, k FROM (SELECT id, k, row_number() OVER (PARTITION BY v "
    "ORDER BY id DESC) AS rn FROM t) x WHERE rn = 1",
    "w_rank_filter": "SELECT id, r FROM (SELECT id, rank() OVER (PARTITION BY k "
    "ORDER BY v NULLS LAST) AS r FROM t) x WHERE r <= 2",
    "w_dense_filter": "SELECT id, k, dr FROM (SELECT id, k, dense_rank() OVER (PARTITION BY k "
    "ORDER BY v DESC NULLS FIRST) AS dr FROM t) x WHERE dr <= 2 AND dr > 0",
    "w_grouped": "SELECT k, sum(v) AS s, rank() OVER (ORDER BY sum(v) NULLS LAST) AS r "
    "FROM t GROUP BY k",
}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=batches, early=st.booleans())
def test_window_views_equal_recompute(ops: list[list[tuple[Any, ...]]], early: bool) -> None:
    run_differential(VIEWS, ops, early)
