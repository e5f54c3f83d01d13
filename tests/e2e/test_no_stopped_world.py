"""Reads and writes that never wait for a barrier, against a real server and real clients.

A barrier is held still in the middle of its step with `SWELL_PAUSE_AT` (the server logs
`paused at` / `resumed at`), carrying a 100,000-row epoch. While it is paused, other
sessions get answers: `SELECT 1`, a point SELECT on a materialized view (the last
committed epoch), a psql `\\d`-style catalog query, an UPDATE and a webhook write (both
acknowledged once durable in the WAL). Only then is the barrier released, and the log
shows it resumed after all of them. The same while a 1,000,000-row COPY is held after
queueing its rows. Then two sessions increment one row concurrently while timer barriers
run: no increment is lost. No assertion depends on a duration.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from engine import faults
from harness.seeds import wait_webhook
from harness.server import SwellServer

PSQL_D = """SELECT n.nspname, c.relname,
  CASE c.relkind WHEN 'r' THEN 'table' WHEN 'm' THEN 'materialized view' END
FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind IN ('r','m') AND n.nspname = 'public' ORDER BY 1, 2"""


def one(c: psycopg.Connection[Any], sql: str) -> Any:
    row = c.execute(sql).fetchone()
    assert row is not None
    return row[0] if len(row) == 1 else row


def post(srv: SwellServer, table: str, body: dict[str, Any]) -> int:
    req = urllib.request.Request(
        srv.webhook_url(table),
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=30) as r:
        return int(r.status)


def wait_for_log(srv: SwellServer, text: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in srv.log_text():
        assert time.monotonic() < deadline, srv.describe_failure(f"no {text!r} in the log")
        assert srv.is_running, srv.describe_failure("the server died")
        time.sleep(0.02)


def test_reads_and_writes_answer_while_a_barrier_is_paused(
    make_server: Callable[..., SwellServer], tmp_path: Path
) -> None:
    hold = tmp_path / "hold-barrier"
    srv = make_server(
        barrier_interval_ms=3_600_000,  # barriers only by FLUSH and DDL
        env={faults.PAUSE_ENV: "view_stepped:1+", faults.PAUSE_FILE_ENV: str(hold)},
    )
    wait_webhook(srv)
    with srv.connect() as c:
        c.execute("CREATE TABLE nw_t (id INT PRIMARY KEY, v INT)")
        c.execute("CREATE MATERIALIZED VIEW nw_v AS SELECT id, v FROM nw_t")
        c.execute("CREATE TABLE nw_w (data JSONB) WITH (connector = 'webhook')")
        c.execute("INSERT INTO nw_t VALUES (1, 10)")
        c.execute("FLUSH")
        # a 100k-row epoch for the paused barrier to carry
        c.execute("INSERT INTO nw_t SELECT g, g FROM generate_series(2, 100001) AS g")
    hold.touch()
    flushed: list[str] = []

    def flush() -> None:
        with srv.connect() as c:
            c.execute("FLUSH")
        flushed.append("FLUSH returned")

    flusher = threading.Thread(target=flush)
    flusher.start()
    try:
        wait_for_log(srv, "SWELL_PAUSE_AT: paused at view_stepped")
        with srv.connect() as c:
            assert one(c, "SELECT 1") == 1
            assert one(c, "SELECT v FROM nw_v WHERE id = 1") == 10  # last committed epoch
            assert one(c, "SELECT count(*) FROM nw_v") == 1
            assert c.execute(PSQL_D).fetchall() == [
                ("public", "nw_t", "table"),
                ("public", "nw_v", "materialized view"),
                ("public", "nw_w", "table"),
            ]
            c.execute("UPDATE nw_t SET v = v + 1 WHERE id = 1")  # acknowledged: durable
            assert c.execute("SELECT 1").fetchone() == (1,)
        assert post(srv, "nw_w", {"k": 1}) == 200
        # every answer above came while the barrier was still held
        assert "resumed at" not in srv.log_text()
        assert flusher.is_alive() and not flushed
    finally:
        hold.unlink()
        flusher.join(timeout=60)
    assert flushed == ["FLUSH returned"]
    wait_for_log(srv, "SWELL_PAUSE_AT: resumed at view_stepped")
    with srv.connect() as c:
        c.execute("FLUSH")
        assert one(c, "SELECT count(*) FROM nw_v") == 100_001
        assert one(c, "SELECT v FROM nw_v WHERE id = 1") == 11
        assert one(c, "SELECT count(*) FROM nw_w") == 1


def test_concurrent_increments_of_one_row_are_never_lost(
    make_server: Callable[..., SwellServer],
) -> None:
    srv = make_server(barrier_interval_ms=20)  # barriers keep running under the updates
    with srv.connect() as c:
        c.execute("CREATE TABLE nw_c (id INT PRIMARY KEY, v INT)")
        c.execute("CREATE MATERIALIZED VIEW nw_cv AS SELECT sum(v) AS s FROM nw_c")
        c.execute("INSERT INTO nw_c VALUES (1, 0), (2, 0)")
        c.execute("FLUSH")
    n = 150
    errors: list[BaseException] = []

    def bump() -> None:
        try:
            with srv.connect() as c:
                for _ in range(n):
                    c.execute("UPDATE nw_c SET v = v + 1 WHERE id = 1")
        except BaseException as e:  # reported below
            errors.append(e)

    workers = [threading.Thread(target=bump) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=300)
    assert not errors, errors
    with srv.connect() as c:
        c.execute("FLUSH")
        assert one(c, "SELECT v FROM nw_c WHERE id = 1") == 2 * n
        assert one(c, "SELECT v FROM nw_c WHERE id = 2") == 0
        assert one(c, "SELECT s FROM nw_cv") == 2 * n


def test_reads_answer_while_a_million_row_copy_is_held(
    make_server: Callable[..., SwellServer], tmp_path: Path
) -> None:
    hold = tmp_path / "hold-copy"
    srv = make_server(
        barrier_interval_ms=3_600_000,
        env={faults.PAUSE_ENV: "copy_queued:1+", faults.PAUSE_FILE_ENV: str(hold)},
    )
    with srv.connect() as c:
        c.execute("CREATE TABLE nw_k (id BIGINT PRIMARY KEY, g INT)")
        c.execute("CREATE MATERIALIZED VIEW nw_kv AS SELECT g, count(*) AS n FROM nw_k GROUP BY g")
        c.execute("INSERT INTO nw_k VALUES (0, 7)")
        c.execute("FLUSH")
    data = "".join(f"{i},{i % 10}\n" for i in range(1, 1_000_001)).encode()
    hold.touch()
    copied: list[str] = []

    def copy() -> None:
        with srv.connect() as c, c.cursor().copy("COPY nw_k FROM STDIN WITH (FORMAT csv)") as cp:
            for i in range(0, len(data), 1 << 20):
                cp.write(data[i : i + (1 << 20)])
        copied.append("COPY returned")

    copier = threading.Thread(target=copy)
    copier.start()
    try:
        wait_for_log(srv, "SWELL_PAUSE_AT: paused at copy_queued")
        with srv.connect() as c:
            assert one(c, "SELECT 1") == 1
            assert one(c, "SELECT n FROM nw_kv WHERE g = 7") == 1
            assert [r[1] for r in c.execute(PSQL_D).fetchall()] == ["nw_k", "nw_kv"]
        assert "resumed at" not in srv.log_text()
        assert copier.is_alive() and not copied
    finally:
        hold.unlink()
        copier.join(timeout=120)
    assert copied == ["COPY returned"]
    with srv.connect() as c:
        c.execute("FLUSH")
        assert one(c, "SELECT count(*) FROM nw_k") == 1_000_001
        assert one(c, "SELECT sum(n) FROM nw_kv") == 1_000_001
