"""Statements of the user's seed scripts and small waits that several e2e tests share.

The seed text (the user's webhook/Kafka/Iceberg walkthrough) is kept verbatim here once, so that the webhook,
Iceberg, Kafka and seed-script tests all run the very same statements; a test that needs
another table name substitutes it with `str.replace`. Nothing here starts anything: the
helpers only poll a server that a fixture (tests/harness/server.py) has started.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

from harness.server import SwellServer

# seed 000, line 218
WBHTABLE1 = """CREATE TABLE wbhtable1 (
      data JSONB
    ) WITH (
      connector = 'webhook'
    ) VALIDATE AS secure_compare(
      headers->>'authorization',
      'TEST_WEBHOOK'
    );"""

# seed 000, line 231
PRODUCT_VIEW_EVENTS = """CREATE MATERIALIZED VIEW product_view_events AS
    SELECT
      (data->>'event_id')::VARCHAR AS event_id,
      (data->>'user_id')::VARCHAR AS user_id,
      (data->>'event_name')::VARCHAR AS event_name,
      (data->'properties'->>'product_id')::VARCHAR AS product_id,
      (data->'properties'->>'category')::VARCHAR AS category,
      (data->'properties'->>'price')::DOUBLE PRECISION AS price,
      (data->>'timestamp')::TIMESTAMP WITH TIME ZONE AS event_timestamp,
      data::VARCHAR AS raw_data
    FROM wbhtable1;"""

# seed 000, line 331
KAFKA_SRC = """CREATE SOURCE kafka_src (
  action VARCHAR
) WITH (
  connector = 'kafka',
  topic = 'query_complete',
  properties.bootstrap.server = 'broker1:29092'
);"""


# seed 000, line 341 (no semicolon in the seed)
KAFKA_SINK = """CREATE SINK kafka_sink from kafka_src WITH (
  connector = 'kafka',
  topic = 'query_complete',
  properties.bootstrap.server = 'broker2:29092'
) FORMAT PLAIN ENCODE JSON"""


def wait_truthy(fn: Callable[[], Any], timeout: float = 30.0) -> Any:
    """Poll `fn()` until it returns something truthy or `timeout` passes; return the last value."""
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v or time.monotonic() > deadline:
            return v
        time.sleep(0.2)


def wait_webhook(srv: SwellServer, timeout: float = 15.0) -> None:
    """The harness waits for pgwire; the webhook listener starts right after it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((srv.host, srv.webhook_port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(srv.describe_failure("webhook port never opened"))


# seed 000, line 247
REST_SINK = """CREATE SINK rest_sink FROM product_view_events
    WITH (
        connector = 'iceberg',
        type = 'upsert',
        primary_key = 'event_id',
        catalog.type = 'rest',
        catalog.uri = 'http://lakekeeper:8181/catalog',
        warehouse.path = 'demo',
        database.name = 'trino_namespace',
        table.name = 'product_view_events',
        s3.endpoint = 'http://minio:9000',
        s3.path.style.access = 'true',
        s3.access.key = 'minio-root-user',
        s3.secret.key = 'minio-root-password',
        s3.region = 'dummy'
    );"""


def local(text: str, **svc: str) -> str:
    """Point the seed's outside services at the local ones (see the module docstring)."""
    out = text.replace("http://localhost:4567", svc.get("webhook", "http://localhost:4567"))
    if "broker1" in svc:
        out = out.replace("broker1:29092", svc["broker1"])
    if "broker2" in svc:
        out = out.replace("broker2:29092", svc["broker2"])
    if "rest" in svc:
        token = f"catalog.token = '{svc['token']}',\n        "
        out = out.replace(
            "catalog.uri = 'http://lakekeeper:8181/catalog'",
            f"{token}catalog.uri = '{svc['rest']}'",
        )
        out = out.replace("'trino_namespace'", "'bronze'")
        out = out.replace("http://minio:9000", "http://127.0.0.1:9")
        out = out.replace("https://gateway.storjshare.io", "http://127.0.0.1:9")
        out = out.replace("warehouse.path = 'risi',", "warehouse.path = 'demo',")
        out = out.replace("   -- database.name = 'risi_space',", "    database.name = 'bronze', --")
    return out
