"""The user's scripts (a webhook/Kafka/Iceberg walkthrough and a Trino-over-Kafka one, here
called seeds 000 and 002) run as written, in their order.

Every RisingWave statement and curl call of seed 000 is listed below verbatim (each with the
seed line it starts on); only the addresses and credentials of outside services are
substituted for the local test services by `local()`:

- `lakekeeper:8181/catalog` -> the lakana-server REST catalog fixture (tests/harness/iceberg.py),
  which needs a bearer token (`catalog.token` added) and only allows the top-level namespaces
  bronze/silver/gold (`trino_namespace` -> `bronze`; the connection's commented-out
  `database.name` line is enabled as `bronze`, since the table's schema `public` is refused);
- `minio:9000` / storj -> an unused local port (lakana's `demo` warehouse is file storage);
- `broker1:29092` / `broker2:29092` -> two Tansu brokers (tests/harness/kafka.py);
- `localhost:4567` -> the test server's webhook port.

Trino's own statements (CREATE CATALOG, CREATE TABLE in the REST catalog, SELECT from it) are
done with pyiceberg against the same catalog. Seed 002 is Trino over Kafka: its DDL becomes a
Kafka source and its two queries run as written apart from the table names.

Statements also covered elsewhere: wbhtable1 + product_view_events with aiohttp and statuses
(test_webhook.py), the REST upsert sink with requests (test_iceberg.py), the Kafka source
alone and source -> sink between brokers (test_kafka_source.py, test_kafka_sink.py).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

from harness.iceberg import lakana  # noqa: F401
from harness.kafka import KafkaBroker
from harness.seeds import (
    KAFKA_SINK,
    KAFKA_SRC,
    PRODUCT_VIEW_EVENTS,
    REST_SINK,
    WBHTABLE1,
    local,
    wait_webhook,
)
from harness.seeds import wait_truthy as wait_for
from harness.server import SwellServer
from harness.tools import require

pytestmark = pytest.mark.timeout(600)

# -- seed 000, verbatim ------------------------------------------------------------------------

# lines 218 (WBHTABLE1) and 231 (PRODUCT_VIEW_EVENTS) are in harness/seeds.py

# line 247: REST_SINK is in harness/seeds.py


def curl_loop(n: int, table: str) -> str:
    """Lines 274 (n=100, wbhtable1) and 459 (n=10, wbhtable5)."""
    return f"""seq 1 {n} | xargs -I {{}} -P 10 bash -c '
  EVENT_ID=$(uuidgen)
  USER_ID="usr_$(uuidgen | head -c 8)"
  PRODUCT_ID="prod_$(uuidgen | head -c 8)"
  TIMESTAMP=$(date -u +"%Y-%m-%dT%H:%M:%SZ")

  curl -s -o /dev/null -X POST \\
    http://localhost:4567/webhook/dev/public/{table} \\
    -H "Content-Type: application/json" \\
    -H "Authorization: TEST_WEBHOOK" \\
    -d "{{
          \\"event_id\\": \\"$EVENT_ID\\",
          \\"user_id\\": \\"$USER_ID\\",
          \\"event_name\\": \\"product_viewed\\",
          \\"properties\\": {{
            \\"product_id\\": \\"$PRODUCT_ID\\",
            \\"category\\": \\"electronics\\",
            \\"price\\": 9199.99
          }},
          \\"timestamp\\": \\"$TIMESTAMP\\"
        }}"
'
"""


# line 331: KAFKA_SRC, in harness/seeds.py

# line 341: KAFKA_SINK, in harness/seeds.py

# line 349
WBHTABLE2 = WBHTABLE1.replace("wbhtable1", "wbhtable2")

# line 360
EVENTS = """CREATE MATERIALIZED VIEW events AS
    SELECT
      (data->>'action')::VARCHAR AS action
    FROM wbhtable2;"""

# line 367
KAFKA_SINK2 = """CREATE SINK kafka_sink2 FROM events WITH (
  connector = 'kafka',
  topic = 'query_complete',
  properties.bootstrap.server = 'broker2:29092'
) FORMAT PLAIN ENCODE JSON (force_append_only='true');"""

# line 378
CURL_WBHTABLE2 = """curl -s -o /dev/null -X POST \\
    http://localhost:4567/webhook/dev/public/wbhtable2 \\
    -H "Content-Type: application/json" \\
    -H "Authorization: TEST_WEBHOOK" \\
    -d "{\\"action\\": \\"11111\\"}"
