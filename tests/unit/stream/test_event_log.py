"""The runtime's event log: counting per (job, expression, SQLSTATE), rate-limited log
lines, FLUSH's warning, and rw_catalog.rw_event_logs for views and sinks (in process)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.database import Config, open_database
from engine.errors import DivisionByZero, InvalidTextRepresentation
from engine.stream import event_log
from engine.stream.event_log import EventLog, flush_warning


def test_kinds_count_and_keep_latest_message() -> None:
    ev = EventLog()
    job = ev.for_job(16400, "v")
    job.report("s::Int32", InvalidTextRepresentation('invalid input ... "x"'), 2, "'x'")
    job.report("s::Int32", InvalidTextRepresentation('invalid input ... "y"'), 1, "'y'")
    job.report("(a / b)", DivisionByZero("division by zero"), 3, "1, 0")
    assert ev.total == 6
    kinds = {(k.expression, k.sqlstate): (k.count, k.error, k.sample) for k in ev.kinds.values()}
    assert kinds == {
        ("s::Int32", "22P02"): (3, 'invalid input ... "y"', "'y'"),
        ("(a / b)", "22012"): (3, "division by zero", "1, 0"),
    }


def test_log_lines_are_rate_limited(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    clock = [1000.0]
    monkeypatch.setattr(event_log.time, "time", lambda: clock[0])
    ev = EventLog()
    job = ev.for_job(1, "v")
    with caplog.at_level(logging.WARNING, logger="swell.stream.errors"):
        for _ in range(5):
            job.report("(a / b)", DivisionByZero("division by zero"), 1, "1, 0")
        clock[0] += event_log.LOG_INTERVAL_S + 1
        job.report("(a / b)", DivisionByZero("division by zero"), 1, "1, 0")
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert "1 row(s) failed" in lines[0] and "5 row(s) failed" in lines[1]  # 4 + 1 since


def test_flush_warning_covers_failures_since_a_point() -> None:
    ev = EventLog()
    assert flush_warning(ev, 0) == (0, None)
    ev.for_job(1, "v1").report("(a / b)", DivisionByZero("division by zero"), 2, "1, 0")
    total, warning = flush_warning(ev, 0)
    assert total == 2 and warning is not None
    assert warning[0].startswith("2 row(s) failed") and "rw_catalog.rw_event_logs" in warning[0]
    assert warning[1] == "v1: (a / b): division by zero (2 row(s) so far)"
    assert flush_warning(ev, total) == (2, None)


@pytest.fixture
def session(tmp_path: Path) -> Iterator[Any]:
    db = open_database(Config(data_dir=tmp_path, barrier_interval_ms=60_000))
    try:
        yield db.connect("root", "dev")
    finally:
        db.close()


def _run(s: Any, sql: str) -> Any:
    return s.execute_simple(sql)[-1]


def test_views_and_sinks_record_their_errors(session: Any) -> None:
    s = session
    _run(s, "CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)")
    _run(s, "CREATE MATERIALIZED VIEW v AS SELECT id, a / b AS q FROM t")
    _run(s, "CREATE SINK k AS SELECT id, a * b AS p FROM t WITH (connector = 'blackhole')")
    _run(s, "INSERT INTO t VALUES (1, 1, 0), (2, 2147483647, 2)")
    res = _run(s, "FLUSH")
    assert [n.severity for n in res.notices] == ["WARNING"]
    assert res.notices[0].message.startswith("2 row(s) failed")
    rows = _run(
        s,
        "SELECT job_name, expression, error, count, info FROM rw_catalog.rw_event_logs "
        "ORDER BY job_name",
    ).rows
    assert [r[:4] for r in rows] == [
        ("k", "(a * b)", "integer out of range", 1),
        ("v", "(a / b)", "division by zero", 1),
    ]
    info = json.loads(rows[1][4])
    assert info["sqlstate"] == "22012" and info["sample"] == "1, 0" and info["job_name"] == "v"
    assert _run(s, "SELECT * FROM v ORDER BY id").rows == [(1, None), (2, 1073741823)]
    # a second session sees no warning for failures before it connected
    other = s.db.connect("root", "dev")
    assert _run(other, "FLUSH").notices == []
    assert _run(s, "FLUSH").notices == []


def test_aggregate_out_of_range_is_null_until_back_in_range(session: Any) -> None:
    s = session
    big = "6" + "0" * 27
    _run(s, "CREATE TABLE n (id INT PRIMARY KEY, k INT, x NUMERIC)")
    _run(s, "CREATE MATERIALIZED VIEW v AS SELECT k, sum(x) AS s, count(*) AS c FROM n GROUP BY k")
    _run(s, f"INSERT INTO n VALUES (1, 1, {big}), (2, 1, {big}), (3, 2, 5)")
    assert _run(s, "FLUSH").notices[0].severity == "WARNING"
    rows = _run(s, "SELECT k, s, c FROM v ORDER BY k").rows
    assert [(k, None if v is None else int(v), c) for k, v, c in rows] == [
        (1, None, 2),
        (2, 5, 1),
    ]
    _run(s, "DELETE FROM n WHERE id = 2")
    assert _run(s, "FLUSH").notices == []  # the old value's failure is not counted again
    rows = _run(s, "SELECT k, s FROM v ORDER BY k").rows
    assert [(k, int(v)) for k, v in rows] == [(1, int(big)), (2, 5)]
    err = _run(s, "SELECT expression, error, count FROM rw_event_logs").rows
    assert err == [("sum($1)", "numeric field overflow", 1)]


def test_emit_on_window_close_aggregate_out_of_range_is_null(session: Any) -> None:
    s = session
    big = "6" + "0" * 27
    _run(
        s,
        "CREATE TABLE o (id INT PRIMARY KEY, x NUMERIC, ts TIMESTAMP, "
        "WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)",
    )
    _run(
        s,
        "CREATE MATERIALIZED VIEW w AS SELECT window_start, sum(x) AS s, count(*) AS n "
        "FROM TUMBLE(o, ts, INTERVAL '1' MINUTE) GROUP BY window_start EMIT ON WINDOW CLOSE",
    )
    _run(
        s,
        f"INSERT INTO o VALUES (1, {big}, '2024-01-01 00:00:10'), "
        f"(2, {big}, '2024-01-01 00:00:20'), (3, 1, '2024-01-01 00:01:20'), "
        "(4, 1, '2024-01-01 00:05:00')",
    )
    assert _run(s, "FLUSH").notices[0].severity == "WARNING"
    rows = _run(s, "SELECT s, n FROM w ORDER BY window_start").rows
    assert [(None if v is None else int(v), n) for v, n in rows] == [(None, 2), (1, 1)]
    assert _run(s, "SELECT job_name, count FROM rw_event_logs").rows == [("w", 1)]


def test_sink_into_table_value_out_of_column_range_is_null(session: Any) -> None:
    """Before, the write failed and was retried forever, holding every FLUSH."""
    s = session
    _run(s, "CREATE TABLE big (id INT PRIMARY KEY, x BIGINT)")
    _run(s, "CREATE TABLE small (id INT PRIMARY KEY, x INT)")
    _run(s, "CREATE SINK sk INTO small AS SELECT id, x FROM big")
    _run(s, "INSERT INTO big VALUES (1, 5), (2, 1099511627776)")
    assert _run(s, "FLUSH").notices[0].severity == "WARNING"
    assert _run(s, "SELECT * FROM small ORDER BY id").rows == [(1, 5), (2, None)]
    assert _run(s, "SELECT job_name, expression, error FROM rw_event_logs").rows == [
        ("sk", "x::Int32", "integer out of range")
    ]


def test_roles_see_failures_of_jobs_they_may_read(session: Any) -> None:
    """Messages and samples carry row values: a role without SELECT on the view sees
    neither its event-log rows nor its name in FLUSH's warning (only the count)."""
    s = session
    _run(s, "CREATE USER alice")
    _run(s, "CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)")
    _run(s, "CREATE MATERIALIZED VIEW secret_v AS SELECT id, a / b AS q FROM t")
    alice = s.db.connect("alice", "dev")
    _run(s, "INSERT INTO t VALUES (1, 42, 0)")
    res = _run(alice, "FLUSH")
    assert res.notices[0].message.startswith("1 row(s) failed")
    assert "secret_v" not in (res.notices[0].detail or "")
    sql = "SELECT job_name, count FROM rw_catalog.rw_event_logs"
    assert _run(alice, sql).rows == []
    assert _run(s, sql).rows == [("secret_v", 1)]
    _run(s, "GRANT SELECT ON secret_v TO alice")
    assert _run(alice, sql).rows == [("secret_v", 1)]
    _run(s, "DROP MATERIALIZED VIEW secret_v")  # the log keeps it, for superusers only
    assert _run(alice, sql).rows == []
    assert _run(s, sql).rows == [("secret_v", 1)]
