"""Kafka source options: defaults, librdkafka pass-through, and the errors users see."""

from __future__ import annotations

import pytest

from connectors.kafka.config import KafkaOptions
from engine.errors import InvalidParameterValue

BASE = {"connector": "kafka", "topic": "t", "properties.bootstrap.server": "b:9092"}


def test_defaults_and_passthrough() -> None:
    o = KafkaOptions.parse(
        {**BASE, "properties.security.protocol": "SASL_SSL", "group.id.prefix": "rw"}
    )
    assert (o.topic, o.bootstrap, o.startup_mode, o.startup_timestamp_ms) == (
        "t",
        "b:9092",
        "earliest",
        None,
    )
    conf = o.consumer_config("x")
    assert conf["security.protocol"] == "SASL_SSL"
    assert conf["group.id"] == "rw-x"
    assert conf["enable.auto.commit"] is False


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"topic": ""}, "missing required option: topic"),
        ({"scan.startup.mode": "middle"}, "invalid scan.startup.mode"),
        ({"scan.startup.timestamp.millis": "soon"}, "invalid scan.startup.timestamp.millis"),
        ({"properties.enable.auto.commit": "true"}, "managed by Swell"),
        ({"startup": "x"}, "unknown kafka source option: startup"),
    ],
)
def test_bad_options(extra: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidParameterValue, match=message):
        KafkaOptions.parse({**BASE, **extra})


def test_bootstrap_required() -> None:
    with pytest.raises(InvalidParameterValue, match="bootstrap"):
        KafkaOptions.parse({"connector": "kafka", "topic": "t"})
