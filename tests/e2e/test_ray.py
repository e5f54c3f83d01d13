"""Stream workers as Ray actors on a real two-node Ray cluster on loopback.

One cluster for the module (`ray_cluster`, tests/harness/ray_cluster.py): a start takes
several seconds. The launcher tests drive `RayLauncher` with a stand-in host (a counter
echo) so they check the transport alone: placement over both nodes, FIFO answers, large
messages through Ray's object store, a crashed or failing host surfacing as `WorkerLost`.
The server test runs a parallel GROUP BY view on two actors (one per node), kills one
with `ray.kill` while rows arrive, and checks the view against its query after FLUSH.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator

import psycopg
import pytest

from engine.stream.parallel.protocol import WorkerLost
from engine.stream.parallel.transport_ray import NAMESPACE, RayLauncher
from harness.ray_cluster import LocalRayCluster
from harness.server import SwellServer

# a cluster start takes seconds on an idle machine, up to a minute on a loaded one
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(300)]


class CountingEchoHost:
    """Stand-in for WorkerHost: answers `<n>:<request reversed>`; `exit` ends the process
    (a crash), `raise` raises (a bug in the host)."""

    def __init__(self, config: dict[str, object]) -> None:
        self.config = config
        self.count = 0

    def handle(self, request: bytes) -> bytes:
        self.count += 1
        if request == b"exit":
            os._exit(1)
        if request == b"raise":
            raise RuntimeError("boom")
        return b"%d:" % self.count + request[::-1]


@pytest.fixture
def launcher(ray_cluster: LocalRayCluster) -> Iterator[RayLauncher]:
    import ray

    # the stand-in lives in this test module, which Ray's workers cannot import by name
    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    launcher = RayLauncher(ray_cluster.address, host_factory=CountingEchoHost)
    try:
        yield launcher
    finally:
        launcher.close()


def test_workers_spread_over_nodes_answer_in_order_and_fail_as_lost(
    ray_cluster: LocalRayCluster, launcher: RayLauncher
) -> None:
    handles = [launcher.start(i, {"worker": i}) for i in range(2)]
    for h in handles:
        for req in (b"abc", b"de", b"f"):
            h.submit(req)
    for h in handles:
        assert [h.result(timeout=60) for _ in range(3)] == [b"1:cba", b"2:ed", b"3:f"]
    infos = [h.info() for h in handles]
    assert sorted(str(i["node"]) for i in infos) == ray_cluster.alive_node_ids()
    assert all(i["transport"] == "ray" and i["address"] == "127.0.0.1" for i in infos)
    big = os.urandom(3 << 20)  # beyond Ray's inline limit: goes through the object store
    handles[1].submit(big)
    assert handles[1].result(timeout=60) == b"4:" + big[::-1]
    assert all(h.alive() for h in handles)
    # a crash (the process exits) and a bug (the host raises) both lose the worker
    crashing, failing = handles
    crashing.submit(b"exit")
    failing.submit(b"raise")
    for h in handles:
        with pytest.raises(WorkerLost, match=f"worker {h.worker_id} "):
            h.result(timeout=60)
        assert not h.alive()
        with pytest.raises(WorkerLost):
            h.submit(b"more")


def _swell_actors() -> dict[str, dict[str, object]]:
    """The live worker actors of Swell servers on the cluster, by name, with where they
    run (asked of each actor itself)."""
    import ray

    names = [
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["namespace"] == NAMESPACE
    ]
    out = {}
    for name in names:
        try:
            actor = ray.get_actor(name, namespace=NAMESPACE)
            out[name] = ray.get(actor.ready.remote(), timeout=60)
        except (ValueError, ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            continue  # gone meanwhile
    return out


GROUP_BY = "SELECT k, count(*) AS n, sum(v) AS s, max(v) AS m FROM t GROUP BY k"


def test_parallel_view_on_ray_is_exact_after_an_actor_is_killed(
    ray_cluster: LocalRayCluster, make_server: Callable[..., SwellServer]
) -> None:
    import ray

    srv = make_server(
        parallelism=2,
        extra_args=["--ray-address", ray_cluster.address],
        env=ray_cluster.env(),
    )
    with srv.connect() as c:
        c.execute("CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR, v INT)")
        c.execute(
            "INSERT INTO t SELECT g, 'k' || (g % 50)::varchar, g FROM generate_series(1, 500) g"
        )
        c.execute(f"CREATE MATERIALIZED VIEW mv AS {GROUP_BY}")
        actors = _swell_actors()
        assert len(actors) == 2, actors
        assert sorted(str(a["node"]) for a in actors.values()) == ray_cluster.alive_node_ids()
        victim = sorted(actors)[1]
        for batch in range(1, 9):  # rows keep arriving (and epochs committing) meanwhile
            first = batch * 1000
            c.execute(
                "INSERT INTO t SELECT g, 'k' || (g % 70)::varchar, g % 997 "
                f"FROM generate_series({first}, {first + 299}) g"
            )
            c.execute(f"UPDATE t SET v = v + 1 WHERE id % 9 = {batch}")
            c.execute(f"DELETE FROM t WHERE id % 13 = {batch}")
            if batch == 4:
                ray.kill(ray.get_actor(victim, namespace=NAMESPACE))
        for _ in range(5):  # the epoch the lost actor was part of fails; the next applies it
            try:
                c.execute("FLUSH")
                break
            except psycopg.Error as exc:
                assert "lost" in str(exc), exc
        else:
            pytest.fail("FLUSH kept failing after the actor was killed")
        view = c.execute("SELECT k, n, s, m FROM mv ORDER BY k").fetchall()
        scratch = c.execute(f"SELECT * FROM ({GROUP_BY}) q ORDER BY k").fetchall()
        assert view == scratch
        assert sum(r[1] for r in view) == c.execute("SELECT count(*) FROM t").fetchone()[0]
        events = [r[0] for r in c.execute("SELECT event_type FROM rw_catalog.rw_event_logs")]
        assert "WORKER_LOST" in events
        placed = c.execute(
            "SELECT DISTINCT node, address FROM rw_catalog.rw_actors WHERE worker_id IS NOT NULL"
        ).fetchall()
        assert sorted(placed) == [(n, "127.0.0.1") for n in ray_cluster.alive_node_ids()]
    after = _swell_actors()
    assert len(after) == 2 and victim not in after  # the lost worker was started again
    assert sorted(str(a["node"]) for a in after.values()) == ray_cluster.alive_node_ids()
    srv.stop()
    deadline = time.monotonic() + 60  # the server's actors end with it (ray.kill is async)
    while _swell_actors() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _swell_actors() == {}
