"""Ray transport: the server's stream workers as Ray actors spread over a Ray cluster's nodes.

`RayLauncher` implements the `WorkerLauncher` interface of `transport.py` for
`--ray-address`: every worker is one Ray actor (`_RayWorker`) holding one `WorkerHost`
and answering `handle(request: bytes) -> bytes`, so the coordinator speaks exactly the same
framed protocol as over the local process transport. Requests and responses are plain
`bytes` (a small header plus Arrow IPC bodies): Ray passes small ones inline with the task
and puts large ones in its object store, which moves them between nodes; no engine object
is pickled.

Placement: with `spread=True` (the default) each `start()` pins the new actor, with soft
node affinity, to the alive node holding the fewest of this launcher's live workers (ties
broken by node id), so W workers over N nodes land round-robin and a restarted worker
returns to the node its predecessor left (or to another if that node is gone). Each actor
reserves `num_cpus` CPUs (default 1: a worker keeps one core busy), so Ray never stacks more
workers on a node than it has cores; given the worker count (`workers=`), a cluster with
fewer CPUs gets a fraction per worker instead (with a warning). A worker that cannot be
placed within `start_timeout_s` raises `WorkerLost` with a hint instead of waiting forever.

Faults: an actor that dies (killed, its process or node gone) makes every pending and
future `result()` raise `WorkerLost`; so does an exception escaping `WorkerHost.handle`
(a bug: the host answers engine errors inside its responses), after the actor is killed.
The pool then restarts workers through `start()` and the runtime recovers from the last
checkpoint, re-shipping each actor's state from the coordinator's store, so an actor can
come back on any node. Actors are not detached: their lifetime is the server's Ray
connection, so a server that exits (even by kill -9) leaves no workers behind.

Lifecycle: `RayLauncher(address)` connects (`ray.init`, in the main thread: Ray installs its
SIGTERM handler there; the server installs its own afterwards) unless this process is
already connected; `start()` per worker; `close()` kills the launcher's actors and
disconnects if it connected. `ray` is imported here only, lazily, so the engine runs
without Ray installed; Ray's exceptions are matched by class through the module.
"""

from __future__ import annotations

import collections
import contextlib
import importlib
import logging
import os
import secrets
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any, NamedTuple

from engine.errors import EngineError
from engine.stream.parallel.protocol import WorkerLost

log = logging.getLogger("swell.parallel")

NAMESPACE = "swell"
"""Ray namespace of the server's actors (named, so operators can find them with
`ray list actors` or `ray.get_actor(name, namespace="swell")`)."""

ACTOR_PREFIX = "swell-"

SCRATCH_DIR = "swell-scratch"
"""Folder of the workers' scratch directories in each node's Ray session directory."""

DEFAULT_START_TIMEOUT_S = 60.0
"""How long a new worker may take to be placed and constructed (a Ray worker process starts
in about a second; a cluster without free CPUs never places it)."""

CPU_RELEASE_WAIT_S = 3.0
"""How long a new worker waits for free CPUs (those of an actor killed just before are
released asynchronously) before it is started without reserving any."""

CONNECT_TIMEOUT_S = 5.0
"""TCP reachability check of the GCS address before `ray.init` (which otherwise retries for
minutes against an address where nothing listens)."""

HostFactory = Callable[[dict[str, object]], Any]
"""Builds the object answering `handle(bytes) -> bytes` inside the actor; the default is
`engine.stream.parallel.host.WorkerHost` (tests pass a stand-in)."""


def _ray() -> Any:
    """The `ray` module, imported on first use (an optional dependency: `swell[ray]`)."""
    try:
        return importlib.import_module("ray")
    except ImportError as exc:
        raise RayUnavailable(
            "--ray-address needs Ray, which is not installed",
            hint='Install it with: pip install "swell[ray]"',
        ) from exc


class RayUnavailable(EngineError):
    """Ray is not installed or its cluster cannot be reached (a startup error)."""

    sqlstate = "58000"  # system_error: outside the database


class RayNode(NamedTuple):
    """One alive node of the Ray cluster."""

    node: str  # Ray's node id (hex)
    address: str  # its IP address
    cpus: float  # its CPU resource


