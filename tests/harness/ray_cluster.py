"""`LocalRayCluster`: a real Ray cluster of several nodes on this machine, on loopback.

Ray's `ray.cluster_utils.Cluster` starts a head node (GCS, raylet, object store) and more
raylets as separate processes, each a real Ray node with its own node id and object store,
all on 127.0.0.1 because `RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0` is set (otherwise Ray binds
the machine's network address). That variable and `RAY_TMPDIR` (a fresh temporary
directory, so the cluster's session files and logs go there instead of /tmp/ray) are set in
this process for the cluster's lifetime and handed to Swell servers through `env()`; they
are set here only, never for users (the first makes `ray start --address` abort).

Lifecycle: `start()` starts the nodes, waits until all are registered and connects this
process as a driver (tests kill actors through it); `stop()` disconnects, shuts the
nodes down, kills any Ray process still running under the temporary directory (by PID) and
removes the directory, so no Ray process or session file outlives the tests. An `atexit`
hook stops a cluster still running.

Fixture: `ray_cluster` (module): one two-node cluster (1 CPU each) per test module; a
cluster start takes several seconds, so a module starts one and its tests share it.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

_LIVE: set[LocalRayCluster] = set()

LOOPBACK_ENV = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


class LocalRayCluster:
    def __init__(self, nodes: int = 2, cpus_per_node: int = 1) -> None:
        self.nodes = nodes
        self.cpus_per_node = cpus_per_node
        self.tmp_dir = ""
        self.address = ""
        self._cluster: Any = None
        self._saved_env: dict[str, str | None] = {}
        self._saved_loopback: bool | None = None

    def env(self) -> dict[str, str]:
        """What a Swell server started with `--ray-address` needs to reach this cluster."""
        return {"RAY_TMPDIR": self.tmp_dir, LOOPBACK_ENV: "0"}

    def start(self) -> LocalRayCluster:
        # short path: Ray's Unix sockets live under it (107-byte limit)
        self.tmp_dir = tempfile.mkdtemp(prefix="swray-", dir="/tmp")
        for key, value in self.env().items():
            self._saved_env[key] = os.environ.get(key)
            os.environ[key] = value
        _LIVE.add(self)
        # Ray reads the loopback switch once, when `ray` is first imported
        constants = sys.modules.get("ray._private.ray_constants")
        if constants is not None:
            self._saved_loopback = constants.ENABLE_RAY_CLUSTER
            constants.ENABLE_RAY_CLUSTER = False
        import ray
        from ray.cluster_utils import Cluster

        node_args = {
            "num_cpus": self.cpus_per_node,
            # a small object store: the tests move kilobytes, and /dev/shm is shared
            "object_store_memory": 80 * 1024 * 1024,
        }
        self._cluster = Cluster(
            initialize_head=True, head_node_args={**node_args, "include_dashboard": False}
        )
        for _ in range(self.nodes - 1):
            self._cluster.add_node(**node_args)
        self._cluster.wait_for_nodes()
        self.address = self._cluster.address
        ray.init(address=self.address, log_to_driver=False)
        return self

    def alive_node_ids(self) -> list[str]:
        import ray

        return sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])

    def stop(self) -> None:
        _LIVE.discard(self)
        try:
            import ray

            if ray.is_initialized():
                ray.shutdown()
            if self._cluster is not None:
                self._cluster.shutdown()
        finally:
            self._cluster = None
            _kill_processes_under(self.tmp_dir)
            if self.tmp_dir:
                shutil.rmtree(self.tmp_dir, ignore_errors=True)
            for key, value in self._saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
            self._saved_env = {}
            constants = sys.modules.get("ray._private.ray_constants")
            if constants is not None and self._saved_loopback is not None:
                constants.ENABLE_RAY_CLUSTER = self._saved_loopback


def ray_processes_under(path: str) -> list[int]:
    """PIDs of processes whose command line mentions `path` (Ray's daemons and workers
    name their session directory in their arguments)."""
    if not path:
        return []
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if path.encode() in cmdline and int(entry) != os.getpid():
            pids.append(int(entry))
    return pids


def _kill_processes_under(path: str) -> None:
    for pid in ray_processes_under(path):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


@atexit.register
def _stop_leftovers() -> None:
    for cluster in list(_LIVE):
        cluster.stop()


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[LocalRayCluster]:
    cluster = LocalRayCluster()
    try:
        yield cluster.start()
    finally:
        cluster.stop()
