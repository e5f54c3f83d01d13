"""Kafka sinks end to end: the seed's statements against a real server and a Tansu broker,
checked message by message; upsert keys and tombstones; debezium envelopes; encodings.
"""

from __future__ import annotations

import json
import time
import urllib.request
import uuid
from typing import Any

import psycopg
import pytest

from harness.kafka import KafkaBroker
from harness.seeds import KAFKA_SINK, KAFKA_SRC, WBHTABLE1
from harness.server import SwellServer

SEED_MV = """CREATE MATERIALIZED VIEW {v} AS
    SELECT
      (data->>'action')::VARCHAR AS action
    FROM {t};"""
SEED_SINK = """CREATE SINK {s} FROM {v} WITH (
  connector = 'kafka',
  topic = '{topic}',
  properties.bootstrap.server = '{broker}'
) FORMAT PLAIN ENCODE JSON (force_append_only='true');"""


def post(srv: SwellServer, table: str, body: bytes) -> int:
    req = urllib.request.Request(
        srv.webhook_url(table),
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", "Authorization": "TEST_WEBHOOK"},
    )
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status


def raw_values(broker: KafkaBroker, topic: str, n: int, timeout: float = 30.0) -> list[Any]:
    """(key, value) bytes of the first `n` messages of a 1-partition topic, in order."""
    deadline = time.monotonic() + timeout
    msgs: list[Any] = []
    while time.monotonic() < deadline:
        msgs = broker.consume(topic, idle=0.5)
        if len(msgs) >= n:
            break
    msgs.sort(key=lambda m: m.offset())
    return [(m.key(), m.value()) for m in msgs]


def names() -> tuple[str, ...]:
    u = uuid.uuid4().hex[:8]
    return f"wbh_{u}", f"events_{u}", f"sink_{u}"


def test_seed_webhook_view_sink_messages(
    server: SwellServer, conn: psycopg.Connection, kafka_broker: KafkaBroker, kafka_topic: Any
) -> None:
    topic = kafka_topic(prefix="query_complete")
    t, v, s = names()
    conn.execute(WBHTABLE1.replace("wbhtable1", t))
    conn.execute(SEED_MV.format(t=t, v=v))
    try:
        # without force_append_only the view's stream may retract: refused as in RisingWave
        with pytest.raises(psycopg.Error, match="force_append_only='true'"):
            conn.execute(
                SEED_SINK.format(s=s, v=v, topic=topic, broker=kafka_broker.bootstrap).replace(
                    " (force_append_only='true')", ""
                )
            )
        post(server, t, b'{"action": "11111"}')  # existing row: backfilled
        conn.execute("FLUSH")
        conn.execute(SEED_SINK.format(s=s, v=v, topic=topic, broker=kafka_broker.bootstrap))
        for a in ("55555", "99999"):
            assert post(server, t, json.dumps({"action": a}).encode()) == 200
        conn.execute("FLUSH")
        got = raw_values(kafka_broker, topic, 3)
        assert got == [
            (None, b'{"action":"11111"}'),
            (None, b'{"action":"55555"}'),
            (None, b'{"action":"99999"}'),
        ]
        assert conn.execute(f"SHOW SINKS LIKE '{s}'").fetchall() == [(s,)]
        row = conn.execute(
            "SELECT connector, sink_type, state, rows_written FROM rw_sink_status "
            f"WHERE sink_name = '{s}'"
        ).fetchone()
        assert row == ("kafka", "force-append-only", "running", 3)
    finally:
        conn.execute(f"DROP SINK IF EXISTS {s}")
        conn.execute(f"DROP MATERIALIZED VIEW IF EXISTS {v}")
        conn.execute(f"DROP TABLE IF EXISTS {t}")