# -- the actor ------------------------------------------------------------------------------
class _RayWorker:
    """One stream worker inside a Ray actor process: a `WorkerHost` behind `handle`.

    Ray runs the actor's calls one at a time in submission order (max_concurrency 1), which
    is the FIFO request/response order `WorkerHandle.result` relies on."""

    def __init__(self, config: dict[str, object], host_factory: HostFactory | None) -> None:
        ray = _ray()
        config = dict(config)
        # the coordinator's data directory does not exist on other nodes: the worker's
        # scratch state goes to a directory of its own on its node
        scratch = _scratch_dir(ray)
        config["scratch_dir"] = scratch
        if host_factory is None:
            from engine.stream.parallel.host import WorkerHost

            host_factory = WorkerHost
        self._host = host_factory(config)
        ctx = ray.get_runtime_context()
        self._info: dict[str, object] = {
            "transport": "ray",
            "pid": os.getpid(),
            "node": ctx.get_node_id(),
            "address": ray.util.get_node_ip_address(),
            "actor": ctx.get_actor_id(),
            "scratch_dir": scratch,
        }

    def ready(self) -> dict[str, object]:
        return self._info

    def handle(self, request: bytes) -> bytes:
        return bytes(self._host.handle(request))


# -- the coordinator's side -----------------------------------------------------------------
class RayWorkerHandle:
    """The coordinator's handle of one worker actor (the `WorkerHandle` interface)."""

    def __init__(
        self,
        worker_id: int,
        actor: Any,
        name: str,
        node_id: str | None,
        start_timeout_s: float,
    ) -> None:
        self.worker_id = worker_id
        self.name = name
        self._actor = actor
        self._node_id = node_id  # the node it was pinned to (None: Ray's choice)
        self._ready_ref: Any | None = actor.ready.remote()
        self._start_deadline = time.monotonic() + start_timeout_s
        self._start_timeout_s = start_timeout_s
        self._info: dict[str, object] = {"transport": "ray", "actor_name": name}
        self._pending: collections.deque[Any] = collections.deque()
        self._lost: str | None = None  # why, once the actor is known gone
        self._hint: str | None = None

    # -- WorkerHandle ----------------------------------------------------------------------
    def submit(self, request: bytes) -> None:
        """Queue one `handle` call on the actor; returns at once."""
        if self._lost is not None:
            raise self._lost_error()
        self._pending.append(self._actor.handle.remote(request))

    def result(self, timeout: float | None = None) -> bytes:
        """The response to the oldest submitted request; `WorkerLost` if the actor is gone,
        failed, or did not answer within `timeout` seconds (it is killed then: a late
        answer would break the FIFO order of the next epoch)."""
        if self._lost is not None:
            raise self._lost_error()
        if not self._pending:
            raise WorkerLost(f"worker {self.worker_id}: result() without a pending request")
        self._await_ready()
        ray = _ray()
        try:
            out = ray.get(self._pending[0], timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            self._fail(f"no answer within {timeout:g} s")
            err = self._lost_error()
            err.timed_out = True
            raise err from None
        except ray.exceptions.RayTaskError as exc:
            # an exception escaped WorkerHost.handle: log it here (the traceback is the
            # worker's), never hand it to clients
            log.error("ray worker %d failed: %s", self.worker_id, exc)
            self._fail("its host raised an exception")
            raise self._lost_error() from None
        except (
            ray.exceptions.RayActorError,
            ray.exceptions.WorkerCrashedError,
            ray.exceptions.ObjectLostError,
            ray.exceptions.NodeDiedError,
            ray.exceptions.RaySystemError,
        ) as exc:
            self._fail(_first_line(exc))
            raise self._lost_error() from None
        self._pending.popleft()
        return bytes(out)

    def alive(self) -> bool:
        """False once the actor is known dead (seen by a call, or DEAD in Ray's actor
        table, which this asks: one GCS round trip)."""
        if self._lost is not None:
            return False
        try:
            ray = _ray()
            state = ray._private.state.state.actor_table(self._actor._actor_id.hex())
        except Exception:  # noqa: BLE001 - the state API is best effort
            return True
        if state and state.get("State") == "DEAD":
            self._lost = "the actor is dead"
            return False
        return True

    def kill(self) -> None:
        """Kill the actor (no restart by Ray: the pool restarts workers itself)."""
        if self._lost is None:
            self._lost = "killed by the server"
        try:
            _ray().kill(self._actor, no_restart=True)
        except Exception as exc:  # noqa: BLE001 - already gone is fine
            log.debug("ray kill of worker %d: %s", self.worker_id, exc)
        self._pending.clear()

    def info(self) -> dict[str, object]:
        """Where the worker runs: {"transport", "actor_name", "pid", "node", "address",
        "actor", "scratch_dir"}; pid/node/address once the actor has started. Never waits
        (system tables read it while the barrier runs)."""
        ref = self._ready_ref
        if ref is not None and self._lost is None:
            done, _ = _ray().wait([ref], timeout=0)
            if done:
                with contextlib.suppress(WorkerLost):
                    self._await_ready()
        return dict(self._info)

    # -- internals -------------------------------------------------------------------------
    def _await_ready(self) -> None:
        """Wait (up to the start deadline) until the actor is placed and constructed."""
        if self._ready_ref is None:
            return
        ray = _ray()
        left = max(0.0, self._start_deadline - time.monotonic())
        try:
            self._info.update(ray.get(self._ready_ref, timeout=left))
        except ray.exceptions.GetTimeoutError:
            self._fail(
                f"not placed within {self._start_timeout_s:g} s",
                hint="Each worker reserves CPUs on a Ray node; check that the cluster has "
                "free CPUs for --parallelism workers (ray status).",
            )
            raise self._lost_error() from None
        except ray.exceptions.RayError as exc:
            self._fail(f"it did not start: {_first_line(exc)}")
            raise self._lost_error() from None
        self._ready_ref = None

    def _fail(self, why: str, *, hint: str | None = None) -> None:
        if self._lost is None:
            self._lost = why
        self._hint = hint
        self.kill()

    def _lost_error(self) -> WorkerLost:
        where = self._info.get("node") or self._node_id or "?"
        return WorkerLost(
            f"worker {self.worker_id} (Ray actor {self.name} on node {where}) is lost: "
            f"{self._lost}",
            hint=self._hint,
        )


class RayLauncher:
    """Starts stream workers as Ray actors (the `WorkerLauncher` interface)."""

    def __init__(
        self,
        address: str,
        *,
        workers: int | None = None,
        num_cpus: float = 1.0,
        spread: bool = True,
        start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
        host_factory: HostFactory | None = None,
    ) -> None:
        self.address = address
        self.num_cpus = num_cpus
        self.spread = spread
        self.start_timeout_s = start_timeout_s
        self._host_factory = host_factory
        self._token = secrets.token_hex(3)  # names of this server's actors are its own
        self._handles: dict[int, RayWorkerHandle] = {}
        self._starts = 0
        self._connected_here = False
        self._actor_class: Any | None = None
        self._connect()
        if workers is not None:
            self._fit(workers)

    # -- WorkerLauncher --------------------------------------------------------------------
    def start(self, worker_id: int, config: dict[str, object]) -> RayWorkerHandle:
        """Create worker `worker_id`'s actor and return its handle at once (the first
        `result()`/`info()` waits until it is placed); a previous actor of the same id is
        killed first."""
        old = self._handles.pop(worker_id, None)
        if old is not None:
            old.kill()
        ray = _ray()
        self._starts += 1
        name = f"{ACTOR_PREFIX}{self._token}-w{worker_id}-{self._starts}"
        node_id = self._pick_node() if self.spread else None
        options: dict[str, Any] = {
            "name": name,
            "namespace": NAMESPACE,
            "num_cpus": self._cpus_for_next(),
            "max_restarts": 0,  # the pool restarts workers and re-ships their state
            "max_task_retries": 0,
            "max_concurrency": 1,
        }
        if node_id is not None:
            strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy
            options["scheduling_strategy"] = strategy(node_id=node_id, soft=True)
        config = {**config, "worker_id": worker_id}
        actor = self._remote_class().options(**options).remote(config, self._host_factory)
        handle = RayWorkerHandle(worker_id, actor, name, node_id, self.start_timeout_s)
        self._handles[worker_id] = handle
        log.info(
            "ray worker starting worker=%d actor=%s node=%s", worker_id, name, node_id or "any"
        )
        return handle

    def close(self) -> None:
        """Kill every actor of this launcher and disconnect if `__init__` connected;
        idempotent."""
        handles, self._handles = list(self._handles.values()), {}
        for handle in handles:
            handle.kill()
        if self._connected_here:
            self._connected_here = False
            try:
                _ray().shutdown()
            except Exception as exc:  # noqa: BLE001 - shutdown must go on
                log.warning("ray shutdown failed: %s", exc)

    # -- cluster ---------------------------------------------------------------------------
    def nodes(self) -> list[RayNode]:
        """The cluster's alive nodes, by node id."""
        out = [
            RayNode(
                str(node["NodeID"]),
                str(node.get("NodeManagerAddress", "")),
                float(node.get("Resources", {}).get("CPU", 0.0)),
            )
            for node in _ray().nodes()
            if node.get("Alive")
        ]
        return sorted(out)

    def cluster_cpus(self) -> int:
        """CPUs of the whole cluster (a sensible default for --parallelism on Ray)."""
        return int(_ray().cluster_resources().get("CPU", 0))

    def _fit(self, workers: int) -> None:
        """Reserve less than `num_cpus` per worker when the cluster has fewer CPUs than
        `workers` need: otherwise the last workers would never be placed."""
        cpus = self.cluster_cpus()
        if cpus > 0 and workers * self.num_cpus > cpus:
            fitted = max(0.01, int(cpus / workers * 100) / 100)
            log.warning(
                "ray cluster has fewer CPUs than workers cpus=%d workers=%d cpus_per_worker=%.2f",
                cpus,
                workers,
                fitted,
            )
            self.num_cpus = fitted

    def _cpus_for_next(self) -> float:
        """`num_cpus`, or 0 when the cluster has no such room left (a node was lost): an
        unplaceable replacement would stall recovery, while one sharing a node's CPUs only
        runs slower. Waits up to `CPU_RELEASE_WAIT_S` for the CPUs of a just-killed actor
        to be released."""
        ray = _ray()
        deadline = time.monotonic() + CPU_RELEASE_WAIT_S
        while True:
            try:
                free = float(ray.available_resources().get("CPU", 0.0))
            except Exception:  # noqa: BLE001 - the resource view is best effort
                return self.num_cpus
            if free + 1e-9 >= self.num_cpus:
                return self.num_cpus
            if time.monotonic() >= deadline:
                break
            time.sleep(0.1)
        log.warning(
            "ray cluster has no free CPU for a worker: it shares a node's CPUs free=%.2f",
            free,
        )
        return 0.0

    def _pick_node(self) -> str | None:
        """The alive node with CPUs for a worker holding fewest of this launcher's live
        workers (ties: lowest node id); None when Ray reports no such node."""
        candidates = [n for n in self.nodes() if n.cpus >= self.num_cpus]
        if not candidates:
            return None
        load = collections.Counter(h._node_id for h in self._handles.values() if h._lost is None)
        return min(candidates, key=lambda n: (load[n.node], n.node)).node

    def _remote_class(self) -> Any:
        if self._actor_class is None:
            self._actor_class = _ray().remote(_RayWorker)
        return self._actor_class

    def _connect(self) -> None:
        loaded = sys.modules.get("ray")
        if loaded is not None and loaded.is_initialized():  # e.g. a connected test driver
            return
        _check_reachable(self.address)  # before importing Ray: a bad address fails fast
        ray = _ray()
        try:
            ray.init(
                address=self.address,
                namespace=NAMESPACE,
                # worker output stays in the Ray session's logs, not in the server's log
                log_to_driver=False,
                configure_logging=False,
            )
        except Exception as exc:  # noqa: BLE001 - any failure to connect is a startup error
            raise RayUnavailable(
                f"could not connect to the Ray cluster at {self.address}: {_first_line(exc)}"
            ) from exc
        self._connected_here = True
        log.info(
            "ray connected address=%s nodes=%d cpus=%d",
            self.address,
            len(self.nodes()),
            self.cluster_cpus(),
        )


def _scratch_dir(ray: Any) -> str:
    """A fresh scratch directory for this actor process under its node's Ray session
    directory (or the system temp directory), after removing those of actors whose process
    is gone: a killed actor cannot clean up after itself."""
    try:
        base = ray._private.worker.global_worker.node.get_session_dir_path()
    except Exception:  # noqa: BLE001 - private API: fall back to the temp directory
        base = tempfile.gettempdir()
    root = os.path.join(base, SCRATCH_DIR)
    os.makedirs(root, exist_ok=True)
    for entry in os.listdir(root):
        pid = entry.rpartition("-")[2]
        if pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(os.path.join(root, entry), ignore_errors=True)
    path = os.path.join(root, f"worker-{os.getpid()}")
    os.makedirs(path, exist_ok=True)
    return path


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _check_reachable(address: str) -> None:
    """Fail fast when nothing listens at a HOST:PORT address (`auto` and `ray://` are left
    to Ray)."""
    if address == "auto" or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise RayUnavailable(
            f"invalid Ray address {address!r}", hint="Use HOST:PORT of the head node's GCS."
        )
    try:
        with socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        raise RayUnavailable(
            f"could not connect to the Ray cluster at {address}: {exc.strerror or exc}",
            hint="Start the head node with `ray start --head` and pass its address.",
        ) from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
