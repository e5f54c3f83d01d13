"""string_agg / array_agg / bool_and / bool_or / count(DISTINCT) / FILTER in views equal
recomputation (CollectAggOp and HashAggOp). See differential.py for the harness.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property.differential import batches, run_differential

VIEWS = {
    "c_str": "SELECT k, string_agg(CAST(v AS VARCHAR), ',' ORDER BY v, id) AS s, "
    "array_agg(id ORDER BY id DESC) AS a, count(*) AS n FROM t GROUP BY k",
    "c_global": "SELECT string_agg(k, '-' ORDER BY k, id) AS s, count(DISTINCT k) AS dk FROM t",
    "c_distinct_filter": "SELECT k, array_agg(DISTINCT v ORDER BY v) FILTER (WHERE v > 0) AS a, "
    "sum(DISTINCT v) AS sd FROM t GROUP BY k",
    "c_bool": "SELECT k, bool_and(v > 1) AS ba, bool_or(v > 4) AS bo, "
    "count(v) FILTER (WHERE v % 2 = 0) AS ev FROM t GROUP BY k",
}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=batches, early=st.booleans())
def test_collect_agg_views_equal_recompute(ops: list[list[tuple[Any, ...]]], early: bool) -> None:
    run_differential(VIEWS, ops, early)
