"""Stream workers as Ray actors on a real two-node Ray cluster on loopback.

One cluster for the module (`ray_cluster`, tests/harness/ray_cluster.py): a start takes
several seconds. The launcher tests drive `RayLauncher` with a stand-in host (a counter
echo) so they check the transport alone: placement over both nodes, FIFO answers, large
messages through Ray's object store, and a dead or failing actor surfacing as `WorkerLost`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

from engine.stream.parallel.protocol import WorkerLost
from engine.stream.parallel.transport_ray import NAMESPACE, RayLauncher
from harness.ray_cluster import LocalRayCluster

pytestmark = pytest.mark.e2e


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


def test_workers_spread_over_nodes_and_answer_in_order(
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


def test_killed_actor_is_worker_lost_and_restarts(
    ray_cluster: LocalRayCluster, launcher: RayLauncher
) -> None:
    import ray

    h = launcher.start(0, {})
    h.submit(b"x")
    assert h.result(timeout=60) == b"1:x"
    node = h.info()["node"]
    ray.kill(ray.get_actor(h.name, namespace=NAMESPACE))
    h.submit(b"y")
    with pytest.raises(WorkerLost, match="worker 0"):
        h.result(timeout=60)
    assert not h.alive()
    with pytest.raises(WorkerLost):
        h.submit(b"z")
    again = launcher.start(0, {})
    again.submit(b"z")
    assert again.result(timeout=60) == b"1:z"  # a fresh host
    assert again.info()["node"] == node  # back on the node its predecessor left


@pytest.mark.parametrize("request_", [b"exit", b"raise"])
def test_crashing_host_is_worker_lost(launcher: RayLauncher, request_: bytes) -> None:
    h = launcher.start(0, {})
    h.submit(request_)
    with pytest.raises(WorkerLost):
        h.result(timeout=60)
    assert not h.alive()
