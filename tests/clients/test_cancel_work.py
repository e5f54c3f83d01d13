"""Cancellation and limits that hold during work, with real clients against a real server.

Every test asserts an order of events, never a duration: the statement is seen running
(pg_stat_activity), then it is cancelled / times out / loses its client, then it is seen
stopped with 57014, and what it was building is not there. The queries used would run for
minutes or hours unless stopped (a 27e9-row cross join), so a cancel that did not act
fails the test rather than slowing it.
"""

from __future__ import annotations

import asyncio
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

import asyncpg
import psycopg
import pytest

from harness.server import SwellServer

pytestmark = pytest.mark.clients

ENDLESS = "SELECT count(*) FROM cw_big x, cw_big y, cw_big z WHERE x.a + y.a < z.a"


@pytest.fixture(scope="module")
def big(server: SwellServer) -> str:
    with server.connect() as c:
        c.execute("DROP TABLE IF EXISTS cw_big")
        c.execute("CREATE TABLE cw_big (a int, b int)")
        c.execute("INSERT INTO cw_big SELECT g, g % 7 FROM generate_series(1, 3000) g")
        c.execute("DROP TABLE IF EXISTS cw_two")
        c.execute("CREATE TABLE cw_two (a int)")
        c.execute("INSERT INTO cw_two VALUES (1), (2)")
        c.execute("FLUSH")
    return "cw_big"


def _active(c: psycopg.Connection[Any], pid: int) -> str | None:
    row = c.execute("SELECT state, query FROM pg_stat_activity WHERE pid = %s", (pid,)).fetchone()
    return None if row is None or row[0] != "active" else str(row[1])


def _wait_for(cond: Callable[[], bool], what: str, limit_s: float = 120.0) -> None:
    """Poll until `cond()`; the limit only bounds a broken run, it asserts no duration."""
    end = time.monotonic() + limit_s
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.05)


def _in_thread(fn: Callable[[], Any]) -> tuple[threading.Thread, list[BaseException]]:
    errors: list[BaseException] = []

    def run() -> None:
        try:
            fn()
        except BaseException as e:  # noqa: BLE001 - inspected by the test
            errors.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, errors


def test_three_way_cross_join_is_stopped_by_statement_timeout(
    server: SwellServer, big: str
) -> None:
    with server.connect() as c:
        c.execute("SET statement_timeout = '1s'")
        with pytest.raises(psycopg.errors.QueryCanceled) as e:
            c.execute(ENDLESS).fetchall()
        assert str(e.value).startswith("canceling statement due to statement timeout")
        assert c.execute("SELECT count(*) FROM cw_big").fetchone() == (3000,)


def test_cancel_request_stops_the_cross_join(server: SwellServer, big: str) -> None:
    with server.connect() as c, server.connect() as watch:
        pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
        t, errors = _in_thread(lambda: c.execute(ENDLESS).fetchall())
        _wait_for(lambda: _active(watch, pid) is not None, "the join is running")
        c.cancel_safe()
        t.join(60)
        assert not t.is_alive()
        assert len(errors) == 1 and isinstance(errors[0], psycopg.errors.QueryCanceled)
        assert str(errors[0]).startswith("canceling statement due to user request")
        assert _active(watch, pid) is None
        assert c.execute("SELECT 1").fetchone() == (1,)


def test_client_disconnect_stops_its_query(server: SwellServer, big: str) -> None:
    with server.connect() as watch:
        c = server.connect()
        pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
        t, _ = _in_thread(lambda: c.execute(ENDLESS).fetchall())
        _wait_for(lambda: _active(watch, pid) is not None, "the join is running")
        # the client vanishes: its socket is shut down under it
        sock = socket.socket(fileno=c.fileno())
        sock.shutdown(socket.SHUT_RDWR)
        sock.detach()
        _wait_for(lambda: _active(watch, pid) is None, "the server stopped the query")
        t.join(60)
        row = watch.execute("SELECT count(*) FROM pg_stat_activity WHERE pid = %s", (pid,))
        _wait_for(lambda: row.fetchone() == (0,) or _gone(watch, pid), "the session closed")
        c.close()


