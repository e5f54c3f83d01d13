"""A failure inside a barrier rolls the epoch back everywhere and the dataflow recovers.

`engine.faults` raises at each named barrier point; after the failed FLUSH every table,
view and sink-into-table target must still show the last committed epoch (no table ahead
of its views), and the next FLUSH must apply every acknowledged write exactly once.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import faults
from engine.database import Config, SwellDatabase
from engine.errors import EpochFailed

SETUP = [
    "CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR, v INT)",
    "CREATE TABLE u (x INT)",
    "CREATE TABLE totals (k VARCHAR PRIMARY KEY, total BIGINT)",
    "CREATE MATERIALIZED VIEW v_sum AS SELECT k, sum(v) AS s, count(*) AS n FROM t GROUP BY k",
    "CREATE MATERIALIZED VIEW v_u AS SELECT count(*) AS n FROM u",
    "CREATE SINK into_totals INTO totals AS SELECT k, sum(v) AS total FROM t GROUP BY k",
    "CREATE MATERIALIZED VIEW v_totals AS SELECT count(*) AS n, sum(total) AS s FROM totals",
]


@pytest.fixture(autouse=True)
def _no_faults() -> Iterator[None]:
    faults.configure()
    yield
    faults.configure()


def open_db(path: Path) -> SwellDatabase:
    return SwellDatabase(Config(data_dir=path, barrier_interval_ms=3_600_000))


def run(db: SwellDatabase, sql: str) -> list[tuple[Any, ...]]:
    s = db.connect("root", "dev")
    rows: list[tuple[Any, ...]] = s.execute_simple(sql)[-1].rows
    return rows


def state(db: SwellDatabase) -> dict[str, Any]:
    return {
        "t": sorted(run(db, "SELECT id, k, v FROM t"), key=repr),
        "u": run(db, "SELECT count(*) FROM u"),
        "v_sum": sorted(run(db, "SELECT * FROM v_sum"), key=repr),
        "v_u": run(db, "SELECT * FROM v_u"),
        "totals": sorted(run(db, "SELECT * FROM totals"), key=repr),
        "v_totals": run(db, "SELECT * FROM v_totals"),
    }


def consistent(db: SwellDatabase) -> None:
    """Every view equals its query over the tables it reads, right now."""
    st = state(db)
    assert st["v_sum"] == sorted(run(db, "SELECT k, sum(v), count(*) FROM t GROUP BY k"), key=repr)
    assert st["v_u"] == st["u"]
    assert st["v_totals"] == run(db, "SELECT count(*), sum(total) FROM totals")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The schema and two committed epochs of rows, built once and copied per test."""
    path = tmp_path_factory.mktemp("rollback") / "data"
    d = open_db(path)
    try:
        for sql in SETUP:
            run(d, sql)
        run(d, "INSERT INTO t VALUES (1, 'a', 10), (2, 'b', 20)")
        run(d, "INSERT INTO u VALUES (1)")
        run(d, "FLUSH")
        run(d, "FLUSH")  # the sink's rows reach `totals`
    finally:
        d.close()
    return path


@pytest.fixture()
def db(template: Path, tmp_path: Path) -> Iterator[SwellDatabase]:
    shutil.copytree(template, tmp_path / "data")
    d = open_db(tmp_path / "data")
    yield d
    d.close()


@pytest.mark.parametrize("point", faults.POINTS)
def test_failure_at_each_point_rolls_back_and_the_retry_applies_every_write(
    db: SwellDatabase, point: str
) -> None:
    before = state(db)
    epoch = db.runtime.epoch
    run(db, "INSERT INTO t VALUES (3, 'a', 5), (1, 'a', 11)")
    run(db, "DELETE FROM t WHERE id = 2")
    run(db, "INSERT INTO u VALUES (2), (3)")
    faults.configure(fail=f"{point}:1")
    with pytest.raises(EpochFailed) as ei:
        run(db, "FLUSH")
    e = ei.value
    assert e.sqlstate == "XX000"
    assert "InjectedFailure" not in e.message and "Traceback" not in (e.detail or "")
    if point in ("checkpoint_written", "post_committed"):
        assert e.message.startswith(f"epoch {epoch + 1} failed after its checkpoint: internal")
        assert db.runtime.epoch == epoch + 1  # durable before the failure: recovered from it
    else:
        assert e.message.startswith(f"epoch {epoch + 1} failed and was rolled back: internal")
        assert db.runtime.epoch == epoch
        assert state(db) == before  # nothing of the failed epoch is visible anywhere
    consistent(db)
    run(db, "FLUSH")
    run(db, "FLUSH")
    after = state(db)
    assert after["t"] == [(1, "a", 11), (3, "a", 5)]
    assert after["u"] == [(3,)]
    assert after["v_sum"] == [("a", 16, 2)]
    assert after["totals"] == [("a", 16)]  # sunk exactly once
    consistent(db)
    assert db.runtime.failure is None


