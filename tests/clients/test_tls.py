"""TLS on the pgwire port: with --ssl-cert/--ssl-key an SSLRequest is answered `S` and the
connection continues over TLS (psql, psycopg and asyncpg with sslmode=require, and SCRAM
over TLS); without a certificate it is answered `N`, so sslmode=require fails and
sslmode=prefer falls back to plain TCP. The certificate is self-signed, made per test run
with the openssl binary."""

from __future__ import annotations

import asyncio
import os
import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import psycopg
import pytest

from harness.server import SwellServer
from harness.tools import require

pytestmark = [pytest.mark.clients, pytest.mark.e2e]

PSQL = shutil.which("psql")


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SwellServer]:
    openssl = require("openssl")
    d = tmp_path_factory.mktemp("tls")
    cert, key = d / "cert.pem", d / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2"]
        + ["-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
        timeout=60,
    )
    server = SwellServer(d / "data", extra_args=["--ssl-cert", str(cert), "--ssl-key", str(key)])
    server.start()
    try:
        with server.connect() as c:
            c.execute("CREATE USER tls_u PASSWORD 'tls-pw'")
        yield server
    finally:
        server.stop()


def test_psycopg_sslmode_require(tls_server: SwellServer) -> None:
    with tls_server.connect(sslmode="require") as c:
        assert c.pgconn.ssl_in_use
        assert c.execute("SELECT 40 + 2").fetchone() == (42,)
    with tls_server.connect(sslmode="require", user="tls_u", password="tls-pw") as c:
        assert c.pgconn.ssl_in_use  # SCRAM inside TLS (libpq prefers SCRAM-SHA-256-PLUS)
    kw = {"user": "tls_u", "password": "tls-pw", "sslmode": "require"}
    with tls_server.connect(channel_binding="require", **kw) as c:
        assert c.execute("SELECT current_user").fetchone() == ("tls_u",)
    with tls_server.connect(channel_binding="disable", **kw) as c:
        assert c.execute("SELECT 1").fetchone() == (1,)
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        tls_server.connect(channel_binding="require", user="tls_u", password="bad").close()
    with tls_server.connect(sslmode="disable") as c:
        assert not c.pgconn.ssl_in_use  # plain TCP still accepted


def test_asyncpg_over_tls(tls_server: SwellServer) -> None:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE

    async def main() -> None:
        c = await asyncpg.connect(
            host=tls_server.host, port=tls_server.port, user="root", database="dev", ssl=ctx
        )
        try:
            assert await c.fetchval("SELECT $1::int * 2", 21) == 42
        finally:
            await c.close()

    asyncio.run(main())


@pytest.mark.needs("psql")
def test_psql_reports_ssl(tls_server: SwellServer) -> None:
    assert PSQL is not None
    r = subprocess.run(
        [PSQL, "-X", "-h", tls_server.host, "-p", str(tls_server.port), "-U", "root", "dev"]
        + ["-c", "\\conninfo"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PGSSLMODE": "require"},
    )
    assert r.returncode == 0, r.stderr
    assert "SSL connection (protocol: TLSv1." in r.stdout


def test_without_certificate_ssl_is_refused(server: SwellServer) -> None:
    with pytest.raises(psycopg.OperationalError, match="server does not support SSL"):
        server.connect(sslmode="require")
    with server.connect(sslmode="prefer") as c:
        assert not c.pgconn.ssl_in_use


def test_cli_rejects_half_configured_tls(tmp_path: Path) -> None:
    from pgwire.cli import ssl_context

    with pytest.raises(SystemExit):
        ssl_context(tmp_path / "cert.pem", None)
    assert ssl_context(None, None) is None


JAVA = shutil.which("java")
JAR = Path("/usr/share/java/postgresql.jar")


@pytest.mark.needs("jdbc")
def test_jdbc_tls_with_scram(tls_server: SwellServer, tmp_path: Path) -> None:
    assert JAVA is not None
    prog = tmp_path / "TlsCheck.java"
    prog.write_text(
        """
import java.sql.*;
public class TlsCheck {
    public static void main(String[] a) throws Exception {
        try (Connection c = DriverManager.getConnection(a[0]);
             ResultSet rs = c.createStatement().executeQuery("SELECT current_user")) {
            rs.next();
            System.out.println("user " + rs.getString(1));
        }
    }
}
"""
    )
    url = (
        f"jdbc:postgresql://{tls_server.host}:{tls_server.port}/dev"
        "?sslmode=require&user=tls_u&password=tls-pw"
    )
    r = subprocess.run(
        [JAVA, "-cp", str(JAR), str(prog), url], capture_output=True, text=True, timeout=90
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["user tls_u"]