def _gone(c: psycopg.Connection[Any], pid: int) -> bool:
    q = "SELECT count(*) FROM pg_stat_activity WHERE pid = %s"
    return c.execute(q, (pid,)).fetchone() == (0,)


def test_thirty_way_cross_join_is_refused_with_53200(server: SwellServer, big: str) -> None:
    tables = ", ".join(f"cw_two t{i}" for i in range(30))
    with server.connect() as c:
        with pytest.raises(psycopg.errors.OutOfMemory) as e:
            c.execute(f"SELECT * FROM {tables}").fetchall()
        assert str(e.value).startswith("out of memory")
        assert "query_memory_limit" in (e.value.diag.message_detail or "")
        # the counted form streams instead (bounded memory) and statement_timeout stops it
        c.execute("SET statement_timeout = '1s'")
        with pytest.raises(psycopg.errors.QueryCanceled):
            c.execute(f"SELECT count(*) FROM {tables}").fetchall()


def test_query_memory_limit_setting(server: SwellServer, big: str) -> None:
    with server.connect() as c:
        c.execute("SET query_memory_limit = '1MB'")
        assert c.execute("SHOW query_memory_limit").fetchone() == ("1MB",)
        with pytest.raises(psycopg.errors.OutOfMemory):
            c.execute("SELECT x.a, y.a FROM cw_big x, cw_big y ORDER BY 1, 2").fetchall()
        # hash aggregation and DISTINCT with too many groups fail the same way
        with pytest.raises(psycopg.errors.OutOfMemory):
            c.execute("SELECT x.a, y.a, count(*) FROM cw_big x, cw_big y GROUP BY 1, 2").fetchall()
        with pytest.raises(psycopg.errors.OutOfMemory):
            c.execute("SELECT DISTINCT x.a, y.a FROM cw_big x, cw_big y").fetchall()
        assert c.execute("SELECT 1").fetchone() == (1,)  # the session goes on
        c.execute("SET query_memory_limit = 0")  # off
        assert c.execute("SELECT count(*) FROM cw_big x, cw_big y").fetchone() == (9_000_000,)
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            c.execute("SET query_memory_limit = 'lots'")
        c.execute("RESET query_memory_limit")


def test_copy_from_stdin_cancel_and_timeout(server: SwellServer, big: str) -> None:
    with server.connect() as c:
        c.execute("DROP TABLE IF EXISTS cw_copy")
        c.execute("CREATE TABLE cw_copy (a int)")
        # cancel while the rows arrive: the next rows meet the error, nothing is inserted
        with pytest.raises(psycopg.errors.QueryCanceled) as e:
            with c.cursor().copy("COPY cw_copy FROM STDIN") as cp:
                cp.write("1\n")
                c.cancel_safe()
                cp.write("2\n")
        assert str(e.value).startswith("canceling statement due to user request")
        c.execute("SET statement_timeout = '1s'")
        with pytest.raises(psycopg.errors.QueryCanceled) as e:
            with c.cursor().copy("COPY cw_copy FROM STDIN") as cp:
                cp.write("1\n")
                time.sleep(1.5)  # the deadline passes while the client is still sending
                cp.write("2\n")
        assert str(e.value).startswith("canceling statement due to statement timeout")
        c.execute("SET statement_timeout = 0")
        c.execute("FLUSH")
        assert c.execute("SELECT count(*) FROM cw_copy").fetchone() == (0,)
        with c.cursor().copy("COPY cw_copy FROM STDIN") as cp:
            cp.write("7\n")
        c.execute("FLUSH")
        assert c.execute("SELECT a FROM cw_copy").fetchall() == [(7,)]


