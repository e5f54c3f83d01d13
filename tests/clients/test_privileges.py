"""Privileges as PostgreSQL, driven by psycopg and psql against a real server.

Owners, GRANT / REVOKE (with GRANT OPTION, ALL, PUBLIC, CASCADE), schema USAGE/CREATE,
ALTER ... OWNER TO, superusers bypassing, views reading with their owner's rights, and
the catalogs telling the truth (`\\dp`, has_table_privilege,
information_schema.table_privileges, pg_class.relowner). Refusals are 42501.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from harness.server import SwellServer

pytestmark = [pytest.mark.clients, pytest.mark.e2e]

Denied = psycopg.errors.InsufficientPrivilege


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SwellServer]:
    server = SwellServer(tmp_path_factory.mktemp("privs") / "data").start()
    try:
        with server.connect() as c:
            for u in ("alice", "bob", "carol"):
                c.execute(f"CREATE USER {u} PASSWORD '{u}-pw'")
            c.execute("CREATE USER su SUPERUSER PASSWORD 'su-pw'")
            c.execute("CREATE TABLE pt (id INT PRIMARY KEY, v INT)")
            c.execute("INSERT INTO pt VALUES (1, 10), (2, 20)")
            c.execute("CREATE MATERIALIZED VIEW pmv AS SELECT count(*) AS n FROM pt")
            c.execute("FLUSH")
        yield server
    finally:
        server.stop()


def as_user(srv: SwellServer, user: str) -> psycopg.Connection[Any]:
    return srv.connect(user=user, password=f"{user}-pw")


def test_owner_only_by_default(srv: SwellServer) -> None:
    with as_user(srv, "alice") as a:
        with pytest.raises(Denied, match="permission denied for table pt"):
            a.execute("SELECT * FROM pt")
        with pytest.raises(Denied, match="permission denied for materialized view pmv"):
            a.execute("SELECT * FROM pmv")
        with pytest.raises(Denied, match="permission denied for table pt"):
            a.execute("INSERT INTO pt VALUES (3, 30)")
        with pytest.raises(Denied, match="must be owner of table pt"):
            a.execute("DROP TABLE pt")
        with pytest.raises(Denied, match="permission denied for table pt"):
            a.execute("CREATE MATERIALIZED VIEW amv AS SELECT * FROM pt")
        # her own objects are hers
        a.execute("CREATE TABLE alice_t (x INT)")
        a.execute("INSERT INTO alice_t VALUES (7)")
        a.execute("FLUSH")
        assert a.execute("SELECT x FROM alice_t").fetchall() == [(7,)]
    with srv.connect() as root:  # superusers bypass every check
        assert root.execute("SELECT x FROM alice_t").fetchall() == [(7,)]
        (owner,) = root.execute(
            "SELECT tableowner FROM pg_tables WHERE tablename = 'alice_t'"
        ).fetchone()
        assert owner == "alice"
        rel = root.execute(
            "SELECT r.relowner = u.usesysid FROM pg_class r, pg_user u "
            "WHERE r.relname = 'alice_t' AND u.usename = 'alice'"
        ).fetchone()
        assert rel == (True,)
    with as_user(srv, "su") as su:
        assert su.execute("SELECT x FROM alice_t").fetchall() == [(7,)]


def test_grant_revoke_with_grant_option_and_cascade(srv: SwellServer) -> None:
    with srv.connect() as root:
        root.execute("CREATE TABLE gt (id INT PRIMARY KEY, v INT)")
        root.execute("INSERT INTO gt VALUES (1, 1)")
        root.execute("GRANT SELECT ON gt TO alice WITH GRANT OPTION")
        root.execute("GRANT INSERT, UPDATE ON TABLE gt TO bob")
    with as_user(srv, "alice") as a:
        assert a.execute("SELECT id FROM gt").fetchall() == [(1,)]
        with pytest.raises(Denied):
            a.execute("DELETE FROM gt")
        a.execute("GRANT SELECT ON gt TO carol")  # she holds the grant option
        with pytest.raises(Denied, match="permission denied for table gt"):
            a.execute("GRANT INSERT ON gt TO carol")
    with as_user(srv, "bob") as b:
        b.execute("INSERT INTO gt VALUES (2, 2)")
        b.execute("FLUSH")
        with pytest.raises(Denied):  # UPDATE ... WHERE reads rows: needs SELECT too
            b.execute("UPDATE gt SET v = 3 WHERE id = 2")
        with pytest.raises(Denied):
            b.execute("GRANT INSERT ON gt TO carol")  # no grant option
    with as_user(srv, "carol") as c:
        assert c.execute("SELECT count(*) FROM gt").fetchone() == (2,)
    with srv.connect() as root:
        with pytest.raises(psycopg.errors.DependentObjectsStillExist):
            root.execute("REVOKE SELECT ON gt FROM alice")
        root.execute("REVOKE SELECT ON gt FROM alice CASCADE")
        root.execute("GRANT ALL ON gt TO PUBLIC")
        root.execute("REVOKE ALL ON gt FROM PUBLIC")
    for user in ("alice", "carol"):
        with as_user(srv, user) as conn, pytest.raises(Denied):
            conn.execute("SELECT * FROM gt")


def test_view_reads_with_its_owners_rights(srv: SwellServer) -> None:
    with srv.connect() as root:
        root.execute("CREATE TABLE vt (a INT)")
        root.execute("INSERT INTO vt VALUES (1)")
        root.execute("GRANT SELECT ON vt TO alice")
    with as_user(srv, "alice") as a:
        a.execute("CREATE VIEW alice_v AS SELECT a FROM vt")
        a.execute("GRANT SELECT ON alice_v TO bob")
    with as_user(srv, "bob") as b:
        assert b.execute("SELECT a FROM alice_v").fetchall() == [(1,)]
        with pytest.raises(Denied):
            b.execute("SELECT a FROM vt")  # not directly
    with srv.connect() as root:
        root.execute("REVOKE SELECT ON vt FROM alice")
    with as_user(srv, "bob") as b, pytest.raises(Denied, match="permission denied for table vt"):
        b.execute("SELECT a FROM alice_v")


def test_schema_usage_and_create(srv: SwellServer) -> None:
    with srv.connect() as root:
        root.execute("CREATE SCHEMA priv_s")
        root.execute("CREATE TABLE priv_s.st (a INT)")
        root.execute("GRANT SELECT ON priv_s.st TO alice")
    with as_user(srv, "alice") as a:
        with pytest.raises(Denied, match="permission denied for schema priv_s"):
            a.execute("CREATE TABLE priv_s.mine (a INT)")
        with pytest.raises(Denied, match="permission denied for schema priv_s"):
            a.execute("SELECT * FROM priv_s.st")
    with srv.connect() as root:
        root.execute("GRANT USAGE, CREATE ON SCHEMA priv_s TO alice")
    with as_user(srv, "alice") as a:
        assert a.execute("SELECT count(*) FROM priv_s.st").fetchone() == (0,)
        a.execute("CREATE TABLE priv_s.mine (a INT)")
        assert a.execute(
            "SELECT has_schema_privilege('priv_s', 'CREATE'), "
            "has_schema_privilege('bob', 'priv_s', 'USAGE')"
        ).fetchone() == (True, False)


def test_alter_owner(srv: SwellServer) -> None:
    with srv.connect() as root:
        root.execute("CREATE TABLE ot (a INT)")
    with as_user(srv, "alice") as a:
        with pytest.raises(Denied, match="must be owner of table ot"):
            a.execute("ALTER TABLE ot OWNER TO alice")
    with srv.connect() as root:
        root.execute("ALTER TABLE ot OWNER TO alice")
        with pytest.raises(psycopg.errors.UndefinedObject):
            root.execute("ALTER TABLE ot OWNER TO nobody")
    with as_user(srv, "alice") as a:
        with pytest.raises(Denied, match="SET ROLE"):
            a.execute("ALTER TABLE ot OWNER TO bob")
        a.execute("INSERT INTO ot VALUES (1)")
        a.execute("DROP TABLE ot")


def test_catalogs_tell_the_truth(srv: SwellServer) -> None:
    with srv.connect() as root:
        root.execute("CREATE TABLE ct (a INT)")
        root.execute("GRANT SELECT ON ct TO alice WITH GRANT OPTION")
        root.execute("GRANT INSERT ON ct TO bob")
        acl = root.execute("SELECT relacl::text FROM pg_class WHERE relname = 'ct'").fetchone()
        assert acl == ("{root=arwdDxt/root,alice=r*/root,bob=a/root}",)
        rows = root.execute(
            "SELECT grantee, privilege_type, is_grantable FROM information_schema.table_privileges "
            "WHERE table_name = 'ct' AND grantee <> 'root' ORDER BY grantee"
        ).fetchall()
        assert rows == [("alice", "SELECT", "YES"), ("bob", "INSERT", "NO")]
        assert root.execute(
            "SELECT has_table_privilege('alice', 'ct', 'SELECT'), "
            "has_table_privilege('alice', 'ct', 'INSERT'), "
            "has_table_privilege('bob', 'public.ct', 'INSERT'), "
            "has_table_privilege('alice', 'ct', 'SELECT WITH GRANT OPTION')"
        ).fetchone() == (True, False, True, True)
    with as_user(srv, "bob") as b:
        assert b.execute("SELECT has_table_privilege('ct', 'SELECT')").fetchone() == (False,)
        seen = b.execute(
            "SELECT DISTINCT grantee FROM information_schema.table_privileges "
            "WHERE table_name = 'ct'"
        ).fetchall()
        assert seen == [("bob",)]  # as PostgreSQL: rows where bob is grantor or grantee


@pytest.mark.needs("psql")
def test_psql_dp_and_z(srv: SwellServer) -> None:
    with srv.connect() as root:
        root.execute("CREATE TABLE dpt (a INT)")
        root.execute("GRANT SELECT, UPDATE ON dpt TO carol")
    env = {**os.environ, "PGCONNECT_TIMEOUT": "10"}
    base = ["psql", "-X", "-h", srv.host, "-p", str(srv.port), "-U", "root", "dev"]
    for meta in ("\\dp dpt", "\\z dpt"):
        out = subprocess.run(
            [*base, "-c", meta], env=env, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        assert "root=arwdDxt/root" in out.stdout and "carol=rw/root" in out.stdout


def test_webhook_validate_literal_only_for_owner(srv: SwellServer) -> None:
    with srv.connect() as root:
        root.execute(
            "CREATE TABLE wh_priv (data JSONB) WITH (connector = 'webhook') "
            "VALIDATE AS secure_compare(headers->>'x-token', 'WebhookTok123')"
        )
        root.execute("GRANT SELECT ON wh_priv TO alice")
        (mine,) = root.execute("SHOW CREATE TABLE wh_priv").fetchone()[1:]
        assert "WebhookTok123" in mine
    with as_user(srv, "alice") as a:
        (shown,) = a.execute("SHOW CREATE TABLE wh_priv").fetchone()[1:]
        rows = a.execute("SELECT definition FROM rw_catalog.rw_tables").fetchall()
    assert "WebhookTok123" not in shown and "'x-token'" in shown
    assert "WebhookTok123" not in repr(rows)


def test_privileges_survive_restart(srv: SwellServer) -> None:
    with srv.connect() as root:
        root.execute("CREATE TABLE rt (a INT)")
        root.execute("GRANT SELECT ON rt TO bob")
    with as_user(srv, "alice") as a:  # her own table, kept across the restart
        a.execute("CREATE TABLE alice_rt (x INT)")
        a.execute("INSERT INTO alice_rt VALUES (7)")
        a.execute("FLUSH")
    srv.restart()
    with as_user(srv, "bob") as b:
        assert b.execute("SELECT count(*) FROM rt").fetchone() == (0,)
        with pytest.raises(Denied):
            b.execute("INSERT INTO rt VALUES (1)")
    with as_user(srv, "alice") as a:
        assert a.execute("SELECT x FROM alice_rt").fetchall() == [(7,)]
    with as_user(srv, "bob") as b, pytest.raises(Denied):
        b.execute("SELECT x FROM alice_rt")


def test_secrets_and_connections_are_their_owners(srv: SwellServer) -> None:
    """A secret or connection used by someone else's connector would hand its credentials
    to that connector's endpoint: only the owner (and superusers) may use or drop it."""
    with srv.connect() as root:
        root.execute("CREATE SECRET root_pw WITH (backend = 'meta') AS 'RootOnly1'")
        root.execute(
            "CREATE CONNECTION root_conn WITH (type = 'kafka', "
            "properties.bootstrap.server = 'localhost:9', properties.sasl.password = 'p')"
        )
        root.execute("CREATE TABLE sink_src (a INT)")
        root.execute("GRANT SELECT ON sink_src TO alice")
    with as_user(srv, "alice") as a:
        with pytest.raises(Denied, match="permission denied for secret root_pw"):
            a.execute(
                "CREATE SINK steal FROM sink_src WITH (connector = 'blackhole', "
                "properties.sasl.password = SECRET root_pw, type = 'append-only', force_append_only = 'true')"
            )
        with pytest.raises(Denied, match="permission denied for secret root_pw"):
            a.execute(
                "CREATE TABLE steal_w (data JSONB) WITH (connector = 'webhook') "
                "VALIDATE SECRET root_pw AS secure_compare(headers->>'x', root_pw)"
            )
        with pytest.raises(Denied, match="must be owner of secret root_pw"):
            a.execute("DROP SECRET root_pw")
        with pytest.raises(Denied, match="permission denied for connection root_conn"):
            a.execute(
                "CREATE SINK steal2 FROM sink_src WITH (connection = root_conn, "
                "connector = 'blackhole', type = 'append-only', force_append_only = 'true')"
            )
        with pytest.raises(Denied, match="must be owner of connection root_conn"):
            a.execute("DROP CONNECTION root_conn")
        a.execute("CREATE SECRET alice_pw WITH (backend = 'meta') AS 'AliceOwn2'")
        a.execute(
            "CREATE SINK own FROM sink_src WITH (connector = 'blackhole', "
            "properties.sasl.password = SECRET alice_pw, type = 'append-only', force_append_only = 'true')"
        )
        a.execute("DROP SINK own")
        a.execute("DROP SECRET alice_pw")


def test_drop_user_owning_objects_is_refused(srv: SwellServer) -> None:
    with srv.connect() as root:
        root.execute("CREATE USER dora PASSWORD 'dora-pw'")
        root.execute("CREATE TABLE dora_read (a INT)")
        root.execute("GRANT SELECT ON dora_read TO dora")
    with as_user(srv, "dora") as d:
        d.execute("CREATE TABLE dora_t (a INT)")
    with srv.connect() as root:
        with pytest.raises(psycopg.errors.DependentObjectsStillExist) as ei:
            root.execute("DROP USER dora")
        assert "owner of table dora_t" in (ei.value.diag.message_detail or "")
        root.execute("ALTER TABLE dora_t OWNER TO root")
        root.execute("DROP USER dora")
        acl = root.execute("SELECT relacl::text FROM pg_class WHERE relname = 'dora_read'")
        assert acl.fetchone() == ("{root=arwdDxt/root}",)