def test_upsert_and_debezium_sinks(
    conn: psycopg.Connection, kafka_broker: KafkaBroker, kafka_topic: Any
) -> None:
    up, dbz = kafka_topic(prefix="up"), kafka_topic(prefix="dbz")
    u = uuid.uuid4().hex[:8]
    t = f"t_{u}"
    conn.execute(f"CREATE TABLE {t} (id INT PRIMARY KEY, name VARCHAR, doc JSONB)")
    try:
        conn.execute(f"""INSERT INTO {t} VALUES (1, 'a', '{{"x": 1}}')""")
        conn.execute("FLUSH")
        b = kafka_broker.bootstrap
        conn.execute(
            f"CREATE SINK up_{u} FROM {t} WITH (connector = 'kafka', topic = '{up}', "
            f"properties.bootstrap.server = '{b}', primary_key = 'id') FORMAT UPSERT ENCODE JSON"
        )
        conn.execute(
            f"CREATE SINK dbz_{u} FROM {t} WITH (connector = 'kafka', topic = '{dbz}', "
            f"properties.bootstrap.server = '{b}', primary_key = 'id', snapshot = 'false') "
            "FORMAT DEBEZIUM ENCODE JSON (jsonb.handling.mode = 'dynamic')"
        )
        conn.execute(f"UPDATE {t} SET name = 'b' WHERE id = 1")
        conn.execute("FLUSH")
        conn.execute(f"DELETE FROM {t} WHERE id = 1")
        conn.execute("FLUSH")
        assert raw_values(kafka_broker, up, 3) == [
            # jsonb.handling.mode 'string' (the default, as RisingWave): the value's text
            (b'{"id":1}', b'{"id":1,"name":"a","doc":"{\\"x\\": 1}"}'),
            (b'{"id":1}', b'{"id":1,"name":"b","doc":"{\\"x\\": 1}"}'),
            (b'{"id":1}', None),
        ]
        d = raw_values(kafka_broker, dbz, 3)
        assert [k for k, _ in d] == [b'{"id":1}'] * 3 and d[2][1] is None
        p = [json.loads(v)["payload"] for _, v in d[:2]]
        assert [(x["op"], x["before"], x["after"]) for x in p] == [
            ("u", {"id": 1, "name": "a", "doc": {"x": 1}}, {"id": 1, "name": "b", "doc": {"x": 1}}),
            ("d", {"id": 1, "name": "b", "doc": {"x": 1}}, None),
        ]
        with pytest.raises(psycopg.Error, match="primary key not defined for upsert kafka sink"):
            conn.execute(
                f"CREATE SINK bad_{u} FROM {t} WITH (connector = 'kafka', topic = '{up}', "
                f"properties.bootstrap.server = '{b}') FORMAT UPSERT ENCODE JSON"
            )
    finally:
        conn.execute(f"DROP TABLE IF EXISTS {t} CASCADE")


def test_timestamptz_and_types_as_risingwave(
    conn: psycopg.Connection, kafka_broker: KafkaBroker, kafka_topic: Any
) -> None:
    topic = kafka_topic(prefix="types")
    u = uuid.uuid4().hex[:8]
    conn.execute(
        f"CREATE TABLE tt_{u} (ts TIMESTAMPTZ, n NUMERIC, f DOUBLE PRECISION, b BOOLEAN) "
        "APPEND ONLY"
    )
    try:
        conn.execute(
            f"CREATE SINK ts_{u} AS SELECT ts, n, f, b FROM tt_{u} WITH (connector = 'kafka', "
            f"topic = '{topic}', properties.bootstrap.server = '{kafka_broker.bootstrap}') "
            "FORMAT PLAIN ENCODE JSON"
        )
        conn.execute(f"INSERT INTO tt_{u} VALUES ('2023-11-11 18:30:09.453+00', 1.50, 2.5, true)")
        conn.execute("FLUSH")
        assert raw_values(kafka_broker, topic, 1) == [
            (None, b'{"ts":"2023-11-11T18:30:09.453000Z","n":"1.5","f":2.5,"b":true}')
        ]
    finally:
        conn.execute(f"DROP TABLE IF EXISTS tt_{u} CASCADE")


def test_unreachable_broker_fails_at_create(conn: psycopg.Connection) -> None:
    u = uuid.uuid4().hex[:8]
    conn.execute(f"CREATE TABLE ub_{u} (a INT) APPEND ONLY")
    try:
        with pytest.raises(psycopg.Error, match="could not reach kafka at 127.0.0.1:9"):
            conn.execute(
                f"CREATE SINK ub_s_{u} FROM ub_{u} WITH (connector = 'kafka', topic = 'x', "
                "properties.bootstrap.server = '127.0.0.1:9', "
                "properties.socket.connection.setup.timeout.ms = '1000')"
            )
        assert conn.execute(f"SHOW SINKS LIKE 'ub_s_{u}'").fetchall() == []
    finally:
        conn.execute(f"DROP TABLE IF EXISTS ub_{u} CASCADE")


