"""Subscriptions end to end with psycopg: change rows with op and rw_timestamp per committed
epoch, a FETCH that waits for the next epoch, a psycopg transaction around DECLARE (the
cursor outlives COMMIT), retention, and an exactly-once consumer resuming with SINCE after
kill -9."""

from __future__ import annotations

import threading
import time
from typing import Any

import psycopg

from harness.server import SwellServer


def fetch_all(c: psycopg.Connection[Any], cursor: str) -> list[tuple[Any, ...]]:
    return c.execute(f"FETCH 1000 FROM {cursor}").fetchall()


def test_change_rows_per_epoch_and_waiting_fetch(fresh_server: SwellServer) -> None:
    with fresh_server.connect() as c:
        c.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
        c.execute(
            "CREATE MATERIALIZED VIEW totals AS SELECT k % 2 AS g, sum(v) AS s FROM t GROUP BY 1"
        )
        c.execute("INSERT INTO t VALUES (1, 10), (2, 20)")
        c.execute("FLUSH")
        c.execute("CREATE SUBSCRIPTION sub_t FROM t WITH (retention = '1D')")
        c.execute("CREATE SUBSCRIPTION sub_totals FROM totals WITH (retention = '1D')")
        c.execute("DECLARE ct SUBSCRIPTION CURSOR FOR sub_t")  # since now()
        c.execute("DECLARE cm SUBSCRIPTION CURSOR FOR sub_totals FULL")
        cur = c.execute("FETCH NEXT FROM cm")
        assert [d.name for d in cur.description or []] == ["g", "s", "op", "rw_timestamp"]
        snapshot = cur.fetchall() + fetch_all(c, "cm")
        assert sorted(snapshot) == [(0, 20, "Insert", None), (1, 10, "Insert", None)]
        assert fetch_all(c, "ct") == []

        c.execute("INSERT INTO t VALUES (3, 30)")
        c.execute("UPDATE t SET v = 11 WHERE k = 1")
        c.execute("FLUSH")
        c.execute("DELETE FROM t WHERE k = 2")
        c.execute("FLUSH")
        rows = fetch_all(c, "ct")
        assert [r[:3] for r in rows] == [
            (3, 30, "Insert"),
            (1, 10, "UpdateDelete"),
            (1, 11, "UpdateInsert"),
            (2, 20, "Delete"),
        ]
        stamps = [r[3] for r in rows]
        # the update pair shares its epoch's stamp; stamps grow with the epochs (the timer
        # may commit the INSERT in an epoch of its own before the UPDATE)
        assert stamps[0] <= stamps[1] == stamps[2] < stamps[3]
        assert abs(stamps[3] - time.time() * 1000) < 600_000
        # the aggregate's snapshot plus its changes, applied in order, give the view's rows
        agg = fetch_all(c, "cm")
        state = {g: s for g, s, _, _ in snapshot}
        for g, total, op, _ in agg:
            if op in ("Delete", "UpdateDelete"):
                assert state.pop(g) == total
            else:
                assert g not in state
                state[g] = total
        assert state == dict(c.execute("SELECT g, s FROM totals").fetchall()) == {1: 41}
        assert agg[-1][:3] == (0, 20, "Delete")

        # SINCE <ms> is inclusive: the second epoch again, from its stamp
        c.execute(f"DECLARE again SUBSCRIPTION CURSOR FOR sub_t SINCE {stamps[3]}")
        assert [r[:3] for r in fetch_all(c, "again")] == [(2, 20, "Delete")]

        # a FETCH with a timeout waits for the next committed epoch
        got: list[Any] = []
        started = threading.Event()

        def consumer() -> None:
            with fresh_server.connect() as c2:
                c2.execute("DECLARE w SUBSCRIPTION CURSOR FOR sub_t")
                started.set()
                got.extend(c2.execute("FETCH 10 FROM w WITH (timeout = '60s')").fetchall())

        th = threading.Thread(target=consumer)
        th.start()
        assert started.wait(30)
        time.sleep(0.3)  # let the FETCH start waiting (the result does not depend on it)
        c.execute("INSERT INTO t VALUES (7, 70)")
        c.execute("FLUSH")
        th.join(60)
        assert [r[:3] for r in got] == [(7, 70, "Insert")]

    # psycopg's default transaction mode: the cursor survives COMMIT, as in RisingWave
    with fresh_server.connect(autocommit=False) as c:
        c.execute("DECLARE tx SUBSCRIPTION CURSOR FOR sub_t SINCE begin()")
        c.commit()
        assert [r[0] for r in c.execute("FETCH 100 FROM tx").fetchall()] == [3, 1, 1, 2, 7]
        c.commit()
    retention_drops_old_epochs(fresh_server)


