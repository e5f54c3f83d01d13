"""Several databases in one server: CREATE/DROP DATABASE, connecting by name, webhook URLs.

Each database has its own relations under the same names (a table `t` in `dev` and in
`shop` are different tables with different rows and views), its own system catalogs,
webhook tables reached at `/webhook/{database}/{schema}/{table}`, and survives a kill -9.
Schemas, functions and secrets are per database too (kept apart across a kill -9). DROP
DATABASE refuses while the database is open or in use and drops everything it holds; only
superusers and CREATEDB roles create databases.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import psycopg
import pytest

from harness.seeds import wait_webhook
from harness.server import SwellServer


def post(url: str, body: dict[str, Any]) -> int:
    async def go() -> int:
        async with aiohttp.ClientSession() as http, http.post(url, json=body) as r:
            await r.read()
            return r.status

    return asyncio.run(go())


def gone(conn: psycopg.Connection[Any], database: str) -> None:
    """Wait until the server has closed the sessions of `database` (a client's close
    reaches it a moment later)."""
    q = "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
    deadline = time.monotonic() + 10
    while conn.execute(q, (database,)).fetchone() != (0,):
        assert time.monotonic() < deadline, f"sessions of {database} stay open"
        time.sleep(0.02)


def test_databases_are_separate_and_durable(fresh_server: SwellServer) -> None:
    srv = fresh_server
    wait_webhook(srv)
    with srv.connect() as dev:
        dev.execute("CREATE DATABASE shop")
        with pytest.raises(psycopg.errors.DuplicateDatabase):
            dev.execute("CREATE DATABASE shop")
        dev.execute("CREATE TABLE t (a INT)")
        dev.execute("INSERT INTO t VALUES (1)")
        dev.execute("CREATE MATERIALIZED VIEW mv AS SELECT count(*) AS n FROM t")
        dev.execute("CREATE FUNCTION twice(x INT) RETURNS INT LANGUAGE sql AS 'SELECT x * 3'")
        dev.execute("CREATE SECRET k WITH (backend = 'meta') AS 'in dev'")
        assert dev.execute("SHOW DATABASES").fetchall() == [("dev",), ("shop",)]
    with srv.connect(dbname="shop") as shop:
        assert shop.execute("SELECT current_database()").fetchone() == ("shop",)
        with pytest.raises(psycopg.errors.UndefinedTable):
            shop.execute("SELECT * FROM t")
        shop.execute("CREATE TABLE t (b VARCHAR)")
        shop.execute("INSERT INTO t VALUES ('x'), ('y')")
        shop.execute("CREATE MATERIALIZED VIEW mv AS SELECT count(*) AS n, min(b) AS m FROM t")
        shop.execute("CREATE TABLE hook (body JSONB) WITH (connector = 'webhook')")
        shop.execute("CREATE SCHEMA s")
        shop.execute("CREATE TABLE s.t2 (a INT)")
        shop.execute("CREATE FUNCTION twice(x INT) RETURNS INT LANGUAGE sql AS 'SELECT x * 2'")
        shop.execute("CREATE SECRET k WITH (backend = 'meta') AS 'in shop'")
        tables = "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace"
        assert sorted(shop.execute(tables).fetchall()) == [("hook",), ("mv",), ("t",)]
        shop.execute("DROP SECRET k")  # shop's; dev's stays
        shop.execute("CREATE SECRET k WITH (backend = 'meta') AS 'in shop'")
    assert post(srv.webhook_url("hook", database="shop"), {"k": 1}) == 200
    assert post(srv.webhook_url("hook"), {"k": 1}) == 404  # dev has no table hook
    assert post(srv.webhook_url("hook", database="nosuch"), {"k": 1}) == 404
    srv.restart(crash=True)
    with srv.connect() as dev, srv.connect(dbname="shop") as shop:
        dev.execute("FLUSH")
        assert dev.execute("SELECT n FROM mv").fetchall() == [(1,)]
        assert shop.execute("SELECT n, m FROM mv").fetchall() == [(2, "x")]
        assert shop.execute("SELECT body FROM hook").fetchall() == [({"k": 1},)]
        assert dev.execute("SELECT twice(2)").fetchone() == (6,)
        assert shop.execute("SELECT twice(2)").fetchone() == (4,)
        schemas = "SELECT nspname FROM pg_namespace WHERE nspname = 's'"
        assert dev.execute(schemas).fetchall() == []
        assert shop.execute(schemas).fetchall() == [("s",)]
        secrets = "SELECT name FROM rw_catalog.rw_secrets"
        assert dev.execute(secrets).fetchall() == shop.execute(secrets).fetchall() == [("k",)]
        with pytest.raises(psycopg.errors.ObjectInUse, match="currently open"):
            shop.execute("DROP DATABASE shop")
        with pytest.raises(psycopg.errors.ObjectInUse, match="accessed by other users"):
            dev.execute("DROP DATABASE shop")
        shop.close()
        gone(dev, "shop")
        dev.execute("DROP DATABASE shop")  # with its tables, views, schema, function, secret
        assert post(srv.webhook_url("hook", database="shop"), {"k": 2}) == 404
        with pytest.raises(psycopg.errors.InvalidCatalogName):
            dev.execute("DROP DATABASE shop")
        assert dev.execute("SELECT datname FROM pg_database").fetchall() == [("dev",)]
    with pytest.raises(psycopg.OperationalError, match='database "shop" does not exist'):
        srv.connect(dbname="shop")
    with srv.connect() as dev:
        dev.execute("CREATE DATABASE shop")
        assert dev.execute("SELECT twice(2)").fetchone() == (6,)
    with srv.connect(dbname="shop") as shop:  # made again: nothing of the dropped one
        assert shop.execute("SELECT count(*) FROM pg_class WHERE relname = 't'").fetchone() == (0,)
        with pytest.raises(psycopg.errors.UndefinedFunction):
            shop.execute("SELECT twice(2)")
        assert shop.execute("SELECT name FROM rw_catalog.rw_secrets").fetchall() == []


def test_who_may_create_and_drop(server: SwellServer) -> None:
    with server.connect() as root:
        root.execute("CREATE USER plain_db_user")
        root.execute("CREATE USER maker_db_user CREATEDB")
        root.execute("CREATE DATABASE rooted")
    try:
        with server.connect(user="plain_db_user") as plain:
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                plain.execute("CREATE DATABASE nope")
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="must be owner"):
                plain.execute("DROP DATABASE rooted")
        with server.connect(user="maker_db_user") as maker:
            maker.execute("CREATE DATABASE made")
            maker.execute("DROP DATABASE made")
            with pytest.raises(psycopg.errors.ObjectInUse, match="currently open"):
                maker.execute("DROP DATABASE dev")
            with pytest.raises(psycopg.errors.FeatureNotSupported):
                maker.execute("CREATE DATABASE x WITH TEMPLATE template0")
        with server.connect(dbname="rooted") as elsewhere:
            with pytest.raises(psycopg.errors.FeatureNotSupported, match="dropping database"):
                elsewhere.execute("DROP DATABASE dev")
    finally:
        with server.connect() as root:
            gone(root, "rooted")
            root.execute("DROP DATABASE rooted")
            root.execute("DROP USER plain_db_user")
            root.execute("DROP USER maker_db_user")
