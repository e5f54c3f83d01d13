"""A big write is all or nothing across kill -9: a COPY of several MB goes to the WAL as parts
plus one commit record. A crash after some parts leaves none of its rows after recovery;
once the client saw `COPY n`, every row is there after kill -9, in tables and views."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from engine import faults
from harness.server import SwellServer

ROWS = 150_000  # about 3 MB in the WAL: three parts
SETUP = [
    "CREATE TABLE wt_t (id BIGINT, g INT)",
    "CREATE MATERIALIZED VIEW wt_v AS SELECT count(*) AS n, sum(id) AS s FROM wt_t",
    "INSERT INTO wt_t VALUES (-1, 0)",
    "FLUSH",
]
DATA = "".join(f"{i},{i % 7}\n" for i in range(ROWS)).encode()


def copy(c: psycopg.Connection[Any]) -> None:
    with c.cursor().copy("COPY wt_t FROM STDIN WITH (FORMAT csv)") as cp:
        cp.write(DATA)


def counts(c: psycopg.Connection[Any]) -> tuple[int, int]:
    c.execute("FLUSH")
    n = c.execute("SELECT count(*) FROM wt_t").fetchone()
    v = c.execute("SELECT n FROM wt_v").fetchone()
    assert n is not None and v is not None
    return int(n[0]), int(v[0])


def started(make_server: Callable[..., SwellServer]) -> SwellServer:
    srv = make_server(barrier_interval_ms=3_600_000)  # barriers only by FLUSH and DDL
    with srv.connect() as c:
        for sql in SETUP:
            c.execute(sql)
    return srv


def test_a_crash_in_the_middle_of_a_big_copy_leaves_none_of_it(
    make_server: Callable[..., SwellServer],
) -> None:
    srv = started(make_server)
    srv.stop()
    srv.env[faults.CRASH_ENV] = "wal_part_written:2"  # a part written, no commit record
    srv.start()
    with srv.connect() as c, pytest.raises(psycopg.OperationalError):
        copy(c)
    deadline = time.monotonic() + 30
    while srv.returncode is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert srv.returncode == faults.CRASH_EXIT_CODE, srv.log_tail()
    srv.kill9()  # reap
    srv.env.pop(faults.CRASH_ENV)
    srv.start()
    with srv.connect() as c:
        assert counts(c) == (1, 1)  # only the row from before
        copy(c)  # the next big write works (and the orphaned parts are gone)
        assert counts(c) == (ROWS + 1, ROWS + 1)


def test_an_acknowledged_big_copy_is_all_there_after_kill_9(
    make_server: Callable[..., SwellServer],
) -> None:
    srv = started(make_server)
    with srv.connect() as c:
        copy(c)  # `COPY n` answered: durable, not yet in any checkpoint
        c.execute("INSERT INTO wt_t VALUES (-2, 0)")
    srv.kill9()
    srv.start()
    with srv.connect() as c:
        assert counts(c) == (ROWS + 2, ROWS + 2)
        s = c.execute("SELECT s FROM wt_v").fetchone()
        assert s is not None and s[0] == ROWS * (ROWS - 1) // 2 - 3
    srv.restart()  # the checkpoint after replay truncated the transaction: still once
    with srv.connect() as c:
        assert counts(c) == (ROWS + 2, ROWS + 2)
