"""RayLauncher's startup checks that need no Ray cluster: a bad or unreachable address is a
one-line startup error (the cluster cases are in tests/e2e/test_ray.py)."""

from __future__ import annotations

import argparse
import asyncio
import logging
from pathlib import Path

import pytest

from engine.stream.parallel import transport_ray
from engine.stream.parallel.transport_ray import RayUnavailable
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
