"""Iceberg end to end against a real server: the seed's pipelines, read back by other engines.

* the seed's webhook -> typed view -> upsert sink into a REST catalog (lakana-server; the
  table created beforehand by "another engine", as Trino does in the seed), read back with
  pyiceberg and polars;
* the seed's CREATE CONNECTION -> SET iceberg_engine_connection -> CREATE TABLE ... ENGINE =
  iceberg -> CREATE SINK ... INTO flow, on the storage catalog over moto's S3;
* exactly once across `kill -9`: rows acknowledged before repeated crashes are in the
  Iceberg table once each, including a crash right after an Iceberg commit and before the
  checkpoint that forgets the staged changes.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import polars as pl
import psycopg
import pytest
import requests

from connectors.iceberg.config import IcebergConfig, load_catalog
from harness.iceberg import lakana, moto_s3  # noqa: F401
from harness.seeds import PRODUCT_VIEW_EVENTS as SEED_MV
from harness.seeds import REST_SINK, local
from harness.seeds import WBHTABLE1 as SEED_TABLE
from harness.seeds import wait_truthy as wait_for
from harness.server import SwellServer

pytestmark = pytest.mark.timeout(900)


def post_events(srv: SwellServer, table: str, ids: list[str]) -> None:
    url = srv.webhook_url(table)
    deadline = time.monotonic() + 15
    for eid in ids:
        body = {
            "event_id": eid,
            "user_id": f"usr_{eid[:8]}",
            "event_name": "product_viewed",
            "properties": {
                "product_id": f"prod_{eid[:8]}",
                "category": "electronics",
                "price": 9199.99,
            },
            "timestamp": "2026-02-12T10:50:00Z",
        }
        while True:
            try:
                r = requests.post(
                    url,
                    data=json.dumps(body),
                    timeout=10,
                    headers={"Content-Type": "application/json", "Authorization": "TEST_WEBHOOK"},
                )
                break
            except requests.ConnectionError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        assert r.status_code == 200, r.text


def test_seed_webhook_view_upsert_sink_rest(
    make_server: Any,
    lakana: dict[str, Any],  # noqa: F811
) -> None:
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.schema import Schema
    from pyiceberg.types import DoubleType, NestedField, StringType, TimestamptzType

    # "Trino" creates the empty table first (the seed's CREATE TABLE in the REST catalog)
    rest = RestCatalog("trino", uri=lakana["uri"], token=lakana["token"], prefix="demo")
    cols = ["event_id", "user_id", "event_name", "product_id", "category"]
    fields = [NestedField(i + 1, c, StringType()) for i, c in enumerate(cols)]
    fields += [
        NestedField(6, "price", DoubleType()),
        NestedField(7, "event_timestamp", TimestamptzType()),
        NestedField(8, "raw_data", StringType()),
    ]
    rest.create_table(("bronze", "product_view_events"), Schema(*fields))

    srv = make_server()
    with srv.connect() as c:
        c.execute(SEED_TABLE)
        c.execute(SEED_MV)
        # the seed's statement; hosts point at the local services, and lakana only allows
        # the namespaces bronze/silver/gold (the seed's is trino_namespace)
        c.execute(local(REST_SINK, rest=lakana["uri"], token=lakana["token"]))
        ids = [str(uuid.uuid4()) for _ in range(40)]
        post_events(srv, "wbhtable1", ids)
        post_events(srv, "wbhtable1", ids[:5])  # retried deliveries: upsert keeps one each

        def committed() -> Any:
            t = rest.load_table(("bronze", "product_view_events")).scan().to_arrow()
            return t if t.num_rows == len(ids) else None

        # default commit_checkpoint_interval (60 checkpoints of 100 ms here)
        t = wait_for(committed, 60)
        assert t is not None
        assert sorted(t.column("event_id").to_pylist()) == sorted(ids)
        assert set(t.column("price").to_pylist()) == {9199.99}
        tbl = rest.load_table(("bronze", "product_view_events"))
        df = pl.scan_iceberg(tbl).collect()
        assert df.height == len(ids) and df["event_id"].n_unique() == len(ids)
        status = c.execute(
            "SELECT sink_name, commits, rows_committed, last_error FROM rw_iceberg_sinks"
        ).fetchall()
        assert status and status[0][0] == "rest_sink" and status[0][1] >= 1
        assert status[0][3] is None


def test_seed_connection_engine_table_sink_into(
    make_server: Any,
    moto_s3: dict[str, Any],  # noqa: F811
) -> None:
    bucket = moto_s3["bucket"]("seed-engine")
    srv = make_server()
    with srv.connect() as c:
        c.execute(SEED_TABLE.replace("wbhtable1", "wbhtable5"))
        c.execute(
            SEED_MV.replace("product_view_events", "product_view_events5").replace(
                "wbhtable1", "wbhtable5"
            )
        )
        c.execute(
            f"""CREATE CONNECTION my_iceberg_conn5 WITH (
    type = 'iceberg',
    warehouse.path = 's3://{bucket}/warehouse',
    s3.region = 'dummy',
    s3.access.key = 'test', -- Ваши ключи
    s3.secret.key = 'test',   -- Ваши ключи
    catalog.type = 'storage',
    s3.endpoint = '{moto_s3["endpoint"]}',
    s3.path.style.access = 'true'
)"""
        )
        c.execute("SET iceberg_engine_connection = 'public.my_iceberg_conn5';")
        c.execute(
            """CREATE TABLE public.my_iceberg_table5 (
       event_id VARCHAR PRIMARY KEY,
       user_id varchar,
       event_name varchar,
       product_id varchar,
       category varchar,
       price double,
       event_timestamp Timestamptz,
       raw_data varchar
) WITH (commit_checkpoint_interval = 1) ENGINE = iceberg;"""
        )
        c.execute(
            """CREATE SINK to_sales_events5 INTO my_iceberg_table5 AS
