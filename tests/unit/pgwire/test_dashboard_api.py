"""The dashboard's JSON API and access rules over a real in-process database
(pgwire/dashboard/server.py, engine/stream/overview.py): relations with their counters,
each job's operators and state tables as its stored plan names them, no credentials,
and who may read it (loopback host names; a superuser's password with --auth password)."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import ClientSession
from aiohttp.test_utils import TestServer

from engine.database import Config, open_database
from pgwire.dashboard.rates import Rates
from pgwire.dashboard.server import api_overview, build_app
from pgwire.limits import Limits


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Any]:
    d = open_database(Config(data_dir=tmp_path / "d", barrier_interval_ms=3_600_000))
    try:
        yield d
    finally:
        d.close()


def _setup(db: Any) -> Any:
    s = db.connect("root", "dev")
    for sql in (
        "CREATE TABLE t (k INT, v INT)",
        "CREATE TABLE u (k INT PRIMARY KEY, name VARCHAR)",
        "CREATE MATERIALIZED VIEW mv AS SELECT t.k, u.name, sum(v) AS s "
        "FROM t JOIN u ON t.k = u.k GROUP BY t.k, u.name",
        "CREATE VIEW pv AS SELECT k FROM t",
        "CREATE SINK sk FROM mv WITH (connector = 'blackhole', "
        "\"properties.sasl.password\" = 'hunter2-sink-pw')",
        "INSERT INTO t VALUES (1, 2), (1, 3), (2, 4)",
        "INSERT INTO u VALUES (1, 'a'), (2, 'b')",
        "FLUSH",
    ):
        s.execute_simple(sql)
    return s


def test_overview_lists_relations_jobs_operators_and_state_tables(db: Any) -> None:
    s = _setup(db)
    doc = api_overview(db, Rates())
    rels = {r["name"]: r for r in doc["relations"]}
    assert [rels[n]["kind"] for n in ("t", "u", "mv", "pv", "sk")] == [
        "table",
        "table",
        "materialized view",
        "view",
        "sink",
    ]
    assert (rels["t"]["rows"], rels["t"]["counter"]) == (3, 3)
    assert (rels["mv"]["rows"], rels["mv"]["counter"]) == (2, 2)
    assert rels["pv"]["rows"] is None and rels["pv"]["counter"] is None
    assert (rels["sk"]["counter"], rels["sk"]["state"], rels["sk"]["connector"]) == (
        2,
        "running",
        "blackhole",
    )
    jobs = {j["name"]: j for j in doc["jobs"]}
    assert set(jobs) == {"mv", "sk"}  # plain views have no dataflow
    mv = jobs["mv"]
    ops = [n["operator"] for n in mv["nodes"] if n["kind"] == "node"]
    assert ops[0] == "HashJoinOp" and ops[-1] == "ColumnarMaterializeOp"
    assert "HashAggOp" in ops
    assert {n["label"] for n in mv["nodes"] if n["kind"] == "relation"} == {"t", "u"}
    # every edge joins two listed nodes; the upstream tables feed the join
    ids = {n["id"] for n in mv["nodes"]}
    assert all(a in ids and b in ids for a, b in mv["edges"])
    join = next(n for n in mv["nodes"] if n.get("operator") == "HashJoinOp")
    assert {a for a, b in mv["edges"] if b == join["id"]} == {
        n["id"] for n in mv["nodes"] if n["kind"] == "relation"
    }
    assert join["rows"] == 3 and join["state_keys"] > 0
    assert join["state_bytes"] > 0 and rels["mv"]["state_bytes"] >= join["state_bytes"]
    # state tables are the ones rw_internal_tables lists for the job
    (r,) = s.execute_simple(
        "SELECT string_agg(id::varchar, ',' ORDER BY id) FROM rw_catalog.rw_internal_tables "
        "WHERE job_name = 'mv'"
    )
    listed = sorted(t["id"] for n in mv["nodes"] for t in n.get("state_tables", []))
    assert ",".join(map(str, listed)) == r.rows[0][0]
    mat = next(n for n in mv["nodes"] if n.get("operator") == "ColumnarMaterializeOp")
    assert mat["rows_stored"] == 2
    assert jobs["sk"]["nodes"][-1]["kind"] == "sink"
    assert 'data-operator="HashAggOp"' in mv["svg"]
    assert doc["barrier_log"] and doc["barrier_log"][-1][1] == doc["epoch"]
    assert "<svg" in doc["latency_svg"]
    assert doc["freshness_mean_ms"] > 0 and doc["checkpoint_mean_ms"] > 0
    # no credential anywhere in the document
    assert "hunter2-sink-pw" not in json.dumps(doc)
    # not even when a connector's error message echoes it
    db.runtime.sinks[rels["sk"]["id"]].status.last_error = "auth failed with hunter2-sink-pw"
    doc = api_overview(db, Rates())
    (sk,) = [r for r in doc["relations"] if r["name"] == "sk"]
    assert sk["last_error"] == "auth failed with [REDACTED]"


def test_rates_and_job_errors_show_up_after_more_work(db: Any) -> None:
    s = _setup(db)
    s.execute_simple("CREATE MATERIALIZED VIEW bad AS SELECT k, 10 / (v - 2) AS q FROM t")
    rates = Rates(min_gap_s=0.0)
    api_overview(db, rates)
    s.execute_simple("INSERT INTO t VALUES (3, 2), (4, 5)")
    s.execute_simple("FLUSH")
    doc = api_overview(db, rates)
    rels = {r["name"]: r for r in doc["relations"]}
    assert rels["t"]["rows_per_s"] > 0
    assert rels["bad"]["errors"] >= 1
    assert "division by zero" in rels["bad"]["last_error"]
    bad = next(j for j in doc["jobs"] if j["name"] == "bad")
    assert all(n["rows_per_s"] is not None for n in bad["nodes"] if n["kind"] == "node")


def _get(
    db: Any, limits: Limits, path: str, host: str = "127.0.0.1", **kw: Any
) -> tuple[int, dict[str, str], bytes]:
    async def go() -> tuple[int, dict[str, str], bytes]:
        server = TestServer(build_app(db, limits, "127.0.0.1"), host="127.0.0.1")
        await server.start_server()
        try:
            async with ClientSession() as c:
                method = kw.pop("method", "GET")
                async with c.request(method, server.make_url(path), **kw) as resp:
                    return resp.status, dict(resp.headers), await resp.read()
        finally:
            await server.close()

    return asyncio.run(asyncio.wait_for(go(), 30))


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def test_trust_serves_page_assets_and_api_read_only_to_loopback_names(db: Any) -> None:
    _setup(db)
    trust = Limits()
    status, headers, body = _get(db, trust, "/")
    assert status == 200 and b'src="static/dashboard.js"' in body
    assert "default-src 'self'" in headers["Content-Security-Policy"]
    assert _get(db, trust, "/static/dashboard.js")[0] == 200
    assert _get(db, trust, "/static/../server.py")[0] == 404
    status, _, body = _get(db, trust, "/api/overview")
    assert status == 200 and {r["name"] for r in json.loads(body)["relations"]} >= {"mv", "pv"}
    mv_id = next(r["id"] for r in json.loads(body)["relations"] if r["name"] == "mv")
    status, headers, body = _get(db, trust, f"/api/jobs/{mv_id}.svg")
    assert status == 200 and headers["Content-Type"].startswith("image/svg+xml")
    assert _get(db, trust, "/api/overview", method="POST")[0] == 405
    # a page on another site that rebinds its name to 127.0.0.1 is refused
    assert _get(db, trust, "/api/overview", headers={"Host": "evil.example:5691"})[0] == 403
    assert _get(db, trust, "/api/overview", headers={"Host": "localhost:5691"})[0] == 200


def test_password_mode_asks_for_a_superusers_password(db: Any) -> None:
    s = _setup(db)
    s.execute_simple("ALTER USER root PASSWORD 'rootpw'")
    s.execute_simple("CREATE USER alice PASSWORD 'alicepw'")
    pw = Limits(auth="password", auth_failure_delay_s=0.0)
    status, headers, _ = _get(db, pw, "/api/overview")
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
    assert _get(db, pw, "/", headers=_basic("root", "wrong"))[0] == 401
    assert _get(db, pw, "/", headers=_basic("alice", "alicepw"))[0] == 401  # not a superuser
    assert _get(db, pw, "/", headers=_basic("nobody", "x"))[0] == 401
    status, _, body = _get(db, pw, "/api/overview", headers=_basic("root", "rootpw"))
    assert status == 200 and json.loads(body)["jobs"]


def test_a_job_without_a_stored_plan_is_drawn_from_its_live_operators(db: Any) -> None:
    _setup(db)
    rel = next(r for r in db.catalog.ordered() if r.name == "mv")
    saved = rel.extra.pop("stream_plan")
    try:
        doc = api_overview(db, Rates())
    finally:
        rel.extra["stream_plan"] = saved
    mv = next(j for j in doc["jobs"] if j["name"] == "mv")
    ops = [n["operator"] for n in mv["nodes"] if n["kind"] == "node"]
    assert ops[0] == "HashJoinOp" and ops[-1] == "ColumnarMaterializeOp"
    assert {n["label"] for n in mv["nodes"] if n["kind"] == "relation"} == {"t", "u"}
    assert 'data-operator="HashAggOp"' in mv["svg"]
