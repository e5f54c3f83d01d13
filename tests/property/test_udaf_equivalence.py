"""Python aggregates (`CREATE AGGREGATE`) in views equal recomputation after every FLUSH.

With `retract`, a view keeps each group's aggregate state (HashAggOp,
engine.stream.operators.agg_udaf): one plain sum of squares, one `WITH (batch = true)`
whose state is an object of a class the body defines, one whose state is a mutable dict.
Without `retract` the view recomputes touched groups from their rows (CollectAggOp).
DuckDB computes the same aggregates with built-ins. See differential.py for the harness.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property.differential import batches, run_differential

SETUP = (
    """CREATE AGGREGATE sumsq(v INT) RETURNS BIGINT LANGUAGE python AS $$
def create_state():
    return 0

def accumulate(s, v):
    return s if v is None else s + v * v

def retract(s, v):
    return s if v is None else s - v * v
$$""",
    """CREATE AGGREGATE sumsq_batch(v INT) RETURNS BIGINT LANGUAGE python
WITH (batch = true) AS $$
import pyarrow.compute as pc

class Total:
    def __init__(self):
        self.n = 0

def create_state():
    return Total()

def accumulate(s, v):
    s.n += pc.sum(pc.multiply(v, v)).as_py() or 0
    return s

def retract(s, v):
    s.n -= pc.sum(pc.multiply(v, v)).as_py() or 0
    return s

def finish(s):
    return s.n
$$""",
    """CREATE AGGREGATE ndistinct(v INT) RETURNS BIGINT LANGUAGE python AS $$
def create_state():
    return {}

def accumulate(s, v):
    if v is not None:
        s[v] = s.get(v, 0) + 1
    return s

def retract(s, v):
    if v is not None:
        s[v] -= 1
        if s[v] == 0:
            del s[v]
    return s

def finish(s):
    return len(s)
$$""",
    """CREATE AGGREGATE top(v INT) RETURNS INT LANGUAGE python AS $$
def create_state():
    return None

def accumulate(s, v):
    return v if s is None or (v is not None and v > s) else s
$$""",
)

VIEWS = {
    "u_sq": "SELECT k, sumsq(v) AS s, ndistinct(v) AS d, count(*) AS n FROM t GROUP BY k",
    "u_batch": "SELECT sumsq_batch(v) FILTER (WHERE v > 0) AS b, sumsq(v) AS s FROM t",
    "u_join": "SELECT t.k, sumsq(u.v) AS s FROM t JOIN u ON t.k = u.k GROUP BY t.k",
    "u_fallback": "SELECT k, top(v) AS m, sumsq(v) AS s FROM t GROUP BY k",
}
DUCK = {
    "u_sq": "SELECT k, coalesce(sum(v * v), 0), count(DISTINCT v), count(*) FROM t GROUP BY k",
    "u_batch": "SELECT coalesce(sum(v * v) FILTER (WHERE v > 0), 0), coalesce(sum(v * v), 0) "
    "FROM t",
    "u_join": "SELECT t.k, coalesce(sum(u.v * u.v), 0) FROM t JOIN u ON t.k = u.k GROUP BY t.k",
    "u_fallback": "SELECT k, max(v), coalesce(sum(v * v), 0) FROM t GROUP BY k",
}


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=batches, early=st.booleans())
def test_udaf_views_equal_recompute(ops: list[list[tuple[Any, ...]]], early: bool) -> None:
    run_differential(VIEWS, ops, early, duck=DUCK, setup=SETUP)
