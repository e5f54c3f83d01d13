"""Kafka source options: `WITH (...)` of CREATE SOURCE / CREATE TABLE -> librdkafka config.

Recognised options (RisingWave names):

- `topic` (required), `properties.bootstrap.server` (required; `properties.bootstrap.servers`
  is accepted too);
- `scan.startup.mode` = `earliest` (default) | `latest`; `scan.startup.timestamp.millis`
  (start each partition at the first message at or after that time; overrides the mode);
- `properties.<name>` = any librdkafka consumer property (`properties.security.protocol`,
  `properties.sasl.mechanism`, `properties.sasl.username`, ...), passed through as `<name>`;
- `group.id.prefix`: prefix of the consumer `group.id` (default `swell-source`). Partitions
  are assigned by Swell (no group membership, no rebalancing); the group id only names
  the client to the broker, offsets are never committed to the broker;
- `swell.partition.discovery.interval.ms` (default 5000): how often a running source looks
  for partitions added to the topic.

Lifecycle: `KafkaOptions.parse(options)` runs at CREATE time (errors go to the user) and
again each time a reader starts (after a restart), from the options kept in the catalog.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from connectors.kafka.rdlog import client_logging
from engine.errors import InvalidParameterValue

STARTUP_MODES = ("earliest", "latest")
_KNOWN = {
    "connector",
    "topic",
    "properties.bootstrap.server",
    "properties.bootstrap.servers",
    "scan.startup.mode",
    "scan.startup.timestamp.millis",
    "scan.startup.timestamp_millis",
    "group.id.prefix",
    "swell.partition.discovery.interval.ms",
}
# librdkafka settings Swell controls itself; a user value would break offset tracking.
_RESERVED = {"enable.auto.commit", "group.id", "auto.offset.reset", "enable.partition.eof"}


@dataclass
class KafkaOptions:
    topic: str
    bootstrap: str
    startup_mode: str = "earliest"
    startup_timestamp_ms: int | None = None
    group_id_prefix: str = "swell-source"
    discovery_interval_s: float = 5.0
    properties: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, options: dict[str, str]) -> KafkaOptions:
        topic = options.get("topic")
        if not topic:
            raise InvalidParameterValue("missing required option: topic")
        bootstrap = options.get("properties.bootstrap.server") or options.get(
            "properties.bootstrap.servers"
        )
        if not bootstrap:
            raise InvalidParameterValue("missing required option: properties.bootstrap.server")
        mode = options.get("scan.startup.mode", "earliest").lower()
        if mode not in STARTUP_MODES:
            raise InvalidParameterValue(
                f"invalid scan.startup.mode: '{mode}'",
                hint="Use 'earliest' or 'latest' (or scan.startup.timestamp.millis).",
            )
        ts_raw = options.get("scan.startup.timestamp.millis") or options.get(
            "scan.startup.timestamp_millis"
        )
        ts = None
        if ts_raw is not None:
            try:
                ts = int(ts_raw)
            except ValueError:
                raise InvalidParameterValue(
                    f"invalid scan.startup.timestamp.millis: '{ts_raw}'"
                ) from None
        try:
            interval = float(options.get("swell.partition.discovery.interval.ms", "5000")) / 1000
        except ValueError:
            raise InvalidParameterValue("invalid swell.partition.discovery.interval.ms") from None
        props: dict[str, str] = {}
        for k, v in options.items():
            if k.startswith("properties.") and k not in (
                "properties.bootstrap.server",
                "properties.bootstrap.servers",
            ):
                name = k[len("properties.") :]
                if name in _RESERVED:
                    raise InvalidParameterValue(
                        f"option {k} is managed by Swell and cannot be set",
                        hint="Swell assigns partitions itself and keeps offsets in its "
                        "checkpoints.",
                    )
                if name == "sasl.jaas.config":  # librdkafka fails at the first read
                    raise InvalidParameterValue(
                        "properties.sasl.jaas.config is a Java (JAAS) setting the Kafka "
                        "client of Swell does not read",
                        hint="Set properties.sasl.mechanism, properties.sasl.username and "
                        "properties.sasl.password (or SECRET references) instead.",
                    )
                props[name] = v
            elif k not in _KNOWN:
                raise InvalidParameterValue(f"unknown kafka source option: {k}")
        return cls(
            topic=topic,
            bootstrap=bootstrap,
            startup_mode=mode,
            startup_timestamp_ms=ts,
            group_id_prefix=options.get("group.id.prefix", "swell-source"),
            discovery_interval_s=max(interval, 0.1),
            properties=props,
        )

    def consumer_config(self, client: str) -> dict[str, Any]:
        """librdkafka config of a consumer Swell drives with `assign()` (no group join)."""
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap,
            "group.id": f"{self.group_id_prefix}-{client}",
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 100,
            "socket.keepalive.enable": True,
            "log_level": 3,
            **client_logging(),
        }
        conf.update(self.properties)
        return conf
