"""Shared harness for differential property tests of streaming operator families.

Hypothesis generates INSERT / UPDATE / DELETE batches over two small tables `t` and `u`
(`id INT PRIMARY KEY, k VARCHAR, v INT`; tiny key domains, NULLs, many duplicates). The
batches run through the real engine in process; after every FLUSH every materialized view
must equal (a) its SELECT run ad hoc and (b) the same SELECT run by DuckDB over the
tables' current rows. A final restart checks that views recover to the same contents.
With `fail_at`, chosen barriers first fail at a named point and are rolled back in process
(`engine.faults`).

Queries given to `run_differential` must be deterministic (write NULLS FIRST/LAST
explicitly: DuckDB's default NULL order differs from PostgreSQL's).

Views whose expressions can fail on some rows (`data_errors=True`): a view computes NULL
for a failing expression where the ad-hoc query raises, so the DuckDB oracle wraps the
same expressions in `TRY(...)`, and (a) is checked only when the ad-hoc query succeeds.
"""

from __future__ import annotations

import atexit
import tempfile
from decimal import Decimal
from pathlib import Path
from typing import Any

import duckdb
from hypothesis import strategies as st

from engine import faults
from engine.database import Config, open_database
from engine.errors import EngineError, EpochFailed
from engine.stream.parallel import protocol
from engine.stream.parallel.transport import ProcessLauncher

TABLES = ("t", "u")
keys = st.sampled_from(["a", "b", "c", None])
vals = st.one_of(st.none(), st.integers(-3, 6))
ids = st.integers(0, 9)
tables = st.sampled_from(TABLES)
op = st.one_of(
    st.tuples(st.just("ins"), tables, ids, keys, vals),
    st.tuples(st.just("del"), tables, ids),
    st.tuples(st.just("upd"), tables, ids, vals),
    st.tuples(st.just("updk"), tables, ids, keys),
    st.tuples(st.just("delk"), tables, keys),
)
batches = st.lists(st.lists(op, min_size=1, max_size=8), min_size=1, max_size=5)
# inserts only, for APPEND ONLY tables (`run_differential(append_only=True)`); ids repeat
insert = st.tuples(st.just("ins"), tables, ids, keys, vals)
append_batches = st.lists(st.lists(insert, min_size=1, max_size=8), min_size=1, max_size=5)


def _lit(v: object) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, str):
        return f"'{v}'"
    return str(v)


def op_sql(o: tuple[Any, ...]) -> str:
    kind, tbl = o[0], o[1]
    if kind == "ins":
        return f"INSERT INTO {tbl} VALUES ({o[2]}, {_lit(o[3])}, {_lit(o[4])})"
    if kind == "del":
        return f"DELETE FROM {tbl} WHERE id = {o[2]}"
    if kind == "upd":
        return f"UPDATE {tbl} SET v = {_lit(o[3])} WHERE id = {o[2]}"
    if kind == "updk":
        return f"UPDATE {tbl} SET k = {_lit(o[3])} WHERE id = {o[2]}"
    if o[2] is None:
        return f"DELETE FROM {tbl} WHERE k IS NULL"
    return f"DELETE FROM {tbl} WHERE k = {_lit(o[2])}"


