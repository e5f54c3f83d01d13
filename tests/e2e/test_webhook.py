"""Webhook source end to end: the seed's statements and curl loop against a real server.

Uses the `swell playground` subprocess (tests/harness): pgwire for SQL, the webhook port for
HTTP. Covers every status code, batched all-or-nothing, concurrent POSTs (aiohttp and the
seed's exact curl command), views equal to what was sent, and `kill -9` right after the
last acknowledgement: every acknowledged event survives, none twice.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import uuid
from typing import Any

import pytest

from harness.seeds import PRODUCT_VIEW_EVENTS as SEED_MV
from harness.seeds import WBHTABLE1 as SEED_TABLE
from harness.seeds import wait_webhook
from harness.server import SwellServer
from harness.webhook_client import post_all, status

AUTH = {"Content-Type": "application/json", "Authorization": "TEST_WEBHOOK"}


def event(i: int) -> dict[str, Any]:
    return {
        "event_id": f"ev-{i}-{uuid.uuid4()}",
        "user_id": f"usr_{i}",
        "event_name": "product_viewed",
        "properties": {"product_id": f"prod_{i}", "category": "electronics", "price": 9199.99},
        "timestamp": "2025-01-02T03:04:05Z",
    }


def test_seed_pipeline_statuses_and_curl(fresh_server: SwellServer) -> None:
    srv = fresh_server
    wait_webhook(srv)
    url = srv.webhook_url("wbhtable1")
    with srv.connect() as c:
        c.execute(SEED_TABLE)
        c.execute(SEED_MV)
        c.execute("CREATE TABLE plain_t (a INT)")
        c.execute(
            "CREATE TABLE batched_t (data JSONB) WITH (connector = 'webhook', is_batched = true)"
        )

        events = [event(i) for i in range(100)]
        codes = asyncio.run(post_all(url, [json.dumps(e).encode() for e in events], AUTH))
        assert codes == [200] * 100

        # the seed's own curl call, verbatim apart from the port
        if shutil.which("curl"):
            # uuidgen (util-linux) may be missing: an exported shell function stands in
            shim = (
                ""
                if shutil.which("uuidgen")
                else ("uuidgen() { cat /proc/sys/kernel/random/uuid; }; export -f uuidgen\n")
            )
            script = shim + (
                "seq 1 10 | xargs -I {} -P 10 bash -c '\n"
                '  EVENT_ID=$(uuidgen)\n  USER_ID="usr_$(uuidgen | head -c 8)"\n'
                '  PRODUCT_ID="prod_$(uuidgen | head -c 8)"\n'
                '  TIMESTAMP=$(date -u +"%Y-%m-%dT%H:%M:%SZ")\n\n'
                "  curl -s -o /dev/null -X POST \\\n"
                f"    {url} \\\n"
                '    -H "Content-Type: application/json" \\\n'
                '    -H "Authorization: TEST_WEBHOOK" \\\n'
                '    -d "{\n'
                '          \\"event_id\\": \\"curl-$EVENT_ID\\",\n'
                '          \\"user_id\\": \\"$USER_ID\\",\n'
                '          \\"event_name\\": \\"product_viewed\\",\n'
                '          \\"properties\\": {\n'
                '            \\"product_id\\": \\"$PRODUCT_ID\\",\n'
                '            \\"category\\": \\"electronics\\",\n'
                '            \\"price\\": 9199.99\n'
                "          },\n"
                '          \\"timestamp\\": \\"$TIMESTAMP\\"\n'
                "        }\"\n'\n"
            )
            subprocess.run(["bash", "-c", script], check=True, timeout=60)
            n_curl = 10
        else:
            n_curl = 0

        # every error status; none of these may write anything
        assert status(url, b'{"a": 1}', {"Authorization": "nope"})[0] == 401
        assert status(url, b'{"a": 1}', {}) == (400, {"error": "`SECURE_COMPARE()` failed"})
        assert status(url, b"{not json", AUTH)[0] == 422
        assert status(srv.webhook_url("no_such_table"), b"{}", AUTH)[0] == 404
        assert status(srv.webhook_url("wbhtable1", database="other"), b"{}", AUTH)[0] == 404
        assert status(srv.webhook_url("plain_t"), b"{}", AUTH) == (
            403,
            {"error": "Table `plain_t` is not backed by a webhook source"},
        )
        assert status(srv.webhook_url("product_view_events"), b"{}", AUTH)[0] == 403
        assert status(url, b"{}", AUTH, method="GET")[0] == 405
        big = b'{"x": "' + b"a" * (11 * 1024 * 1024) + b'"}'
        assert status(url, big, AUTH)[0] == 413
        b_url = srv.webhook_url("batched_t")
        assert status(b_url, b'{"n": 1}\n{"n": 2}\n{broken\n', {})[0] == 422
        assert status(b_url, b'{"n": 1}\n\n{"n": 2}\n', {})[0] == 200

        c.execute("FLUSH")
        got = c.execute(
            "SELECT event_id, user_id, event_name, product_id, category, price, raw_data "
            "FROM product_view_events"
        ).fetchall()
        ours = sorted(r for r in got if r[0].startswith("ev-"))
        want = sorted(
            (
                e["event_id"],
                e["user_id"],
                "product_viewed",
                e["properties"]["product_id"],
                "electronics",
                9199.99,
            )
            for e in events
        )
        assert [r[:6] for r in ours] == want
        assert len(got) == 100 + n_curl
        assert all(json.loads(r[6])["event_name"] == "product_viewed" for r in got)
        ts = c.execute(
            "SELECT DISTINCT event_timestamp::VARCHAR FROM product_view_events "
            "WHERE event_id LIKE 'ev-%'"
        ).fetchall()
        assert ts == [("2025-01-02 03:04:05+00:00",)]
        assert sorted(c.execute("SELECT (data->>'n')::INT FROM batched_t").fetchall()) == [
            (1,),
            (2,),
        ]
        c.execute("DROP MATERIALIZED VIEW product_view_events")
        c.execute("DROP TABLE wbhtable1")
        assert status(url, b"{}", AUTH)[0] == 404


@pytest.mark.swell_server(barrier_interval_ms=5000)
def test_acknowledged_events_survive_kill9(fresh_server: SwellServer) -> None:
    """Barrier every 5 s: the acked rows are only in the WAL when the server dies."""
    srv = fresh_server
    wait_webhook(srv)
    with srv.connect() as c:
        c.execute(
            "CREATE TABLE dur_t (data JSONB) WITH (connector = 'webhook', "
            "webhook.wait_for_persistence = true) "
            "VALIDATE AS secure_compare(headers->>'authorization', 'TEST_WEBHOOK')"
        )
        c.execute("CREATE MATERIALIZED VIEW dur_mv AS SELECT (data->>'i')::INT AS i FROM dur_t")
    n = 300
    codes = asyncio.run(
        post_all(srv.webhook_url("dur_t"), [json.dumps({"i": i}).encode() for i in range(n)], AUTH)
    )
    assert codes == [200] * n
    srv.kill9()  # right after the last 200
    srv.start()
    with srv.connect() as c:
        c.execute("FLUSH")
        got = sorted(r[0] for r in c.execute("SELECT i FROM dur_mv").fetchall())
    assert got == list(range(n))  # all present, none twice
