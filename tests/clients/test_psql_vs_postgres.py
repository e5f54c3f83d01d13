"""psql's meta-commands print the same for Swell as for PostgreSQL 15 for the same objects.

A private PostgreSQL cluster (Debian's postgresql-15 server binaries, superuser `root`,
trust auth) and Swell get the same table and view; psql's output of `\\d t`, `\\d v`,
`\\dt`, `\\dv` and `\\di` must match line for line. Skipped outside CI when the server
binaries are missing.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.server import SwellServer
from tests.clients.test_psql import PSQL, psql

INITDB = next(iter(sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))), None)

pytestmark = [
    pytest.mark.clients,
    pytest.mark.needs("psql", "initdb"),
]

OBJECTS = [
    "CREATE TABLE cmp_t (id INT PRIMARY KEY, name VARCHAR, amount DOUBLE PRECISION, "
    "at TIMESTAMPTZ, flag BOOLEAN)",
    "CREATE VIEW cmp_v AS SELECT id, name FROM cmp_t",
]
COMMANDS = [r"\d cmp_t", r"\d cmp_v", r"\dt cmp_*", r"\dv cmp_*", r"\di cmp_*"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(cmd: list[str]) -> list[str]:
    # initdb and postgres refuse to run as root
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@pytest.fixture(scope="module")
def postgres() -> Iterator[int]:
    assert INITDB is not None
    bindir = Path(INITDB).parent
    tmp = Path(tempfile.mkdtemp(prefix="swell-pg15-"))
    if os.geteuid() == 0:
        shutil.chown(tmp, "postgres")
    data = tmp / "data"
    port = _free_port()
    subprocess.run(
        _as_postgres([str(bindir / "initdb"), "-D", str(data), "-U", "root", "--auth=trust"]),
        check=True,
        capture_output=True,
    )
    opts = f"-p {port} -k {tmp} -c listen_addresses=127.0.0.1 -c fsync=off"
    pg_ctl = str(bindir / "pg_ctl")
    subprocess.run(
        _as_postgres([pg_ctl, "-D", str(data), "-o", opts, "-l", str(tmp / "log"), "-w", "start"]),
        check=True,
        capture_output=True,
    )
    try:
        yield port
    finally:
        subprocess.run(_as_postgres([pg_ctl, "-D", str(data), "-m", "immediate", "stop"]))
        shutil.rmtree(tmp, ignore_errors=True)


def _pg_psql(port: int, *args: str) -> str:
    assert PSQL is not None
    cmd = [PSQL, "-X", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(port)]
    r = subprocess.run(
        [*cmd, "-U", "root", "postgres", *args], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_meta_commands_match_postgres(server: SwellServer, postgres: int) -> None:
    for stmt in OBJECTS:
        _pg_psql(postgres, "-c", stmt)
    for stmt in ["DROP VIEW IF EXISTS cmp_v", "DROP TABLE IF EXISTS cmp_t", *OBJECTS]:
        r = psql(server, "-c", stmt)
        assert r.returncode == 0, r.stderr
    for command in COMMANDS:
        ours = psql(server, "-c", command)
        assert ours.returncode == 0, f"{command}: {ours.stderr}"
        assert ours.stdout == _pg_psql(postgres, "-c", command), command


# calls sqlglot parses into one node per family (variance = var_samp, ceiling = ceil, ...):
# PostgreSQL names the column after the function as written
NAMED = (
    "SELECT char_length('ab'), substr('abc', 2), ceiling(1.5), log10(100), pow(2, 3), "
    "mod(7, 3), date_part('year', date '2020-01-01'), extract(year from date '2020-01-01'), "
    "current_timestamp, now(), variance(1), var_samp(1), stddev(1), every(true), "
    "array_position(array[1], 1), array_append(array[1], 2), substring('abc' from 2), "
    "trim(' a '), 7 % 3, cast(1 as int)"
)


def test_column_names_match_postgres(server: SwellServer, postgres: int) -> None:
    header = _pg_psql(postgres, "-A", "-c", NAMED).splitlines()[0]
    ours = psql(server, "-A", "-c", NAMED)
    assert ours.returncode == 0, ours.stderr
    assert ours.stdout.splitlines()[0] == header
