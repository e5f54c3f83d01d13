"""connectors.webhook.server in-process: status codes, coalescing, durability, shutdown."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from connectors.webhook import WebhookServer, start_webhook_server
from engine.database import Config, SwellDatabase


def run(db: SwellDatabase, sql: str) -> list[Any]:
    return db.connect("root", "dev").execute_simple(sql)


class Env:
    def __init__(self, db: SwellDatabase, srv: WebhookServer, http: aiohttp.ClientSession):
        self.db, self.srv, self.http = db, srv, http

    def url(self, table: str, database: str = "dev") -> str:
        return f"http://127.0.0.1:{self.srv.port}/webhook/{database}/public/{table}"

    async def post(
        self, table: str, body: bytes, headers: dict[str, str] | None = None, method: str = "POST"
    ) -> tuple[int, Any]:
        async with self.http.request(
            method, self.url(table), data=body, headers=headers or {}
        ) as r:
            text = await r.text()
            return r.status, (json.loads(text) if text else None)


def with_env(tmp_path: Path, scenario: Callable[[Env], Awaitable[None]]) -> None:
    """Run `scenario` against a real database + webhook server in a fresh event loop
    (pytest-asyncio is not installed: each test owns its loop)."""

    async def main() -> None:
        db = SwellDatabase(Config(data_dir=tmp_path / "data", barrier_interval_ms=50))
        run(
            db,
            "CREATE TABLE tok (data JSONB) WITH (connector = 'webhook') "
            "VALIDATE AS secure_compare(headers->>'authorization', 'TEST_WEBHOOK')",
        )
        srv = await start_webhook_server(db, "127.0.0.1", 0, max_body_bytes=4096)
        http = aiohttp.ClientSession()
        try:
            await scenario(Env(db, srv, http))
        finally:
            await http.close()
            await srv.close()
            await asyncio.to_thread(db.close)

    asyncio.run(main())


AUTH = {"Authorization": "TEST_WEBHOOK", "Content-Type": "application/json"}


def rows(db: SwellDatabase, sql: str) -> list[Any]:
    return run(db, f"FLUSH; {sql}")[1].rows


def test_every_status(tmp_path: Path) -> None:
    with_env(tmp_path, _test_every_status)


async def _test_every_status(env: Env) -> None:
    run(env.db, "CREATE TABLE plain (a INT)")
    run(env.db, "CREATE TABLE bat (data JSONB) WITH (connector = 'webhook', is_batched = true)")
    assert await env.post("tok", b'{"a": 1}', AUTH) == (200, None)
    assert await env.post("tok", b'{"a": 1}', {"Authorization": "x"}) == (
        401,
        {"error": "Signature verification failed"},
    )
    assert await env.post("tok", b'{"a": 1}') == (400, {"error": "`SECURE_COMPARE()` failed"})
    assert (await env.post("tok", b"{nope", AUTH))[0] == 422
    assert (await env.post("tok", b"{nope", {"Authorization": "x"}))[0] == 401
    assert (await env.post("nope", b"{}", AUTH))[0] == 404
    st, body = await env.post("plain", b"{}", AUTH)
    assert (st, body["error"]) == (403, "Table `plain` is not backed by a webhook source")
    assert (await env.post("tok", b"x" * 5000, AUTH))[0] == 413
    assert (await env.post("tok", b"{}", AUTH, method="GET"))[0] == 405
    assert (await env.post("tok", b"{}", AUTH, method="PUT"))[0] == 405
    # batched: all lines or none
    assert (await env.post("bat", b'{"n": 1}\n{"n": 2}\n{"n": \n', AUTH))[0] == 422
    assert (await env.post("bat", b'{"n": 3}\n\n{"n": 4}\n', AUTH))[0] == 200
    assert sorted(rows(env.db, "SELECT (data->>'n')::INT FROM bat")) == [(3,), (4,)]
    assert rows(env.db, "SELECT data FROM tok") == [('{"a": 1}',)]
    s = env.srv.stats()["responses"]
    assert s[200] == 2 and s[401] == 2 and s[422] == 2 and s[405] == 2


def test_concurrent_requests_share_flushes_and_fsyncs(tmp_path: Path) -> None:
    with_env(tmp_path, _test_concurrent_requests_share_flushes_and_fsyncs)


async def _test_concurrent_requests_share_flushes_and_fsyncs(env: Env) -> None:
    n = 300
    fsyncs0 = env.db.wal.fsyncs
    res = await asyncio.gather(
        *[env.post("tok", json.dumps({"i": i}).encode(), AUTH) for i in range(n)]
    )
    assert {r[0] for r in res} == {200}
    assert env.db.wal.durable_seq >= env.db.wal.last_seq - 0  # every ack was durable
    got = rows(env.db, "SELECT (data->>'i')::INT FROM tok")
    assert sorted(r[0] for r in got) == list(range(n))
    assert env.srv.flushes < n and env.db.wal.fsyncs - fsyncs0 < n


def test_github_hmac_over_http(tmp_path: Path) -> None:
    with_env(tmp_path, _test_github_hmac_over_http)


async def _test_github_hmac_over_http(env: Env) -> None:
    run(env.db, "CREATE SECRET gh_s AS 'topsecret'")
    run(
        env.db,
        "CREATE TABLE gh (data JSONB) WITH (connector = 'webhook') VALIDATE SECRET gh_s "
        "AS secure_compare(headers->>'x-hub-signature-256', "
        "'sha256=' || encode(hmac(gh_s, data, 'sha256'), 'hex'))",
    )
    body = b'{"action": "opened"}'
    sig = "sha256=" + hmac.new(b"topsecret", body, hashlib.sha256).hexdigest()
    assert (await env.post("gh", body, {"X-Hub-Signature-256": sig}))[0] == 200
    assert (await env.post("gh", body + b" ", {"X-Hub-Signature-256": sig}))[0] == 401


def test_no_wait_for_persistence_and_typed(tmp_path: Path) -> None:
    with_env(tmp_path, _test_no_wait_for_persistence_and_typed)


async def _test_no_wait_for_persistence_and_typed(env: Env) -> None:
    run(
        env.db,
        "CREATE TABLE fast (id INT, name VARCHAR) WITH (connector = 'webhook', "
        "webhook.wait_for_persistence = false)",
    )
    assert (await env.post("fast", b'{"id": 1, "name": "a"}'))[0] == 200
    st, body = await env.post("fast", b'{"id": "one"}')
    assert st == 422 and body["error"].startswith("failed to decode webhook JSON payload")
    assert rows(env.db, "SELECT id, name FROM fast") == [(1, "a")]


def test_shutdown_answers_503(tmp_path: Path) -> None:
    with_env(tmp_path, _test_shutdown_answers_503)


async def _test_shutdown_answers_503(env: Env) -> None:
    assert (await env.post("tok", b"{}", AUTH))[0] == 200
    await env.srv.close()
    with pytest.raises(aiohttp.ClientError):
        await env.post("tok", b"{}", AUTH)  # no longer listening
    assert env.srv._closing


def test_requests_during_shutdown_get_503_or_complete(tmp_path: Path) -> None:
    with_env(tmp_path, _shutdown_race)


async def _shutdown_race(env: Env) -> None:
    async def one(i: int) -> tuple[int, int | None]:
        try:
            return i, (await env.post("tok", json.dumps({"i": i}).encode(), AUTH))[0]
        except aiohttp.ClientError:
            return i, None  # connection refused/closed: no answer, so no ack was given

    tasks = [asyncio.create_task(one(i)) for i in range(200)]
    while env.srv.requests < 50:  # close while requests are arriving and in flight
        await asyncio.sleep(0.001)
    await env.srv.close()
    results = await asyncio.gather(*tasks)
    assert {st for _, st in results} <= {200, 503, None}
    acked = sorted(i for i, st in results if st == 200)
    assert acked, "some requests should have completed before the shutdown"
    got = sorted(r[0] for r in rows(env.db, "SELECT (data->>'i')::INT FROM tok"))
    assert set(acked) <= set(got)  # every acknowledged event is there
