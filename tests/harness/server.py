"""`SwellServer`: one real Swell server process, driven the way a user or an operator would.

End-to-end tests must exercise the shipped entry point (`swell playground`), the real
pgwire listener and the real RocksDB data directory, so the harness runs the server as a
subprocess rather than in-process: a crash, a hang on shutdown or a recovery bug then
shows up exactly as it would for a user.

Lifecycle of one `SwellServer`:

1. `__init__` fixes the data directory and picks two free loopback ports (pgwire and
   webhook); both stay the same for the object's lifetime, so `restart()` comes back on the
   same addresses and data.
2. `start()` launches `python -m pgwire.cli playground ...` (or `$SWELL_TEST_SERVER_CMD ...`,
   split like a shell would) with stdout and stderr appended
   to `<data_dir>/swell-server.log`, then polls the pgwire port until it accepts a TCP
   connection. If the process exits first, or the port is not open within
   `startup_timeout` seconds, it raises `ServerError` carrying the tail of this run's log
   (and prints it to stderr, so pytest shows it with the failure).
3. `connect()` hands out psycopg autocommit connections as user `root`, database `dev`.
4. `stop()` sends SIGTERM and waits (a graceful shutdown writes a final checkpoint);
   `kill9()` sends SIGKILL to the process group to simulate a crash; `restart()` is
   `stop()` (or `kill9()` with `crash=True`) followed by `start()`.

The object can be started and stopped any number of times. An `atexit` hook kills any
server still running when the test process exits, so an interrupted run leaks nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import datetime as _dt
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import psycopg

REPO_ROOT = Path(__file__).resolve().parents[2]
LOG_NAME = "swell-server.log"
DEFAULT_COMMAND: tuple[str, ...] = (sys.executable, "-m", "pgwire.cli", "playground")
# Overrides DEFAULT_COMMAND for every server the harness starts, e.g. the installed script:
# SWELL_TEST_SERVER_CMD="swell playground" pytest
COMMAND_ENV = "SWELL_TEST_SERVER_CMD"

_LIVE: set[SwellServer] = set()


class ServerError(RuntimeError):
    """The server did not start, did not stop in time, or died unexpectedly."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that nothing listens on right now (the kernel's choice)."""
    return free_ports(1, host)[0]


def free_ports(n: int, host: str = "127.0.0.1") -> list[int]:
    """`n` distinct free ports; the sockets are held open together so they differ."""
    socks: list[socket.socket] = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


