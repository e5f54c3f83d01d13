"""PostgreSQL CDC (`connector = 'postgres-cdc'`) against a private PostgreSQL 15 server.

The upstream runs with `wal_level = logical`; Swell snapshots a table, then follows its
inserts, updates (also of the primary key) and deletes while it is SIGKILLed twice; at
the end the CDC table and a view over it equal the same queries over the upstream
database. The checks at CREATE (wal_level, primary key, publication, unreachable host)
refuse with the cause.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from harness.postgres import private_postgres, restart_postgres
from harness.server import SwellServer

pytestmark = pytest.mark.needs("initdb")

COLS = "id INT, g VARCHAR, v BIGINT, price NUMERIC(12, 2), ok BOOLEAN, ts TIMESTAMPTZ, note VARCHAR"
VIEW = "SELECT g, count(*) AS n, sum(v) AS s, sum(price) AS p FROM t GROUP BY g"


@pytest.fixture(scope="module")
def cluster() -> Iterator[int]:
    with private_postgres() as port:
        yield port


def wal_level(port: int, level: str) -> int:
    """Switch the private server to `level` (a restart) unless it is there already."""
    with pg(port) as c:
        if c.execute("SHOW wal_level").fetchone() == (level,):
            return port
        c.execute(f"ALTER SYSTEM SET wal_level = {level}")
    restart_postgres(port)
    return port


@pytest.fixture
def upstream(cluster: int) -> int:
    return wal_level(cluster, "logical")


def pg(port: int) -> psycopg.Connection[Any]:
    return psycopg.connect(
        host="127.0.0.1", port=port, user="root", dbname="postgres", autocommit=True
    )


def source_sql(port: int, name: str = "pg", **extra: str) -> str:
    opts = {
        "connector": "postgres-cdc",
        "hostname": "127.0.0.1",
        "port": str(port),
        "username": "root",
        "password": "x",
        "database.name": "postgres",
        "schema.name": "public",
        "slot.name": f"{name}_slot",
        "publication.name": f"{name}_pub",
        **extra,
    }
    body = ", ".join(f"{k} = '{v}'" for k, v in opts.items())
    return f"CREATE SOURCE {name} WITH ({body})"


def wait_for(fn: Callable[[], Any], expected: Any, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    got = fn()
    while got != expected and time.monotonic() < deadline:
        time.sleep(0.1)
        got = fn()
    assert got == expected
    return got


def _changes(port: int, stop: threading.Event, done: list[int]) -> None:
    """Transactions of inserts, updates (value and key) and deletes, until stopped."""
    rnd = random.Random(7)
    nxt = 100_000
    with pg(port) as c:
        while not stop.is_set() and done[0] < 400:
            with c.transaction():
                for _ in range(rnd.randint(1, 20)):
                    r = rnd.random()
                    k = rnd.randint(1, 3000)
                    if r < 0.4:
                        nxt += 1
                        c.execute(
                            "INSERT INTO t VALUES (%s, %s, %s, %s, %s, now(), %s)",
                            (nxt, f"g{nxt % 5}", nxt, nxt / 100, nxt % 2 == 0, "it's"),
                        )
                    elif r < 0.7:
                        c.execute("UPDATE t SET v = v + 1, price = price + 0.5 WHERE id = %s", (k,))
                    elif r < 0.8:
                        nxt += 1
                        c.execute("UPDATE t SET id = %s WHERE id = %s", (nxt, k))
                    else:
                        c.execute("DELETE FROM t WHERE id = %s", (k,))
            done[0] += 1
            time.sleep(0.005)


def test_wal_level_replica_refused(cluster: int, conn: psycopg.Connection[Any]) -> None:
    port = wal_level(cluster, "replica")
    with pytest.raises(psycopg.errors.Error, match='wal_level = "replica"') as e:
        conn.execute(source_sql(port))
    assert "wal_level = logical" in (e.value.diag.message_hint or "")


def test_snapshot_then_live_changes_across_kill9(upstream: int, fresh_server: SwellServer) -> None:
    with pg(upstream) as u:
        u.execute(f"CREATE TABLE t ({COLS}, PRIMARY KEY (id))")
        u.execute(
            "INSERT INTO t SELECT i, 'g' || (i % 5), i, i / 100.0, i % 3 = 0,"
            " '2024-01-01 00:00:00+00'::timestamptz + i * interval '1 minute',"
            " CASE WHEN i % 7 = 0 THEN NULL WHEN i % 11 = 0 THEN '' ELSE 'a,\"b\"' END"
            " FROM generate_series(1, 3000) i"
        )
    c = fresh_server.connect()
    c.execute(source_sql(upstream))
    c.execute(f"CREATE TABLE t ({COLS}, PRIMARY KEY (id)) FROM pg TABLE 'public.t'")
    c.execute(f"CREATE MATERIALIZED VIEW v AS {VIEW}")
    wait_for(lambda: c.execute("SELECT count(*) FROM t").fetchone(), (3000,))
    c.close()
    stop, done = threading.Event(), [0]
    th = threading.Thread(target=_changes, args=(upstream, stop, done))
    th.start()
    try:
        for _ in range(2):
            with fresh_server.connect() as c:
                base = c.execute("SELECT sum(v) FROM t").fetchone()
                deadline = time.monotonic() + 20
                while c.execute("SELECT sum(v) FROM t").fetchone() == base:
                    assert time.monotonic() < deadline, "no change arrived"
                    time.sleep(0.05)
            fresh_server.restart(crash=True)
    finally:
        stop.set()
        th.join()
    assert done[0] > 0
    full = "SELECT id, g, v, price, ok, ts, note FROM t ORDER BY id"
    with pg(upstream) as u:
        want_rows = u.execute(full).fetchall()
        want_view = u.execute(VIEW + " ORDER BY g").fetchall()
    with fresh_server.connect() as c:
        wait_for(lambda: c.execute(full).fetchall(), want_rows, timeout=40)
        assert c.execute("SELECT * FROM v ORDER BY g").fetchall() == want_view
    with pg(upstream) as u:  # the slot is confirmed up to what Swell committed
        lag = u.execute(
            "SELECT pg_current_wal_lsn() >= confirmed_flush_lsn, confirmed_flush_lsn > '0/0'"
            " FROM pg_replication_slots WHERE slot_name LIKE 'pg_slot_%'"
        ).fetchall()
    assert lag == [(True, True)]
    with fresh_server.connect() as c:
        c.execute("DROP MATERIALIZED VIEW v")
        c.execute("DROP TABLE t")
    with pg(upstream) as u:  # DROP TABLE released the slot
        assert u.execute("SELECT count(*) FROM pg_replication_slots").fetchone() == (0,)


def test_create_errors(upstream: int, conn: psycopg.Connection[Any]) -> None:
    with pg(upstream) as u:
        u.execute("CREATE TABLE nopk (id INT, v INT)")
        u.execute("CREATE TABLE haspk (id INT PRIMARY KEY, v INT)")
    with pytest.raises(psycopg.errors.Error, match="cannot connect"):
        conn.execute(source_sql(1, "bad"))
    with pytest.raises(psycopg.errors.Error, match='publication "nopub_pub" does not exist'):
        conn.execute(source_sql(upstream, "nopub", **{"publication.create.enable": "false"}))
    conn.execute("CREATE SECRET pw WITH (backend = 'meta') AS 'x'")
    conn.execute(source_sql(upstream, "e").replace("password = 'x'", "password = SECRET pw"))
    with pytest.raises(psycopg.errors.Error, match="has no primary key"):
        conn.execute("CREATE TABLE nopk (id INT PRIMARY KEY, v INT) FROM e TABLE 'public.nopk'")
    with pytest.raises(psycopg.errors.Error, match="needs a PRIMARY KEY"):
        conn.execute("CREATE TABLE haspk (id INT, v INT) FROM e TABLE 'public.haspk'")
    with pytest.raises(psycopg.errors.Error, match="does not exist"):
        conn.execute("CREATE TABLE x (id INT PRIMARY KEY) FROM e TABLE 'public.missing'")
    conn.execute("CREATE TABLE haspk (id INT, v INT, PRIMARY KEY (id)) FROM e TABLE 'public.haspk'")
    with pytest.raises(psycopg.errors.DependentObjectsStillExist):
        conn.execute("DROP SOURCE e")
    conn.execute("DROP TABLE haspk")
    conn.execute("DROP SOURCE e")


def test_truncate_upstream_and_dml_refused(upstream: int, conn: psycopg.Connection[Any]) -> None:
    """An upstream TRUNCATE empties the CDC table at its place in the stream (rows
    inserted after it in the same transaction stay); writes to a CDC table are refused."""
    with pg(upstream) as u:
        u.execute("CREATE TABLE tr (id INT PRIMARY KEY, v INT)")
        u.execute("INSERT INTO tr SELECT i, i FROM generate_series(1, 50) i")
    conn.execute(source_sql(upstream, "trs"))
    conn.execute("CREATE TABLE tr (id INT, v INT, PRIMARY KEY (id)) FROM trs TABLE 'public.tr'")
    conn.execute("CREATE MATERIALIZED VIEW trv AS SELECT count(*) AS n, sum(v) AS s FROM tr")
    count = "SELECT count(*) FROM tr"
    wait_for(lambda: conn.execute(count).fetchone(), (50,))
    for sql in (
        "INSERT INTO tr VALUES (100, 1)",
        "UPDATE tr SET v = 0",
        "DELETE FROM tr WHERE id = 1",
    ):
        with pytest.raises(psycopg.errors.WrongObjectType, match="with a connector"):
            conn.execute(sql)
    with pg(upstream) as u:
        with u.transaction():
            u.execute("INSERT INTO tr VALUES (60, 60)")
            u.execute("TRUNCATE tr")
            u.execute("INSERT INTO tr VALUES (70, 7), (71, 8)")
        u.execute("INSERT INTO tr VALUES (72, 9)")
    wait_for(lambda: conn.execute(count).fetchone(), (3,))
    assert conn.execute("SELECT id, v FROM tr ORDER BY id").fetchall() == [
        (70, 7),
        (71, 8),
        (72, 9),
    ]
    conn.execute("FLUSH")
    assert conn.execute("SELECT n, s FROM trv").fetchone() == (3, 24)
    conn.execute("DROP MATERIALIZED VIEW trv")
    conn.execute("DROP TABLE tr")
    conn.execute("DROP SOURCE trs")
