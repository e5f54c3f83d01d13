"""Several databases in one server: CREATE/DROP DATABASE, connecting by name, webhook URLs.

Each database has its own relations under the same names (a table `t` in `dev` and in
`shop` are different tables with different rows and views), its own system catalogs,
webhook tables reached at `/webhook/{database}/{schema}/{table}`, and survives a kill -9.
DROP DATABASE refuses while the database is open, in use or not empty; only superusers and
CREATEDB roles create databases.
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
        assert dev.execute("SHOW DATABASES").fetchall() == [("dev",), ("shop",)]
    with srv.connect(dbname="shop") as shop:
        assert shop.execute("SELECT current_database()").fetchone() == ("shop",)
        with pytest.raises(psycopg.errors.UndefinedTable):
            shop.execute("SELECT * FROM t")
        shop.execute("CREATE TABLE t (b VARCHAR)")
        shop.execute("INSERT INTO t VALUES ('x'), ('y')")
        shop.execute("CREATE MATERIALIZED VIEW mv AS SELECT count(*) AS n, min(b) AS m FROM t")
        shop.execute("CREATE TABLE hook (body JSONB) WITH (connector = 'webhook')")
        tables = "SELECT relname FROM pg_class WHERE relnamespace = 'public'::regnamespace"
        assert sorted(shop.execute(tables).fetchall()) == [("hook",), ("mv",), ("t",)]
    assert post(srv.webhook_url("hook", database="shop"), {"k": 1}) == 200
    assert post(srv.webhook_url("hook"), {"k": 1}) == 404  # dev has no table hook
    assert post(srv.webhook_url("hook", database="nosuch"), {"k": 1}) == 404
    srv.restart(crash=True)
    with srv.connect() as dev, srv.connect(dbname="shop") as shop:
        dev.execute("FLUSH")
        assert dev.execute("SELECT n FROM mv").fetchall() == [(1,)]
        assert shop.execute("SELECT n, m FROM mv").fetchall() == [(2, "x")]
        assert shop.execute("SELECT body FROM hook").fetchall() == [({"k": 1},)]
        with pytest.raises(psycopg.errors.ObjectInUse, match="currently open"):
            shop.execute("DROP DATABASE shop")
        with pytest.raises(psycopg.errors.ObjectInUse, match="accessed by other users"):
            dev.execute("DROP DATABASE shop")
        shop.close()
        gone(dev, "shop")
        with pytest.raises(psycopg.errors.DependentObjectsStillExist, match="not empty"):
            dev.execute("DROP DATABASE shop")
        with srv.connect(dbname="shop") as shop2:
            for stmt in ("DROP MATERIALIZED VIEW mv", "DROP TABLE t", "DROP TABLE hook"):
                shop2.execute(stmt)
        gone(dev, "shop")
        dev.execute("DROP DATABASE shop")
        with pytest.raises(psycopg.errors.InvalidCatalogName):
            dev.execute("DROP DATABASE shop")
        assert dev.execute("SELECT datname FROM pg_database").fetchall() == [("dev",)]
    with pytest.raises(psycopg.OperationalError, match='database "shop" does not exist'):
        srv.connect(dbname="shop")


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