SELECT * FROM product_view_events5;"""
        )
        ids = [str(uuid.uuid4()) for _ in range(10)]
        post_events(srv, "wbhtable5", ids)
        got = wait_for(
            lambda: len(c.execute("select * from my_iceberg_table5").fetchall()) == 10, 30
        )
        assert got
        rows = c.execute("SELECT event_id, price FROM my_iceberg_table5").fetchall()
        assert sorted(r[0] for r in rows) == sorted(ids)
        assert {r[1] for r in rows} == {9199.99}
        names = [r[0] for r in c.execute("SHOW CONNECTIONS").fetchall()]
        assert names == ["my_iceberg_conn5"]
    # and pyiceberg/polars see the same committed table on S3
    cfg = IcebergConfig.parse(
        {
            "catalog.type": "storage",
            "warehouse.path": f"s3://{bucket}/warehouse",
            "s3.endpoint": moto_s3["endpoint"],
            "s3.region": "us-east-1",
            "s3.access.key": "test",
            "s3.secret.key": "test",
        },
        need_table=False,
    )
    tbl = load_catalog(cfg).load_table(("public", "my_iceberg_table5"))
    df = pl.scan_iceberg(tbl, reader_override="pyiceberg").collect()
    assert sorted(df["event_id"].to_list()) == sorted(ids)


def _ids(path: Path) -> tuple[int, set[int]]:
    cfg = IcebergConfig.parse(
        {"catalog.type": "storage", "warehouse.path": str(path)}, need_table=False
    )
    t = load_catalog(cfg).load_table(("ns", "t")).scan().to_arrow()
    return t.num_rows, set(t.column("id").to_pylist())


def test_exactly_once_across_kill9(make_server: Any, tmp_path: Path) -> None:
    wh = tmp_path / "wh"
    data = tmp_path / "data"
    srv = make_server(data)
    with srv.connect() as c:
        c.execute("CREATE TABLE src (id INT PRIMARY KEY, v VARCHAR) APPEND ONLY")
        c.execute(
            f"CREATE SINK s FROM src WITH (connector = 'iceberg', type = 'append-only', "
            f"catalog.type = 'storage', warehouse.path = '{wh}', database.name = 'ns', "
            f"table.name = 't', create_table_if_not_exists = 'true', "
            f"commit_checkpoint_interval = 3)"
        )
    acked = 0
    for _round in range(4):
        with srv.connect() as c:
            for _ in range(15):
                c.execute(f"INSERT INTO src VALUES ({acked}, 'x')")
                acked += 1
        srv.kill9()
        srv.start()
    # a crash right after an Iceberg commit, before the checkpoint that clears the log
    srv.env["SWELL_TEST_CRASH_AFTER_ICEBERG_COMMIT"] = "1"
    srv.restart()
    uncertain = None
    try:
        with srv.connect() as c:
            for _ in range(5):
                uncertain = acked
                c.execute(f"INSERT INTO src VALUES ({acked}, 'y')")
                uncertain = None
                acked += 1
    except psycopg.OperationalError:
        pass  # it crashed while we were still inserting: `uncertain` may or may not be in
    wait_for(lambda: not srv.is_running, 30)
    assert not srv.is_running  # it died in the window
    srv.kill9()  # reap
    srv.env.pop("SWELL_TEST_CRASH_AFTER_ICEBERG_COMMIT")
    srv.start()
    wait_for(lambda: _ids(wh)[0] >= acked, 30)
    time.sleep(1.0)  # a few more checkpoints: nothing may be committed twice
    n, ids = _ids(wh)
    assert n == len(ids)  # no duplicates
    extra = ids - set(range(acked))
    assert set(range(acked)) <= ids and extra <= ({uncertain} - {None}), (n, acked, extra)
    srv.stop()
