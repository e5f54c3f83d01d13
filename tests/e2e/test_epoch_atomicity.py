"""Atomic epochs against a real server: a failing barrier, then kill -9; a crash mid-barrier.

`SWELL_FAIL_AT` makes every barrier fail inside a view (a deterministic bug): the server
stays up, DML and webhook writes are still acknowledged, FLUSH reports the rolled-back epoch without internals, reads show the last
committed epoch (no table ahead of its views) and the traceback is in the log. After
`kill -9` and a restart without the fault every acknowledged write is there.
`SWELL_CRASH_AT` exits in the middle of a checkpoint; the restart recovers the same way.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from engine import faults
from harness.seeds import wait_webhook
from harness.server import SwellServer

SETUP = [
    "CREATE TABLE ea_w (data JSONB) WITH (connector = 'webhook')",
    "CREATE MATERIALIZED VIEW ea_vw AS SELECT count(*) AS n FROM ea_w",
    "CREATE TABLE ea_t (id INT PRIMARY KEY, a INT)",
    "CREATE MATERIALIZED VIEW ea_vt AS SELECT count(*) AS n, sum(a) AS s FROM ea_t",
    "CREATE TABLE ea_u (x INT)",
    "CREATE MATERIALIZED VIEW ea_vu AS SELECT count(*) AS n FROM ea_u",
    "INSERT INTO ea_t VALUES (1, 10)",
    "FLUSH",
]


def one(c: psycopg.Connection[Any], sql: str) -> Any:
    row = c.execute(sql).fetchone()
    assert row is not None
    return row[0] if len(row) == 1 else row


def consistent(c: psycopg.Connection[Any]) -> tuple[int, int]:
    t, u = one(c, "SELECT count(*) FROM ea_t"), one(c, "SELECT count(*) FROM ea_u")
    assert one(c, "SELECT n FROM ea_vt") == t
    assert one(c, "SELECT n FROM ea_vu") == u
    return t, u


def post(srv: SwellServer, table: str, body: dict[str, Any]) -> int:
    req = urllib.request.Request(
        srv.webhook_url(table),
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return int(r.status)


def test_a_failing_barrier_rolls_back_and_kill_9_keeps_acknowledged_writes(
    make_server: Callable[..., SwellServer],
) -> None:
    srv = make_server(barrier_interval_ms=100)
    with srv.connect() as c:
        for sql in SETUP:
            c.execute(sql)
    srv.stop()
    srv.env[faults.FAIL_ENV] = "view_stepped:1+"
    srv.start()
    wait_webhook(srv)
    assert post(srv, "ea_w", {"i": 1}) == 200  # acknowledged: in the WAL
    with srv.connect() as c:
        c.execute("INSERT INTO ea_t VALUES (2, 20)")
        c.execute("INSERT INTO ea_u VALUES (1)")
        with pytest.raises(psycopg.errors.InternalError_) as ei:
            c.execute("FLUSH")
        msg = ei.value.diag.message_primary or ""
        assert "failed and was rolled back: internal error" in msg, msg
        assert 'materialized view "ea_vw"' in msg  # the first view of the barrier
        assert "Traceback" not in str(ei.value) and "InjectedFailure" not in str(ei.value)
        assert consistent(c) == (1, 0)  # the last committed epoch, everywhere
        assert one(c, "SELECT count(*) FROM ea_w") == one(c, "SELECT n FROM ea_vw") == 0
        time.sleep(1.0)  # the timer retries (and fails) meanwhile; the server stays up
        assert srv.is_running
        assert consistent(c) == (1, 0)
        c.execute("INSERT INTO ea_t VALUES (3, 30)")
    log = srv.log_text()
    assert "rolling back to the last checkpoint" in log and "Traceback" in log
    srv.kill9()
    srv.env.pop(faults.FAIL_ENV)
    srv.start()
    with srv.connect() as c:
        c.execute("FLUSH")
        assert consistent(c) == (3, 1)
        assert one(c, "SELECT s FROM ea_vt") == 60
        assert one(c, "SELECT count(*) FROM ea_w") == one(c, "SELECT n FROM ea_vw") == 1


def test_a_crash_in_the_middle_of_a_checkpoint_recovers_every_write(
    make_server: Callable[..., SwellServer],
) -> None:
    srv = make_server(barrier_interval_ms=3_600_000)  # barriers only by FLUSH and DDL
    with srv.connect() as c:
        for sql in SETUP:
            c.execute(sql)
    srv.stop()
    srv.env[faults.CRASH_ENV] = "checkpoint_batch:1"
    srv.start()
    with srv.connect() as c:
        c.execute("INSERT INTO ea_t VALUES (2, 20)")
        c.execute("INSERT INTO ea_u VALUES (1)")
        # FLUSH builds the checkpoint, and the process exits before writing it
        with pytest.raises(psycopg.OperationalError):
            c.execute("FLUSH")
    deadline = time.monotonic() + 30
    while srv.returncode is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.returncode == faults.CRASH_EXIT_CODE, srv.log_tail()
    assert "exiting at checkpoint_batch" in srv.log_text()
    srv.kill9()  # reap
    srv.env.pop(faults.CRASH_ENV)
    srv.start()
    with srv.connect() as c:
        c.execute("FLUSH")
        assert consistent(c) == (2, 1)