class SwellServer:
    """One Swell server subprocess on loopback ports with its own data directory."""

    def __init__(
        self,
        data_dir: Path | str,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        webhook_port: int | None = None,
        barrier_interval_ms: int = 100,
        parallelism: int = 1,
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        startup_timeout: float = 30.0,
        stop_timeout: float = 20.0,
        command: Sequence[str] | None = None,
    ) -> None:
        self.data_dir = Path(data_dir)
        self.host = host
        if port is None or webhook_port is None:
            p, w = free_ports(2, host)
            port = p if port is None else port
            webhook_port = w if webhook_port is None else webhook_port
        self.port: int = port
        self.webhook_port: int = webhook_port
        self.barrier_interval_ms = barrier_interval_ms
        self.parallelism = parallelism  # worker processes: 1 unless a test is about them
        self.extra_args = list(extra_args)
        self.env = dict(env or {})
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        if command is None:
            override = os.environ.get(COMMAND_ENV, "").strip()
            command = shlex.split(override) if override else DEFAULT_COMMAND
        self.command = list(command)
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0
        self.starts = 0

    # -- addresses ------------------------------------------------------------------------
    @property
    def dsn(self) -> str:
        """libpq URL, usable by psycopg, asyncpg and psql."""
        return f"postgresql://root@{self.host}:{self.port}/dev"

    @property
    def jdbc_url(self) -> str:
        return f"jdbc:postgresql://{self.host}:{self.port}/dev?user=root"

    def webhook_url(self, table: str, *, schema: str = "public", database: str = "dev") -> str:
        return f"http://{self.host}:{self.webhook_port}/webhook/{database}/{schema}/{table}"

    @property
    def log_path(self) -> Path:
        return self.data_dir / LOG_NAME

    # -- process state ----------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def returncode(self) -> int | None:
        """Exit status of the last process (None while running or before the first start);
        negative means killed by that signal."""
        return self._proc.poll() if self._proc is not None else None

    @property
    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def argv(self) -> list[str]:
        """The exact command line `start()` runs."""
        return [
            *self.command,
            "--listen-addr",
            f"{self.host}:{self.port}",
            "--webhook-listen-addr",
            f"{self.host}:{self.webhook_port}",
            "--data-dir",
            str(self.data_dir),
            "--barrier-interval-ms",
            str(self.barrier_interval_ms),
            "--parallelism",
            str(self.parallelism),
            *self.extra_args,
        ]

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> SwellServer:
        """Launch the server and wait until its pgwire port accepts connections."""
        if self.is_running:
            raise ServerError(f"swell server already running (pid {self.pid})")
        self.data_dir.mkdir(parents=True, exist_ok=True)
        argv = self.argv()
        env = os.environ.copy()
        env["PYTHONUNBUFFERED"] = "1"
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
        env.update(self.env)
        with open(self.log_path, "ab") as log:
            self._log_offset = log.tell()
            stamp = _dt.datetime.now().isoformat(timespec="milliseconds")
            log.write(f"===== harness {stamp}: {shlex.join(argv)}\n".encode())
            log.flush()
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=REPO_ROOT,
                env=env,
                start_new_session=True,
            )
        _LIVE.add(self)
        self.starts += 1
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        while True:
            rc = self._proc.poll()
            if rc is not None:
                self._fail_start(
                    f"swell server exited with code {rc} before accepting "
                    f"connections on {self.host}:{self.port}"
                )
            if _port_open(self.host, self.port):
                return
            if time.monotonic() > deadline:
                self._kill_group()
                self._fail_start(
                    f"swell server did not accept connections on "
                    f"{self.host}:{self.port} within {self.startup_timeout:g} s "
                    f"(killed)"
                )
            time.sleep(0.05)

    def _fail_start(self, what: str) -> None:
        msg = self.describe_failure(what)
        print(msg, file=sys.stderr)
        raise ServerError(msg)

    def describe_failure(self, what: str, *, lines: int = 60) -> str:
        """`what`, the command line and the tail of this run's log, for error messages."""
        return (
            f"{what}\ncommand: {shlex.join(self.argv())}\n"
            f"--- last {lines} lines of {self.log_path} ---\n{self.log_tail(lines)}"
        )

    def stop(self, timeout: float | None = None) -> int | None:
        """SIGTERM, then wait for a graceful exit; returns the exit code.

        Raises `ServerError` (after killing the process group) if the server does not exit
        within `timeout` seconds: a shutdown that hangs is a bug worth failing a test for.
        """
        if self._proc is None:
            return None
        if self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(self.stop_timeout if timeout is None else timeout)
            except subprocess.TimeoutExpired:
                self._kill_group()
                raise ServerError(
                    self.describe_failure(
                        f"swell server (pid {self._proc.pid}) did not exit within "
                        f"{self.stop_timeout if timeout is None else timeout:g} s of SIGTERM "
                        f"(killed)"
                    )
                ) from None
        _LIVE.discard(self)
        return self._proc.returncode

    def kill9(self) -> None:
        """SIGKILL the server's process group, as a crash would, and reap it."""
        if self._proc is not None and self._proc.poll() is None:
            self._kill_group()
        _LIVE.discard(self)

    def _kill_group(self) -> None:
        assert self._proc is not None
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._proc.pid, signal.SIGKILL)
        with contextlib.suppress(ProcessLookupError):
            self._proc.kill()
        self._proc.wait()

    def restart(self, *, crash: bool = False) -> SwellServer:
        """Stop (gracefully, or SIGKILL if `crash`) and start again on the same ports and
        data directory."""
        if crash:
            self.kill9()
        else:
            self.stop()
        return self.start()

    # -- clients ----------------------------------------------------------------------------
    def connect(self, **kwargs: Any) -> psycopg.Connection[Any]:
        """A psycopg connection (autocommit unless overridden) as root to database dev."""
        params: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": "root",
            "dbname": "dev",
            "autocommit": True,
            "connect_timeout": 10,
        }
        params.update(kwargs)
        return psycopg.connect(**params)

    # -- logs -------------------------------------------------------------------------------
    def log_text(self, *, all_runs: bool = False) -> str:
        """The server's output: this run's (since the last start) or every run's."""
        try:
            with open(self.log_path, "rb") as f:
                if not all_runs:
                    f.seek(self._log_offset)
                return f.read().decode("utf-8", "replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    # -- context manager ----------------------------------------------------------------------
    def __enter__(self) -> SwellServer:
        if not self.is_running:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.is_running:
            self.stop()

    def __repr__(self) -> str:
        state = "running" if self.is_running else f"stopped rc={self.returncode}"
        return f"<SwellServer {self.host}:{self.port} data={self.data_dir} {state}>"


@atexit.register
def _kill_leftovers() -> None:
    for srv in list(_LIVE):
        srv.kill9()
