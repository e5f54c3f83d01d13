"""The Prometheus endpoint: `GET /metrics` on --prometheus-listener-addr serves the text
exposition format with the runtime, checkpoint, WAL, store, webhook and pgwire counters,
and the counters move with the work done (and the dashboard API shows the same for a
source and a sink). A taken metrics port only disables metrics."""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families

from harness.kafka import KafkaBroker
from harness.server import SwellServer, free_port, free_ports


def scrape(port: int) -> tuple[str, dict[tuple[str, tuple[tuple[str, str], ...]], float]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
        ctype = resp.headers["Content-Type"]
        text = resp.read().decode()
    samples = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return ctype, samples


def test_metrics_endpoint_counts_work(tmp_path: Path) -> None:
    mport = free_port()
    srv = SwellServer(
        tmp_path / "data", extra_args=["--prometheus-listener-addr", f"127.0.0.1:{mport}"]
    )
    srv.start()
    try:
        _, before = scrape(mport)
        with srv.connect() as c:
            c.execute("CREATE TABLE m_t (id INT PRIMARY KEY)")
            c.execute("INSERT INTO m_t VALUES (1), (2), (3)")
            c.execute("CREATE MATERIALIZED VIEW m_v AS SELECT count(*) AS n FROM m_t")
            c.execute("CREATE MATERIALIZED VIEW m_d AS SELECT id, 1 / (id - 2) AS q FROM m_t")
            c.execute("INSERT INTO m_t VALUES (4)")
            c.execute(
                "CREATE TABLE m_wh (data JSONB) WITH (connector = 'webhook') "
                "VALIDATE AS secure_compare(headers->>'authorization', 'tok')"
            )
            c.execute("FLUSH")
            req = urllib.request.Request(
                srv.webhook_url("m_wh"),
                data=b'{"a": 1}',
                headers={"Authorization": "tok", "Content-Type": "application/json"},
            )
            with urllib.request.urlopen(req, timeout=10) as resp:
                assert resp.status == 200
            with pytest.raises(psycopg.OperationalError):
                srv.connect(user="no_such_user").close()
            with pytest.raises(psycopg.errors.UndefinedTable):
                c.execute("SELECT * FROM no_such_table_m")
            ctype, after = scrape(mport)
        assert ctype.startswith("text/plain; version=0.0.4")

        def v(name: str, **labels: str) -> float:
            return after[(name, tuple(sorted(labels.items())))]

        assert v("swell_barriers_total") > before[("swell_barriers_total", ())]
        assert v("swell_checkpoints_total") >= 2  # every DDL checkpoints
        assert v("swell_wal_records_total") >= 2  # the INSERT and the webhook row
        assert v("swell_wal_fsyncs_total") >= 1
        assert v("swell_state_store_bytes_written_total") > 0
        assert v("swell_relations", kind="tables") == 2
        # barrier CPU by phase and by view operator class (engine/stream/cpu.py)
        assert v("swell_stream_cpu_seconds_total", phase="tables") >= 0
        assert v("swell_stream_cpu_seconds_total", phase="commit") >= 0
        assert v("swell_operator_cpu_seconds_total", operator="HashAggOp") >= 0
        assert v("swell_webhook_requests_total") == 1
        assert v("swell_webhook_rows_ingested_total") == 1
        assert v("swell_webhook_responses_total", status="200") == 1
        assert v("swell_pgwire_auth_failures_total") == 1
        assert v("swell_pgwire_connections") == 1  # the psycopg connection still open
        assert v("swell_pgwire_connections_accepted_total") >= 2
        assert v("swell_uptime_seconds") > 0
        assert v("swell_pgwire_statements_total") >= 5  # 4 statements + the failed one
        assert v("swell_pgwire_errors_total") == 1
        assert v("swell_stream_expression_errors_total") == 1  # id 2 in m_d
        assert v("swell_job_expression_errors_total", job="m_d") == 1
    finally:
        srv.stop()


def test_taken_metrics_port_keeps_sql_running(tmp_path: Path) -> None:
    mport = free_port()
    args = ["--prometheus-listener-addr", f"127.0.0.1:{mport}"]
    first = SwellServer(tmp_path / "a", extra_args=args).start()
    try:
        second = SwellServer(tmp_path / "b", extra_args=args).start()
        try:
            with second.connect() as c:
                assert c.execute("SELECT 1").fetchone() == (1,)
            assert "metrics disabled" in second.log_text()
            scrape(mport)  # still the first server's endpoint
        finally:
            second.stop()
    finally:
        first.stop()


def test_histograms_per_relation_series_and_process_metrics(
    tmp_path: Path, kafka_broker: KafkaBroker
) -> None:
    mport, dport = free_ports(2)
    srv = SwellServer(
        tmp_path / "data",
        extra_args=[
            "--prometheus-listener-addr",
            f"127.0.0.1:{mport}",
            "--dashboard-listen-addr",
            f"127.0.0.1:{dport}",
        ],
    )
    srv.start()
    try:
        kafka_broker.create_topic("metrics_src", 1)
        kafka_broker.produce("metrics_src", [{"a": 1}, {"a": 2}])
        with srv.connect() as c:
            c.execute("CREATE TABLE h_t (id INT PRIMARY KEY)")
            c.execute("INSERT INTO h_t VALUES (1), (2)")
            c.execute("SELECT * FROM h_t")
            c.execute(
                "CREATE SOURCE h_src (a INT) WITH (connector = 'kafka', topic = 'metrics_src', "
                f"properties.bootstrap.server = '{kafka_broker.bootstrap}') FORMAT PLAIN ENCODE JSON"
            )
            c.execute("CREATE MATERIALIZED VIEW h_v AS SELECT count(*) AS n FROM h_src")
            c.execute("CREATE SINK h_sink FROM h_t WITH (connector = 'blackhole')")
            c.execute(
                "CREATE TABLE h_wh (data JSONB) WITH (connector = 'webhook') "
                "VALIDATE AS secure_compare(headers->>'authorization', 'tok')"
            )
            req = urllib.request.Request(
                srv.webhook_url("h_wh"), data=b'{"a": 1}', headers={"Authorization": "tok"}
            )
            with urllib.request.urlopen(req, timeout=10) as resp:
                assert resp.status == 200
            deadline = time.monotonic() + 30
            while c.execute("SELECT n FROM h_v").fetchall() != [(2,)]:
                assert time.monotonic() < deadline
                c.execute("FLUSH")
            _, m = scrape(mport)
            url = f"http://127.0.0.1:{dport}/api/overview"
            with urllib.request.urlopen(url, timeout=30) as resp:
                board = {r["name"]: r for r in json.loads(resp.read())["relations"]}

        def v(name: str, **labels: str) -> float:
            return m[(name, tuple(sorted(labels.items())))]

        # histograms: every barrier/checkpoint/statement/ack lands in exactly one bucket
        for name in (
            "swell_barrier_duration_seconds",
            "swell_checkpoint_duration_seconds",
            "swell_webhook_ack_seconds",
            "swell_freshness_seconds",  # the INSERT and the webhook row became visible
            "swell_wal_queue_seconds",  # the INSERT's and the webhook's WAL records
            "swell_wal_sync_seconds",
        ):
            n = v(f"{name}_count")
            assert n >= 1 and v(f"{name}_bucket", le="+Inf") == n and v(f"{name}_sum") > 0
        assert v("swell_webhook_ack_seconds_count") == 1
        stmt = "swell_statement_duration_seconds"
        assert v(f"{stmt}_count", statement="insert") == 1
        assert v(f"{stmt}_count", statement="select") >= 2
        assert v(f"{stmt}_count", statement="ddl") == 5
        assert v(f"{stmt}_bucket", statement="ddl", le="30.0") <= 5
        # per source and per sink, labelled with their names
        assert v("swell_source_messages_total", source="h_src") == 2
        assert v("swell_source_bad_messages_total", source="h_src") == 0
        assert v("swell_source_up", source="h_src") == 1
        assert v("swell_sink_rows_total", sink="h_sink") == 2
        assert v("swell_sink_up", sink="h_sink") == 1
        # per table and materialized view, labelled with their names
        assert v("swell_table_rows_in_total", table="h_t") == 2
        assert v("swell_table_rows_in_total", table="h_wh") == 1
        assert v("swell_view_rows_out_total", view="h_v") >= 1
        assert v("swell_relation_rows", relation="h_v", kind="materialized view") == 1
        assert v("swell_relation_rows", relation="h_t", kind="table") == 2
        assert v("swell_relation_state_keys", relation="h_v", kind="materialized view") > 0
        # the dashboard shows the same figures for the source and the sink
        assert (board["h_src"]["kind"], board["h_src"]["counter"]) == ("source", 2)
        assert board["h_src"]["state"] == "running" and board["h_src"]["errors"] == 0
        assert (board["h_sink"]["counter"], board["h_sink"]["state"]) == (2, "running")
        assert board["h_v"]["rows"] == 1
        # process metrics
        assert v("process_resident_memory_bytes") > 10_000_000
        assert v("process_cpu_seconds_total") > 0
        assert v("process_open_fds") > 0
    finally:
        srv.stop()
