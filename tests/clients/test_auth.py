"""Users and password authentication, driven by real clients against a real server.

CREATE USER ... PASSWORD stores a SCRAM-SHA-256 verifier (or MD5 after
`SET password_encryption = 'md5'`); such users must then prove the password with the
client's own SCRAM/MD5 implementation (libpq via psql and psycopg, asyncpg, pgjdbc).
Users without a password and the built-in `root` keep trust authentication. Users survive
a restart (they are part of the checkpointed catalog).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import psycopg
import pytest

from harness.server import SwellServer

pytestmark = [pytest.mark.clients, pytest.mark.e2e]

PSQL = shutil.which("psql")
JAVA = shutil.which("java")
JAR = Path("/usr/share/java/postgresql.jar")


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SwellServer]:
    server = SwellServer(tmp_path_factory.mktemp("auth") / "data").start()
    try:
        with server.connect() as c:
            c.execute("CREATE USER scram_u WITH PASSWORD 's3cret' CREATEDB")
            c.execute("SET password_encryption = 'md5'")
            c.execute("CREATE USER md5_u PASSWORD 'md5-pw'")
            c.execute("CREATE USER open_u")
            c.execute("CREATE ROLE nologin_r PASSWORD 'x'")
        yield server
    finally:
        server.stop()


def _connect(srv: SwellServer, user: str, password: str | None = None) -> psycopg.Connection:
    kw = {"user": user} if password is None else {"user": user, "password": password}
    return srv.connect(**kw)


def _sqlstate(srv: SwellServer, user: str, password: str | None) -> tuple[str | None, str]:
    """libpq reports no SQLSTATE for a failed connection: derive it from the message."""
    with pytest.raises(psycopg.OperationalError) as ei:
        _connect(srv, user, password).close()
    text = str(ei.value)
    if "password authentication failed" in text:
        return "28P01", text
    if "does not exist" in text or "not permitted to log in" in text:
        return "28000", text
    return None, text


def test_psycopg_scram_and_md5_passwords(srv: SwellServer) -> None:
    for user, pw in (("scram_u", "s3cret"), ("md5_u", "md5-pw")):
        with _connect(srv, user, pw) as c:
            assert c.execute("SELECT 1").fetchone() == (1,)
            assert c.info.parameter_status("session_authorization") == user
    state, text = _sqlstate(srv, "scram_u", "wrong")
    assert state == "28P01"
    assert 'password authentication failed for user "scram_u"' in text
    state, text = _sqlstate(srv, "md5_u", "s3cret")
    assert state == "28P01"
    assert 'password authentication failed for user "md5_u"' in text


def test_unknown_user_and_nologin_role_are_refused(srv: SwellServer) -> None:
    state, text = _sqlstate(srv, "nobody", None)
    assert state == "28000"
    assert 'role "nobody" does not exist' in text
    state, text = _sqlstate(srv, "nologin_r", "x")
    assert state == "28000"
    assert 'role "nologin_r" is not permitted to log in' in text


def test_users_without_password_keep_trust(srv: SwellServer) -> None:
    for user in ("open_u", "root", "postgres"):
        with _connect(srv, user) as c:
            assert c.execute("SELECT 2").fetchone() == (2,)


def test_alter_rename_drop_user(srv: SwellServer) -> None:
    with srv.connect() as root:
        root.execute("CREATE USER temp_u PASSWORD 'one'")
        root.execute("ALTER USER temp_u WITH PASSWORD 'two'")
        assert _sqlstate(srv, "temp_u", "one")[0] == "28P01"
        _connect(srv, "temp_u", "two").close()
        root.execute("ALTER USER temp_u RENAME TO temp_v")
        _connect(srv, "temp_v", "two").close()  # SCRAM verifiers do not depend on the name
        assert _sqlstate(srv, "temp_u", "two")[0] == "28000"
        root.execute("ALTER USER temp_v PASSWORD NULL")
        _connect(srv, "temp_v").close()  # no password: trust again
        root.execute("DROP USER temp_v")
        assert _sqlstate(srv, "temp_v", None)[0] == "28000"
        with pytest.raises(psycopg.errors.UndefinedObject, match='role "temp_v" does not exist'):
            root.execute("DROP USER temp_v")
        notices: list[str] = []
        root.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        root.execute("DROP USER IF EXISTS temp_v")
        assert notices == ['role "temp_v" does not exist, skipping']
        with pytest.raises(psycopg.errors.DuplicateObject, match='role "open_u" already exists'):
            root.execute("CREATE USER open_u")
        with pytest.raises(psycopg.errors.ObjectInUse):
            root.execute("DROP USER root")


def test_client_side_hashed_password_like_psql_password(srv: SwellServer) -> None:
    r"""psql's \password hashes on the client (PQencryptPasswordConn, which first asks
    SHOW password_encryption) and sends ALTER USER ... PASSWORD '<verifier>'."""
    with srv.connect() as root:
        root.execute("CREATE USER hashed_u")
        try:
            for algorithm in (None, b"md5"):
                vf = root.pgconn.encrypt_password(
                    b"pw-" + (algorithm or b"x"), b"hashed_u", algorithm
                )
                root.execute(f"ALTER USER hashed_u PASSWORD '{vf.decode()}'")
                pw = "pw-" + (algorithm or b"x").decode()
                with _connect(srv, "hashed_u", pw) as c:
                    assert c.info.parameter_status("is_superuser") == "off"
                assert _sqlstate(srv, "hashed_u", "wrong")[0] == "28P01"
        finally:
            root.execute("DROP USER hashed_u")


def test_non_superuser_may_change_only_own_password(srv: SwellServer) -> None:
    with srv.connect() as root:
        root.execute("CREATE USER self_u PASSWORD 'a'")
    try:
        with _connect(srv, "self_u", "a") as c:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute("CREATE USER other_u")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                c.execute("ALTER USER self_u SUPERUSER")
            c.execute("ALTER USER self_u PASSWORD 'b'")
        _connect(srv, "self_u", "b").close()
    finally:
        with srv.connect() as root:
            root.execute("DROP USER self_u")


def test_asyncpg_scram_and_md5(srv: SwellServer) -> None:
    async def main() -> None:
        for user, pw in (("scram_u", "s3cret"), ("md5_u", "md5-pw")):
            c = await asyncpg.connect(
                host=srv.host, port=srv.port, user=user, password=pw, database="dev", timeout=10
            )
            try:
                assert await c.fetchval("SELECT $1::int + 1", 41) == 42
            finally:
                await c.close()
        with pytest.raises(asyncpg.InvalidPasswordError):
            await asyncpg.connect(
                host=srv.host, port=srv.port, user="scram_u", password="no", database="dev"
            )

    asyncio.run(main())


@pytest.mark.needs("psql")
def test_psql_with_pgpassword(srv: SwellServer) -> None:
    assert PSQL is not None
    base = [PSQL, "-X", "-v", "ON_ERROR_STOP=1", "-h", srv.host, "-p", str(srv.port), "-d", "dev"]
    for user, pw in (("scram_u", "s3cret"), ("md5_u", "md5-pw")):
        env = {**os.environ, "PGPASSWORD": pw, "PGCONNECT_TIMEOUT": "10"}
        r = subprocess.run(
            [*base, "-U", user, "-tAc", "SELECT 7"], capture_output=True, text=True, env=env
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout.strip() == "7"
    env = {**os.environ, "PGPASSWORD": "bad", "PGCONNECT_TIMEOUT": "10"}
    r = subprocess.run(
        [*base, "-U", "scram_u", "-c", "SELECT 1"], capture_output=True, text=True, env=env
    )
    assert r.returncode == 2
    assert 'password authentication failed for user "scram_u"' in r.stderr


@pytest.mark.needs("jdbc")
def test_jdbc_scram_and_md5(srv: SwellServer, tmp_path: Path) -> None:
    assert JAVA is not None
    prog = tmp_path / "AuthCheck.java"
    prog.write_text(
        """