def test_cancelled_create_materialized_view_leaves_no_view(server: SwellServer, big: str) -> None:
    create = (
        "CREATE MATERIALIZED VIEW cw_mv AS SELECT x.a AS xa, y.a AS ya "
        "FROM cw_big x JOIN cw_big y ON x.b = y.b"
    )
    with server.connect() as c, server.connect() as watch:
        c.execute("DROP MATERIALIZED VIEW IF EXISTS cw_mv")
        # throttled, so the backfill cannot end before the timeout however fast the
        # machine is (a cancel after the work is done has no effect, as in PostgreSQL)
        c.execute("SET backfill_rate_limit = 500")
        c.execute("SET statement_timeout = '100ms'")
        with pytest.raises(psycopg.errors.QueryCanceled) as e:
            c.execute(create)
        c.execute("RESET backfill_rate_limit")
        assert str(e.value).startswith("canceling statement due to statement timeout")
        c.execute("SET statement_timeout = 0")
        names = "SELECT count(*) FROM pg_matviews WHERE matviewname = 'cw_mv'"
        assert watch.execute(names).fetchone() == (0,)
        # the name is free again
        c.execute(create.replace("JOIN cw_big y ON x.b = y.b", "JOIN cw_big y ON x.a = y.a"))
        assert c.execute("SELECT count(*) FROM cw_mv").fetchone() == (3000,)
        c.execute("DROP MATERIALIZED VIEW cw_mv")


def test_large_result_streams_while_it_is_computed(server: SwellServer, big: str) -> None:
    """The first rows of a 9M-row result reach the client while the statement still runs
    (it would have ended if the result were built whole before sending); then a cancel
    stops the rest."""
    with server.connect() as c, server.connect() as watch:
        pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
        rows = c.cursor().stream("SELECT x.a, y.a FROM cw_big x, cw_big y")
        first = next(rows)
        assert first[0] is not None
        assert (_active(watch, pid) or "").startswith("SELECT x.a")
        c.cancel_safe()
        with pytest.raises(psycopg.errors.QueryCanceled):
            for _ in rows:
                pass
        assert _active(watch, pid) is None
        assert c.execute("SELECT 1").fetchone() == (1,)


def test_copy_to_stdout_streams_and_cancels(server: SwellServer, big: str) -> None:
    """COPY ... TO STDOUT of a 9M-row query sends its first lines while the statement still
    runs (a result built whole first would have ended it); a cancel stops the rest. A
    complete COPY of a result larger than one chunk has every line and the `COPY n` tag."""
    with server.connect() as c, server.connect() as watch:
        pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
        with pytest.raises(psycopg.errors.QueryCanceled):
            with c.cursor().copy("COPY (SELECT x.a, y.a FROM cw_big x, cw_big y) TO STDOUT") as cp:
                first = bytes(next(iter(cp)))
                assert b"\t" in first
                assert (_active(watch, pid) or "").startswith("COPY (SELECT x.a")
                c.cancel_safe()
                for _ in cp:
                    pass
        assert _active(watch, pid) is None
        assert c.execute("SELECT 1").fetchone() == (1,)
        cur = c.cursor()
        data = bytearray()
        with cur.copy(
            "COPY (SELECT x.a, x.b FROM cw_big x, cw_two y) TO STDOUT (FORMAT CSV)"
        ) as cp:
            for part in cp:
                data += part
        assert cur.rowcount == 6000  # the `COPY n` tag
        lines = bytes(data).decode().splitlines()
        assert sorted(lines) == sorted(f"{a},{a % 7}" for a in range(1, 3001) for _ in range(2))
        cur = c.cursor()
        with cur.copy("COPY (SELECT x.a FROM cw_big x, cw_big y WHERE y.a <= 30) TO STDOUT") as cp:
            n = sum(bytes(part).count(b"\n") for part in cp)
        assert n == 90_000 and cur.rowcount == 90_000  # beyond the first chunk