def consume(server: SwellServer, since: int | None, store: list[tuple[int, int]]) -> int | None:
    """An exactly-once consumer: applies whole epochs (all rows of one rw_timestamp) and
    returns the last applied stamp, which a real consumer stores with its results."""
    with server.connect() as c:
        where = f"SINCE {since + 1}" if since is not None else "SINCE begin()"
        c.execute(f"DECLARE feed SUBSCRIPTION CURSOR FOR sub {where}")
        last = since
        while True:
            rows = c.execute("FETCH 3 FROM feed").fetchall()  # smaller than an epoch
            if not rows:
                return last
            for k, v, op, ts in rows:
                assert op == "Insert"
                store.append((k, v))
                last = ts


def test_exactly_once_resume_after_kill(fresh_server: SwellServer) -> None:
    with fresh_server.connect() as c:
        c.execute("CREATE TABLE t (k INT PRIMARY KEY, v INT)")
        c.execute("CREATE SUBSCRIPTION sub FROM t WITH (retention = '1D')")
        for batch in range(3):
            c.execute(f"INSERT INTO t SELECT {batch} * 10 + i, i FROM generate_series(0, 4) i")
            c.execute("FLUSH")
    store: list[tuple[int, int]] = []
    last = consume(fresh_server, None, store)
    assert last is not None and len(store) == 15
    with fresh_server.connect() as c:
        c.execute("INSERT INTO t VALUES (100, 1), (101, 2)")
        c.execute("FLUSH")
    fresh_server.restart(crash=True)  # the log is in the checkpoint: it survives
    last = consume(fresh_server, last, store)
    assert sorted(k for k, _ in store) == [*range(0, 5), *range(10, 15), *range(20, 25), 100, 101]
    with fresh_server.connect() as c:
        c.execute("INSERT INTO t VALUES (102, 3)")
        c.execute("FLUSH")
    consume(fresh_server, last, store)
    assert len(store) == len({k for k, _ in store}) == 18  # no duplicates, nothing lost


def retention_drops_old_epochs(server: SwellServer) -> None:
    with server.connect() as c:
        c.execute("CREATE TABLE r (k INT)")
        c.execute("CREATE SUBSCRIPTION sub_r FROM r WITH (retention = '1s')")
        c.execute("DECLARE early SUBSCRIPTION CURSOR FOR sub_r")
        c.execute("INSERT INTO r VALUES (1)")
        c.execute("FLUSH")
        time.sleep(1.5)
        c.execute("INSERT INTO r VALUES (2)")
        c.execute("FLUSH")  # this epoch's checkpoint deletes the first one
        c.execute("DECLARE late SUBSCRIPTION CURSOR FOR sub_r SINCE begin()")
        assert [r[0] for r in fetch_all(c, "late")] == [2]
        try:
            c.execute("FETCH 10 FROM early")
        except psycopg.Error as e:
            assert "data may have been recycled" in str(e)
        else:
            raise AssertionError("a cursor behind the retention must fail")
        c.execute("ALTER SUBSCRIPTION sub_r SET RETENTION TO '1D'")
        c.execute("DROP TABLE r CASCADE")
        n = c.execute("SELECT count(*) FROM rw_catalog.rw_subscriptions WHERE name = 'sub_r'")
        assert n.fetchone() == (0,)
