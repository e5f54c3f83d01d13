"""A server at --parallelism 2: views run their aggregation and join as actors in two
worker processes, give the answers of their queries, survive a crash of the server, and a
worker killed with SIGKILL costs one epoch (rolled back, applied again), never a row."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest

from engine import faults
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


@pytest.mark.swell_server(parallelism=2, extra_args=["--max-heartbeat-interval-secs", "4"])
def test_a_hung_worker_is_declared_lost_and_the_job_recovers(fresh_server: SwellServer) -> None:
    """SIGSTOP, not SIGKILL: the worker is alive but silent. The barrier gives up on it
    after --max-heartbeat-interval-secs, kills it, and the job recovers as after a crash;
    the event log says why. A worker stopped and continued before the timeout is kept."""
    with fresh_server.connect() as c:
        c.execute("CREATE TABLE users (id INT PRIMARY KEY, name VARCHAR)")
        c.execute("CREATE TABLE orders (id INT PRIMARY KEY, user_id INT, amount INT)")
        c.execute("INSERT INTO users SELECT g, 'u' || g::varchar FROM generate_series(0, 49) g")
        for name, q in VIEWS.items():
            c.execute(f"CREATE MATERIALIZED VIEW {name} AS {q}")
        c.execute("INSERT INTO orders SELECT g, g % 60, g % 17 FROM generate_series(1, 1000) g")
        c.execute("FLUSH")
        assert fresh_server.pid is not None
        short, long = workers_of(fresh_server.pid)
        # stopped briefly (under the timeout; a barrier may wait for it): nothing is lost
        os.kill(short, signal.SIGSTOP)
        time.sleep(0.5)
        os.kill(short, signal.SIGCONT)
        c.execute("INSERT INTO orders SELECT g, g % 60, 1 FROM generate_series(1001, 1500) g")
        c.execute("FLUSH")
        check(c)
        assert short in workers_of(fresh_server.pid)
        # stopped for good: declared lost at the timeout, replaced, the epoch applied again
        os.kill(long, signal.SIGSTOP)
        c.execute("INSERT INTO orders SELECT g, g % 60, 2 FROM generate_series(1501, 2500) g")
        try:
            c.execute("FLUSH")
        except psycopg.Error as e:  # this FLUSH's epoch waited for the stopped worker
            assert "no answer within 4 s" in str(e)
        c.execute("FLUSH")
        check(c)
        assert c.execute("SELECT sum(n) FROM by_user").fetchone() == (2500,)
        assert long not in workers_of(fresh_server.pid)
        assert len(workers_of(fresh_server.pid)) == 2
        lost = c.execute(
            "SELECT count(*) FROM rw_event_logs "
            "WHERE event_type = 'WORKER_LOST' AND info->>'reason' = 'timeout'"
        ).fetchone()
        assert lost == (1,)


def test_a_crash_between_a_commit_and_its_actor_files_keeps_the_epoch(
    make_server: Callable[..., SwellServer],
) -> None:
    """An epoch that rewrites many groups: each actor hands its checkpoint writes in as
    an SST file, which the server ingests after the commit batch. The server exits right
    after that batch (the files named, not yet ingested); the restart ingests them, and
    the views equal their queries with the epoch's rows in them, exactly once."""
    srv = make_server(parallelism=2, barrier_interval_ms=3_600_000)  # barriers by FLUSH
    with srv.connect() as c:
        c.execute("CREATE TABLE users (id INT PRIMARY KEY, name VARCHAR)")
        c.execute("CREATE TABLE orders (id INT PRIMARY KEY, user_id INT, amount INT)")
        c.execute("INSERT INTO users SELECT g, 'u' || g::varchar FROM generate_series(0, 49) g")
        for name, q in VIEWS.items():
            c.execute(f"CREATE MATERIALIZED VIEW {name} AS {q}")
        c.execute("INSERT INTO orders SELECT g, g, 1 FROM generate_series(1, 40000) g")
        c.execute("FLUSH")
    srv.stop()
    srv.env[faults.CRASH_ENV] = "checkpoint_pieces:1"
    srv.start()
    with srv.connect() as c:
        c.execute("UPDATE orders SET amount = 2 WHERE id % 2 = 0")  # acknowledged
        with pytest.raises(psycopg.OperationalError):
            c.execute("FLUSH")
    deadline = time.monotonic() + 30
    while srv.returncode is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.returncode == faults.CRASH_EXIT_CODE, srv.log_tail()
    assert any((srv.data_dir / "state.ingest").iterdir())  # the epoch's actor files
    srv.kill9()  # reap
    srv.env.pop(faults.CRASH_ENV)
    srv.start()
    with srv.connect() as c:
        check(c)
        assert c.execute("SELECT sum(total) FROM by_user").fetchone() == (60000,)
        c.execute("DELETE FROM orders WHERE id % 4 = 0")
        c.execute("FLUSH")
        check(c)
    assert not any((srv.data_dir / "state.ingest").iterdir())


