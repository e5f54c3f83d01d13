"""librdkafka log routing: the rate limit per kind of line, and the CREATE probe."""

from __future__ import annotations

import logging

import pytest

from connectors.kafka.rdlog import RateLimit, probe
from engine.errors import ConnectorError
from harness.kafka import KafkaBroker
from harness.server import free_port


def _record(text: str) -> logging.LogRecord:
    args = ("FAIL", "rdkafka#consumer-1", text)
    return logging.LogRecord(
        "swell.kafka.librdkafka", logging.ERROR, "", 0, "%s [%s] %s", args, None
    )


def test_rate_limit_passes_one_line_per_kind_and_counts_the_rest() -> None:
    f = RateLimit(interval=3600)
    refused = (
        "127.0.0.1:1/bootstrap: Connect to ipv4#127.0.0.1:1 failed (after {}ms in state CONNECT)"
    )
    assert f.filter(_record(refused.format(0)))
    # the same line with other numbers is the same kind: dropped and counted
    assert [f.filter(_record(refused.format(n))) for n in range(20)] == [False] * 20
    assert f.filter(_record("another kind of line"))
    f.interval = 0.0
    rec = _record(refused.format(5))
    assert f.filter(rec)
    assert "20 similar lines" in rec.getMessage()


def test_probe_refuses_a_closed_port_at_once() -> None:
    port = free_port()
    with pytest.raises(ConnectorError, match=f"could not reach kafka at 127.0.0.1:{port}"):
        probe({"bootstrap.servers": f"127.0.0.1:{port}"}, "t")


def test_probe_reports_whether_the_topic_exists(kafka_broker: KafkaBroker) -> None:
    conf = {"bootstrap.servers": kafka_broker.bootstrap}
    kafka_broker.create_topic("probe_exists", 1)
    assert probe(conf, "probe_exists") is True
    assert probe(conf, "probe_missing_topic") is False
