"""Limits a hostile client meets, and safe defaults, against real servers.

Raw sockets send what no driver would (a password message declaring a gigabyte, an
oversized startup packet); psycopg and psql check what a user sees (53300 past
--max-connections, the pause after a failed login, --auth password with
SWELL_ROOT_PASSWORD). Also: the data directory's permissions, the WARNING for trust
authentication on a non-loopback address, and malformed HTTP requests on the webhook port
logged once per interval without a traceback.
"""

from __future__ import annotations

import os
import socket
import stat
import struct
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from harness.raw_pg import RawPg
from harness.server import ServerError, SwellServer

pytestmark = [pytest.mark.clients, pytest.mark.e2e]


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SwellServer]:
    """trust auth, small limits: 4 connections, 100 kB messages, 0.6 s failure delay."""
    server = SwellServer(
        tmp_path_factory.mktemp("limits") / "data",
        extra_args=[
            "--max-connections",
            "4",
            "--max-message-bytes",
            "100000",
            "--auth-failure-delay-ms",
            "600",
            "--log-level",
            "debug",  # cancel requests are logged at debug
        ],
    ).start()
    try:
        with server.connect() as c:
            c.execute("CREATE USER lim_pw WITH PASSWORD 'right-pw'")
        yield server
    finally:
        server.stop()


# -- message lengths ----------------------------------------------------------------------------
def test_password_message_declaring_a_gigabyte_is_refused_unread(limited: SwellServer) -> None:
    with RawPg(limited.host, limited.port) as raw:
        raw.send_startup(user="lim_pw")
        kind, body = raw.read()
        assert kind == b"R" and struct.unpack(">i", body[:4])[0] == 10  # SASL offered
        raw.send_header(b"p", 1 << 30)  # and never the body
        err = raw.error()
        assert err["C"] == "08P01" and err["S"] == "FATAL"
        assert "too long before authentication" in err["M"]
        assert raw.closed_by_server()
    with limited.connect() as c:  # the server is fine
        assert c.execute("SELECT 1").fetchone() == (1,)


def test_oversized_startup_packet_is_refused(limited: SwellServer) -> None:
    with RawPg(limited.host, limited.port) as raw:
        raw.send_raw(struct.pack(">i", 20_000) + struct.pack(">i", 196608))
        err = raw.error()
        assert err["C"] == "08P01" and "invalid length of startup packet" in err["M"]
        assert raw.closed_by_server()


def test_message_limit_after_login(limited: SwellServer) -> None:
    with limited.connect() as c:
        ok = "x" * 50_000
        assert c.execute(f"SELECT length('{ok}')").fetchone() == (50_000,)
        big = "x" * 150_000
        with pytest.raises(psycopg.OperationalError) as ei:
            c.execute(f"SELECT length('{big}')")
        assert "exceeds the server's maximum of 100000 bytes" in str(ei.value)
        assert c.closed or c.broken
    # the same over a raw socket: FATAL 08P01 with the flag named
    with RawPg(limited.host, limited.port) as raw:
        raw.send_startup()
        raw.until(b"Z")
        raw.send_header(b"Q", 200_000)
        err = raw.error()
        assert err["C"] == "08P01" and err["S"] == "FATAL"
        assert "--max-message-bytes" in err.get("H", "")


# -- connection limit -----------------------------------------------------------------------------
def test_max_connections_refuses_with_53300_and_frees_slots(limited: SwellServer) -> None:
    conns = [limited.connect() for _ in range(4)]
    try:
        with RawPg(limited.host, limited.port) as raw:
            raw.send_startup()
            err = raw.error()
            assert err["C"] == "53300" and err["S"] == "FATAL"
            assert err["M"] == "sorry, too many clients already"
        with pytest.raises(psycopg.OperationalError, match="too many clients"):
            limited.connect().close()
        # a cancel request needs no slot: it still reaches its session
        conns[0].cancel()
        assert conns[0].execute("SELECT 2").fetchone() == (2,)
    finally:
        conns.pop().close()
    try:
        with limited.connect() as c:  # a freed slot is usable again
            assert c.execute("SELECT 3").fetchone() == (3,)
    finally:
        for c in conns:
            c.close()
    log = limited.log_text()
    assert "cancel request pid=" in log and "cancel request ignored" not in log
    assert "Traceback" not in log


# -- failed logins --------------------------------------------------------------------------------
def test_failed_login_waits_before_answering(limited: SwellServer) -> None:
    t0 = time.monotonic()
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        limited.connect(user="lim_pw", password="wrong").close()
    assert time.monotonic() - t0 >= 0.6  # the configured delay, a lower bound
    with limited.connect(user="lim_pw", password="right-pw") as c:
        assert c.execute("SELECT current_user").fetchone() == ("lim_pw",)


