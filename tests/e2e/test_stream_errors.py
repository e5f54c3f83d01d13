"""A data error in one materialized view neither stops the dataflow nor loses other views'
rows: the failing value is NULL, FLUSH succeeds with a WARNING naming the event log, and
the same holds after kill -9 and a restart (the epoch is replayed from the WAL).

Ad-hoc queries over the same rows still raise PostgreSQL's error."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from harness.server import SwellServer

SETUP = [
    "CREATE TABLE t (id INT PRIMARY KEY, a INT, b INT)",
    "CREATE MATERIALIZED VIEW v_div AS SELECT id, a / b AS q FROM t",
    "CREATE TABLE u (x INT)",
    "CREATE MATERIALIZED VIEW v_u AS SELECT count(*) AS n FROM u",
]


def _flush(c: psycopg.Connection[Any]) -> list[tuple[str | None, str, str]]:
    """FLUSH; the notices it got as (severity, message, detail)."""
    notices: list[tuple[str | None, str, str]] = []

    def keep(d: psycopg.errors.Diagnostic) -> None:  # fields live only during the call
        notices.append((d.severity_nonlocalized, d.message_primary or "", d.message_detail or ""))

    c.add_notice_handler(keep)
    c.execute("FLUSH")
    c.remove_notice_handler(keep)
    return notices


def _views(c: psycopg.Connection[Any]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    return (
        sorted(c.execute("SELECT id, q FROM v_div").fetchall()),
        c.execute("SELECT n FROM v_u").fetchall(),
    )


def test_division_by_zero_does_not_stop_other_views(fresh_server: SwellServer) -> None:
    with fresh_server.connect() as c:
        for q in SETUP:
            c.execute(q)
        c.execute("INSERT INTO t VALUES (2, 1, 0)")
        c.execute("INSERT INTO u VALUES (1)")
        notices = _flush(c)
        assert [n[0] for n in notices] == ["WARNING"]
        assert "1 row(s) failed" in notices[0][1]
        assert "rw_catalog.rw_event_logs" in notices[0][1]
        assert "v_div: (a / b): division by zero" in notices[0][2]
        assert _views(c) == ([(2, None)], [(1,)])
        assert _flush(c) == []  # nothing failed since the last FLUSH
        row = c.execute(
            "SELECT event_type, job_name, expression, error, count, info->>'sqlstate' "
            "FROM rw_catalog.rw_event_logs"
        ).fetchall()
        assert row == [("EXPRESSION_ERROR", "v_div", "(a / b)", "division by zero", 1, "22012")]
        with pytest.raises(psycopg.errors.DivisionByZero):
            c.execute("SELECT a / b FROM t")

    fresh_server.restart(crash=True)
    with fresh_server.connect() as c:
        assert _views(c) == ([(2, None)], [(1,)])
        c.execute("INSERT INTO t VALUES (3, 6, 2)")
        c.execute("INSERT INTO u VALUES (2)")
        assert _flush(c) == []
        assert _views(c) == ([(2, None), (3, 3)], [(2,)])
        c.execute("UPDATE t SET b = 1 WHERE id = 2")  # back in range: the value returns
        _flush(c)
        assert _views(c) == ([(2, 1), (3, 3)], [(2,)])


@pytest.mark.swell_server(barrier_interval_ms=600_000)  # only FLUSH and DDL step the flows
def test_unflushed_error_survives_kill(fresh_server: SwellServer) -> None:
    """The bad row is acknowledged but not yet through a barrier when the process dies:
    the restarted server replays it from the WAL through both views."""
    with fresh_server.connect() as c:
        for q in SETUP:
            c.execute(q)
        c.execute("INSERT INTO t VALUES (2, 1, 0)")
        c.execute("INSERT INTO u VALUES (1)")
    fresh_server.restart(crash=True)
    with fresh_server.connect() as c:
        _flush(c)
        assert _views(c) == ([(2, None)], [(1,)])
        n = c.execute(
            "SELECT sum(count) FROM rw_catalog.rw_event_logs WHERE job_name = 'v_div'"
        ).fetchone()
        assert n == (1,)