import java.sql.*;
public class AuthCheck {
    public static void main(String[] a) throws Exception {
        for (int i = 1; i + 1 < a.length; i += 2) {
            try (Connection c = DriverManager.getConnection(a[0], a[i], a[i + 1]);
                 ResultSet rs = c.createStatement().executeQuery("SELECT 5")) {
                rs.next();
                System.out.println(a[i] + " " + rs.getInt(1));
            } catch (SQLException e) {
                System.out.println(a[i] + " " + e.getSQLState());
            }
        }
    }
}
"""
    )
    url = f"jdbc:postgresql://{srv.host}:{srv.port}/dev"
    r = subprocess.run(
        [JAVA, "-cp", str(JAR), str(prog), url]
        + ["scram_u", "s3cret", "md5_u", "md5-pw", "scram_u", "bad"],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["scram_u 5", "md5_u 5", "scram_u 28P01"]


def test_users_survive_restart(tmp_path: Path) -> None:
    server = SwellServer(tmp_path / "data").start()
    try:
        with server.connect() as c:
            c.execute("CREATE USER durable_u PASSWORD 'pw'")
        server.restart()
        _connect(server, "durable_u", "pw").close()
        assert _sqlstate(server, "durable_u", "nope")[0] == "28P01"
        server.restart(crash=True)  # DDL forced a checkpoint: survives a crash too
        _connect(server, "durable_u", "pw").close()
    finally:
        server.stop()
