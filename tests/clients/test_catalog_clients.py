"""asyncpg's type introspection and SQLAlchemy's inspector on Swell's real catalogs.

asyncpg introspects every type without a built-in codec (int4[], jsonb...) with a
`WITH RECURSIVE` query over pg_type/pg_namespace/pg_range/pg_attribute; SQLAlchemy's
`inspect(engine)` lists tables, views and materialized views and reads columns and primary
keys with queries using select-list unnest/generate_subscripts, array_agg(... ORDER BY),
bool_and and ::regclass. Both run on the engine (no query recognition in pgwire).
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from harness.server import SwellServer

pytestmark = [pytest.mark.clients]


@pytest.fixture
def objects(server: SwellServer) -> Any:
    async def setup() -> None:
        c = await asyncpg.connect(server.dsn)
        try:
            await c.execute("CREATE TABLE IF NOT EXISTS cc_t (id INT PRIMARY KEY, tags VARCHAR[])")
            await c.execute(
                "CREATE MATERIALIZED VIEW IF NOT EXISTS cc_mv AS SELECT id, tags FROM cc_t"
            )
            await c.execute("CREATE VIEW IF NOT EXISTS cc_v AS SELECT id FROM cc_t")
        finally:
            await c.close()

    asyncio.run(setup())


def test_asyncpg_introspects_arrays_on_the_catalog(server: SwellServer) -> None:
    async def run() -> list[Any]:
        c = await asyncpg.connect(server.dsn)
        try:
            return [
                await c.fetchval("SELECT ARRAY[1, 2]::int[]"),
                await c.fetchval("SELECT $1::int8[]", [3, 4]),
                await c.fetch(
                    "SELECT oid, typname FROM pg_type WHERE oid = any($1::oid[]) ORDER BY 1",
                    [23, 25],
                ),
            ]
        finally:
            await c.close()

    got = asyncio.run(run())
    assert got[0] == [1, 2]
    assert got[1] == [3, 4]
    assert [tuple(r) for r in got[2]] == [(23, "int4"), (25, "text")]


def test_sqlalchemy_inspect(server: SwellServer, objects: Any) -> None:
    sa = pytest.importorskip("sqlalchemy")
    from sqlalchemy.ext.asyncio import create_async_engine

    async def run() -> Any:
        eng = create_async_engine(server.dsn.replace("postgresql://", "postgresql+asyncpg://"))
        try:
            async with eng.connect() as conn:

                def inspect(sync_conn: Any) -> Any:
                    i = sa.inspect(sync_conn)
                    return (
                        i.get_table_names(),
                        i.get_view_names(),
                        i.get_materialized_view_names(),
                        [(c["name"], str(c["type"])) for c in i.get_columns("cc_t")],
                        [c["name"] for c in i.get_columns("cc_mv")],
                        i.get_pk_constraint("cc_t"),
                    )

                info = await conn.run_sync(inspect)
                t = sa.table("cc_t", sa.column("id"))
                rows = (await conn.execute(sa.select(t.c.id).where(t.c.id == 1))).fetchall()
                return info, rows
        finally:
            await eng.dispose()

    (tables, views, mvs, cols, mv_cols, pk), rows = asyncio.run(run())
    assert "cc_t" in tables
    assert "cc_v" in views and not any(v.startswith("rw_") for v in views)
    assert "cc_mv" in mvs
    assert cols == [("id", "INTEGER"), ("tags", "ARRAY")]
    assert mv_cols == ["id", "tags"]
    assert pk["constrained_columns"] == ["id"] and pk["name"] == "cc_t_pkey"
    assert rows == []


def test_sqlalchemy_psycopg_reflection(server: SwellServer, objects: Any) -> None:
    """The sync psycopg dialect (savepoint around its hstore probe), Table reflection and a
    Core query; get_indexes joins pg_constraint ON ... contype = ANY (ARRAY[...])."""
    sa = pytest.importorskip("sqlalchemy")
    eng = sa.create_engine(server.dsn.replace("postgresql://", "postgresql+psycopg://"))
    try:
        i = sa.inspect(eng)
        assert "cc_mv" in i.get_materialized_view_names()
        assert [ix["name"] for ix in i.get_indexes("cc_t")] == []
        assert i.get_pk_constraint("cc_t")["constrained_columns"] == ["id"]
        t = sa.Table("cc_t", sa.MetaData(), autoload_with=eng)
        assert [c.name for c in t.columns] == ["id", "tags"]
        with eng.connect() as c:
            assert c.execute(sa.select(t).where(t.c.id == -1)).fetchall() == []
    finally:
        eng.dispose()
