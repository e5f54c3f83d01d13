"""A server at --parallelism 2: views run their aggregation and join as actors in two
worker processes, give the answers of their queries, survive a crash of the server, and a
worker killed with SIGKILL costs one epoch (rolled back, applied again), never a row."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import psycopg
import pytest

from harness.server import SwellServer

VIEWS = {
    "by_user": "SELECT user_id, count(*) AS n, sum(amount) AS total FROM orders GROUP BY user_id",
    "named": "SELECT o.id, u.name, o.amount FROM orders o JOIN users u ON o.user_id = u.id",
}


def workers_of(pid: int) -> list[int]:
    """The worker processes (children running worker_main) of the server `pid`."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"engine.stream.parallel.worker_main" in cmd:
            out.append(int(d.name))
    return sorted(out)


def check(c: psycopg.Connection) -> None:  # type: ignore[type-arg]
    for name, q in VIEWS.items():
        got = sorted(c.execute(f"SELECT * FROM {name}").fetchall())
        assert got == sorted(c.execute(q).fetchall()), name
        assert got, name


@pytest.mark.swell_server(parallelism=2)
def test_parallel_views_through_the_server(fresh_server: SwellServer) -> None:
    with fresh_server.connect() as c:
        c.execute("CREATE TABLE users (id INT PRIMARY KEY, name VARCHAR)")
        c.execute("CREATE TABLE orders (id INT PRIMARY KEY, user_id INT, amount INT)")
        c.execute("INSERT INTO users SELECT g, 'u' || g::varchar FROM generate_series(0, 49) g")
        for name, q in VIEWS.items():
            c.execute(f"CREATE MATERIALIZED VIEW {name} AS {q}")
        c.execute("INSERT INTO orders SELECT g, g % 60, g % 17 FROM generate_series(1, 3000) g")
        c.execute("FLUSH")
        check(c)
        assert fresh_server.pid is not None
        assert len(workers_of(fresh_server.pid)) == 2
    fresh_server.restart(crash=True)
    with fresh_server.connect() as c:
        check(c)
        assert fresh_server.pid is not None
        victim = workers_of(fresh_server.pid)[0]
        before = c.execute("SELECT sum(n) FROM by_user").fetchone()
        os.kill(victim, signal.SIGKILL)
        c.execute("DELETE FROM orders WHERE id % 3 = 0")
        # reads answer meanwhile: the last committed epoch
        assert c.execute("SELECT sum(n) FROM by_user").fetchone() in (before, (2000,))
        try:
            c.execute("FLUSH")
        except psycopg.Error as e:  # this FLUSH's epoch met the dead worker
            assert "was lost" in str(e)
        c.execute("FLUSH")
        check(c)
        assert c.execute("SELECT sum(n) FROM by_user").fetchone() == (2000,)
        assert victim not in workers_of(fresh_server.pid)
