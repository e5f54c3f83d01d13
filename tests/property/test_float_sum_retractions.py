"""sum / avg over double precision in views, through inserts and deletes of NaN, the
infinities and values far larger than the rest, equal the sums of the rows left.

A float sum kept by adding each step's delta loses what a large value absorbed when that
value is retracted (1e20 + 1 - 1e20 is 0 in plain float arithmetic), and an infinity
once added makes it NaN for good (inf - inf). The aggregation counts NaN / Infinity /
-Infinity apart and keeps a Neumaier compensation (agg_calls._SumLike), in both its
paths: the columnar one (integer group keys, `w_int`) and the tuple one (text keys,
DISTINCT, a global row). The oracle is `math.fsum` over the rows left (PostgreSQL's
NULL, NaN and infinity rules applied); values must agree to 1e-9.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property.differential import open_db, select

VIEWS = {
    "w_int": "SELECT g, sum(f) AS s, avg(f) AS a, count(f) AS n FROM w GROUP BY g",
    "w_text": "SELECT k, sum(f) AS s, avg(f) AS a, count(f) AS n FROM w GROUP BY k",
    "w_distinct": "SELECT k, sum(DISTINCT f) AS s, avg(DISTINCT f) AS a, count(DISTINCT f) AS n "
    "FROM w GROUP BY k",
    "w_global": "SELECT sum(f) AS s, avg(f) AS a, count(f) AS n FROM w",
}

_F = st.one_of(
    st.none(),
    st.sampled_from(
        [0.1, 0.2, 0.3, 1.0, -2.5, 1e20, -1e20, 3e16, 7.0, float("nan"), float("inf")]
        + [float("-inf")]
    ),
)
_row = st.tuples(st.integers(0, 2), _F)
#: a batch: rows to insert, then ids to delete (of those inserted so far)
_batch = st.tuples(st.lists(_row, max_size=8), st.lists(st.integers(0, 40), max_size=6))


def _lit(v: float | None) -> str:
    if v is None:
        return "NULL"
    if math.isnan(v) or math.isinf(v):
        return f"'{v!r}'::float8".replace("inf", "Infinity").replace("nan", "NaN")
    return repr(v)


def _sum(vals: list[float], distinct: bool) -> tuple[float | None, float | None, int]:
    if distinct:  # NaN equals NaN here, as PostgreSQL's DISTINCT has it
        seen: dict[Any, float] = {}
        for v in vals:
            seen.setdefault("nan" if math.isnan(v) else v, v)
        vals = list(seen.values())
    if not vals:
        return None, None, 0
    if any(math.isnan(v) for v in vals) or (math.inf in vals and -math.inf in vals):
        s = math.nan
    elif math.inf in vals or -math.inf in vals:
        s = math.inf if math.inf in vals else -math.inf
    else:
        s = math.fsum(vals)
    return s, s / len(vals), len(vals)


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    a, b = float(a), float(b)
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return a == b or math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


def _check(s: Any) -> None:
    rows = select(s, "SELECT g, k, f FROM w")
    for name in VIEWS:
        key = 0 if name == "w_int" else 1
        groups: dict[Any, list[float]] = {}
        for r in rows:
            groups.setdefault(None if name == "w_global" else r[key], [])
            if r[2] is not None:
                groups[None if name == "w_global" else r[key]].append(r[2])
        if name == "w_global" and not groups:
            groups[None] = []
        want = {g: _sum(v, name == "w_distinct") for g, v in groups.items()}
        got_rows = select(s, f"SELECT * FROM {name}")
        got = {None: tuple(got_rows[0])} if name == "w_global" else {r[0]: r[1:] for r in got_rows}
        assert set(got) == set(want), f"{name}: groups {sorted(map(str, got))}"
        for g, vals in got.items():
            assert all(_same(x, y) for x, y in zip(vals, want[g], strict=True)), (
                f"{name}, group {g}: (sum, avg, count) = {vals}, over the rows left {want[g]}"
            )


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batches=st.lists(_batch, min_size=1, max_size=6), early=st.booleans())
def test_float_sums_through_retractions_equal_the_rows_left(
    batches: list[tuple[list[tuple[int, float | None]], list[int]]], early: bool
) -> None:
    with tempfile.TemporaryDirectory() as d:
        db = open_db(Path(d))
        try:
            s = db.connect("root", "dev")
            s.execute_simple("CREATE TABLE w (id INT PRIMARY KEY, g INT, k VARCHAR, f FLOAT8)")
            next_id = 0
            for i, (rows, deletes) in enumerate(batches):
                if early and i == 0:
                    _create(s)
                if rows:
                    vals = ", ".join(
                        f"({next_id + j}, {g}, 'k{g}', {_lit(f)})" for j, (g, f) in enumerate(rows)
                    )
                    s.execute_simple(f"INSERT INTO w VALUES {vals}")
                    next_id += len(rows)
                if not early and i == 0:
                    _create(s)
                if deletes:
                    ids = ", ".join(str(x) for x in deletes)
                    s.execute_simple(f"DELETE FROM w WHERE id IN ({ids})")
                s.execute_simple("FLUSH")
                _check(s)
        finally:
            db.close()


def _create(s: Any) -> None:
    for name, q in VIEWS.items():
        s.execute_simple(f"CREATE MATERIALIZED VIEW {name} AS {q}")
