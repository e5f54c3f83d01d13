"""Kafka sources and tables end to end: a real Swell server reading a real broker (Tansu).

Covers the seed's CREATE SOURCE verbatim (broker address substituted), ad-hoc SELECT over
the topic (with offset/partition/timestamp bounds), views on a source, SHOW / DESCRIBE /
DROP SOURCE, INCLUDE columns, ENCODE BYTES, FORMAT UPSERT with tombstones, bad messages,
partitions added while running, and exactly-once into views across `kill -9`.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from harness.kafka import KafkaBroker
from harness.seeds import KAFKA_SRC as SEED_SOURCE
from harness.server import SwellServer


def wait_for(fn: Callable[[], Any], expected: Any, timeout: float = 30.0) -> Any:
    """Poll `fn()` until it returns `expected` (or fail with the last value seen)."""
    deadline = time.monotonic() + timeout
    got = fn()
    while got != expected and time.monotonic() < deadline:
        time.sleep(0.1)
        got = fn()
    assert got == expected
    return got


def rows(conn: psycopg.Connection[Any], sql: str) -> list[tuple[Any, ...]]:
    return conn.execute(sql).fetchall()


def test_seed_source_adhoc_view_show_describe_drop(
    conn: psycopg.Connection[Any], kafka_broker: KafkaBroker
) -> None:
    # the seed's topic name, on a broker of this test (a fresh topic per session broker)
    topic = "query_complete"
    if topic not in kafka_broker.admin().list_topics(timeout=5).topics:
        kafka_broker.create_topic(topic, 4)
    kafka_broker.produce(topic, ({"action": f"a{i % 3}", "other": i} for i in range(300)))
    conn.execute(SEED_SOURCE.replace("broker1:29092", kafka_broker.bootstrap))
    try:
        assert rows(conn, "SELECT action, count(*) FROM kafka_src GROUP BY action ORDER BY 1") == [
            ("a0", 100),
            ("a1", 100),
            ("a2", 100),
        ]
        conn.execute(
            "CREATE MATERIALIZED VIEW actions AS "
            "SELECT action, count(*) AS n FROM kafka_src GROUP BY action"
        )
        wait_for(
            lambda: rows(conn, "SELECT action, n FROM actions ORDER BY 1"),
            [("a0", 100), ("a1", 100), ("a2", 100)],
        )
        kafka_broker.produce(topic, [{"action": "99999"}] * 5)
        wait_for(lambda: rows(conn, "SELECT n FROM actions WHERE action = '99999'"), [(5,)])
        assert ("kafka_src",) in rows(conn, "SHOW SOURCES")
        desc = rows(conn, "DESCRIBE kafka_src")
        assert desc[0][:3] == ("action", "character varying", False)
        assert [d[0] for d in desc if d[2]] == [
            "_rw_kafka_partition",
            "_rw_kafka_offset",
            "_rw_kafka_timestamp",
        ]
        with pytest.raises(psycopg.errors.DependentObjectsStillExist):
            conn.execute("DROP SOURCE kafka_src")
        conn.execute("DROP MATERIALIZED VIEW actions")
    finally:
        conn.execute("DROP SOURCE IF EXISTS kafka_src CASCADE")
    assert ("kafka_src",) not in rows(conn, "SHOW SOURCES")


def test_adhoc_bounds_include_and_bad_messages(
    conn: psycopg.Connection[Any], kafka_broker: KafkaBroker, kafka_topic: Callable[..., str]
) -> None:
    topic = kafka_topic(partitions=2)
    kafka_broker.produce(
        topic,
        ({"id": i, "name": f"n{i}", "price": i / 2} for i in range(40)),
        key=lambda i, _v: f"k{i}".encode(),
        partition=lambda i, _v: i % 2,
        headers={"h": b"hv"},
    )
    kafka_broker.produce(
        topic, [b"not json", b'{"id": "x", "name": "bad"}', b"[1,2]"], raw=True, partition=0
    )
    conn.execute(
        f"""CREATE SOURCE s_inc (id INT, name VARCHAR, price DOUBLE PRECISION)
        INCLUDE key AS k INCLUDE partition INCLUDE offset AS off
        INCLUDE timestamp AS ts INCLUDE header 'h' varchar AS hv
        WITH (connector = 'kafka', topic = '{topic}',
              properties.bootstrap.server = '{kafka_broker.bootstrap}')
        FORMAT PLAIN ENCODE JSON"""
    )
    try:
        assert rows(conn, "SELECT count(*), count(id), sum(id) FROM s_inc") == [(41, 40, 780)]
        assert rows(conn, "SELECT k, _rw_kafka_partition, off, hv FROM s_inc WHERE id = 3") == [
            (b"k3", 1, 1, "hv")
        ]
        assert rows(conn, "SELECT name FROM s_inc WHERE id IS NULL") == [("bad",)]
        # seeking by offset and partition: same answers as filtering everything
        assert rows(
            conn, "SELECT count(*) FROM s_inc WHERE _rw_kafka_offset >= 10 AND off < 15"
        ) == [(10,)]
        assert rows(
            conn,
            "SELECT sum(id) FROM s_inc WHERE _rw_kafka_partition = 1 AND _rw_kafka_offset > 17",
        ) == [(39 + 37,)]
        assert rows(
            conn,
            "SELECT count(*) FROM s_inc WHERE _rw_kafka_timestamp > now() - interval '1 hour'",
        ) == [(41,)]
        assert rows(
            conn, "SELECT count(*) FROM s_inc WHERE _rw_kafka_timestamp > now() + interval '1 hour'"
        ) == [(0,)]
        # only the used columns are decoded: every query shape still sees the right values
        assert rows(conn, "SELECT name FROM s_inc WHERE price > 18 ORDER BY 1") == [
            ("n37",),
            ("n38",),
            ("n39",),
        ]
        assert rows(conn, "SELECT sum(price) FILTER (WHERE id >= 38), max(name) FROM s_inc") == [
            (19.0 + 19.5, "n9")
        ]
        assert rows(
            conn, "SELECT count(*) FROM s_inc a JOIN s_inc b ON a.id = b.id WHERE b.price < 1"
        ) == [(2,)]
        assert rows(conn, "SELECT id, name, price, k, off, hv FROM s_inc WHERE id = 2") == [
            (2, "n2", 1.0, b"k2", 1, "hv")
        ]
        # a running source keeps its bad messages (with where they are) and its lag queryable
        conn.execute("CREATE MATERIALIZED VIEW inc_n AS SELECT count(*) AS n FROM s_inc")
        wait_for(lambda: rows(conn, "SELECT n FROM inc_n"), [(41,)])
        errs = rows(
            conn,
            'SELECT topic, partition, "offset", error_kind FROM rw_catalog.rw_source_errors '
            "WHERE source_name = 's_inc' ORDER BY \"offset\"",
        )
        assert errs == [
            (topic, 0, 20, "invalid json"),
            (topic, 0, 21, "type mismatch"),
            (topic, 0, 22, "not a json object"),
        ]
        lag = rows(
            conn,
            'SELECT partition, "offset", messages, errors FROM rw_catalog.rw_source_lag '
            "WHERE source_name = 's_inc' ORDER BY partition",
        )
        assert lag == [(0, 23, 43, 3), (1, 20, 43, 3)]
    finally:
        conn.execute("DROP SOURCE s_inc CASCADE")


def test_bytes_and_upsert_table(
    conn: psycopg.Connection[Any], kafka_broker: KafkaBroker, kafka_topic: Callable[..., str]
) -> None:
    t_bytes = kafka_topic()
    kafka_broker.produce(t_bytes, [b"\x00\x01", b"hello"], raw=True)
    conn.execute(
        f"""CREATE SOURCE s_bytes (payload BYTEA) WITH (connector = 'kafka', topic = '{t_bytes}',
        properties.bootstrap.server = '{kafka_broker.bootstrap}') FORMAT PLAIN ENCODE BYTES"""
    )
    t_up = kafka_topic(partitions=2)
    key = lambda i, v: (v or {}).get("k", "gone").encode()  # noqa: E731
    conn.execute(
        f"""CREATE TABLE t_up (v INT, note VARCHAR, PRIMARY KEY (k)) INCLUDE KEY AS k
        WITH (connector = 'kafka', topic = '{t_up}',
              properties.bootstrap.server = '{kafka_broker.bootstrap}')
        FORMAT UPSERT ENCODE JSON"""
    )
    try:
        assert sorted(rows(conn, "SELECT payload FROM s_bytes")) == [(b"\x00\x01",), (b"hello",)]
        kafka_broker.produce(
            t_up,
            [{"k": "a", "v": 1}, {"k": "b", "v": 2}, {"k": "a", "v": 3, "note": "x"}],
            key=key,
            partition=0,
        )
        wait_for(
            lambda: rows(conn, "SELECT k, v, note FROM t_up ORDER BY k"),
            [(b"a", 3, "x"), (b"b", 2, None)],
        )
        kafka_broker.produce(t_up, [None], key=lambda i, v: b"a", partition=0)  # tombstone
        wait_for(lambda: rows(conn, "SELECT k, v FROM t_up ORDER BY k"), [(b"b", 2)])
        conn.execute("CREATE MATERIALIZED VIEW up_sum AS SELECT sum(v) AS s FROM t_up")
        kafka_broker.produce(t_up, [{"k": "c", "v": 10}], key=key, partition=1)
        wait_for(lambda: rows(conn, "SELECT s FROM up_sum"), [(12,)])
        with pytest.raises(psycopg.errors.FeatureNotSupported):
            conn.execute(
                f"""CREATE SOURCE s_bad (v INT) INCLUDE KEY AS k WITH (connector = 'kafka',
                topic = '{t_up}', properties.bootstrap.server = 'x:1') FORMAT UPSERT ENCODE JSON"""
            )
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            conn.execute(
                "CREATE SOURCE s_bad (v INT) WITH (connector = 'kafka', topic = 't', "
                "properties.bootstrap.server = 'x:1', scan.startup.mode = 'sometime')"
            )
    finally:
        conn.execute("DROP SOURCE IF EXISTS s_bytes")
        conn.execute("DROP TABLE IF EXISTS t_up CASCADE")


def test_partitions_appearing_while_running_are_read(
    conn: psycopg.Connection[Any], kafka_broker: KafkaBroker
) -> None:
    """The topic does not exist when the view starts; its 3 partitions are found later.

    (Tansu cannot add partitions to an existing topic - no CreatePartitions - so discovery
    is exercised by a topic that appears while the source runs.)
    """
    from harness.kafka import unique_topic

    topic = unique_topic("grow")
    conn.execute(
        f"""CREATE SOURCE s_grow (v INT) WITH (connector = 'kafka', topic = '{topic}',
        properties.bootstrap.server = '{kafka_broker.bootstrap}',
        swell.partition.discovery.interval.ms = '200')"""
    )
    try:
        conn.execute(
            "CREATE MATERIALIZED VIEW grow_sum AS SELECT count(*) AS n, sum(v) AS s FROM s_grow"
        )
        time.sleep(0.5)  # a few discovery rounds find nothing
        kafka_broker.create_topic(topic, 3)
        kafka_broker.produce(topic, [{"v": 2}] * 30, partition=lambda i, _v: i % 3)
        wait_for(lambda: rows(conn, "SELECT n, s FROM grow_sum"), [(30, 60)])
        assert rows(conn, "SELECT count(DISTINCT _rw_kafka_partition) FROM s_grow") == [(3,)]
    finally:
        conn.execute("DROP SOURCE s_grow CASCADE")


def test_startup_timestamp_and_show_create(
    conn: psycopg.Connection[Any], kafka_broker: KafkaBroker, kafka_topic: Callable[..., str]
) -> None:
    topic = kafka_topic(partitions=2)
    kafka_broker.produce(topic, [{"v": 1}] * 10, timestamp_ms=1_600_000_000_000)
    kafka_broker.produce(topic, [{"v": 100}] * 5, timestamp_ms=1_700_000_000_000)
    ddl = f"""CREATE SOURCE s_ts (v INT) WITH (connector = 'kafka', topic = '{topic}',
        properties.bootstrap.server = '{kafka_broker.bootstrap}',
        scan.startup.timestamp.millis = '1650000000000') FORMAT PLAIN ENCODE JSON"""
    conn.execute(ddl)
    try:
        conn.execute(
            "CREATE MATERIALIZED VIEW ts_sum AS SELECT count(*) AS n, sum(v) AS s FROM s_ts"
        )
        wait_for(lambda: rows(conn, "SELECT n, s FROM ts_sum"), [(5, 500)])
        # ad hoc reads the whole topic, and seeks by timestamp when asked
        assert rows(conn, "SELECT count(*) FROM s_ts") == [(15,)]
        assert rows(
            conn,
            "SELECT count(*) FROM s_ts WHERE _rw_kafka_timestamp >= '2022-01-01 00:00:00+00'",
        ) == [(5,)]
        assert rows(conn, "SHOW CREATE SOURCE s_ts") == [("public.s_ts", ddl)]
    finally:
        conn.execute("DROP SOURCE s_ts CASCADE")


def test_startup_latest(
    conn: psycopg.Connection[Any], kafka_broker: KafkaBroker, kafka_topic: Callable[..., str]
) -> None:
    topic = kafka_topic(partitions=2)
    kafka_broker.produce(topic, ({"v": 1} for _ in range(3000)), partition=lambda i, _v: i % 2)
    conn.execute(
        f"""CREATE SOURCE s_latest (v INT) WITH (connector = 'kafka', topic = '{topic}',
        properties.bootstrap.server = '{kafka_broker.bootstrap}', scan.startup.mode = 'latest')"""
    )
    try:
        conn.execute("CREATE MATERIALIZED VIEW latest_sum AS SELECT count(*) AS n FROM s_latest")
        # the reader has found the end of both partitions
        wait_for(
            lambda: rows(
                conn,
                'SELECT partition, "offset" FROM rw_catalog.rw_source_lag '
                "WHERE source_name = 's_latest' ORDER BY partition",
            ),
            [(0, 1500), (1, 1500)],
        )
        kafka_broker.produce(topic, [{"v": 2}] * 7)
        wait_for(lambda: rows(conn, "SELECT n FROM latest_sum"), [(7,)])
    finally:
        conn.execute("DROP SOURCE s_latest CASCADE")


def test_exactly_once_across_kill9(
    fresh_server: SwellServer, kafka_broker: KafkaBroker, kafka_topic: Callable[..., str]
) -> None:
    """Produce while the server is SIGKILLed twice; the view counts every message once."""
    topic = kafka_topic(partitions=4)
    c = fresh_server.connect()
    c.execute(
        f"""CREATE SOURCE ev (g VARCHAR, v BIGINT) WITH (connector = 'kafka', topic = '{topic}',
        properties.bootstrap.server = '{kafka_broker.bootstrap}') FORMAT PLAIN ENCODE JSON"""
    )
    c.execute(
        "CREATE MATERIALIZED VIEW ev_agg AS SELECT g, count(*) AS n, sum(v) AS s FROM ev GROUP BY g"
    )
    # a table with a connector stores what it reads, offsets committed with its rows
    c.execute(
        f"""CREATE TABLE ev_t (g VARCHAR, v BIGINT) WITH (connector = 'kafka', topic = '{topic}',
        properties.bootstrap.server = '{kafka_broker.bootstrap}')"""
    )
    c.close()
    sent: list[dict[str, Any]] = []
    stop = threading.Event()

    def producer() -> None:
        i = 0
        while not stop.is_set() and i < 60:
            batch = [{"g": f"g{(i * 500 + j) % 7}", "v": i * 500 + j} for j in range(500)]
            kafka_broker.produce(topic, batch)
            sent.extend(batch)
            i += 1
            time.sleep(0.02)

    th = threading.Thread(target=producer)
    th.start()
    try:
        for _ in range(2):
            # let some epochs commit with data, then crash mid-stream
            deadline = time.monotonic() + 20
            with fresh_server.connect() as c:
                base = rows(c, "SELECT coalesce(sum(n), 0) FROM ev_agg")[0][0]
                while time.monotonic() < deadline:
                    if rows(c, "SELECT coalesce(sum(n), 0) FROM ev_agg")[0][0] > base:
                        break
                    time.sleep(0.05)
            fresh_server.restart(crash=True)
    finally:
        th.join()
    expected: dict[str, list[int]] = {}
    for m in sent:
        e = expected.setdefault(m["g"], [0, 0])
        e[0] += 1
        e[1] += m["v"]
    want = sorted((g, n, s) for g, (n, s) in expected.items())
    with fresh_server.connect() as c:
        wait_for(lambda: rows(c, "SELECT g, n, s FROM ev_agg ORDER BY g"), want, timeout=60)
        # the ad-hoc query over all messages agrees with the view
        assert rows(c, "SELECT g, count(*), sum(v) FROM ev GROUP BY g ORDER BY g") == want
        total = (len(sent), sum(m["v"] for m in sent))
        wait_for(lambda: rows(c, "SELECT count(*), sum(v) FROM ev_t"), [total])
    assert sum(Counter(m["g"] for m in sent).values()) == 30000


def test_source_watermark_drives_emit_on_window_close(
    conn: psycopg.Connection[Any], kafka_broker: KafkaBroker, kafka_topic: Callable[..., str]
) -> None:
    """WATERMARK FOR on a Kafka source: an EOWC window view emits a window only once the
    source's watermark (max event time - 5 s) passes its end, and drops late rows."""
    topic = kafka_topic(partitions=1)
    conn.execute(
        f"CREATE SOURCE wm_src (k VARCHAR, ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)"
        f" WITH (connector = 'kafka', topic = '{topic}',"
        f" properties.bootstrap.server = '{kafka_broker.bootstrap}') FORMAT PLAIN ENCODE JSON"
    )
    try:
        conn.execute(
            "CREATE MATERIALIZED VIEW wm_counts AS SELECT window_start, count(*) AS n "
            "FROM TUMBLE(wm_src, ts, INTERVAL '1' MINUTE) GROUP BY window_start "
            "EMIT ON WINDOW CLOSE"
        )
        kafka_broker.produce(
            topic,
            [{"k": "a", "ts": "2026-01-01 00:00:10"}, {"k": "b", "ts": "2026-01-01 00:00:50"}],
        )
        # the watermark (00:00:45) has not passed 00:01:00: nothing is emitted yet
        wait_for(lambda: rows(conn, "SELECT count(*) FROM wm_src"), [(2,)])
        conn.execute("FLUSH")
        assert rows(conn, "SELECT * FROM wm_counts") == []
        kafka_broker.produce(topic, [{"k": "c", "ts": "2026-01-01 00:01:30"}])
        wait_for(
            lambda: [(str(r[0]), r[1]) for r in rows(conn, "SELECT * FROM wm_counts")],
            [("2026-01-01 00:00:00", 2)],
        )
        # a late row for the closed window is dropped; the window is not emitted again
        kafka_broker.produce(
            topic,
            [{"k": "late", "ts": "2026-01-01 00:00:20"}, {"k": "d", "ts": "2026-01-01 00:02:30"}],
        )
        wait_for(lambda: rows(conn, "SELECT count(*) FROM wm_counts"), [(2,)])
        got = [(str(r[0]), r[1]) for r in rows(conn, "SELECT * FROM wm_counts ORDER BY 1")]
        assert got == [("2026-01-01 00:00:00", 2), ("2026-01-01 00:01:00", 1)]
    finally:
        conn.execute("DROP SOURCE IF EXISTS wm_src CASCADE")