def _copy(c: psycopg.Connection, table: str, data: bytes, fmt: str = "csv") -> None:  # type: ignore[type-arg]
    with c.cursor().copy(f"COPY {table} FROM STDIN WITH (FORMAT {fmt})") as cp:
        for i in range(0, len(data), 1 << 16):
            cp.write(data[i : i + (1 << 16)])


@pytest.mark.swell_server(parallelism=2)
def test_a_large_copy_is_decoded_by_the_workers(fresh_server: SwellServer) -> None:
    """A COPY of over a megabyte of plain CSV or text is decoded by the two workers (one
    request each, seen on a table no parallel view reads), and gives the rows the server's
    own decoding gives: with NULLs, a header, quoted line ends (decoded by the server),
    and a bad value, reported with its line as PostgreSQL does; a dead worker leaves the
    decoding to the server and its job recovers."""
    n = 60_000
    lines = [f"{i},{i % 97},{i / 8},name{i % 13}\n" for i in range(n)]
    data = "".join(lines).encode()
    assert len(data) > 1 << 20
    with fresh_server.connect() as c:
        c.execute("CREATE TABLE t (id BIGINT, k INT, v DOUBLE PRECISION, s VARCHAR) APPEND ONLY")
        c.execute("CREATE TABLE other (id BIGINT, k INT, v DOUBLE PRECISION, s VARCHAR)")
        q = "SELECT k, count(*) AS n, sum(v) AS sv, count(s) AS ns FROM t GROUP BY k"
        c.execute(f"CREATE MATERIALIZED VIEW agg AS {q}")
        c.execute("FLUSH")

        def requests() -> int:
            return int(c.execute("SELECT sum(requests) FROM rw_worker_nodes").fetchone()[0])

        before = requests()
        _copy(c, "other", data)  # no parallel view reads `other`: only the decoding asks
        assert requests() == before + 2
        _copy(c, "t", data)
        text = data.replace(b",", b"\t").replace(b"\tname0\n", b"\t\\N\n")  # NULL markers
        _copy(c, "t", text, "text")
        with c.cursor().copy("COPY t FROM STDIN WITH (FORMAT csv, HEADER)") as cp:
            cp.write(b"id,k,v,s\n" + data)
        _copy(c, "t", b'-1,1,0.5,"two\nlines"\n' + data)  # a quoted line end: the server's
        bad = b"".join(x.encode() for x in lines[:40_000]) + b"7,x,1,a\n" + data
        with pytest.raises(psycopg.errors.InvalidTextRepresentation) as err:
            _copy(c, "t", bad)
        assert "line 40001" in str(err.value)
        c.execute("FLUSH")
        got = sorted(c.execute("SELECT * FROM agg").fetchall())
        assert got == sorted(c.execute(q).fetchall())
        assert sum(r[1] for r in got) == 4 * n + 1
        assert c.execute("SELECT count(*) FROM t WHERE s IS NULL").fetchone() == (
            sum(1 for i in range(n) if i % 13 == 0),
        )
        assert c.execute("SELECT count(*), sum(id) FROM other").fetchone() == (
            n,
            n * (n - 1) // 2,
        )
        assert fresh_server.pid is not None
        os.kill(workers_of(fresh_server.pid)[0], signal.SIGKILL)
        time.sleep(0.2)  # dead before the COPY asks it (else the COPY still finds it)
        _copy(c, "t", data)  # decoded by the server: the worker is gone
        for _ in range(2):
            try:
                c.execute("FLUSH")  # the job meets the lost worker and recovers
            except psycopg.Error as e:
                assert "was lost" in str(e)
        got = sorted(c.execute("SELECT * FROM agg").fetchall())
        assert got == sorted(c.execute(q).fetchall())
        assert sum(r[1] for r in got) == 5 * n + 1
