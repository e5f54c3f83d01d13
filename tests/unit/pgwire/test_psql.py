"""pgwire driven by the real psql binary (libpq): connect, query, errors with SQLSTATE."""

from __future__ import annotations

import shutil
import subprocess

import pytest

PSQL = shutil.which("psql")
pytestmark = pytest.mark.needs("psql")


def _psql(port: int, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [PSQL or "psql", "-X", "-h", "127.0.0.1", "-p", str(port), "-U", "root", "dev", *args]
    return subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=30,
        env={"PGCONNECT_TIMEOUT": "5", "PATH": "/usr/bin:/bin"},
    )


def test_psql_select_1(pg) -> None:
    out = _psql(pg.port, "-c", "select 1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:4] == [" ?column? ", "----------", "        1", "(1 row)"]


def test_psql_all_types_unaligned(pg) -> None:
    out = _psql(pg.port, "-A", "-t", "-c", "all types")
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[0].split("|")
    assert first[:3] == ["t", "-32768", "2147483647"]
    assert first[12] == "2024-01-02 03:04:05+00:00"


def test_psql_error_shows_sqlstate_and_position(pg) -> None:
    out = _psql(pg.port, "-v", "VERBOSITY=verbose", "-c", "fail")
    assert out.returncode == 1
    assert 'ERROR:  42601: syntax error at or near "fail"' in out.stderr
    assert "LINE 1: fail" in out.stderr and "HINT:  Try again." in out.stderr


def test_psql_unknown_database(pg) -> None:
    cmd = [
        PSQL or "psql",
        "-X",
        "-h",
        "127.0.0.1",
        "-p",
        str(pg.port),
        "-U",
        "root",
        "nope",
        "-c",
        "select 1",
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert out.returncode == 2
    assert 'database "nope" does not exist' in out.stderr
