"""Fixtures shared by every test: real Swell servers for end-to-end tests.

Fixtures (see tests/harness/server.py for the `SwellServer` API):

- `server` (session): the shared server, started on first use on free loopback ports with
  a temporary data directory and a 100 ms barrier interval. Tests that use it must use
  their own table names and drop what they create. If a test kills it, that test errors at
  teardown and the server is restarted for the others.
- `conn` (function): a psycopg autocommit connection to `server` (user root, database dev),
  closed after the test.
- `fresh_server` (function): a server of the test's own, with its own data directory, for
  restart and crash tests. Options via `@pytest.mark.swell_server(barrier_interval_ms=...,
  extra_args=[...], env={...})`.
- `make_server` (function): a factory `make_server(data_dir=None, **SwellServer kwargs)`
  for tests needing several servers; all are stopped (or killed) at teardown.

Tests that use any of these are marked `e2e` automatically (`pytest -m "not e2e"` skips
them). The shared server stops at session end; an unclean shutdown fails the session.

The whole suite (plain `pytest`, no paths) runs in `SWELL_TEST_WORKERS` pytest-xdist
worker processes (default: 2, or the number of cores if fewer), each test file in one
worker so its module fixtures (brokers, catalogs, clusters) start once; most of the
suite's time is spent waiting on servers, so two workers fit two cores. Each worker has
its own shared server. Naming test paths runs them in one process, as usual;
`SWELL_TEST_WORKERS=0` (or `-n 0`) runs the whole suite in one process too.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from harness.server import SwellServer
from harness.shared import check_shared_server, shared_server, shutdown_shared_server

_SERVER_FIXTURES = {"server", "conn", "fresh_server", "make_server"}

# Kafka broker fixtures (`kafka_broker`, `kafka_topic`): tests/harness/kafka.py; a local
# two-node Ray cluster (`ray_cluster`): tests/harness/ray_cluster.py; the `needs`
# marker for external programs (psql, a JDK, openssl, ...): tests/harness/tools.py
pytest_plugins = ["harness.kafka", "harness.ray_cluster", "harness.tools"]


@pytest.hookimpl(tryfirst=True)  # before xdist turns -n into worker processes
def pytest_cmdline_main(config: pytest.Config) -> None:
    if config.args_source is not pytest.Config.ArgsSource.TESTPATHS:
        return  # paths named on the command line: one process
    if not config.pluginmanager.hasplugin("xdist") or os.environ.get("PYTEST_XDIST_WORKER"):
        return
    if getattr(config.option, "numprocesses", None) is not None:
        return  # -n given
    workers = int(os.environ.get("SWELL_TEST_WORKERS", min(2, os.cpu_count() or 1)))
    if workers > 1:
        config.option.numprocesses = workers
        config.option.dist = "loadfile"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "swell_server(**kwargs): SwellServer options for the fresh_server fixture",
    )


@pytest.hookimpl(tryfirst=True)  # before `-m` deselection looks at the markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & _SERVER_FIXTURES or item.get_closest_marker("e2e") is not None:
            item.add_marker(pytest.mark.e2e)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    failed = exitstatus != 0 or session.testsfailed > 0  # an xdist worker's exitstatus is 0
    problems, kept = shutdown_shared_server(session.config, keep_data=failed)
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")

    def say(text: str, **markup: bool) -> None:
        if reporter is not None:
            reporter.write_line(text, **markup)
        else:
            print(text)

    for p in problems:
        say("")
        say(p, red=True)
    if kept is not None:
        say(f"shared swell server data directory (with swell-server.log) kept at {kept}")
    if problems and session.exitstatus == 0:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(scope="session")
def server(request: pytest.FixtureRequest) -> SwellServer:
    return shared_server(request.config)


@pytest.fixture(autouse=True)
def _shared_server_watch(request: pytest.FixtureRequest) -> Iterator[None]:
    """After a test that used the shared server, fail it if the server died meanwhile."""
    yield
    if "server" in request.fixturenames:
        check_shared_server(request.config, request.node.nodeid)


@pytest.fixture
def conn(server: SwellServer) -> Iterator[psycopg.Connection[Any]]:
    c = server.connect()
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def make_server(tmp_path: Path) -> Iterator[Callable[..., SwellServer]]:
    made: list[SwellServer] = []

    def make(data_dir: Path | str | None = None, **kwargs: Any) -> SwellServer:
        d = Path(data_dir) if data_dir is not None else tmp_path / f"data{len(made)}"
        srv = SwellServer(d, **kwargs)
        made.append(srv)
        return srv.start()

    yield make
    errors = []
    for srv in made:
        try:
            srv.stop()
        except Exception as e:  # stop every server even if one hangs
            errors.append(e)
    if errors:
        raise errors[0]


@pytest.fixture
def fresh_server(
    request: pytest.FixtureRequest, make_server: Callable[..., SwellServer]
) -> SwellServer:
    marker = request.node.get_closest_marker("swell_server")
    kwargs = dict(marker.kwargs) if marker is not None else {}
    return make_server(**kwargs)
