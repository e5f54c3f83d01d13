"""Joins whose keys are not plain column pairs equal recomputation: expression and cast keys,
IS NOT DISTINCT FROM keys (NULL matches NULL), comma joins keyed by WHERE equalities, and
USING / NATURAL merged columns; append-only joins (both inputs APPEND ONLY tables) and
the aggregations over them. See differential.py for the harness.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property.differential import append_batches, batches, run_differential

VIEWS = {
    "j_expr": "SELECT t.id, u.id AS uid FROM t JOIN u ON t.v + 1 = u.v",
    "j_cast": "SELECT t.id, u.id AS uid FROM t LEFT JOIN u ON CAST(t.v AS BIGINT) = u.v",
    "j_nullsafe": "SELECT t.id, u.id AS uid FROM t FULL JOIN u ON t.k IS NOT DISTINCT FROM u.k "
    "AND t.v <> u.v",
    "j_comma": "SELECT a.id, b.id AS bid, c.id AS cid FROM t a, u b, t c "
    "WHERE a.k = b.k AND b.v = c.v AND a.id <> c.id",
    "j_using_full": "SELECT k, t.id, u.id AS uid FROM t FULL JOIN u USING (k)",
    "j_using_right": "SELECT k, v, t.id FROM t RIGHT JOIN u USING (k, v)",
    "j_in_comma": "SELECT id FROM t WHERE k IN (SELECT u.k FROM u, t t2 WHERE u.v = t2.v)",
    "j_exists_comma": "SELECT id FROM t WHERE EXISTS (SELECT 1 FROM u, t t2 "
    "WHERE u.k = t2.k AND t2.id = t.id AND u.v > 0)",
}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=batches, early=st.booleans())
def test_join_views_equal_recompute(ops: list[list[tuple[Any, ...]]], early: bool) -> None:
    run_differential(VIEWS, ops, early)


# both inputs APPEND ONLY: inner equi-joins plan as append-only hash joins, and min/max over
# them keep one value per group (no multiset)
APPEND_ONLY_VIEWS = {
    "ao_join": "SELECT t.id, t.v, u.id AS uid, u.v AS uv FROM t JOIN u ON t.k = u.k",
    "ao_cond": "SELECT t.id, u.id AS uid FROM t JOIN u ON t.k = u.k AND t.v < u.v",
    "ao_two_keys": "SELECT t.id, u.id AS uid FROM t JOIN u ON t.k = u.k AND t.v = u.v",
    "ao_self": "SELECT a.id, b.id AS bid FROM t a JOIN t b ON a.v = b.v",
    "ao_agg": "SELECT t.k, count(*) AS n, max(u.v) AS mx, min(t.v) AS mn "
    "FROM t JOIN u ON t.k = u.k GROUP BY t.k",
    "ao_distinct_join": "SELECT d.k, u.id FROM (SELECT k, v FROM t GROUP BY k, v) d "
    "JOIN u ON d.v = u.v",
    "ao_left": "SELECT t.id, u.id AS uid FROM t LEFT JOIN u ON t.k = u.k",
}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=append_batches, early=st.booleans())
def test_append_only_joins_equal_recompute(ops: list[list[tuple[Any, ...]]], early: bool) -> None:
    run_differential(APPEND_ONLY_VIEWS, ops, early, append_only=True)
