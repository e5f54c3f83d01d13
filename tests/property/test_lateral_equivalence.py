"""Table functions joined laterally in FROM of views equal recomputation after every FLUSH.

`FROM t, LATERAL generate_series(1, t.v)`, `unnest(...) WITH ORDINALITY` and a Python
table function over a table's columns (engine.plan.plan_lateral: a ProjectSet over the
left side), alone and under an aggregation and a join; DuckDB computes the same joins.
See differential.py for the harness.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property.differential import batches, run_differential

SETUP = (
    """CREATE FUNCTION series(n INT) RETURNS TABLE (i INT, s VARCHAR) LANGUAGE python AS $$
def series(n):
    for i in range(n or 0):
        yield i, "#" * i
$$""",
)

VIEWS = {
    "l_series": "SELECT t.id, t.k, g.x FROM t, LATERAL generate_series(1, t.v) AS g(x)",
    "l_unnest": "SELECT t.id, u.x, u.o FROM t CROSS JOIN LATERAL "
    "unnest(ARRAY[t.v, t.id]) WITH ORDINALITY AS u(x, o)",
    "l_udtf": "SELECT t.id, f.i, f.s FROM t, LATERAL series(t.v) AS f",
    "l_agg": "SELECT t.k, count(*) AS n, sum(g) AS s FROM t CROSS JOIN "
    "generate_series(1, t.v) AS g GROUP BY t.k",
    "l_join": "SELECT t.id, u.id AS uid, g FROM t JOIN u ON t.k = u.k, "
    "LATERAL generate_series(u.v, t.v) AS g",
}
DUCK = {
    "l_series": "SELECT t.id, t.k, g.x FROM t, generate_series(1, t.v) AS g(x)",
    "l_unnest": "SELECT t.id, CASE o.o WHEN 1 THEN t.v ELSE t.id END, o.o "
    "FROM t, (VALUES (1), (2)) AS o(o)",
    "l_udtf": "SELECT t.id, g.i, repeat('#', CAST(g.i AS INTEGER)) FROM t, "
    "generate_series(0, t.v - 1) AS g(i)",
    "l_agg": "SELECT t.k, count(*), sum(g.g) FROM t, generate_series(1, t.v) AS g(g) GROUP BY t.k",
    "l_join": "SELECT t.id, u.id, g.g FROM t JOIN u ON t.k = u.k, "
    "generate_series(u.v, t.v) AS g(g)",
}


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=batches, early=st.booleans())
def test_lateral_views_equal_recompute(ops: list[list[tuple[Any, ...]]], early: bool) -> None:
    run_differential(VIEWS, ops, early, duck=DUCK, setup=SETUP)