# -- --auth password / SWELL_ROOT_PASSWORD ----------------------------------------------------------
@pytest.fixture(scope="module")
def locked(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SwellServer]:
    """SWELL_ROOT_PASSWORD set: password authentication for everybody."""
    server = SwellServer(
        tmp_path_factory.mktemp("locked") / "data",
        env={"SWELL_ROOT_PASSWORD": "r00t-pw"},
        extra_args=["--auth-failure-delay-ms", "0"],
    ).start()
    try:
        with server.connect(password="r00t-pw") as c:
            c.execute("CREATE USER nopw_u")
            c.execute("CREATE USER pw_u PASSWORD 'pw-u-pw'")
        yield server
    finally:
        server.stop()


def _refusal(srv: SwellServer, **kw: str) -> str:
    with pytest.raises(psycopg.OperationalError) as ei:
        srv.connect(**kw).close()
    return str(ei.value)


def test_password_mode_every_user_authenticates(locked: SwellServer) -> None:
    assert "no password supplied" in _refusal(locked)  # the server asked for one
    assert 'password authentication failed for user "root"' in _refusal(locked, password="no")
    # built-in and created users without a password cannot log in at all
    for user in ("postgres", "nopw_u"):
        assert "no password supplied" in _refusal(locked, user=user)
        assert f'password authentication failed for user "{user}"' in _refusal(
            locked, user=user, password="anything"
        )
    # an unknown user gets the same answer as a wrong password: nothing to enumerate
    assert 'password authentication failed for user "ghost"' in _refusal(
        locked, user="ghost", password="x"
    )
    with locked.connect(user="pw_u", password="pw-u-pw") as c:
        assert c.execute("SELECT current_user").fetchone() == ("pw_u",)
    assert "auth=password" in locked.log_text()


@pytest.mark.needs("psql")
def test_password_mode_with_psql(locked: SwellServer) -> None:
    base = ["psql", "-X", "-h", locked.host, "-p", str(locked.port), "-U", "root", "dev"]
    env = {**os.environ, "PGPASSWORD": "r00t-pw", "PGCONNECT_TIMEOUT": "10"}
    out = subprocess.run(
        [*base, "-tAc", "SELECT 40 + 2"], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "42"
    env["PGPASSWORD"] = "wrong"
    out = subprocess.run(
        [*base, "-tAc", "SELECT 1"], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode != 0
    assert 'password authentication failed for user "root"' in out.stderr


def test_root_password_survives_restart_and_is_never_logged(locked: SwellServer) -> None:
    locked.restart()
    assert "root password set" not in locked.log_text()  # unchanged: nothing rewritten
    with locked.connect(password="r00t-pw") as c:
        assert c.execute("SELECT current_user").fetchone() == ("root",)
    assert "r00t-pw" not in locked.log_text(all_runs=True)


def test_password_mode_without_a_superuser_password_refuses_to_start(tmp_path: Path) -> None:
    srv = SwellServer(tmp_path / "data", extra_args=["--auth", "password"], startup_timeout=30)
    with pytest.raises(ServerError):
        srv.start()
    assert "--auth password needs a superuser with a password" in srv.log_text()


# -- startup warnings and the data directory --------------------------------------------------------
def test_trust_on_a_non_loopback_address_warns(tmp_path: Path) -> None:
    srv = SwellServer(tmp_path / "open", host="0.0.0.0").start()
    try:
        with srv.connect() as c:
            assert c.execute("SELECT 1").fetchone() == (1,)
        assert "WARNING swell trust authentication on a non-loopback address" in srv.log_text()
    finally:
        srv.stop()
    srv = SwellServer(tmp_path / "closed").start()  # loopback: no warning
    try:
        assert "trust authentication on a non-loopback" not in srv.log_text()
    finally:
        srv.stop()


def test_data_directory_is_private(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    os.chmod(data, 0o755)  # as older versions left it
    old = data / "notes.txt"
    old.write_text("x")
    os.chmod(old, 0o644)
    srv = SwellServer(data).start()
    try:
        with srv.connect() as c:
            c.execute("CREATE TABLE perm_t (a INT)")
            c.execute("INSERT INTO perm_t VALUES (1)")
            c.execute("FLUSH")
        entries = [data, *data.rglob("*")]
        assert len(entries) > 5
        for p in entries:
            mode = stat.S_IMODE(p.lstat().st_mode)
            assert mode & 0o077 == 0, f"{p} has mode {oct(mode)}"
    finally:
        srv.stop()


def test_malformed_http_is_logged_once_without_traceback(tmp_path: Path) -> None:
    srv = SwellServer(tmp_path / "data").start()
    try:
        deadline = time.monotonic() + 30
        while " ready " not in srv.log_text() and time.monotonic() < deadline:
            time.sleep(0.05)  # the webhook listener starts after pgwire
        for i in range(20):
            with socket.create_connection((srv.host, srv.webhook_port), timeout=5) as s:
                s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nBad Header Line %d\r\n\r\n" % i)
                assert b" 400 " in s.recv(100)
        log = srv.log_text()
        assert log.count("malformed HTTP request") == 1, log
        assert "Traceback" not in log
    finally:
        srv.stop()
