"""Kafka connector: sources and tables fed by Kafka topics, and Kafka sinks
(confluent-kafka / librdkafka).

Importing this package registers `KafkaSourceConnector` and the sink writer
`KafkaSinkWriter` under the name `kafka` in `engine.connector_registry` (the engine imports
it lazily on the first `WITH (connector = 'kafka')`). Modules: config (options), decode
(batch JSON/bytes decoding), reader (streaming poll thread), source (the connector:
columns, checks, bounded reads; bad messages and lag go to engine.stream.source_status),
sink (the sink writer), sink_json (RisingWave's JSON encoding of sink rows).
"""

from __future__ import annotations

from connectors.kafka.sink import KafkaSinkWriter
from connectors.kafka.source import KafkaSourceConnector
from engine.connector_registry import register_sink, register_source

register_source("kafka", KafkaSourceConnector())
register_sink("kafka", KafkaSinkWriter)

__all__ = ["KafkaSinkWriter", "KafkaSourceConnector"]
