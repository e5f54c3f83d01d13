"""The Tansu broker fixture works: explicit topics, produce, count across partitions."""

from __future__ import annotations

from collections.abc import Callable

from harness.kafka import KafkaBroker


def test_produce_and_count_across_partitions(
    kafka_broker: KafkaBroker, kafka_topic: Callable[..., str]
) -> None:
    topic = kafka_topic(partitions=4)
    assert kafka_broker.partitions(topic) == [0, 1, 2, 3]
    n = kafka_broker.produce(
        topic, ({"i": i} for i in range(500)), key=lambda i, _v: str(i % 7).encode()
    )
    assert n == 500
    msgs = kafka_broker.consume(topic, idle=0.5)
    assert sorted(orjson_i(m.value()) for m in msgs) == list(range(500))
    assert len({m.partition() for m in msgs}) > 1


def test_tombstones_and_explicit_partition(
    kafka_broker: KafkaBroker, kafka_topic: Callable[..., str]
) -> None:
    topic = kafka_topic(partitions=2)
    kafka_broker.produce(topic, [{"a": 1}, None], key=lambda i, _v: b"k", partition=1)
    msgs = kafka_broker.consume(topic, idle=0.5)
    assert [(m.partition(), m.key(), m.value()) for m in msgs] == [
        (1, b"k", b'{"a":1}'),
        (1, b"k", None),
    ]


def orjson_i(v: bytes) -> int:
    import orjson

    return int(orjson.loads(v)["i"])
