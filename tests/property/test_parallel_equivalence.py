"""Views at parallelism 3 equal their queries recomputed from scratch, as at parallelism 1.

The differential harness (differential.py) with `parallelism=3`: each view's aggregations,
joins, grouped top-N and partitioned window functions run as three actors in worker
processes, rows exchanged by vnode. After every FLUSH, after a restart and after epochs
rolled back at named fault points every view must equal its query ad hoc and in DuckDB:
the same contents the in-process path is held to by the other differential tests. A
subset of their views, to keep the suite's time.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property.differential import append_batches, batches, run_differential

from engine import faults

VIEWS = {
    "p_agg": "SELECT k, count(*) AS c, count(v) AS cv, sum(v) AS s, min(v) AS mn, max(v) AS mx "
    "FROM t GROUP BY k",
    "p_distinct": "SELECT DISTINCT k FROM u WHERE v IS NOT NULL",
    "p_join": "SELECT t.id, u.id AS uid, u.v FROM t JOIN u ON t.k = u.k",
    "p_full": "SELECT k, t.id, u.id AS uid FROM t FULL JOIN u USING (k)",
    "p_expr": "SELECT t.id, u.id AS uid FROM t LEFT JOIN u ON CAST(t.v AS BIGINT) + 1 = u.v",
    "p_join_agg": "SELECT t.k, count(*) AS n, sum(u.v) AS s FROM t JOIN u ON t.v = u.id "
    "AND t.id <> u.id GROUP BY t.k",
    "p_semi": "SELECT id FROM t WHERE k IN (SELECT k FROM u WHERE v > 0)",
    "p_top2": "SELECT * FROM (SELECT id, k, v, row_number() OVER (PARTITION BY k "
    "ORDER BY v DESC NULLS LAST, id) AS rn FROM t) x WHERE rn <= 2",
    "p_lag": "SELECT id, lag(v) OVER (PARTITION BY k ORDER BY id) AS l, "
    "sum(v) OVER (PARTITION BY k ORDER BY id) AS s FROM t",
}

points = st.lists(st.one_of(st.none(), st.sampled_from(faults.POINTS)), min_size=1, max_size=4)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=batches, early=st.booleans())
def test_parallel_views_equal_recompute(ops: list[list[tuple[Any, ...]]], early: bool) -> None:
    run_differential(VIEWS, ops, early, parallelism=3)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=batches, early=st.booleans(), fail_at=points)
def test_parallel_rolled_back_epochs_leave_no_trace(
    ops: list[list[tuple[Any, ...]]], early: bool, fail_at: list[str | None]
) -> None:
    run_differential(VIEWS, ops, early, fail_at=fail_at, parallelism=3)


APPEND_ONLY_VIEWS = {
    "pa_join": "SELECT t.id, u.id AS uid, u.v FROM t JOIN u ON t.k = u.k",
    "pa_agg": "SELECT t.k, count(*) AS n, max(u.v) AS mx FROM t JOIN u ON t.v = u.v GROUP BY t.k",
}


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=append_batches, early=st.booleans(), fail_at=points)
def test_parallel_append_only_joins_equal_recompute(
    ops: list[list[tuple[Any, ...]]], early: bool, fail_at: list[str | None]
) -> None:
    run_differential(
        APPEND_ONLY_VIEWS, ops, early, fail_at=fail_at, parallelism=3, append_only=True
    )