"""

# line 393
WBHTABLE5 = WBHTABLE1.replace("wbhtable1", "wbhtable5")

# line 404
PRODUCT_VIEW_EVENTS5 = PRODUCT_VIEW_EVENTS.replace(
    "product_view_events", "product_view_events5"
).replace("wbhtable1", "wbhtable5")

# line 418 (no semicolon in the seed)
MY_ICEBERG_CONN5 = """CREATE CONNECTION my_iceberg_conn5 WITH (
    type = 'iceberg',
    warehouse.path = 'risi',  -- s3://my-bucket/warehouse/
   -- database.name = 'risi_space',  оказалось не нужна 
    s3.region = 'dummy',
    s3.access.key = 'ЧЧЧ', -- Ваши ключи
    s3.secret.key = 'ЧЧЧ',   -- Ваши ключи
    catalog.type = 'rest',
    s3.endpoint = 'https://gateway.storjshare.io',
    s3.path.style.access = 'true',
    
    -- ИСПОЛЬЗУЕМ ИМЯ СЕРВИСА И ЕГО ВНУТРЕННИЙ ПОРТ!
    catalog.uri = 'http://lakekeeper:8181/catalog'
)"""

# line 435
SET_ENGINE_CONN = "SET iceberg_engine_connection = 'public.my_iceberg_conn5';"

# line 440
MY_ICEBERG_TABLE5 = """CREATE TABLE public.my_iceberg_table5 (
       event_id VARCHAR PRIMARY KEY,
       user_id varchar,
       event_name varchar,
       product_id varchar,
       category varchar,
       price double,
       event_timestamp Timestamptz,
       raw_data varchar
) ENGINE = iceberg;"""

# line 454
TO_SALES_EVENTS5 = """CREATE SINK to_sales_events5 INTO my_iceberg_table5 AS
SELECT * FROM product_view_events5;"""

# lines 485 and 489
SELECT_VIEW5 = "SELECT * FROM product_view_events5;"
SELECT_TABLE5 = "select * from my_iceberg_table5"

# -- substitutions of outside services -----------------------------------------------------


def run_shell(script: str) -> None:
    require("curl")
    # uuidgen (util-linux) may be missing: an exported shell function stands in
    shim = (
        ""
        if shutil.which("uuidgen")
        else ("uuidgen() { cat /proc/sys/kernel/random/uuid; }; export -f uuidgen\n")
    )
    subprocess.run(["bash", "-c", shim + script], check=True, timeout=120)


def webhook_base(srv: SwellServer) -> str:
    return f"http://{srv.host}:{srv.webhook_port}"


@pytest.fixture
def two_brokers() -> Iterator[tuple[KafkaBroker, KafkaBroker]]:
    b1, b2 = KafkaBroker().start(), KafkaBroker().start()
    try:
        yield b1, b2
    finally:
        b1.stop()
        b2.stop()


def rest_catalog(lk: dict[str, Any]) -> Any:
    from pyiceberg.catalog.rest import RestCatalog

    return RestCatalog("trino", uri=lk["uri"], token=lk["token"], prefix="demo")


# -- the tests -----------------------------------------------------------------------------


def test_seed000_webhook_view_rest_sink_curl(
    make_server: Callable[..., SwellServer],
    lakana: dict[str, Any],  # noqa: F811
) -> None:
    """Lines 188-299: Trino's catalog table, the webhook, the view, the sink, 100 curls."""
    from pyiceberg.schema import Schema
    from pyiceberg.types import DoubleType, NestedField, StringType, TimestamptzType

    # line 201, done by "Trino": the empty table in the REST catalog
    rest = rest_catalog(lakana)
    cols = ["event_id", "user_id", "event_name", "product_id", "category"]
    fields = [NestedField(i + 1, c, StringType()) for i, c in enumerate(cols)]
    fields += [
        NestedField(6, "price", DoubleType()),
        NestedField(7, "event_timestamp", TimestamptzType()),
        NestedField(8, "raw_data", StringType()),
    ]
    ident = ("bronze", "product_view_events_curl")
    rest.create_table(ident, Schema(*fields))

    srv = make_server()
    wait_webhook(srv)
    svc = {"webhook": webhook_base(srv), "rest": lakana["uri"], "token": lakana["token"]}
    with srv.connect() as c:
        c.execute(WBHTABLE1)
        c.execute(PRODUCT_VIEW_EVENTS)
        c.execute(
            local(REST_SINK, **svc).replace("'product_view_events',", "'product_view_events_curl',")
        )
        run_shell(local(curl_loop(100, "wbhtable1"), **svc))
        c.execute("FLUSH")
        rows = c.execute("SELECT * FROM product_view_events").fetchall()
        assert len(rows) == 100 and len({r[0] for r in rows}) == 100
        assert {(r[2], r[4], r[5]) for r in rows} == {("product_viewed", "electronics", 9199.99)}
        assert all(r[1].startswith("usr_") and r[3].startswith("prod_") for r in rows)
        assert all(json.loads(r[7])["event_id"] == r[0] for r in rows)

        # line 299, Trino's SELECT: read back from the REST catalog (default commit interval)
        def committed() -> Any:
            t = rest.load_table(ident).scan().to_arrow()
            return t if t.num_rows == 100 else None

        t = wait_for(committed, 60)
        assert t is not None
        assert sorted(t.column("event_id").to_pylist()) == sorted(r[0] for r in rows)


