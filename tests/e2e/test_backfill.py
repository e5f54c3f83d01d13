"""Background backfill, seen from real clients: a new materialized view or sink over
existing data fills in key order while everything else keeps running.

Each backfill here is throttled with `backfill_rate_limit`, so it lasts long enough for
the other sessions' statements to happen while it runs; the tests assert the order of
events (a statement answered while `rw_ddl_progress` still listed the job below 100%),
never durations. Every finished view is compared with its query run ad hoc.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from engine import faults
from harness.kafka import KafkaBroker
from harness.server import SwellServer

ROWS = 6000
RATE = 1500  # rows per second: a backfill of ROWS lasts a few seconds


def _wait(cond: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _progress(c: psycopg.Connection[Any], name: str) -> tuple[Any, ...] | None:
    """(ddl_id, progress, rows_done, rows_total, create_type) of the job creating `name`."""
    for row in c.execute(
        "SELECT ddl_id, ddl_statement, progress, rows_done, rows_total, create_type "
        "FROM rw_catalog.rw_ddl_progress"
    ).fetchall():
        if f" {name} " in f" {row[1]} ":
            return (row[0], row[2], row[3], row[4], row[5])
    return None


def _equal(c: psycopg.Connection[Any], view: str, query: str) -> None:
    got = sorted(c.execute(f"SELECT * FROM {view}").fetchall())
    want = sorted(c.execute(query).fetchall())
    assert got == want, view
    assert got, view


def _fill(c: psycopg.Connection[Any], table: str, n: int = ROWS) -> None:
    c.execute(f"INSERT INTO {table} SELECT x, x % 13, x * 2 FROM generate_series(1, {n}) AS x")
    c.execute("FLUSH")


def test_others_proceed_and_upstream_changes_count_once(fresh_server: SwellServer) -> None:
    """While a throttled foreground CREATE waits: SELECT 1 answers, another view keeps
    stepping, and DML on the backfilled table (behind and ahead of the position) ends up
    in the view exactly once."""
    query = "SELECT g, count(*) AS n, sum(v) AS s, max(id) AS top FROM big GROUP BY g"
    with fresh_server.connect() as c:
        c.execute("CREATE TABLE big (id INT PRIMARY KEY, g INT, v BIGINT)")
        c.execute("CREATE TABLE small (id INT PRIMARY KEY)")
        c.execute("CREATE MATERIALIZED VIEW small_n AS SELECT count(*) AS n FROM small")
        _fill(c, "big")
    done: list[Any] = []

    events: list[str] = []

    def create() -> None:
        with fresh_server.connect() as w:
            w.add_notice_handler(lambda d: events.append(d.message_primary or ""))
            w.execute(f"SET backfill_rate_limit = {RATE * 2 // 3}")  # lasts past a NOTICE
            w.execute(f"CREATE MATERIALIZED VIEW agg AS {query}")
            events.append("done")
            done.append(True)

    t = threading.Thread(target=create)
    t.start()
    try:
        with fresh_server.connect() as c:
            first = _wait(lambda: _progress(c, "agg"), "the job in rw_ddl_progress")
            assert first[4] == "FOREGROUND"
            assert c.execute("SELECT 1").fetchone() == (1,)
            # another view steps while the backfill runs
            c.execute("INSERT INTO small VALUES (1), (2)")
            c.execute("FLUSH")
            assert c.execute("SELECT n FROM small_n").fetchone() == (2,)
            # changes on both sides of the backfill position, and new keys past the end
            c.execute("UPDATE big SET v = v + 1000 WHERE id % 100 = 1")
            c.execute("DELETE FROM big WHERE id % 250 = 7")
            c.execute(f"INSERT INTO big VALUES ({ROWS + 1}, 1, 5), ({ROWS + 2}, 2, 6)")
            c.execute("UPDATE big SET g = g + 1 WHERE id % 333 = 5")
            # still creating: everything above happened during the backfill
            now = _progress(c, "agg")
            assert now is not None and not done
            assert now[2] < now[3], now  # rows done < rows total
            jobs = c.execute("SHOW JOBS").fetchall()
            assert [j[0] for j in jobs] == [first[0]]
            with pytest.raises(psycopg.errors.UndefinedTable):
                c.execute("SELECT * FROM agg")
    finally:
        t.join(120)
    assert done
    # the waiting client was told the progress before its CREATE returned
    assert events[-1] == "done" and events[0].startswith('backfill of "agg": '), events
    with fresh_server.connect() as c:
        assert _progress(c, "agg") is None
        c.execute("FLUSH")
        _equal(c, "agg", query)
        c.execute("UPDATE big SET v = v - 1 WHERE id % 7 = 0")
        c.execute("FLUSH")
        _equal(c, "agg", query)


def test_background_ddl_cancel_and_wait(fresh_server: SwellServer) -> None:
    with fresh_server.connect() as c:
        c.execute("CREATE TABLE big (id INT PRIMARY KEY, g INT, v BIGINT)")
        _fill(c, "big")
        c.execute("SET background_ddl = true")
        c.execute("SET backfill_rate_limit = 0")  # paused: stays creating
        c.execute("CREATE MATERIALIZED VIEW paused AS SELECT id, v FROM big WHERE g = 3")
        c.execute("FLUSH")
        c.execute("FLUSH")
        (job_id, progress, done, total, kind) = _progress(c, "paused")
        assert kind == "BACKGROUND" and done == 0 and total == ROWS  # the limit holds it
        assert progress.startswith("0.00%")
        with pytest.raises(psycopg.errors.UndefinedTable):
            c.execute("SELECT * FROM paused")
        with pytest.raises(psycopg.errors.DuplicateTable):
            c.execute("CREATE MATERIALIZED VIEW paused AS SELECT 1 AS x FROM big")
        assert c.execute(
            "SELECT status FROM rw_catalog.rw_streaming_jobs WHERE name = 'paused'"
        ).fetchall() == [("CREATING",)]
        assert c.execute(f"CANCEL JOBS {job_id}").fetchall() == [(str(job_id),)]
        assert c.execute("SHOW JOBS").fetchall() == []
        assert c.execute("SELECT count(*) FROM rw_relations WHERE name = 'paused'").fetchone() == (
            0,
        )
        assert c.execute(
            "SELECT count(*) FROM rw_catalog.rw_internal_tables WHERE job_name = 'paused'"
        ).fetchone() == (0,)
        # the name is free again; a background job finishes by itself, WAIT waits for it
        c.execute("SET backfill_rate_limit = -1")
        c.execute("CREATE MATERIALIZED VIEW paused AS SELECT id, v FROM big WHERE g = 3")
        c.execute("WAIT")
        assert c.execute("SHOW JOBS").fetchall() == []
        _equal(c, "paused", "SELECT id, v FROM big WHERE g = 3")


def test_cancel_request_drops_a_waiting_create(fresh_server: SwellServer) -> None:
    with fresh_server.connect() as c:
        c.execute("CREATE TABLE big (id INT PRIMARY KEY, g INT, v BIGINT)")
        _fill(c, "big")
    w = fresh_server.connect()
    w.execute("SET backfill_rate_limit = 10")
    errors: list[BaseException] = []

    def create() -> None:
        try:
            w.execute(
                "CREATE MATERIALIZED VIEW slow AS SELECT g, count(*) AS n FROM big GROUP BY g"
            )
        except BaseException as e:  # noqa: BLE001 - the test inspects it
            errors.append(e)

    t = threading.Thread(target=create)
    t.start()
    with fresh_server.connect() as c:
        _wait(lambda: _progress(c, "slow"), "the job in rw_ddl_progress")
        w.cancel()
        t.join(60)
        assert errors and isinstance(errors[0], psycopg.errors.QueryCanceled)
        assert c.execute("SHOW JOBS").fetchall() == []
        assert c.execute("SELECT count(*) FROM rw_relations WHERE name = 'slow'").fetchone() == (0,)
    w.close()


def test_crash_during_backfill_resumes(fresh_server: SwellServer) -> None:
    """kill -9 in the middle of a join's backfill: after the restart the job resumes from
    its committed position (rows done do not go back to 0) and the finished view equals
    its query, with the DML before and after the crash counted once."""
    query = "SELECT a.id, a.v, b.v AS bv FROM big a JOIN big b ON a.id = b.id + 1 WHERE a.g < 9"
    with fresh_server.connect() as c:
        c.execute("CREATE TABLE big (id INT PRIMARY KEY, g INT, v BIGINT)")
        _fill(c, "big")
        c.execute("SET background_ddl = true")
        c.execute(f"SET backfill_rate_limit = {RATE // 2}")  # still running at the crash
        c.execute(f"CREATE MATERIALIZED VIEW j AS {query}")
        _wait(lambda: (_progress(c, "j") or (0, "", 0))[2] > 0, "backfill progress")
        c.execute("UPDATE big SET v = -v WHERE id % 50 = 0")
        c.execute("FLUSH")  # commits the rows done so far with the view's state
        before = _progress(c, "j")
        assert before is not None and 0 < before[2] < before[3]
    fresh_server.restart(crash=True)
    with fresh_server.connect() as c:
        after = _progress(c, "j")
        assert after is not None and after[2] >= before[2], (before, after)
        assert after[4] == "BACKGROUND"
        c.execute(f"INSERT INTO big VALUES ({ROWS + 1}, 1, 1)")
        c.execute("DELETE FROM big WHERE id = 10")
        c.execute("WAIT")
        c.execute("FLUSH")
        _equal(c, "j", query)
    fresh_server.restart(crash=True)
    with fresh_server.connect() as c:
        _equal(c, "j", query)


def test_crash_at_a_backfill_slice_resumes(make_server: Callable[..., SwellServer]) -> None:
    """SWELL_CRASH_AT exits between two slices of a foreground CREATE; after the
    restart the job goes on by itself and the view equals its query."""
    query = "SELECT g, count(*) AS n, min(v) AS lo FROM big GROUP BY g"
    srv = make_server()
    with srv.connect() as c:
        c.execute("CREATE TABLE big (id INT PRIMARY KEY, g INT, v BIGINT)")
        _fill(c, "big")
    srv.stop()
    srv.env[faults.CRASH_ENV] = "backfill_sliced:3"
    srv.start()
    with srv.connect() as c:
        c.execute(f"SET backfill_rate_limit = {RATE}")
        with pytest.raises(psycopg.OperationalError):
            c.execute(f"CREATE MATERIALIZED VIEW crashed AS {query}")
    _wait(lambda: srv.returncode is not None, "the crash")
    assert srv.returncode == faults.CRASH_EXIT_CODE, srv.log_tail()
    srv.kill9()  # reap
    srv.env.pop(faults.CRASH_ENV)
    srv.start()
    with srv.connect() as c:
        c.execute("DELETE FROM big WHERE id % 10 = 3")
        c.execute("WAIT")
        c.execute("FLUSH")
        _equal(c, "crashed", query)


def test_views_on_views_and_sinks_backfill(fresh_server: SwellServer) -> None:
    with fresh_server.connect() as c:
        c.execute("CREATE TABLE big (id INT PRIMARY KEY, g INT, v BIGINT)")
        c.execute("CREATE TABLE dim (g INT PRIMARY KEY, name VARCHAR)")
        c.execute("INSERT INTO dim SELECT x, 'g' || x FROM generate_series(0, 12) AS x")
        _fill(c, "big")
        c.execute("CREATE MATERIALIZED VIEW named AS SELECT b.id, b.v, d.name "
                  "FROM big b JOIN dim d ON b.g = d.g")  # fmt: skip
        c.execute("CREATE MATERIALIZED VIEW per_name AS SELECT name, count(*) AS n, "
                  "sum(v) AS s FROM named GROUP BY name")  # fmt: skip
        c.execute("CREATE TABLE copy (id INT PRIMARY KEY, v BIGINT, name VARCHAR)")
        c.execute("SET background_ddl = true")
        c.execute(f"SET backfill_rate_limit = {RATE * 2}")
        c.execute("CREATE SINK into_copy INTO copy AS SELECT id, v, name FROM named")
        _wait(lambda: _progress(c, "into_copy"), "the sink's job")
        c.execute("UPDATE big SET v = v + 1 WHERE id % 9 = 0")
        c.execute("UPDATE dim SET name = 'renamed' WHERE g = 4")
        c.execute("WAIT")
        c.execute("FLUSH")
        _equal(c, "named", "SELECT b.id, b.v, d.name FROM big b JOIN dim d ON b.g = d.g")
        _equal(c, "per_name", "SELECT name, count(*), sum(v) FROM named GROUP BY name")
        _equal(c, "copy", "SELECT id, v, name FROM named")


def test_source_backfill_reads_the_broker_without_the_lock(
    make_server: Callable[..., SwellServer],
    kafka_broker: KafkaBroker,
    kafka_topic: Callable[..., str],
    tmp_path: Path,
) -> None:
    """A new view on a running Kafka source reads the topic once, up to the reader's
    position; the read is held after it returned, and barriers, reads and the source's
    other view go on meanwhile. Messages that arrive during the read count once."""
    hold = tmp_path / "hold-source-read"
    srv = make_server(
        env={faults.PAUSE_ENV: "source_backfill_read@sb_g", faults.PAUSE_FILE_ENV: str(hold)}
    )
    topic = kafka_topic(partitions=2)
    kafka_broker.produce(topic, ({"g": i % 5, "v": i} for i in range(500)))
    with srv.connect() as c:
        c.execute(
            f"CREATE SOURCE sb (g INT, v BIGINT) WITH (connector = 'kafka', topic = '{topic}', "
            f"properties.bootstrap.server = '{kafka_broker.bootstrap}', "
            "scan.startup.mode = 'earliest') FORMAT PLAIN ENCODE JSON"
        )
        c.execute("CREATE MATERIALIZED VIEW sb_all AS SELECT count(*) AS n FROM sb")
        _wait(lambda: c.execute("SELECT n FROM sb_all").fetchone() == (500,), "the first view")
        hold.touch()
        c.execute("SET background_ddl = true")
        c.execute(
            "CREATE MATERIALIZED VIEW sb_g AS SELECT g, count(*) AS n, sum(v) AS s FROM sb GROUP BY g"
        )
        _wait(lambda: "paused at source_backfill_read" in srv.log_text(), "the held read")
        try:
            kafka_broker.produce(topic, ({"g": i % 5, "v": i} for i in range(500, 800)))
            # barriers carry the new messages into the other view while the read is held
            _wait(lambda: c.execute("SELECT n FROM sb_all").fetchone() == (800,), "a barrier")
            c.execute("FLUSH")
            assert c.execute("SELECT 1").fetchone() == (1,)
            assert _progress(c, "sb_g") is not None  # still creating
            assert "resumed at" not in srv.log_text()
        finally:
            hold.unlink()
        c.execute("WAIT")
        assert c.execute("SHOW JOBS").fetchall() == []
        c.execute("FLUSH")
        want = [(g, 160, sum(v for v in range(800) if v % 5 == g)) for g in range(5)]
        assert c.execute("SELECT g, n, s FROM sb_g ORDER BY g").fetchall() == want
        assert (
            c.execute("SELECT g, count(*), sum(v) FROM sb GROUP BY g ORDER BY g").fetchall() == want
        )
