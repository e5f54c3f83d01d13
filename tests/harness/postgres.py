"""A private PostgreSQL 15 server for differential tests: the reference for ad-hoc SQL.

`private_postgres()` runs initdb into a fresh temporary directory (superuser `root`, trust
auth, fsync off), starts the server on a free loopback port with its socket in the same
directory, yields the port and stops and deletes everything on exit. Debian's server
binaries live outside PATH (`/usr/lib/postgresql/<v>/bin`, found by harness.tools), and
initdb refuses to run as root, so as root the server runs as the `postgres` user.
Callers declare `pytest.mark.needs("initdb")` so the test skips where PostgreSQL is absent.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from harness.server import free_port
from harness.tools import require


def _as_postgres(cmd: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


_RUNNING: dict[int, tuple[Path, Path, str]] = {}  # port -> (data dir, socket dir, options)


def restart_postgres(port: int) -> None:
    """Restart a running private server (after ALTER SYSTEM of a restart-only setting)."""
    data, tmp, opts = _RUNNING[port]
    pg_ctl = str(Path(require("initdb")).parent / "pg_ctl")
    subprocess.run(
        _as_postgres(
            [
                pg_ctl,
                "-D",
                str(data),
                "-o",
                opts,
                "-l",
                str(tmp / "log"),
                "-m",
                "fast",
                "-w",
                "restart",
            ]
        ),
        check=True,
        capture_output=True,
    )


@contextlib.contextmanager
def private_postgres(settings: dict[str, str] | None = None) -> Iterator[int]:
    """`settings`: extra server parameters (`{"wal_level": "logical"}` for CDC tests)."""
    bindir = Path(require("initdb")).parent
    tmp = Path(tempfile.mkdtemp(prefix="swell-pg-"))
    if os.geteuid() == 0:
        shutil.chown(tmp, "postgres")
    data = tmp / "data"
    port = free_port()
    pg_ctl = str(bindir / "pg_ctl")
    try:
        subprocess.run(
            _as_postgres([str(bindir / "initdb"), "-D", str(data), "-U", "root", "--auth=trust"]),
            check=True,
            capture_output=True,
        )
        opts = f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c fsync=off"
        opts += "".join(f" -c {k}={v}" for k, v in (settings or {}).items())
        subprocess.run(
            _as_postgres(
                [pg_ctl, "-D", str(data), "-o", opts, "-l", str(tmp / "log"), "-w", "start"]
            ),
            check=True,
            capture_output=True,
        )
        _RUNNING[port] = (data, tmp, opts)
        yield port
    finally:
        _RUNNING.pop(port, None)
        subprocess.run(
            _as_postgres([pg_ctl, "-D", str(data), "-m", "immediate", "stop"]),
            capture_output=True,
        )
        shutil.rmtree(tmp, ignore_errors=True)
