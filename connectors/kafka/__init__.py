"""Kafka connector: sources and tables fed by Kafka topics (confluent-kafka / librdkafka).

Importing this package registers `KafkaSourceConnector` under the name `kafka` in
`engine.connector_registry` (the engine imports it lazily on the first
`WITH (connector = 'kafka')`). Modules: config (options), decode (batch JSON/bytes
decoding), reader (streaming poll thread), source (the connector: columns, checks,
bounded reads), stats (bad messages and lag behind the rw_kafka_* system tables).
"""

from __future__ import annotations

from connectors.kafka.source import KafkaSourceConnector
from engine.connector_registry import register_source

register_source("kafka", KafkaSourceConnector())

__all__ = ["KafkaSourceConnector"]
