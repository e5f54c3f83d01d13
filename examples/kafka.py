"""Produce to and consume from a Kafka topic, for the examples' scripts.

    python examples/kafka.py produce BROKER TOPIC < lines     one message per input line
    python examples/kafka.py consume BROKER TOPIC N           print N message values

`consume` reads every partition from the beginning (no consumer group) and stops after N
messages or 30 s without a new one, printing one value per line.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition


def produce(broker: str, topic: str) -> int:
    p = Producer({"bootstrap.servers": broker, "linger.ms": 5})
    n = 0
    for line in sys.stdin:
        line = line.rstrip("\n")
        if line:
            p.produce(topic, line.encode())
            n += 1
    left = p.flush(30)
    return 1 if left else 0


def consume(broker: str, topic: str, want: int) -> int:
    c = Consumer({"bootstrap.servers": broker, "group.id": "examples", "enable.auto.commit": False})
    md = c.list_topics(topic, timeout=10).topics[topic]
    c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in md.partitions])
    got, idle = 0, time.monotonic() + 30
    while got < want and time.monotonic() < idle:
        for m in c.consume(100, 0.5):
            if m.error() is None:
                print(m.value().decode())
                got += 1
                idle = time.monotonic() + 30
    c.close()
    return 0 if got >= want else 1


if __name__ == "__main__":
    cmd, broker, topic, *rest = sys.argv[1:]
    sys.exit(produce(broker, topic) if cmd == "produce" else consume(broker, topic, int(rest[0])))
