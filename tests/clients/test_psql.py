"""psql, the reference PostgreSQL terminal client, against Swell: `-c`, `-f` scripts,
command tags, aligned and unaligned output, and error reporting with ON_ERROR_STOP."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from harness.server import SwellServer

PSQL = shutil.which("psql")


pytestmark = [
    pytest.mark.clients,
    pytest.mark.needs("psql"),
]


def psql(server: SwellServer, *args: str) -> subprocess.CompletedProcess[str]:
    assert PSQL is not None
    cmd = [PSQL, "-X", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-p", str(server.port)]
    cmd += ["-U", "root", "dev", *args]
    env = {**os.environ, "PGCONNECT_TIMEOUT": "10", "PGOPTIONS": "", "PAGER": ""}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)


def test_c_prints_aligned_table(server: SwellServer) -> None:
    r = psql(server, "-c", "SELECT 1 AS one, 'x' AS two")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [" one | two ", "-----+-----", "   1 | x", "(1 row)", ""]


def test_script_with_tags_and_unaligned_rows(server: SwellServer, tmp_path: Path) -> None:
    script = tmp_path / "script.sql"
    script.write_text(
        """
        DROP TABLE IF EXISTS psql_t;
        CREATE TABLE psql_t (id INT PRIMARY KEY, name VARCHAR, v INT);
        INSERT INTO psql_t VALUES (1, 'a', 10), (2, 'b', NULL), (3, '', 30);
        CREATE MATERIALIZED VIEW psql_mv AS SELECT count(*) AS n, sum(v) AS s FROM psql_t;
        FLUSH;
        SELECT id, name, v FROM psql_t ORDER BY id;
        SELECT n, s FROM psql_mv;
        DROP MATERIALIZED VIEW psql_mv;
        DROP TABLE psql_t;
        """
    )
    r = psql(server, "-A", "-t", "-f", str(script))
    assert r.returncode == 0, r.stderr
    # RisingWave spells tags CREATE_MATERIALIZED_VIEW; psql prints whatever the server sends
    lines = [ln.replace("_", " ") for ln in r.stdout.splitlines()]
    assert lines == [
        "DROP TABLE",
        "CREATE TABLE",
        "INSERT 0 3",
        "CREATE MATERIALIZED VIEW",
        "FLUSH",
        "1|a|10",
        "2|b|",
        "3||30",
        "3|40",
        "DROP MATERIALIZED VIEW",
        "DROP TABLE",
    ]


def test_error_message_and_exit_code(server: SwellServer) -> None:
    r = psql(server, "-c", "SELECT * FROM psql_nope")
    assert r.returncode == 1
    assert 'ERROR:  relation "psql_nope" does not exist' in r.stderr


def test_on_error_stop_aborts_script(server: SwellServer, tmp_path: Path) -> None:
    script = tmp_path / "fail.sql"
    script.write_text("SELECT 1;\nSELECT 1 / 0;\nSELECT 'not reached';\n")
    r = psql(server, "-A", "-t", "-f", str(script))
    assert r.returncode == 3, (r.stdout, r.stderr)
    assert r.stdout.splitlines() == ["1"]
    assert "ERROR:  division by zero" in r.stderr
    assert "fail.sql:2" in r.stderr


def test_quickstart_example_runs(fresh_server: SwellServer) -> None:
    """examples/quickstart/quickstart.sql (the README's first block) runs cleanly in psql and
    prints its documented rows."""
    example = Path(__file__).resolve().parents[2] / "examples" / "quickstart" / "quickstart.sql"
    r = psql(fresh_server, "-A", "-t", "-f", str(example))
    assert r.returncode == 0, r.stderr
    rows = [ln for ln in r.stdout.splitlines() if "|" in ln]
    assert [ln.split("|")[:5] for ln in rows] == [
        ["a", "2", "15", "5", "10"],
        ["b", "1", "7", "7", "7"],
        ["a", "1", "6", "6", "6"],
        ["b", "1", "50", "50", "50"],
    ]
    assert [float(ln.split("|")[5]) for ln in rows] == [7.5, 7, 6, 50]