def test_seed000_kafka_source_sinks_webhook_curl(
    make_server: Callable[..., SwellServer], two_brokers: tuple[KafkaBroker, KafkaBroker]
) -> None:
    """Lines 331-390: Kafka source -> Kafka sink, webhook -> view -> Kafka sink, the curl."""
    b1, b2 = two_brokers
    for b in (b1, b2):
        b.create_topic("query_complete")
    b1.produce("query_complete", [{"action": "22222"}])
    srv = make_server()
    wait_webhook(srv)
    svc = {"webhook": webhook_base(srv), "broker1": b1.bootstrap, "broker2": b2.bootstrap}
    with srv.connect() as c:
        c.execute(local(KAFKA_SRC, **svc))
        c.execute(local(KAFKA_SINK, **svc))
        c.execute(WBHTABLE2)
        c.execute(EVENTS)
        c.execute(local(KAFKA_SINK2, **svc))
        # line 375: "without the view" messages arrive as {"data":"{\"action\": \"55555\"}"}
        b2.create_topic("raw_webhook")
        c.execute(
            "CREATE SINK raw_sink FROM wbhtable2 WITH (connector = 'kafka', "
            f"topic = 'raw_webhook', properties.bootstrap.server = '{b2.bootstrap}') "
            "FORMAT PLAIN ENCODE JSON (force_append_only='true')"
        )
        run_shell(local(CURL_WBHTABLE2, **svc))
        c.execute("FLUSH")
        assert c.execute("SELECT action FROM events").fetchall() == [("11111",)]

        def on_b2(topic: str, n: int) -> Any:
            def get() -> Any:
                c.execute("FLUSH")
                got = b2.consume(topic, idle=0.5)
                return got if len(got) >= n else None

            return wait_for(get, 30) or b2.consume(topic, idle=0.5)

        # line 377: "with the view": {"action":"99999"}; and kafka_src's message, re-encoded
        got = sorted(m.value() for m in on_b2("query_complete", 2))
        assert got == [b'{"action":"11111"}', b'{"action":"22222"}']
        raw = [m.value() for m in on_b2("raw_webhook", 1)]
        assert raw == [b'{"data":"{\\"action\\": \\"11111\\"}"}']


def test_seed000_connection_engine_table_sink_into_curl(
    make_server: Callable[..., SwellServer],
    lakana: dict[str, Any],  # noqa: F811
) -> None:
    """Lines 393-489: REST connection, ENGINE = iceberg table, SINK INTO, 10 curls, reads."""
    srv = make_server()
    wait_webhook(srv)
    svc = {"webhook": webhook_base(srv), "rest": lakana["uri"], "token": lakana["token"]}
    with srv.connect() as c:
        c.execute(WBHTABLE5)
        c.execute(PRODUCT_VIEW_EVENTS5)
        c.execute(local(MY_ICEBERG_CONN5, **svc))
        c.execute(SET_ENGINE_CONN)
        c.execute(MY_ICEBERG_TABLE5)
        c.execute(TO_SALES_EVENTS5)
        run_shell(local(curl_loop(10, "wbhtable5"), **svc))
        c.execute("FLUSH")
        view = c.execute(SELECT_VIEW5).fetchall()
        assert len(view) == 10 and {r[5] for r in view} == {9199.99}
        # "появляются не сразу": the default commit interval
        table = wait_for(lambda: len(c.execute(SELECT_TABLE5).fetchall()) == 10, 60)
        assert table, c.execute(SELECT_TABLE5).fetchall()
        got = c.execute(SELECT_TABLE5).fetchall()
        assert sorted(got) == sorted(view)
    # "И в keeper она есть": the table is in the REST catalog
    t = rest_catalog(lakana).load_table(("bronze", "my_iceberg_table5")).scan().to_arrow()
    assert sorted(t.column("event_id").to_pylist()) == sorted(r[0] for r in view)


