"""Views whose expressions fail on some rows equal recomputation with TRY semantics.

The generated values (`v` in -3..6 and NULL, `k` in a/b/c/NULL) make `6 / v` divide by
zero, `v * 1000000000` overflow integer and `replace(k, 'a', '7')::INT` an invalid cast on
some rows. In a view each failing expression is NULL for that row (SELECT list, WHERE,
GROUP BY key, join key, aggregate argument, HAVING), so DuckDB runs the same query with
the failing expressions wrapped in `TRY(...)` (NULL on error; `//` is its integer
division). See differential.py for the harness.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property.differential import batches, run_differential

VIEWS = {
    "e_select": "SELECT id, k, 6 / v AS q, v * 1000000000 AS big FROM t",
    "e_coalesce": "SELECT id, coalesce(6 / v, -1) AS c FROM t",
    "e_cast": "SELECT id, replace(k, 'a', '7')::INT AS n FROM t",
    "e_where": "SELECT id, v FROM t WHERE 6 / v >= 1",
    "e_group": "SELECT 6 / v AS g, count(*) AS n FROM t GROUP BY 6 / v",
    "e_agg": "SELECT k, sum(6 / v) AS s, count(6 / v) AS c, count(*) AS n FROM t GROUP BY k",
    "e_having": "SELECT k, count(*) AS n FROM t GROUP BY k HAVING sum(v) / min(v) >= 1",
    "e_join": "SELECT t.id, u.id AS uid FROM t JOIN u ON 6 / t.v = u.v",
    "e_left": "SELECT t.id, u.id AS uid FROM t LEFT JOIN u ON t.k = u.k AND 6 / u.v > t.v",
}

DUCK = {
    "e_select": "SELECT id, k, TRY(6 // v) AS q, TRY(v * 1000000000) AS big FROM t",
    "e_coalesce": "SELECT id, coalesce(TRY(6 // v), -1) AS c FROM t",
    "e_cast": "SELECT id, TRY(CAST(replace(k, 'a', '7') AS INTEGER)) AS n FROM t",
    "e_where": "SELECT id, v FROM t WHERE TRY(6 // v) >= 1",
    "e_group": "SELECT TRY(6 // v) AS g, count(*) AS n FROM t GROUP BY TRY(6 // v)",
    "e_agg": "SELECT k, sum(TRY(6 // v)) AS s, count(TRY(6 // v)) AS c, count(*) AS n FROM t "
    "GROUP BY k",
    # DuckDB allows no aggregate inside TRY: the HAVING moves above a grouped subquery
    "e_having": "SELECT k, n FROM (SELECT k, count(*) AS n, sum(v) AS s, min(v) AS m FROM t "
    "GROUP BY k) WHERE TRY(s // m) >= 1",
    "e_join": "SELECT t.id, u.id AS uid FROM t JOIN u ON TRY(6 // t.v) = u.v",
    "e_left": "SELECT t.id, u.id AS uid FROM t LEFT JOIN u ON t.k = u.k AND TRY(6 // u.v) > t.v",
}


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=batches, early=st.booleans())
def test_failing_expressions_equal_try_recompute(
    ops: list[list[tuple[Any, ...]]], early: bool
) -> None:
    run_differential(VIEWS, ops, early, duck=DUCK, data_errors=True)
