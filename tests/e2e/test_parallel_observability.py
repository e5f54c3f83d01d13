"""Parallel jobs seen from outside, and a worker process killed under a stream of rows.

A real server at `--parallelism 2` runs a GROUP BY and a join view as actors in two worker
processes. The system tables (`rw_fragments`, `rw_actors`, `rw_worker_nodes`), EXPLAIN
CREATE MATERIALIZED VIEW, the Prometheus endpoint and the dashboard's overview JSON show
the fragments, the actors' workers, pids and vnode ranges, and per-worker counters.

Then one worker is killed with SIGKILL while a writer inserts rows. The recovery is held
still at its start (`SWELL_PAUSE_AT=recovery`): meanwhile reads are answered from the last
committed epoch, consistently (a view's total equals its table's count in one snapshot).
After it resumes, every acknowledged row is counted once: the views equal their queries
run from scratch, and rw_event_logs has the WORKER_LOST and RECOVERY events. No
assertion depends on a duration.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from engine import faults
from harness.server import SwellServer, free_ports

AGG = "SELECT k, count(*) AS n, sum(v) AS s FROM ev GROUP BY k"
JOIN = (
    "SELECT d.name, count(*) AS n, sum(ev.v) AS s FROM ev JOIN dim d ON ev.k = d.k GROUP BY d.name"
)

TOP = (
    "SELECT k, v FROM (SELECT k, v, row_number() OVER (PARTITION BY k ORDER BY v DESC) AS rn "
    "FROM ev) q WHERE rn <= 2"
)


def _wait(cond: Callable[[], Any], what: str, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = cond()
        if got:
            return got
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _setup(c: psycopg.Connection[Any]) -> None:
    c.execute("CREATE TABLE ev (k INT, v BIGINT) APPEND ONLY")
    c.execute("CREATE TABLE dim (k INT PRIMARY KEY, name VARCHAR)")
    c.execute("INSERT INTO dim SELECT g, 'n' || (g % 7)::varchar FROM generate_series(0, 49) g")
    c.execute("INSERT INTO ev SELECT g % 50, g FROM generate_series(1, 2000) g")
    c.execute("FLUSH")
    c.execute(f"CREATE MATERIALIZED VIEW agg AS {AGG}")
    c.execute(f"CREATE MATERIALIZED VIEW j AS {JOIN}")


def _sorted(c: psycopg.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
    return sorted(c.execute(sql).fetchall())


def _check_seen(srv: SwellServer, mport: int, dport: int) -> None:
    """Fragments, actors and workers in the system tables, EXPLAIN, metrics, overview."""
    with srv.connect() as c:
        c.execute("FLUSH")
        plan = [
            r[0] for r in c.execute(f"EXPLAIN CREATE MATERIALIZED VIEW agg2 AS {AGG}").fetchall()
        ]
        assert any("StreamExchange { dist: HashShard(k) }" in ln for ln in plan), plan
        assert any(ln.startswith("Fragment 1: StreamHashAgg, parallelism 2") for ln in plan), plan
        c.execute("SET streaming_parallelism = 1")
        plan1 = [
            r[0] for r in c.execute(f"EXPLAIN CREATE MATERIALIZED VIEW agg2 AS {AGG}").fetchall()
        ]
        assert not any("StreamExchange" in ln or ln.startswith("Fragment") for ln in plan1)
        c.execute("RESET streaming_parallelism")

        frags = c.execute(
            "SELECT f.fragment_id, f.distribution_type, f.parallelism, f.operators, "
            "f.distribution_key, f.upstream_fragment_ids, f.rows_in FROM rw_fragments f "
            "JOIN rw_materialized_views m ON m.id = f.table_id WHERE m.name = 'agg' "
            "ORDER BY f.fragment_id"
        ).fetchall()
        assert [(d, p) for _, d, p, *_ in frags] == [("SINGLE", 1), ("HASH", 2)]
        single, hashed = frags
        assert "StreamMaterialize" in single[3] and hashed[3] == "StreamHashAgg"
        assert hashed[4] == "k" and hashed[5] == [single[0]] and hashed[6] == 2000
        join_ops = c.execute(
            "SELECT operators FROM rw_fragments WHERE job_name = 'j' AND distribution_type = 'HASH'"
        ).fetchall()
        assert ("StreamHashJoin",) in join_ops and ("StreamHashAgg",) in join_ops

        actors = c.execute(
            "SELECT a.worker_id, a.pid, a.vnode_first, a.vnode_last, a.state FROM rw_actors a "
            f"WHERE a.fragment_id = {hashed[0]} ORDER BY a.actor_index"
        ).fetchall()
        assert [(w, f, last, st) for w, _, f, last, st in actors] == [
            (0, 0, 127, "RUNNING"),
            (1, 128, 255, "RUNNING"),
        ]
        (rows_in,) = c.execute(
            f"SELECT sum(rows_in) FROM rw_actors WHERE fragment_id = {hashed[0]}"
        ).fetchone()
        assert rows_in == 2000  # every row went to exactly one actor
        pids = {pid for _, pid, *_ in actors}
        server_pid = c.execute(
            "SELECT pid FROM rw_actors WHERE worker_id IS NULL LIMIT 1"
        ).fetchone()
        assert len(pids) == 2 and server_pid is not None and server_pid[0] not in pids
        for pid in pids:
            os.kill(pid, 0)  # live processes
        workers = c.execute(
            "SELECT id, state, pid, actors, requests > 0, exchange_bytes_out > 0 "
            "FROM rw_worker_nodes ORDER BY id"
        ).fetchall()
        assert [(i, st, a, r, b) for i, st, _, a, r, b in workers] == [
            (0, "RUNNING", 3, True, True),
            (1, "RUNNING", 3, True, True),
        ]
        assert {pid for _, _, pid, *_ in workers} == pids

    with urllib.request.urlopen(f"http://127.0.0.1:{mport}/metrics", timeout=10) as resp:
        text = resp.read().decode()
    for name in (
        "swell_worker_cpu_seconds_total",
        "swell_worker_exchange_bytes_total",
        "swell_worker_up",
        "swell_worker_rows_in_total",
        "swell_worker_busy_seconds_total",
        "swell_worker_barrier_alignment_wait_seconds_total",
        "swell_workers_lost_total",
    ):
        assert f'{name}{{worker="1"' in text or f"{name} " in text, name
    with urllib.request.urlopen(f"http://127.0.0.1:{dport}/api/overview", timeout=10) as resp:
        overview = json.loads(resp.read())
    assert [w["worker"] for w in overview["workers"]] == [0, 1]
    agg_job = next(j for j in overview["jobs"] if j["name"] == "agg")
    assert [n.get("parallelism") for n in agg_job["nodes"] if "parallelism" in n] == [2]


def test_parallel_jobs_seen_and_a_worker_killed_during_a_stream(
    make_server: Callable[..., SwellServer], tmp_path: Path
) -> None:
    hold = tmp_path / "hold-recovery"
    mport, dport = free_ports(2)
    srv = make_server(
        parallelism=2,
        env={faults.PAUSE_ENV: "recovery:1+", faults.PAUSE_FILE_ENV: str(hold)},
        extra_args=[
            "--prometheus-listener-addr",
            f"127.0.0.1:{mport}",
            "--dashboard-listen-addr",
            f"127.0.0.1:{dport}",
        ],
    )
    with srv.connect() as c:
        _setup(c)
    _check_seen(srv, mport, dport)
    with srv.connect() as c:
        victim = c.execute(
            "SELECT pid FROM rw_actors WHERE job_name = 'agg' AND worker_id = 1"
        ).fetchone()[0]
    sent = [2000]
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with srv.connect() as w:
                start = 2001
                while not stop.is_set() and start < 40_000:
                    w.execute(
                        "INSERT INTO ev SELECT g % 50, g FROM "
                        f"generate_series({start}, {start + 499}) g"
                    )
                    sent[0] += 500  # acknowledged
                    start += 500
                    time.sleep(0.01)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    th = threading.Thread(target=writer, daemon=True)
    th.start()
    try:
        with srv.connect() as c:
            _wait(lambda: c.execute("SELECT sum(n) FROM agg").fetchone()[0] > 2000, "a commit")
            hold.touch()
            os.kill(victim, signal.SIGKILL)
            _wait(lambda: "SWELL_PAUSE_AT: paused at recovery" in srv.log_text(), "recovery")
            # the recovery is held: reads answer from the last committed epoch, consistently
            assert c.execute("SELECT 1").fetchone() == (1,)
            same = c.execute(
                "SELECT (SELECT sum(n) FROM agg) = (SELECT count(*) FROM ev), "
                "(SELECT sum(n) FROM j) = (SELECT count(*) FROM ev)"
            ).fetchone()
            assert same == (True, True)
            assert "resumed at recovery" not in srv.log_text()
    finally:
        hold.unlink(missing_ok=True)
        stop.set()
        th.join(timeout=120)
    assert not errors, errors
    with srv.connect() as c:
        c.execute("FLUSH")
        assert c.execute("SELECT count(*) FROM ev").fetchone() == (sent[0],)
        assert _sorted(c, "SELECT * FROM agg") == _sorted(c, AGG)
        assert _sorted(c, "SELECT * FROM j") == _sorted(c, JOIN)
        assert c.execute("SELECT sum(n) FROM agg").fetchone()[0] == sent[0]
        events = [
            r[0]
            for r in c.execute("SELECT event_type FROM rw_event_logs ORDER BY timestamp").fetchall()
        ]
        assert "WORKER_LOST" in events and "RECOVERY" in events
        assert events.index("WORKER_LOST") < len(events) - 1 - events[::-1].index("RECOVERY")
        lost = c.execute(
            "SELECT info FROM rw_event_logs WHERE event_type = 'WORKER_LOST'"
        ).fetchone()[0]
        assert (lost if isinstance(lost, dict) else json.loads(lost))["pid"] == victim
        # the worker was replaced: a new process runs its actors
        now = c.execute(
            "SELECT DISTINCT pid FROM rw_actors WHERE job_name = 'agg' AND worker_id = 1"
        ).fetchall()
        assert len(now) == 1 and now[0][0] != victim
        assert c.execute(
            "SELECT workers_lost >= 1 FROM rw_worker_nodes WHERE id = 1"
        ).fetchone() == (True,)


def test_rescale_while_rows_arrive(make_server: Callable[..., SwellServer]) -> None:
    """ALTER MATERIALIZED VIEW ... SET PARALLELISM moves a GROUP BY's state and a join's
    (with the GROUP BY over it) by vnode at a barrier while a writer inserts rows:
    2 -> 3 -> 1 -> 2 actors; after each the views equal their queries from scratch
    (nothing recomputed, nothing lost), and after a restart too. A view with a top-N
    running as actors is refused, naming what can be rescaled."""
    srv = make_server(parallelism=2)
    with srv.connect() as c:
        _setup(c)
        c.execute(f"CREATE MATERIALIZED VIEW top AS {TOP}")
    sent = [2000]
    stop = threading.Event()
    quiet = threading.Lock()  # held while a view is compared with its query (no writes)
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with srv.connect() as w:
                start = 2001
                while not stop.is_set():
                    with quiet:
                        w.execute(
                            f"INSERT INTO ev SELECT g % 50, g "
                            f"FROM generate_series({start}, {start + 99}) g"
                        )
                    sent[0] += 100
                    start += 100
                    time.sleep(0.02)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    th = threading.Thread(target=writer, daemon=True)
    th.start()
    try:
        with srv.connect() as c:
            for n, ranges in (
                (3, [(0, 85), (86, 170), (171, 255)]),
                (1, []),
                (2, [(0, 127), (128, 255)]),
            ):
                c.execute(f"ALTER MATERIALIZED VIEW agg SET PARALLELISM = {n}")
                c.execute(f"ALTER MATERIALIZED VIEW j SET PARALLELISM = {n}")
                got = c.execute(
                    "SELECT vnode_first, vnode_last FROM rw_actors WHERE job_name = 'agg' "
                    "AND worker_id IS NOT NULL ORDER BY actor_index"
                ).fetchall()
                assert got == ranges, (n, got)
                # the join and the GROUP BY over it: n actors each
                got = c.execute(
                    "SELECT count(*) FROM rw_actors WHERE job_name = 'j' AND worker_id IS NOT NULL"
                ).fetchone()
                assert got == ((2 * n,) if n > 1 else (0,)), (n, got)
                policy = c.execute(
                    "SELECT parallelism_policy FROM rw_fragments WHERE job_name = 'agg' "
                    "ORDER BY fragment_id DESC LIMIT 1"
                ).fetchone()
                assert policy == ((f"FIXED({n})",) if n > 1 else ("FIXED(1)",))
                with quiet:  # the rescales ran while rows arrived; compare at rest
                    c.execute("FLUSH")
                    assert _sorted(c, "SELECT * FROM agg") == _sorted(c, AGG), n
                    assert _sorted(c, "SELECT * FROM j") == _sorted(c, JOIN), n
            with pytest.raises(psycopg.errors.InvalidParameterValue):
                c.execute("ALTER MATERIALIZED VIEW agg SET PARALLELISM = abc")
            # a top-N's state is not moved by vnode: refused before anything changes
            with pytest.raises(psycopg.errors.FeatureNotSupported) as refused:
                c.execute("ALTER MATERIALIZED VIEW top SET PARALLELISM = 3")
            assert "top-N" in str(refused.value)
            assert "GROUP BY aggregations and equi-joins" in str(refused.value.diag.message_hint)
            assert c.execute(
                "SELECT count(*) FROM rw_actors WHERE job_name = 'top' AND worker_id IS NOT NULL"
            ).fetchone() == (2,)
    finally:
        stop.set()
        th.join(timeout=60)
    assert not errors, errors
    with srv.connect() as c:
        c.execute("FLUSH")
        assert c.execute("SELECT sum(n) FROM agg").fetchone()[0] == sent[0]
        assert _sorted(c, "SELECT * FROM j") == _sorted(c, JOIN)
        assert _sorted(c, "SELECT * FROM top") == _sorted(c, TOP)
    srv.restart()  # the rescaled layout is what recovery rebuilds
    with srv.connect() as c:
        assert _sorted(c, "SELECT * FROM agg") == _sorted(c, AGG)
        c.execute("INSERT INTO ev VALUES (3, 5)")
        c.execute("FLUSH")
        assert _sorted(c, "SELECT * FROM agg") == _sorted(c, AGG)
        assert _sorted(c, "SELECT * FROM j") == _sorted(c, JOIN)
