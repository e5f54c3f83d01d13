"""Rolled-back epochs leave every operator family's state as if they never ran.

The differential harness (differential.py) with `fail_at`: a FLUSH fails at a random named
barrier point (engine.faults), the runtime rolls the epoch back and rebuilds every view's
state from the last checkpoint in process, and the next FLUSH applies the batch. After the
failure and after the retry every view equals its query ad hoc and in DuckDB, so no
operator keeps in-memory state (indexes, caches, counts) of a rolled-back epoch.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property.differential import batches, run_differential

from engine import faults

VIEWS = {
    "agg": "SELECT k, count(*) AS n, sum(v) AS s, min(v) AS mn, max(v) AS mx FROM t GROUP BY k",
    "ljoin": "SELECT t.id, u.id AS uid FROM t LEFT JOIN u ON t.k = u.k AND t.v <= u.v",
    "anti": "SELECT id FROM t WHERE NOT EXISTS (SELECT 1 FROM u WHERE u.v = t.v)",
    "top2": "SELECT id, k, v FROM (SELECT id, k, v, row_number() OVER (PARTITION BY k "
    "ORDER BY v DESC NULLS LAST, id) AS rn FROM t) WHERE rn <= 2",
    "lagged": "SELECT id, v, lag(v) OVER (PARTITION BY k ORDER BY id) AS pv FROM u",
    "setop": "SELECT k, v FROM t EXCEPT SELECT k, v FROM u",
    "dist": "SELECT DISTINCT k FROM u",
}

points = st.lists(st.one_of(st.none(), st.sampled_from(faults.POINTS)), min_size=1, max_size=5)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=batches, early=st.booleans(), fail_at=points)
def test_rolled_back_epochs_leave_no_trace(
    ops: list[list[tuple[Any, ...]]], early: bool, fail_at: list[str | None]
) -> None:
    run_differential(VIEWS, ops, early, fail_at=fail_at)
