"""A real Swell server for the end-to-end benchmarks, and the measurements around it.

The headline benchmarks (COPY, webhook, Kafka, the side-by-side with Pathway) go through
the shipped entry point as a user would: `python -m pgwire.cli playground` in its own
process (pinned to CPU 0 when the machine has two or more, so the client or load
generator gets the other one), a temporary data directory, psycopg over loopback.

Lifecycle: `with BenchServer() as srv:` starts the process and waits until psycopg can
connect; `srv.connect()` hands out autocommit connections; `srv.cpu_seconds()` reads the
server's utime + stime (all threads) from /proc, so a figure per CPU-second counts
everything the server did (parsing, WAL, barriers, checkpoints); `srv.profile(seconds)`
starts py-spy on it when py-spy is installed; leaving the block terminates the server.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import psycopg

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of process `pid` (every thread), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def child_pids(pid: int) -> list[int]:
    """The live child processes of `pid` (from /proc/<pid>/task/*/children)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            out += [int(x) for x in task.read_text().split()]
        except OSError:
            continue
    return out


def pinned(cmd: list[str], cpu: int) -> list[str]:
    """`cmd` under `taskset -c cpu` when the machine has a second core to give away."""
    if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
        return ["taskset", "-c", str(cpu), *cmd]
    return cmd


class BenchServer:
    """One Swell server process for a benchmark run (see the module docstring)."""

    def __init__(
        self,
        *,
        barrier_ms: int = 1000,
        extra_args: list[str] | None = None,
        cpu: int | None = 0,
        stall_trace: Path | None = None,
        parent_dir: str | None = None,
    ) -> None:
        # parent_dir: where the data directory goes (default the system's temporary one)
        self._tmp = tempfile.TemporaryDirectory(prefix="swell-bench-", dir=parent_dir)
        self.dir = Path(self._tmp.name)
        self.pg_port = free_port()
        self.webhook_port = free_port()
        self.barrier_ms = barrier_ms
        self.extra_args = extra_args or []
        self.cpu = cpu  # None: not pinned (a server with helper processes uses every core)
        self.stall_trace = stall_trace  # run under bench/_stall.py's monitor, tracing there
        self.proc: subprocess.Popen[bytes] | None = None
        self._spy: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> BenchServer:
        monitor = [] if self.stall_trace is None else [str(ROOT / "bench" / "_stall.py")]
        cmd = [
            sys.executable,
            *monitor,
            *([str(self.stall_trace)] if monitor else []),
            "-m",
            "pgwire.cli",
            "playground",
            "--listen-addr",
            f"127.0.0.1:{self.pg_port}",
            "--webhook-listen-addr",
            f"127.0.0.1:{self.webhook_port}",
            "--data-dir",
            str(self.dir / "data"),
            "--barrier-interval-ms",
            str(self.barrier_ms),
            *self.extra_args,
        ]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        self._log = open(self.dir / "server.log", "wb")  # noqa: SIM115 - closed in __exit__
        self.proc = subprocess.Popen(
            cmd if self.cpu is None else pinned(cmd, self.cpu),
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        for _ in range(600):
            try:
                self.connect().close()
                return self
            except psycopg.OperationalError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.1)
        self.__exit__(None, None, None)
        raise RuntimeError("the server did not start:\n" + self.log_tail())

    def __exit__(
        self,
        et: type[BaseException] | None,
        e: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._spy is not None and self._spy.poll() is None:
            self._spy.terminate()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        self._tmp.cleanup()

    def log_tail(self, n: int = 40) -> str:
        lines = (self.dir / "server.log").read_text(errors="replace").splitlines()
        return "\n".join(lines[-n:])

    def connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(
            host="127.0.0.1", port=self.pg_port, user="root", dbname="dev", autocommit=True
        )

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def cpu_seconds(self, exclude: set[int] | None = None) -> float:
        """utime + stime of the server and its live child processes (acceptors), except
        the children in `exclude` (e.g. worker processes counted on their own)."""
        skip = exclude or set()
        return process_cpu_seconds(self.pid) + sum(
            process_cpu_seconds(p) for p in child_pids(self.pid) if p not in skip
        )

    def thread_cpu(self) -> dict[str, float]:
        """CPU seconds per thread name of the server (Python and native threads)."""
        out: dict[str, float] = {}
        tick = os.sysconf("SC_CLK_TCK")
        for task in Path(f"/proc/{self.pid}/task").iterdir():
            try:
                raw = (task / "stat").read_text()
            except OSError:
                continue
            name = raw[raw.index("(") + 1 : raw.rindex(")")]
            f = raw[raw.rindex(")") + 2 :].split()
            out[name] = out.get(name, 0.0) + (int(f[11]) + int(f[12])) / tick
        return out

    def profile_start(self, out: Path) -> bool:
        """Sample the server with py-spy until `profile_stop`; False if py-spy is missing."""
        spy = shutil.which("py-spy")
        if spy is None:
            print("(--profile: py-spy is not installed; `pip install py-spy`)", flush=True)
            return False
        self._spy_out = out
        self._spy = subprocess.Popen(
            [spy, "record", "-p", str(self.pid), "-f", "raw", "-o", str(out), "-r", "200"]
            + ["--function", "--gil"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(0.5)
        return True

    def profile_stop(self, top: int = 25) -> None:
        """Stop py-spy and print the functions with the most samples (self and total)."""
        if self._spy is None:
            return
        self._spy.send_signal(2)
        try:
            self._spy.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._spy.kill()
        self._spy = None
        print_collapsed(self._spy_out, top)
        print(f"(collapsed stacks: {self._spy_out})")


def print_collapsed(path: Path, top: int = 25) -> None:
    """Summarise a collapsed-stack file (py-spy `-f raw`): self and inclusive samples."""
    if not path.exists():
        print("(no profile written)")
        return
    own: dict[str, int] = {}
    incl: dict[str, int] = {}
    total = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        own[frames[-1]] = own.get(frames[-1], 0) + n
        for f in set(frames):
            incl[f] = incl.get(f, 0) + n
    if not total:
        print("(empty profile)")
        return
    print(f"profile: {total} samples; top by self time (self%, incl%, function)")
    for f, n in sorted(own.items(), key=lambda kv: -kv[1])[:top]:
        print(f"  {100 * n / total:5.1f} {100 * incl[f] / total:5.1f}  {f[:110]}")