def test_restart_after_a_rollback_sees_the_same_data(db: SwellDatabase, tmp_path: Path) -> None:
    run(db, "INSERT INTO t VALUES (5, 'c', 1)")
    faults.configure(fail="view_stepped:2")
    with pytest.raises(EpochFailed):
        run(db, "FLUSH")
    faults.configure()
    db.close()
    d2 = open_db(tmp_path / "data")
    try:
        run(d2, "FLUSH")
        run(d2, "FLUSH")
        assert ("c", 1, 1) in state(d2)["v_sum"]
        assert ("c", 1) in state(d2)["totals"]
        consistent(d2)
    finally:
        d2.close()


def test_shutting_down_while_every_barrier_fails_keeps_the_writes(
    db: SwellDatabase, tmp_path: Path
) -> None:
    run(db, "INSERT INTO t VALUES (6, 'd', 4)")
    faults.configure(fail="view_stepped:1+")
    db.close()  # the final barrier fails: nothing is rebuilt, the WAL keeps the row
    faults.configure()
    d2 = open_db(tmp_path / "data")
    try:
        run(d2, "FLUSH")
        assert ("d", 4, 1) in state(d2)["v_sum"]
        consistent(d2)
    finally:
        d2.close()


def test_a_deterministic_failure_keeps_the_server_usable(db: SwellDatabase) -> None:
    before = state(db)
    faults.configure(fail="view_stepped:1+")  # every barrier fails from now on
    run(db, "INSERT INTO u VALUES (7)")  # acknowledged: durable in the WAL
    for attempt in (1, 2, 3):
        with pytest.raises(EpochFailed) as ei:
            run(db, "FLUSH")
        assert f"Failed attempts in a row: {attempt}" in (ei.value.detail or "")
        assert state(db) == before  # reads serve the last committed epoch
    f = db.runtime.failure
    assert f is not None and f.where == 'materialized view "v_sum"' and f.recovered
    events = run(
        db,
        "SELECT info->>'attempts', info->>'where' FROM rw_catalog.rw_event_logs "
        "WHERE event_type = 'COLLECT_BARRIER_FAIL'",
    )
    assert sorted(events) == [(str(i), 'materialized view "v_sum"') for i in (1, 2, 3)]
    assert db.runtime.stats()["failed_epochs"] == 3
    # the timer loop backs off: before retry_at a timer barrier does not even try
    assert f.retry_at > time.monotonic()
    assert db.runtime.barrier() == db.runtime.epoch and db.runtime.failure is f
    run(db, "INSERT INTO u VALUES (8)")
    faults.configure()
    run(db, "FLUSH")
    assert run(db, "SELECT * FROM v_u") == [(3,)]
    assert db.runtime.failure is None
    consistent(db)


def test_a_failed_recovery_is_repeated_before_the_next_epoch(db: SwellDatabase) -> None:
    before = state(db)
    run(db, "INSERT INTO u VALUES (4)")
    faults.configure(fail="view_stepped:1,recovery:1")  # the rollback's recovery fails
    with pytest.raises(EpochFailed) as ei:
        run(db, "FLUSH")
    assert "Recovering from the last checkpoint failed too" in (ei.value.detail or "")
    assert db.runtime.failure is not None and not db.runtime.failure.recovered
    run(db, "FLUSH")  # recovers first, then runs the epoch
    assert db.runtime.failure is None
    assert state(db)["v_u"] == [(before["u"][0][0] + 1,)]
    consistent(db)


def test_dropping_the_failing_view_unblocks_the_others(db: SwellDatabase) -> None:
    faults.configure(fail="view_stepped@v_sum:1+")  # a bug in one job
    run(db, "INSERT INTO u VALUES (9)")
    with pytest.raises(EpochFailed, match='materialized view "v_sum"'):
        run(db, "FLUSH")
    with pytest.raises(EpochFailed):
        run(db, "CREATE TABLE other (a INT)")  # DDL runs the failing barrier too
    assert db.catalog.find("other") is None
    run(db, "DROP MATERIALIZED VIEW v_sum")  # its barrier runs without the failing view
    assert db.runtime.failure is None
    assert run(db, "SELECT * FROM v_u") == [(2,)]


def test_a_failed_ddl_barrier_undoes_the_ddl(db: SwellDatabase) -> None:
    faults.configure(fail="checkpoint_batch:1")
    with pytest.raises(EpochFailed):
        run(db, "CREATE MATERIALIZED VIEW v_new AS SELECT count(*) FROM t")
    assert db.catalog.find("v_new") is None
    run(db, "CREATE MATERIALIZED VIEW v_new AS SELECT count(*) AS n FROM t")
    assert run(db, "SELECT * FROM v_new") == [(2,)]


def test_bad_fault_specs_are_refused() -> None:
    with pytest.raises(ValueError, match="view_stepped"):
        faults.configure(crash="no_such_point")
    with pytest.raises(ValueError):
        faults.configure(crash="view_stepped:2+")  # repeating only makes sense for raises
    with pytest.raises(ValueError):
        faults.configure(fail="view_stepped:0")
    with pytest.raises(ValueError):
        faults.configure(fail="view_stepped@:1")
