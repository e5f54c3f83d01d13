"""RayLauncher without a Ray cluster: a bad or unreachable address is a one-line startup
error, and the placement of workers over nodes (the cluster cases are in
tests/e2e/test_ray.py)."""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path

import pytest

from engine.stream.parallel import transport_ray
from engine.stream.parallel.transport_ray import RayLauncher, RayNode, RayUnavailable
from harness.server import free_port
from pgwire import cli


def test_unreachable_address_fails_fast() -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(
        RayUnavailable, match=f"could not connect to the Ray cluster at 127.0.0.1:{port}"
    ):
        transport_ray._check_reachable(f"127.0.0.1:{port}")


@pytest.mark.parametrize("address", ["nohost", "host:port", ":"])
def test_malformed_address(address: str) -> None:
    with pytest.raises(RayUnavailable, match="invalid Ray address"):
        transport_ray._check_reachable(address)


def test_auto_and_client_addresses_are_left_to_ray() -> None:
    transport_ray._check_reachable("auto")
    transport_ray._check_reachable("ray://head:10001")


def test_playground_with_unreachable_ray_exits_1(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    args = cli.build_parser().parse_args(
        [
            "playground",
            "--data-dir",
            str(tmp_path / "d"),
            "--ray-address",
            f"127.0.0.1:{free_port()}",
        ]
    )
    assert isinstance(args, argparse.Namespace)
    with caplog.at_level(logging.ERROR, logger="swell"):
        assert asyncio.run(cli.playground(args)) == 1
    assert "startup failed" in caplog.text and "Ray cluster" in caplog.text


class _Placed:
    """What `_pick_node` reads of a started worker's handle."""

    def __init__(self, node: str, lost: str | None = None) -> None:
        self._node_id = node
        self._lost = lost


def _launcher(nodes: list[RayNode], cpus: float = 1.0) -> RayLauncher:
    launcher = RayLauncher.__new__(RayLauncher)  # no cluster: placement logic only
    launcher.num_cpus = cpus
    launcher._handles = {}
    launcher.nodes = lambda: sorted(nodes)  # type: ignore[method-assign]
    launcher.cluster_cpus = lambda: int(sum(n.cpus for n in nodes))  # type: ignore[method-assign]
    return launcher


def test_workers_go_round_robin_and_back_to_the_node_left() -> None:
    launcher = _launcher([RayNode("b", "10.0.0.2", 4), RayNode("a", "10.0.0.1", 4)])
    picked = []
    for i in range(4):
        node = launcher._pick_node()
        assert node is not None
        picked.append(node)
        launcher._handles[i] = _Placed(node)  # type: ignore[assignment]
    assert picked == ["a", "b", "a", "b"]
    del launcher._handles[1]  # worker 1 (on b) restarts: back to b
    assert launcher._pick_node() == "b"
    launcher._handles[1] = _Placed("b", lost="killed")  # a lost worker does not count
    assert launcher._pick_node() == "b"


def test_nodes_without_cpus_for_a_worker_are_skipped() -> None:
    launcher = _launcher([RayNode("a", "10.0.0.1", 0), RayNode("b", "10.0.0.2", 2)])
    assert launcher._pick_node() == "b"
    assert _launcher([RayNode("a", "10.0.0.1", 0)])._pick_node() is None  # Ray decides


def test_too_few_cpus_for_the_workers_gives_each_a_fraction() -> None:
    launcher = _launcher([RayNode("a", "10.0.0.1", 2), RayNode("b", "10.0.0.2", 1)])
    launcher._fit(2)
    assert launcher.num_cpus == 1.0
    launcher._fit(8)
    assert launcher.num_cpus == 0.37  # 3 CPUs over 8 workers, rounded down