def test_seed_source_to_sink_between_two_brokers(fresh_server: SwellServer) -> None:
    b1, b2 = KafkaBroker().start(), KafkaBroker().start()
    try:
        b1.create_topic("query_complete")
        b2.create_topic("query_complete")
        b1.produce("query_complete", [{"action": "11111"}, {"action": "22222"}])
        with fresh_server.connect() as c:
            c.autocommit = True
            c.execute(KAFKA_SRC.replace("broker1:29092", b1.bootstrap))
            c.execute(KAFKA_SINK.replace("broker2:29092", b2.bootstrap))
            b1.produce("query_complete", [{"action": "33333"}])
            deadline = time.monotonic() + 30
            got: list[Any] = []
            while time.monotonic() < deadline and len(got) < 3:
                c.execute("FLUSH")
                got = raw_values(b2, "query_complete", 3, timeout=2)
            assert [v for _, v in got] == [
                b'{"action":"11111"}',
                b'{"action":"22222"}',
                b'{"action":"33333"}',
            ]
    finally:
        b1.stop()
        b2.stop()


def test_broker_outage_retries_shows_status_and_loses_nothing(tmp_path: Any) -> None:
    from engine.database import Config, SwellDatabase

    broker = KafkaBroker().start()
    broker.create_topic("out")
    db = SwellDatabase(Config(data_dir=tmp_path / "data", barrier_interval_ms=60_000))
    s = db.connect("root", "dev")
    try:
        s.execute_simple("CREATE TABLE t (a INT) APPEND ONLY")
        s.execute_simple(
            "CREATE SINK s FROM t WITH (connector = 'kafka', topic = 'out', "
            f"properties.bootstrap.server = '{broker.bootstrap}', flush_timeout_ms = '300', "
            "properties.reconnect.backoff.max.ms = '200') FORMAT PLAIN ENCODE JSON"
        )
        s.execute_simple("INSERT INTO t VALUES (1)")
        s.execute_simple("FLUSH")
        assert [v for _, v in raw_values(broker, "out", 1)] == [b'{"a":1}']
        broker.stop()
        epoch = db.runtime.epoch
        s.execute_simple("INSERT INTO t VALUES (2), (3)")
        db.runtime.barrier()  # the timer barrier: the sink cannot flush, nothing commits
        db.runtime.barrier()
        assert db.runtime.epoch == epoch
        st = s.execute_simple(
            "SELECT state, errors > 0, retries > 0, last_error FROM rw_sink_status"
        )[0].rows
        assert st[0][:3] == ("retrying", True, True) and "not yet delivered" in st[0][3]
        broker = KafkaBroker(port=broker.port).start()  # memory storage: a new, empty broker
        broker.create_topic("out")
        s.execute_simple("FLUSH")  # waits for the sink
        assert db.runtime.epoch > epoch
        got = sorted(v for _, v in raw_values(broker, "out", 2))
        assert got[:2] == [b'{"a":2}', b'{"a":3}'] and set(got) <= {b'{"a":2}', b'{"a":3}'}
        assert s.execute_simple("SELECT state FROM rw_sink_status")[0].rows == [("running",)]
    finally:
        db.close()
        broker.stop()


@pytest.mark.swell_server(barrier_interval_ms=3_600_000)
def test_kill9_then_restart_delivers_every_row_at_least_once(
    fresh_server: SwellServer, kafka_broker: KafkaBroker, kafka_topic: Any
) -> None:
    topic = kafka_topic(prefix="crash")
    with fresh_server.connect() as c:
        c.autocommit = True
        c.execute("CREATE TABLE ev (id INT) APPEND ONLY")
        c.execute(
            f"CREATE SINK out FROM ev WITH (connector = 'kafka', topic = '{topic}', "
            f"properties.bootstrap.server = '{kafka_broker.bootstrap}')"
        )
        c.execute("INSERT INTO ev SELECT * FROM generate_series(1, 100)")
        c.execute("FLUSH")
        # acknowledged (in the WAL) but not checkpointed: the barrier interval is an hour
        c.execute("INSERT INTO ev SELECT * FROM generate_series(101, 200)")
    fresh_server.kill9()
    fresh_server.restart()
    with fresh_server.connect() as c:
        c.autocommit = True
        c.execute("FLUSH")
        assert c.execute("SELECT sink_name, state FROM rw_sink_status").fetchall() == [
            ("out", "running")
        ]
    ids = [json.loads(v)["id"] for _, v in raw_values(kafka_broker, topic, 200)]
    assert sorted(set(ids)) == list(range(1, 201))
