"""pgwire driven by asyncpg: named statements without OIDs, binary parameters and results."""

from __future__ import annotations

import asyncio
import datetime as dt
from decimal import Decimal

import asyncpg
import pytest


def _run(coro):  # noqa: ANN001, ANN202 - tiny helper
    return asyncio.run(asyncio.wait_for(coro, 10))


def test_fetch_with_params(pg) -> None:
    async def main() -> None:
        conn = await asyncpg.connect(host="127.0.0.1", port=pg.port, user="root", database="dev")
        try:
            assert await conn.fetchval("select 1") == 1
            rows = await conn.fetch(
                "echo $1::int, $2::varchar, $3::numeric", 5, "x", Decimal("2.50")
            )
            assert [tuple(r) for r in rows] == [(5, "x", Decimal("2.5"))]
            stmt = await conn.prepare("echo $1::timestamptz, $2::date, $3::interval, $4::bool")
            ts = dt.datetime(2024, 5, 6, 7, 8, 9, 10, tzinfo=dt.UTC)
            row = await stmt.fetchrow(
                ts, dt.date(2020, 1, 1), dt.timedelta(days=2, microseconds=3), False
            )
            assert tuple(row) == (
                ts,
                dt.date(2020, 1, 1),
                dt.timedelta(days=2, microseconds=3),
                False,
            )
            assert [a.type.name for a in stmt.get_attributes()] == [
                "timestamptz",
                "date",
                "interval",
                "bool",
            ]
            assert [p.name for p in stmt.get_parameters()] == [
                "timestamptz",
                "date",
                "interval",
                "bool",
            ]
            # (arrays would make asyncpg introspect pg_type, which needs the real engine)
            row = await conn.fetchrow(
                "echo $1::jsonb, $2::bytea, $3::float8, $4::int8",
                '{"a": 1}',
                b"\x00\x01",
                -0.5,
                -(2**40),
            )
            assert tuple(row) == ('{"a": 1}', b"\x00\x01", -0.5, -(2**40))
        finally:
            await conn.close()

    _run(main())


# asyncpg's type introspection (arrays) runs on the real catalog: see
# tests/clients/test_catalog_clients.py (the fake engine here has no pg_type).


def test_row_limit_cursor(pg) -> None:
    async def main() -> None:
        conn = await asyncpg.connect(host="127.0.0.1", port=pg.port, user="root", database="dev")
        try:
            async with conn.transaction():
                cur = await conn.cursor("series 10")
                assert [r["n"] for r in await cur.fetch(4)] == [0, 1, 2, 3]
                assert [r["n"] for r in await cur.fetch(4)] == [4, 5, 6, 7]
                assert [r["n"] for r in await cur.fetch(4)] == [8, 9]
        finally:
            await conn.close()

    _run(main())


def test_errors_map_to_exceptions(pg) -> None:
    async def main() -> None:
        conn = await asyncpg.connect(host="127.0.0.1", port=pg.port, user="root", database="dev")
        try:
            with pytest.raises(asyncpg.PostgresSyntaxError) as info:
                await conn.fetch("fail")
            assert info.value.sqlstate == "42601"
            assert info.value.position == "1"
            assert await conn.fetchval("echo $1::int", 41) == 41
        finally:
            await conn.close()

    _run(main())


def test_cancel_via_timeout(pg) -> None:
    async def main() -> None:
        conn = await asyncpg.connect(host="127.0.0.1", port=pg.port, user="root", database="dev")
        try:
            with pytest.raises(asyncio.TimeoutError):
                await conn.execute("sleep", timeout=0.3)
            # asyncpg sent a CancelRequest; the session saw it and the connection is usable
            assert await conn.fetchval("select 1") == 1
        finally:
            await conn.close()

    _run(main())
