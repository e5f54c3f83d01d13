"""What the server log tells an operator: levels, DDL, connections, third-party noise,
recovery progress and a data directory already in use (real server processes)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.server import SwellServer


def _run_some(server: SwellServer) -> None:
    with server.connect() as c:
        c.execute(
            "CREATE TABLE log_wb (data JSONB) WITH (connector = 'webhook') "
            "VALIDATE AS secure_compare(headers->>'authorization', 'TEST_WEBHOOK')"
        )
        c.execute("CREATE TABLE log_t (id INT PRIMARY KEY, v INT)")
        c.execute("INSERT INTO log_t VALUES (1, 10)")
        c.execute("CREATE MATERIALIZED VIEW log_mv AS SELECT count(*) AS n FROM log_t")
        c.execute("SHOW JOBS")
        c.execute("EXPLAIN SELECT * FROM log_mv")
        c.execute("FLUSH")
        c.execute("DROP MATERIALIZED VIEW log_mv")


def test_info_logs_ddl_not_connections_nor_library_warnings(tmp_path: Path) -> None:
    with SwellServer(tmp_path / "data") as server:
        _run_some(server)
        log = server.log_text()
    lines = log.splitlines()
    ddl = [ln for ln in lines if " ddl tag=" in ln]
    assert [ln.split(" ddl tag=")[1].split()[0] for ln in ddl] == [
        "CREATE_TABLE",
        "CREATE_TABLE",
        "CREATE_MATERIALIZED_VIEW",
        "DROP_MATERIALIZED_VIEW",
    ]
    assert all(" INFO swell " in ln and "user=root" in ln for ln in ddl)
    assert 'statement="CREATE TABLE log_t (id INT PRIMARY KEY, v INT)"' in ddl[1]
    assert "session started" not in log and "session closed" not in log
    # sqlglot falls back to a Command for the webhook table, SHOW and EXPLAIN: not logged
    assert "sqlglot" not in log and "unsupported syntax" not in log
    assert "Warning" not in log and "Traceback" not in log


def test_debug_level_logs_connections(tmp_path: Path) -> None:
    with SwellServer(tmp_path / "data", extra_args=["--log-level", "debug"]) as server:
        with server.connect() as c:
            c.execute("SELECT 1")
            log = server.log_text()
    assert " DEBUG pgwire session started " in log


def test_warning_level_hides_info(tmp_path: Path) -> None:
    with SwellServer(tmp_path / "data", extra_args=["--log-level", "warning"]) as server:
        _run_some(server)
        log = server.log_text()
    assert " INFO " not in log and "ddl tag=" not in log


def test_recovery_progress_at_start(tmp_path: Path) -> None:
    with SwellServer(tmp_path / "data") as server:
        with server.connect() as c:
            c.execute("CREATE TABLE rec_t (id INT PRIMARY KEY)")
            c.execute("CREATE MATERIALIZED VIEW rec_mv AS SELECT count(*) AS n FROM rec_t")
        server.restart()
        log = server.log_text()
    assert "recovering relations=2 " in log
    assert "recovered epoch=" in log


def test_data_directory_in_use_is_one_line(tmp_path: Path) -> None:
    with SwellServer(tmp_path / "data") as first:
        second = SwellServer(tmp_path / "data")
        out = subprocess.run(second.argv(), capture_output=True, text=True, timeout=60)
        assert first.is_running
    assert out.returncode == 1
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, out.stderr
    assert " ERROR swell startup failed " in lines[0]
    assert f'data directory \\"{tmp_path / "data"}\\" is in use by another Swell server' in lines[0]
    assert "hint=" in lines[0]