@pytest.mark.needs("psql")
def test_psql_ctrl_c_cancels(server: SwellServer, big: str) -> None:
    """psql's Ctrl-C (SIGINT) sends a CancelRequest: the query stops with its error."""
    psql = shutil.which("psql")
    assert psql is not None
    with server.connect() as watch:
        before = {r[0] for r in watch.execute("SELECT pid FROM pg_stat_activity").fetchall()}
        p = subprocess.Popen(
            [psql, server.dsn, "-X", "-c", ENDLESS],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            q = "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query LIKE %s"

            def running() -> bool:
                pids = {r[0] for r in watch.execute(q, ("SELECT count(*) FROM cw_big%",))}
                return bool(pids - before)

            _wait_for(running, "psql's query runs")
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
        assert p.returncode == 1, (out, err)
        assert "Cancel request sent" in err
        assert "canceling statement due to user request" in err


def test_asyncpg_timeout_cancels_the_query(server: SwellServer, big: str) -> None:
    """asyncpg's `timeout=` sends a CancelRequest and waits for the statement to end; the
    connection then answers at once (it would wait for the endless join otherwise)."""

    async def run() -> None:
        conn = await asyncpg.connect(server.dsn)
        try:
            with pytest.raises(asyncio.TimeoutError):
                await conn.fetch(ENDLESS, timeout=1.0)
            assert await conn.fetchval("SELECT 1") == 1
        finally:
            await conn.close()

    asyncio.run(run())


def _vanish(c: psycopg.Connection[Any]) -> None:
    """The client disappears: its socket is shut down under it (no Terminate message)."""
    sock = socket.socket(fileno=c.fileno())
    sock.shutdown(socket.SHUT_RDWR)
    sock.detach()


def test_client_disconnect_drops_its_half_built_view(server: SwellServer, big: str) -> None:
    with server.connect() as watch:
        watch.execute("DROP MATERIALIZED VIEW IF EXISTS cw_gone")
        c = server.connect()
        pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
        c.execute("SET backfill_rate_limit = 10")  # far from done when the client goes
        create = (
            "CREATE MATERIALIZED VIEW cw_gone AS SELECT b, count(*) AS n FROM cw_big GROUP BY b"
        )
        t, _ = _in_thread(lambda: c.execute(create))
        jobs = "SELECT count(*) FROM rw_catalog.rw_ddl_progress WHERE ddl_statement LIKE %s"
        _wait_for(
            lambda: watch.execute(jobs, ("%cw_gone%",)).fetchone() == (1,), "the backfill runs"
        )
        _vanish(c)
        _wait_for(lambda: watch.execute("SHOW JOBS").fetchall() == [], "the job was dropped")
        _wait_for(lambda: _gone(watch, pid), "the session closed")
        names = "SELECT count(*) FROM rw_relations WHERE name = 'cw_gone'"
        assert watch.execute(names).fetchone() == (0,)
        t.join(60)
        c.close()
        # the name is free again
        watch.execute(create.replace("count(*)", "sum(a)"))
        assert watch.execute("SELECT count(*) FROM cw_gone").fetchone() == (7,)
        watch.execute("DROP MATERIALIZED VIEW cw_gone")


def test_client_disconnect_during_copy_inserts_nothing(server: SwellServer, big: str) -> None:
    with server.connect() as watch:
        watch.execute("DROP TABLE IF EXISTS cw_copy_gone")
        watch.execute("CREATE TABLE cw_copy_gone (a int)")
        c = server.connect()
        pid = c.execute("SELECT pg_backend_pid()").fetchone()[0]
        started = threading.Event()
        hold = threading.Event()

        def copy() -> None:
            with c.cursor().copy("COPY cw_copy_gone FROM STDIN") as cp:
                cp.write("".join(f"{i}\n" for i in range(10_000)))
                started.set()
                hold.wait(60)  # the client goes before it ends the COPY

        t, _ = _in_thread(copy)
        started.wait(60)
        _wait_for(lambda: _active(watch, pid) is not None, "the COPY runs")
        _vanish(c)
        _wait_for(lambda: _gone(watch, pid), "the server ended the COPY's session")
        hold.set()
        t.join(60)
        c.close()
        watch.execute("FLUSH")
        assert watch.execute("SELECT count(*) FROM cw_copy_gone").fetchone() == (0,)
