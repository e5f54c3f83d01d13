"""asyncpg against Swell. asyncpg only speaks the extended protocol with named statements,
sends parameters without type OIDs (so the server must infer them) and asks for binary
results for every column: a strict test of Describe and the binary encodings."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from harness.server import SwellServer

pytestmark = pytest.mark.clients


def run(server: SwellServer, body: Callable[[asyncpg.Connection], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        conn = await asyncpg.connect(server.dsn, timeout=10)
        try:
            return await asyncio.wait_for(body(conn), 60)
        finally:
            await conn.close(timeout=10)

    return asyncio.run(main())


def test_fetch_fetchrow_fetchval_with_parameters(server: SwellServer) -> None:
    async def body(conn: asyncpg.Connection) -> None:
        await conn.execute("DROP TABLE IF EXISTS apg_t")
        await conn.execute(
            "CREATE TABLE apg_t (id INT PRIMARY KEY, name VARCHAR, score DOUBLE PRECISION)"
        )
        try:
            await conn.executemany(
                "INSERT INTO apg_t VALUES ($1, $2, $3)",
                [(1, "a", 1.5), (2, "b", None), (3, "c", -2.0)],
            )
            await conn.execute("FLUSH")
            rows = await conn.fetch(
                "SELECT id, name, score FROM apg_t WHERE id >= $1 ORDER BY id", 2
            )
            assert [tuple(r) for r in rows] == [(2, "b", None), (3, "c", -2.0)]
            assert rows[0]["name"] == "b"
            row = await conn.fetchrow("SELECT name, score FROM apg_t WHERE id = $1", 1)
            assert row is not None and tuple(row) == ("a", 1.5)
            assert await conn.fetchrow("SELECT name FROM apg_t WHERE id = $1", 99) is None
            assert await conn.fetchval("SELECT count(*) FROM apg_t") == 3
            assert await conn.fetchval("SELECT $1::int + 1", 41) == 42
            assert await conn.fetchval("SELECT $1::varchar || '!'", "hi") == "hi!"
        finally:
            await conn.execute("DROP TABLE apg_t")

    run(server, body)


def test_prepared_statement_reuse_and_types(server: SwellServer) -> None:
    async def body(conn: asyncpg.Connection) -> None:
        await conn.execute("DROP TABLE IF EXISTS apg_p")
        await conn.execute("CREATE TABLE apg_p (id BIGINT PRIMARY KEY, label VARCHAR, ok BOOLEAN)")
        try:
            await conn.execute("INSERT INTO apg_p VALUES (1, 'one', true), (2, 'two', false)")
            await conn.execute("FLUSH")
            stmt = await conn.prepare("SELECT label, ok FROM apg_p WHERE id = $1")
            assert [t.name for t in stmt.get_parameters()] == ["int8"]
            assert [(a.name, a.type.name) for a in stmt.get_attributes()] == [
                ("label", "varchar"),
                ("ok", "bool"),
            ]
            for i in range(8):
                key = 1 + i % 2
                got = await stmt.fetchrow(key)
                assert got is not None and tuple(got) == (("one", True), ("two", False))[key - 1]
            assert await stmt.fetchval(1) == "one"
        finally:
            await conn.execute("DROP TABLE apg_p")

    run(server, body)


def test_arrays_of_arrays_in_binary(server: SwellServer) -> None:
    """An array of arrays goes out as one two-dimensional int4[] (binary, with its dims)."""

    async def body(conn: asyncpg.Connection) -> None:
        got = await conn.fetchval("SELECT ARRAY[[1, 2], [3, NULL]]")
        assert got == [[1, 2], [3, None]]
        stmt = await conn.prepare("SELECT ARRAY[[1, 2], [3, 4]] AS m")
        assert [a.type.name for a in stmt.get_attributes()] == ["int4[]"]

    run(server, body)


def test_errors_map_to_asyncpg_exceptions(server: SwellServer) -> None:
    async def body(conn: asyncpg.Connection) -> None:
        with pytest.raises(asyncpg.exceptions.UndefinedTableError) as ei:
            await conn.fetch("SELECT * FROM apg_nope WHERE x = $1", 1)
        assert ei.value.sqlstate == "42P01"
        with pytest.raises(asyncpg.exceptions.DivisionByZeroError):
            await conn.fetchval("SELECT 1 / $1::int", 0)
        assert await conn.fetchval("SELECT 7") == 7

    run(server, body)
