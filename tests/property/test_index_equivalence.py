"""Queries answered through an index equal the same queries scanning the table.

Two tables get the same random writes (inserts, updates that move rows between keys,
deletes; some batches committed before the index exists, so its backfill is exercised,
the others after); one of them has indexes on an integer, a text and a timestamp
column, and multi-column ones that do not hold every column (their lookups read the
table's rows by primary key). Random point, IN-list and range predicates (with NULLs,
repeated keys and bounds outside the data) must give the same rows from both, and the indexed
table's plan must show the index being used, so the test fails if the index is not.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.database import Config, SwellDatabase

INDEXES = {"k": "CREATE INDEX eq_k ON eq_i (k)", "s": "CREATE INDEX eq_s ON eq_i (s DESC)",
           "ts": "CREATE INDEX eq_ts ON eq_i (ts, k)",
           # multi-column and not covering (no ts): found keys read the table's rows by id
           "ks": "CREATE INDEX eq_ks ON eq_i (k, s) INCLUDE (id)",
           "sts": "CREATE INDEX eq_sts ON eq_i (s, ts) INCLUDE (k)"}  # fmt: skip
BASE = dt.datetime(2024, 1, 1)

keys = st.one_of(st.none(), st.integers(-5, 5))
texts = st.one_of(st.none(), st.sampled_from(["", "a", "ab", "b", "é", "zz"]))
stamps = st.one_of(st.none(), st.integers(0, 6).map(lambda h: BASE + dt.timedelta(hours=h)))
rows = st.tuples(st.integers(0, 40), keys, texts, stamps)
batch = st.lists(rows, min_size=1, max_size=25)
ops = st.sampled_from(["=", "<", "<=", ">", ">="])
conds = st.one_of(
    st.tuples(st.just("k"), ops, st.integers(-7, 7)),
    st.tuples(st.just("k"), st.just("IN"), st.lists(st.integers(-6, 6), min_size=1, max_size=3)),
    st.tuples(st.just("s"), st.just("="), st.sampled_from(["", "a", "b", "é"])),
    st.tuples(st.just("s"), ops, st.sampled_from(["", "a", "aa", "b", "zzz", "é"])),
    st.tuples(st.just("ts"), ops, st.integers(-1, 7)),
)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SwellDatabase]:
    path: Path = tmp_path_factory.mktemp("index_eq")
    d = SwellDatabase(Config(data_dir=path / "data", barrier_interval_ms=60_000))
    try:
        yield d
    finally:
        d.close()


def _lit(col: str, v: Any) -> str:
    if isinstance(v, list):
        return "(" + ", ".join(str(x) for x in v) + ")"
    if col == "k":  # a constant expression: evaluated once when the query runs
        return f"{v - 1} + 1" if v % 2 else str(v)
    if col == "s":
        return "'" + v + "'"
    return f"TIMESTAMP '{BASE + dt.timedelta(hours=v)}'"


def _sql(v: Any) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, dt.datetime):
        return f"TIMESTAMP '{v}'"
    if isinstance(v, str):
        return "'" + v + "'"
    return str(v)


def _write(s: Any, b: list[tuple[Any, ...]]) -> None:
    for t in ("eq_i", "eq_p"):
        vals = ", ".join(f"({i}, {_sql(k)}, {_sql(x)}, {_sql(ts)})" for i, k, x, ts in b)
        s.execute_simple(f"INSERT INTO {t} VALUES {vals}")  # upsert by the primary key
        lo = min(r[0] for r in b)
        s.execute_simple(f"DELETE FROM {t} WHERE id % 7 = {lo % 7} AND id > {lo}")
        s.execute_simple(f"UPDATE {t} SET k = k + 1 WHERE id % 5 = {lo % 5}")
    s.execute_simple("FLUSH")


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])  # fmt: skip
@given(before=st.lists(batch, max_size=2), after=st.lists(batch, min_size=1, max_size=3),
       queries=st.lists(st.lists(conds, min_size=1, max_size=2), min_size=1, max_size=8))  # fmt: skip
def test_index_lookups_equal_scans(
    db: SwellDatabase,
    before: list[list[tuple[Any, ...]]],
    after: list[list[tuple[Any, ...]]],
    queries: list[list[tuple[str, str, Any]]],
) -> None:
    s = db.connect("root", "dev")
    for t in ("eq_i", "eq_p"):
        s.execute_simple(f"DROP TABLE IF EXISTS {t}")
        s.execute_simple(f"CREATE TABLE {t} (id INT PRIMARY KEY, k INT, s VARCHAR, ts TIMESTAMP)")
    for b in before:
        _write(s, b)
    for ddl in INDEXES.values():
        s.execute_simple(ddl)
    for b in after:
        _write(s, b)
    for q in queries:
        where = " AND ".join(f"{c} {op} {_lit(c, v)}" for c, op, v in q)
        got = s.execute_simple(f"SELECT * FROM eq_i WHERE {where}")[0].rows
        want = s.execute_simple(f"SELECT * FROM eq_p WHERE {where}")[0].rows
        assert sorted(got, key=repr) == sorted(want, key=repr), where
        plan = "\n".join(
            r[0] for r in s.execute_simple(f"EXPLAIN SELECT * FROM eq_i WHERE {where}")[0].rows
        )
        assert "BatchIndexScan" in plan, plan