def test_unreachable_broker_refused_at_create(conn: psycopg.Connection[Any]) -> None:
    """As RisingWave (and Kafka sinks): CREATE SOURCE / CREATE TABLE contact the brokers."""
    for ddl in (
        "CREATE SOURCE unreach_src (a INT) WITH (connector = 'kafka', topic = 't', "
        "properties.bootstrap.server = '127.0.0.1:9') FORMAT PLAIN ENCODE JSON",
        "CREATE TABLE unreach_t (a INT) WITH (connector = 'kafka', topic = 't', "
        "properties.bootstrap.server = '127.0.0.1:9') FORMAT PLAIN ENCODE JSON",
    ):
        with pytest.raises(
            psycopg.errors.SystemError, match="could not reach kafka at 127.0.0.1:9"
        ):
            conn.execute(ddl)
    names = rows(conn, "SELECT name FROM rw_relations WHERE name LIKE 'unreach%'")
    assert names == []


def test_broker_outage_shows_in_source_status(
    fresh_server: SwellServer, kafka_topic: Callable[..., str]
) -> None:
    """A running source whose broker goes away: `unreachable` with the error, then back to
    `running`; librdkafka's reconnect lines reach the server log rate-limited."""
    broker = KafkaBroker().start()
    try:
        broker.create_topic("outage", 1)
        broker.produce("outage", [{"a": 1}])
        with fresh_server.connect() as c:
            c.autocommit = True
            c.execute(
                "CREATE SOURCE out_src (a INT) WITH (connector = 'kafka', topic = 'outage', "
                f"properties.bootstrap.server = '{broker.bootstrap}', "
                "properties.reconnect.backoff.max.ms = '100') FORMAT PLAIN ENCODE JSON"
            )
            status = "SELECT source_name, state FROM rw_source_status"
            assert rows(c, status) == [("out_src", "idle")]  # no view reads it yet
            c.execute("CREATE MATERIALIZED VIEW out_n AS SELECT count(*) AS n FROM out_src")
            wait_for(lambda: rows(c, "SELECT n FROM out_n"), [(1,)])
            wait_for(lambda: rows(c, status), [("out_src", "running")])
            broker.stop()
            wait_for(lambda: rows(c, status), [("out_src", "unreachable")])
            (err,) = rows(c, "SELECT last_error FROM rw_source_status")[0]
            assert "down" in err or broker.bootstrap in err, err
            time.sleep(3)  # librdkafka retries about every 100 ms meanwhile
            broker = KafkaBroker(port=broker.port).start()
            broker.create_topic("outage", 1)
            wait_for(lambda: rows(c, status), [("out_src", "running")])
        log = fresh_server.log_text()
        assert "kafka source out_src: brokers unreachable" in log
        assert "kafka source out_src: brokers reachable again" in log
        # one librdkafka line per kind of message every 30 s, not one per reconnect attempt
        refused = [ln for ln in log.splitlines() if "librdkafka" in ln or "Connect to" in ln]
        assert 0 < len(refused) <= 12, refused  # unlimited: about 20 a second
        assert not any(ln.startswith("%3|") for ln in log.splitlines())
    finally:
        broker.stop()