# -- seed 002: Trino over Kafka, as RisingWave SQL -------------------------------------------

# line 137: Trino's `CREATE TABLE kafka.default.user_actions ... WITH ('kafka_topic' = ...,
# 'value_format' = 'json')` is a Kafka source here (total_value added: query 1 uses it)
USER_ACTIONS = """CREATE SOURCE user_actions (
  user_id BIGINT,
  action VARCHAR,
  event_time TIMESTAMP,
  total_value DOUBLE PRECISION
) WITH (
  connector = 'kafka',
  topic = 'user_actions',
  properties.bootstrap.server = '{broker}',
  scan.startup.mode = 'earliest'
) FORMAT PLAIN ENCODE JSON"""

# line 199, table name kafka.default.user_actions -> user_actions
QUERY1 = """SELECT date_trunc('minute', event_time) AS minute_bucket,
  count(*) AS events,
  avg(total_value) AS avg_value

FROM user_actions

WHERE event_time >= TIMESTAMP '2026-01-01 00:00:00'
GROUP BY 1

ORDER BY 1;"""

# line 210, as written apart from the Kafka table's name
QUERY2 = """SELECT a.minute_bucket,
a.events,
b.total_orders

FROM (

  SELECT date_trunc('minute', event_time) AS minute_bucket,
         count(*) AS events
  FROM user_actions
  GROUP BY 1
) AS a
LEFT JOIN payments.daily_summary AS b

ON a.minute_bucket = b.event_minute;"""


def test_seed002_trino_kafka_queries(
    conn: psycopg.Connection[Any], kafka_broker: KafkaBroker
) -> None:
    if "user_actions" not in kafka_broker.admin().list_topics(timeout=5).topics:
        kafka_broker.create_topic("user_actions", 2)
    events = [
        {"user_id": 1, "action": "view", "event_time": "2025-12-31 23:59:10", "total_value": 1.0},
        {"user_id": 1, "action": "buy", "event_time": "2026-01-01 00:00:05", "total_value": 10.0},
        {"user_id": 2, "action": "buy", "event_time": "2026-01-01 00:00:55", "total_value": 20.0},
        {"user_id": 3, "action": "view", "event_time": "2026-01-01 00:01:30", "total_value": 3.0},
    ]
    kafka_broker.produce("user_actions", events, partition=lambda i, _v: i % 2)
    conn.execute(USER_ACTIONS.format(broker=kafka_broker.bootstrap))
    try:
        from datetime import datetime

        m0, m1 = datetime(2026, 1, 1, 0, 0), datetime(2026, 1, 1, 0, 1)
        assert conn.execute(QUERY1).fetchall() == [(m0, 2, 15.0), (m1, 1, 3.0)]
        # the same query as a materialized view stays up to date (ORDER BY accepted and
        # ignored, as in RisingWave: a view has no row order)
        conn.execute("CREATE MATERIALIZED VIEW user_actions_per_minute AS " + QUERY1)
        # the "other source" of query 2, payments.daily_summary, is a table in a schema
        conn.execute("CREATE SCHEMA IF NOT EXISTS payments")
        conn.execute(
            "CREATE TABLE payments.daily_summary (event_minute TIMESTAMP, total_orders BIGINT)"
        )
        conn.execute("INSERT INTO payments.daily_summary VALUES ('2026-01-01 00:00:00', 7)")
        conn.execute("FLUSH")
        prev = datetime(2025, 12, 31, 23, 59)
        got2 = conn.execute(QUERY2).fetchall()
        assert sorted(got2) == [(prev, 1, None), (m0, 2, 7), (m1, 1, None)]
        kafka_broker.produce(
            "user_actions",
            [
                {
                    "user_id": 4,
                    "action": "buy",
                    "event_time": "2026-01-01 00:01:40",
                    "total_value": 5.0,
                }
            ],
        )
        got = wait_for(
            lambda: (
                conn.execute("SELECT * FROM user_actions_per_minute ORDER BY 1").fetchall()
                == [(m0, 2, 15.0), (m1, 2, 4.0)]
            ),
            30,
        )
        assert got, conn.execute("SELECT * FROM user_actions_per_minute ORDER BY 1").fetchall()
    finally:
        conn.execute("DROP MATERIALIZED VIEW IF EXISTS user_actions_per_minute")
        conn.execute("DROP TABLE IF EXISTS payments.daily_summary")
        conn.execute("DROP SCHEMA IF EXISTS payments")
        conn.execute("DROP SOURCE IF EXISTS user_actions CASCADE")