def norm(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    def fix(v: object) -> object:
        if isinstance(v, Decimal | float):
            return round(float(v), 6)
        if isinstance(v, list | tuple):
            return tuple(fix(x) for x in v)
        return v

    return sorted((tuple(fix(v) for v in r) for r in rows), key=repr)


def select(s: Any, sql: str) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = s.execute_simple(sql)[0].rows
    return rows


def check(
    s: Any, views: dict[str, str], duck: dict[str, str] | None = None, data_errors: bool = False
) -> None:
    con = duckdb.connect()
    for tbl in TABLES:
        con.execute(f"CREATE TABLE {tbl} (id INTEGER, k VARCHAR, v INTEGER)")
        rows = select(s, f"SELECT id, k, v FROM {tbl}")
        if rows:
            con.executemany(f"INSERT INTO {tbl} VALUES (?, ?, ?)", rows)
    for name, q in views.items():
        got = norm(select(s, f"SELECT * FROM {name}"))
        try:
            adhoc = norm(select(s, q))
        except EngineError as e:
            if not (data_errors and e.sqlstate.startswith("22")):
                raise
        else:
            assert got == adhoc, f"{name}: view != ad-hoc query\n{got}\n{adhoc}"
        expected = norm(con.execute((duck or {}).get(name, q)).fetchall())
        assert got == expected, f"{name}: view != duckdb\n{got}\n{expected}"


class KeptWorkers:
    """A worker launcher whose processes outlive one database: each database's pool
    resets them at its close instead of stopping them, so an example does not pay for
    starting worker processes (they end with the test process)."""

    def __init__(self) -> None:
        self.inner = ProcessLauncher()
        self.handles: dict[int, Any] = {}
        atexit.register(self.inner.close)

    def __call__(self) -> KeptWorkers:
        return self

    def start(self, worker_id: int, config: dict[str, object]) -> Any:
        h = self.handles.get(worker_id)
        if h is None or not h.alive():
            h = self.handles[worker_id] = self.inner.start(worker_id, {})
        return h

    def close(self) -> None:
        for h in self.handles.values():
            if h.alive():
                h.submit(protocol.encode({"cmd": "reset"}))
                h.result()


KEPT_WORKERS = KeptWorkers()


def open_db(path: Path, parallelism: int = 1) -> Any:
    launcher = KEPT_WORKERS if parallelism > 1 else None
    return open_database(
        Config(
            data_dir=path,
            barrier_interval_ms=60_000,
            parallelism=parallelism,
            worker_launcher=launcher,
        )
    )


def run_differential(
    views: dict[str, str],
    ops: list[list[tuple[Any, ...]]],
    early: bool,
    duck: dict[str, str] | None = None,
    data_errors: bool = False,
    fail_at: list[str | None] | None = None,
    parallelism: int = 1,
    setup: tuple[str, ...] = (),
    append_only: bool = False,
) -> None:
    """Apply `ops` batch by batch (FLUSH after each) and check every view each time.
    `setup`: statements run first (e.g. CREATE AGGREGATE for the views).
    `append_only`: `t` and `u` are APPEND ONLY tables without a primary key (give
    inserts only: `append_batches`).

    `fail_at[i]` (an `engine.faults` point) makes batch i's first FLUSH fail there: the
    epoch is rolled back, every view must still equal its query over the tables (all at
    the last committed epoch), and the next FLUSH must apply the batch.

    `parallelism` > 1: the views' partitionable nodes run as that many actors in worker
    processes (kept across examples, `KEPT_WORKERS`)."""
    with tempfile.TemporaryDirectory() as d:
        db = open_db(Path(d), parallelism)
        try:
            s = db.connect("root", "dev")
            for stmt in setup:
                s.execute_simple(stmt)
            cols = (
                "id INT, k VARCHAR, v INT"
                if append_only
                else "id INT PRIMARY KEY, k VARCHAR, v INT"
            )
            for tbl in TABLES:
                s.execute_simple(
                    f"CREATE TABLE {tbl} ({cols})" + (" APPEND ONLY" if append_only else "")
                )
            if early:  # views created before the data: purely incremental
                for name, q in views.items():
                    s.execute_simple(f"CREATE MATERIALIZED VIEW {name} AS {q}")
            for i, batch in enumerate(ops):
                for o in batch:
                    s.execute_simple(op_sql(o))
                if not early and i == 0:  # views created over existing data: backfill
                    for name, q in views.items():
                        s.execute_simple(f"CREATE MATERIALIZED VIEW {name} AS {q}")
                point = fail_at[i] if fail_at is not None and i < len(fail_at) else None
                if point is not None:
                    faults.configure(fail=f"{point}:1")
                    try:
                        s.execute_simple("FLUSH")
                        raise AssertionError(f"FLUSH did not fail at {point}")
                    except EpochFailed:
                        pass
                    finally:
                        faults.configure()
                    check(s, views, duck, data_errors)
                s.execute_simple("FLUSH")
                check(s, views, duck, data_errors)
        finally:
            db.close()
        db = open_db(Path(d), parallelism)
        try:
            check(db.connect("root", "dev"), views, duck, data_errors)
        finally:
            db.close()
