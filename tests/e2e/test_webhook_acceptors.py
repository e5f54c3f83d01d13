"""Webhook acceptor processes (`--webhook-workers 2`) against a real server.

The acceptors share the webhook port (SO_REUSEPORT) and hand decoded batches to the
server, which answers only after the WAL fsync. Checked here: rows arrive and views see
them; error statuses come from the acceptors as from the in-process listener; every
acknowledged event survives `kill -9` of the server (and the acceptors go with it); an
acceptor killed with SIGKILL is restarted and the port keeps answering; a dropped table
is noticed by an acceptor that had it cached.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from collections.abc import Callable
from typing import TypeVar

import pytest

from harness.seeds import wait_webhook
from harness.server import SwellServer
from harness.webhook_client import post_all, status

T = TypeVar("T")
AUTH = {"Content-Type": "application/json", "Authorization": "TEST_WEBHOOK"}

pytestmark = pytest.mark.swell_server(
    barrier_interval_ms=5000, extra_args=["--webhook-workers", "2"]
)

TABLE = (
    "CREATE TABLE {t} (data JSONB) WITH (connector = 'webhook') "
    "VALIDATE AS secure_compare(headers->>'authorization', 'TEST_WEBHOOK')"
)


def acceptor_pids(server_pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    stat = f.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if int(stat[1]) == server_pid and b"connectors.webhook.acceptor" in cmd:
                out.append(int(d))
    return sorted(out)


def wait_for(pred: Callable[[], T], timeout: float = 20.0) -> T:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = pred()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError("condition not reached")


def test_acceptors_acks_survive_kill9_and_errors(fresh_server: SwellServer) -> None:
    srv = fresh_server
    wait_webhook(srv)
    assert srv.pid is not None
    assert len(wait_for(lambda: len(acceptor_pids(srv.pid)) == 2 and acceptor_pids(srv.pid))) == 2
    with srv.connect() as c:
        c.execute(TABLE.format(t="acc_t"))
        c.execute("CREATE MATERIALIZED VIEW acc_mv AS SELECT (data->>'i')::INT AS i FROM acc_t")
        c.execute("CREATE TABLE acc_typed (id INT, name VARCHAR) WITH (connector = 'webhook')")
        c.execute(
            "CREATE TABLE acc_bat (data JSONB) WITH (connector = 'webhook', is_batched = true)"
        )
    url = srv.webhook_url("acc_t")
    n = 300
    bodies = [json.dumps({"i": i}).encode() for i in range(n)]
    codes = asyncio.run(post_all(url, bodies, AUTH, concurrency=50))
    assert codes == [200] * n
    # errors, answered by whichever acceptor got the connection
    assert status(url, b"{not json", AUTH) == (422, {"error": "failed to parse request body"})
    assert status(url, b'{"a": 1}', {"Authorization": "nope"})[0] == 401
    assert status(srv.webhook_url("nope"), b"{}", AUTH)[0] == 404
    assert status(url, b"{}", AUTH, method="GET")[0] == 405
    typed = srv.webhook_url("acc_typed")
    st, body = status(typed, b'{"id": "one"}', {})
    assert st == 422 and body["error"].startswith("failed to decode webhook JSON payload")
    assert status(typed, b'{"id": 7, "name": "x"}', {})[0] == 200
    bat = srv.webhook_url("acc_bat")
    assert status(bat, b'{"n": 1}\n{broken\n', {}) == (
        422,
        {"error": "failed to parse request body: line 2 is not valid JSON"},
    )
    assert status(bat, b'{"n": 1}\n{"n": 2}\n', {})[0] == 200
    old = acceptor_pids(srv.pid)
    srv.kill9()  # right after the last 200; the barrier (5 s) has not run: rows are in the WAL
    wait_for(lambda: not any(os.path.exists(f"/proc/{p}") for p in old), 10)
    srv.start()
    wait_webhook(srv)
    with srv.connect() as c:
        c.execute("FLUSH")
        got = sorted(r[0] for r in c.execute("SELECT i FROM acc_mv").fetchall())
        assert got == list(range(n))  # all present, none twice
        assert c.execute("SELECT id, name FROM acc_typed").fetchall() == [(7, "x")]
        assert sorted(c.execute("SELECT (data->>'n')::INT FROM acc_bat").fetchall()) == [
            (1,),
            (2,),
        ]


@pytest.mark.swell_server(barrier_interval_ms=100, extra_args=["--webhook-workers", "2"])
def test_killed_acceptor_restarts_and_ddl_is_seen(fresh_server: SwellServer) -> None:
    srv = fresh_server
    wait_webhook(srv)
    assert srv.pid is not None
    pids = wait_for(lambda: len(acceptor_pids(srv.pid)) == 2 and acceptor_pids(srv.pid))
    with srv.connect() as c:
        c.execute(TABLE.format(t="k_t"))
    url = srv.webhook_url("k_t")
    assert asyncio.run(post_all(url, [b'{"a": 1}'] * 20, AUTH)) == [200] * 20
    os.kill(pids[0], signal.SIGKILL)
    new = wait_for(lambda: (p := acceptor_pids(srv.pid)) and len(p) == 2 and pids[0] not in p and p)
    assert pids[1] in new
    # every request is answered (by the survivor, then by both)
    assert asyncio.run(post_all(url, [b'{"a": 2}'] * 50, AUTH)) == [200] * 50
    with srv.connect() as c:
        c.execute("FLUSH")
        assert c.execute("SELECT count(*) FROM k_t").fetchone() == (70,)
        c.execute("DROP TABLE k_t")  # both acceptors had it cached
    assert {status(url, b"{}", AUTH)[0] for _ in range(6)} == {404}
    assert "webhook acceptor exited" in srv.log_path.read_text()
