"""Tests of the harness itself: the start/stop/kill/restart logic against a stand-in server
(tests/harness/fake_server.py), and one round trip through the real server."""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.server import LOG_NAME, ServerError, SwellServer, free_ports

FAKE = [sys.executable, str(Path(__file__).with_name("fake_server.py")), "playground"]


def fake(tmp_path: Path, mode: str = "ok", **kwargs: Any) -> SwellServer:
    env = {"FAKE_SWELL_MODE": mode}
    return SwellServer(tmp_path / "data", command=FAKE, env=env, **kwargs)


def test_free_ports_are_distinct_and_bindable() -> None:
    a, b = free_ports(2)
    assert a != b
    for p in (a, b):
        with socket.socket() as s:
            s.bind(("127.0.0.1", p))


def test_start_stop_restart_keep_ports_and_data_dir(tmp_path: Path) -> None:
    srv = fake(tmp_path)
    assert srv.argv()[-10:] == [
        "--listen-addr",
        f"127.0.0.1:{srv.port}",
        "--webhook-listen-addr",
        f"127.0.0.1:{srv.webhook_port}",
        "--data-dir",
        str(tmp_path / "data"),
        "--barrier-interval-ms",
        "100",
        "--parallelism",
        "1",
    ]
    srv.start()
    try:
        assert srv.is_running
        port, wport = srv.port, srv.webhook_port
        socket.create_connection(("127.0.0.1", srv.webhook_port), timeout=2).close()
        assert srv.stop() == 0
        assert not srv.is_running
        srv.start()
        srv.restart()
        assert (srv.port, srv.webhook_port) == (port, wport)
        assert (tmp_path / "data" / "fake-starts").read_text().count("start") == 3
        assert "fake swell serving" in srv.log_text()
        assert srv.log_text(all_runs=True).count("===== harness") == 3
    finally:
        srv.kill9()


def test_kill9_is_a_crash_and_restart_after_crash_works(tmp_path: Path) -> None:
    srv = fake(tmp_path).start()
    try:
        srv.kill9()
        assert srv.returncode == -9
        srv.restart(crash=True)
        assert srv.is_running
    finally:
        srv.kill9()


def test_early_exit_reports_exit_code_and_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    srv = fake(tmp_path, "exit")
    with pytest.raises(ServerError) as ei:
        srv.start()
    msg = str(ei.value)
    assert "exited with code 3 before accepting connections" in msg
    assert "fake swell: cannot open data directory" in msg
    assert str(tmp_path / "data" / LOG_NAME) in msg
    assert "cannot open data directory" in capsys.readouterr().err


def test_startup_timeout_kills_and_reports(tmp_path: Path) -> None:
    srv = fake(tmp_path, "hang", startup_timeout=1.0)
    with pytest.raises(ServerError, match=r"did not accept connections .* within 1 s"):
        srv.start()
    assert not srv.is_running


def test_stop_that_hangs_is_an_error(tmp_path: Path) -> None:
    srv = fake(tmp_path, "ignore-term", stop_timeout=1.0).start()
    with pytest.raises(ServerError, match=r"did not exit within 1 s of SIGTERM"):
        srv.stop()
    assert not srv.is_running


def test_missing_entry_point_is_reported(tmp_path: Path) -> None:
    srv = SwellServer(
        tmp_path / "data", command=[sys.executable, "-m", "pgwire.no_such_module", "playground"]
    )
    with pytest.raises(ServerError, match=r"(?s)exited with code 1.*No module named"):
        srv.start()


def test_real_server_data_survives_restart_and_crash(fresh_server: SwellServer) -> None:
    with fresh_server.connect() as c:
        c.execute("CREATE TABLE harness_restart (id INT PRIMARY KEY, v VARCHAR)")
        c.execute("INSERT INTO harness_restart VALUES (1, 'one'), (2, 'two')")
        c.execute("FLUSH")
    fresh_server.restart()
    with fresh_server.connect() as c:
        rows = c.execute("SELECT id, v FROM harness_restart ORDER BY id").fetchall()
        assert rows == [(1, "one"), (2, "two")]
        c.execute("INSERT INTO harness_restart VALUES (3, 'three')")
        c.execute("FLUSH")
    fresh_server.restart(crash=True)
    with fresh_server.connect() as c:
        n = c.execute("SELECT count(*) FROM harness_restart").fetchone()
        assert n == (3,)


def test_shared_server_watchdog_flags_the_test_that_killed_it(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In an inner pytest session on the fake server: the test that kills the shared server
    errors at teardown, the next test gets a restarted server, and the session fails."""
    tests_dir = Path(__file__).resolve().parents[1]
    monkeypatch.setenv("PYTHONPATH", str(tests_dir))
    monkeypatch.setenv("SWELL_TEST_SERVER_CMD", " ".join(FAKE))
    pytester.makeconftest((tests_dir / "conftest.py").read_text())
    pytester.makepyfile(
        test_inner="""
        def test_kills(server):
            server.kill9()

        def test_after(server):
            assert server.is_running and server.starts == 2
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*the shared swell server died during test_inner.py::test_kills*"])
    assert result.ret == pytest.ExitCode.TESTS_FAILED
