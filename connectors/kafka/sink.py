"""The Kafka sink writer (`CREATE SINK ... WITH (connector = 'kafka', ...)`).

Options: `topic`, `properties.bootstrap.server` (required), `primary_key` (columns of the
message key; required for UPSERT and DEBEZIUM), any other `properties.<librdkafka key>`
passed to the producer (security settings included), `flush_timeout_ms` (Swell: how long
one pre-commit waits for acks before the checkpoint is retried, default 5000).
Formats, all `ENCODE JSON` (see `connectors.kafka.sink_json` for value encodings):

* `FORMAT PLAIN`: one message per inserted row (the sink framework has already dropped
  deletes and turned updates into inserts for `force_append_only`); key = the primary key
  columns as a JSON object when `primary_key` is set, else no key.
* `FORMAT UPSERT`: key = primary key object; INSERT and U+ send the row, DELETE sends a
  tombstone (null value), U- sends nothing.
* `FORMAT DEBEZIUM`: `{"schema": ..., "payload": {"before", "after", "op": c|u|d, "ts_ms",
  "source"}}` (`schemas.enable = 'false'` drops the schema); a delete is followed by a
  tombstone.

Delivery (at-least-once): `write` encodes the chunk (vectorised) and hands the messages to
librdkafka; messages librdkafka cannot take yet (queue full) and messages whose delivery
failed stay in `_unsent` and are sent again. `pre_commit` sends what is left and flushes;
if anything is still undelivered it raises, so the checkpoint waits (the framework retries
with backoff and shows the error in `rw_sink_status`). librdkafka itself retries broker
errors without a message timeout (`message.timeout.ms = 0`). As in RisingWave the
producer is not idempotent unless `properties.enable.idempotence = 'true'` (then order per
partition survives retries; but a broker that lost its producer state, e.g. a Tansu memory
broker restarted, never accepts that producer again).
A fatal producer error replaces the producer and resends.
Lifecycle: factory -> validate (CREATE only: options, producer config, broker reachable,
topic created if missing) -> open -> write/pre_commit per epoch -> close (flushes briefly).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import numpy as np
import orjson
import polars as pl

from connectors.kafka.rdlog import client_logging
from connectors.kafka.sink_json import JsonRowEncoder
from engine.chunk import Op, StreamChunk
from engine.errors import ConnectorError, InvalidParameterValue, not_supported
from engine.stream.sink import (
    APPEND_ONLY,
    DEBEZIUM,
    FORCE_APPEND_ONLY,
    UPSERT,
    BaseSinkWriter,
    SinkSpec,
)
from engine.types import TypeKind

log = logging.getLogger("swell.kafka.sink")

# RisingWave-only `properties.*` options that are not librdkafka settings
_RW_ONLY = {"properties.retry.max", "properties.retry.interval"}
_BOOTSTRAP = ("properties.bootstrap.server", "properties.bootstrap.servers")
_DEFAULTS = {
    "linger.ms": "5",
    "message.timeout.ms": "0",  # never give up on a message; pre_commit waits instead
    "queue.buffering.max.messages": "1000000",
}
_SCHEMA_TYPES = {
    TypeKind.BOOLEAN: "boolean",
    TypeKind.SMALLINT: "int16",
    TypeKind.INT: "int32",
    TypeKind.BIGINT: "int64",
    TypeKind.REAL: "float",
    TypeKind.DOUBLE: "double",
    TypeKind.NUMERIC: "string",
    TypeKind.DATE: "int32",
    TypeKind.VARCHAR: "string",
    TypeKind.TIME: "int64",
    TypeKind.TIMESTAMP: "int64",
    TypeKind.TIMESTAMPTZ: "string",
    TypeKind.INTERVAL: "string",
    TypeKind.LIST: "array",
    TypeKind.BYTEA: "bytes",
    TypeKind.JSONB: "string",
}


class KafkaSinkWriter(BaseSinkWriter):
    def __init__(self, spec: SinkSpec) -> None:
        super().__init__(spec)
        self.producer: Any = None
        self._unsent: list[tuple[bytes | str | None, bytes | str | None]] = []
        self._lock = threading.Lock()  # _unsent is appended to from delivery callbacks
        self._fatal: str | None = None
        self._kafka_error: str | None = None  # the last broker/delivery error librdkafka reported
        self.topic, self.conf = self._config()
        fo = spec.format_options
        tz_mode = fo.get("timestamptz.handling.mode", spec.options.get("timestamptz.handling.mode"))
        jb_mode = fo.get("jsonb.handling.mode", spec.options.get("jsonb.handling.mode"))
        self.value_enc = JsonRowEncoder(
            spec.fields, timestamptz_mode=tz_mode or "utc_string", jsonb_mode=jb_mode or "string"
        )
        self.key_enc = (
            JsonRowEncoder(
                spec.fields,
                spec.pk,
                timestamptz_mode=tz_mode or "utc_string",
                jsonb_mode=jb_mode or "string",
            )
            if spec.pk
            else None
        )
        self.schemas = fo.get("schemas.enable", "true").lower() != "false"
        # how long one pre-commit waits for acks before the checkpoint is retried later
        self.flush_timeout = int(spec.options.get("flush_timeout_ms", "5000")) / 1000
        st = spec.status.extra
        for k in ("messages_queued", "messages_delivered", "delivery_errors", "broker_errors"):
            st.setdefault(k, 0)

    # -- configuration ----------------------------------------------------------------------
    def _config(self) -> tuple[str, dict[str, Any]]:
        spec, opts = self.spec, self.spec.options
        topic = opts.get("topic")
        if not topic:
            raise InvalidParameterValue(
                "topic not specified for kafka sink", hint="Add topic = '<name>' to WITH."
            )
        bootstrap = next((opts[k] for k in _BOOTSTRAP if opts.get(k)), None)
        if not bootstrap:
            raise InvalidParameterValue(
                "properties.bootstrap.server not specified for kafka sink",
                hint="Add properties.bootstrap.server = 'host:port' to WITH.",
            )
        if spec.encode not in (None, "JSON"):
            raise not_supported(f"ENCODE {spec.encode} for kafka sinks", hint="Use ENCODE JSON.")
        if spec.key_encode not in (None, "JSON"):
            raise not_supported(f"KEY ENCODE {spec.key_encode} for kafka sinks")
        if spec.sink_type in (UPSERT, DEBEZIUM) and not spec.pk:
            kind = "upsert" if spec.sink_type == UPSERT else "debezium"
            raise InvalidParameterValue(
                f"primary key not defined for {kind} kafka sink (please define in "
                "`primary_key` field)"
            )
        conf: dict[str, Any] = dict(_DEFAULTS)
        for k, v in opts.items():
            if k.startswith("properties.") and k not in _BOOTSTRAP and k not in _RW_ONLY:
                conf[k[len("properties.") :]] = v
        conf["bootstrap.servers"] = bootstrap
        return topic, conf

    def _new_producer(self) -> Any:
        from confluent_kafka import KafkaException, Producer

        conf = dict(self.conf)
        conf["error_cb"] = self._on_error
        conf["on_delivery"] = self._on_delivery
        conf["delivery.report.only.error"] = True
        conf.update(client_logging())  # librdkafka's lines: to logging, rate-limited
        try:
            return Producer(conf)
        except (KafkaException, ValueError, TypeError) as e:
            raise InvalidParameterValue(f"invalid kafka producer property: {e}") from None

    # -- callbacks (librdkafka threads call these from poll/flush) -------------------------
    def _on_error(self, err: Any) -> None:
        st = self.spec.status
        st.extra["broker_errors"] = st.extra.get("broker_errors", 0) + 1
        st.last_error = self._kafka_error = f"kafka: {err.str()}"
        if err.fatal():
            self._fatal = err.str()

    def _on_delivery(self, err: Any, msg: Any) -> None:
        if err is None:
            return
        st = self.spec.status
        st.extra["delivery_errors"] = st.extra.get("delivery_errors", 0) + 1
        st.last_error = self._kafka_error = f"kafka delivery: {err.str()}"
        with self._lock:
            self._unsent.append((msg.key(), msg.value()))

    # -- lifecycle ----------------------------------------------------------------------------
    def validate(self) -> None:
        p = self._new_producer()
        timeout = 10.0
        setup = self.conf.get("socket.connection.setup.timeout.ms")
        if setup is not None and str(setup).isdigit():
            timeout = min(timeout, int(setup) / 1000 + 1)
        try:
            md = p.list_topics(self.topic, timeout=timeout)
        except Exception as e:
            raise ConnectorError(
                f"could not reach kafka at {self.conf['bootstrap.servers']}: {e}",
                hint="Check properties.bootstrap.server and that the broker is running.",
            ) from None
        t = md.topics.get(self.topic)
        if t is None or t.error is not None or not t.partitions:
            self._create_topic()

    def _create_topic(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin_conf = {
            k: v
            for k, v in self.conf.items()
            if k == "bootstrap.servers" or k.startswith(("security.", "sasl.", "ssl."))
        }
        admin = AdminClient({**admin_conf, **client_logging()})
        try:
            admin.create_topics([NewTopic(self.topic, num_partitions=1)])[self.topic].result(10)
        except Exception as e:
            if "already exists" not in str(e).lower() and "TOPIC_ALREADY_EXISTS" not in str(e):
                raise ConnectorError(f"could not create kafka topic {self.topic}: {e}") from None

    def open(self) -> None:
        self.producer = self._new_producer()

    def close(self) -> None:
        if self.producer is not None:
            self.producer.flush(2)
            self.producer = None

    # -- encoding -------------------------------------------------------------------------------
    def encode(self, chunk: StreamChunk) -> tuple[list[Any], list[Any]]:
        """(keys, values) of the messages for one chunk (None = no key / tombstone)."""
        kind = self.spec.sink_type
        batch = chunk.data
        values = self.value_enc.encode(batch)
        keys = self.key_enc.encode(batch) if self.key_enc is not None else None
        n = len(chunk)
        if kind in (APPEND_ONLY, FORCE_APPEND_ONLY):
            return (keys.to_list() if keys is not None else [None] * n), values.to_list()
        ops = chunk.ops.to_numpy(zero_copy_only=False)
        assert keys is not None
        if kind == UPSERT:
            keep = ops != Op.UPDATE_DELETE
            vals = pl.Series(values).set(pl.Series(ops == Op.DELETE), None)
            return keys.filter(keep).to_list(), vals.filter(keep).to_list()
        return self._debezium(ops, keys, values)

    def _debezium(
        self, ops: np.ndarray, keys: pl.Series, rows: pl.Series
    ) -> tuple[list[Any], list[Any]]:
        ts = int(time.time() * 1000)
        source = orjson.dumps({"db": "dev", "table": self.spec.name, "ts_ms": ts}).decode()
        df = pl.DataFrame({"op": ops, "row": rows, "key": keys}).with_columns(
            prev=pl.col("row").shift(1)
        )
        op = pl.col("op")
        before = (
            pl.when(op == Op.DELETE)
            .then(pl.col("row"))
            .when(op == Op.UPDATE_INSERT)
            .then(pl.col("prev"))
            .otherwise(pl.lit("null"))
        )
        after = pl.when(op == Op.DELETE).then(pl.lit("null")).otherwise(pl.col("row"))
        code = (
            pl.when(op == Op.DELETE)
            .then(pl.lit('"d"'))
            .when(op == Op.UPDATE_INSERT)
            .then(pl.lit('"u"'))
            .otherwise(pl.lit('"c"'))
        )
        head = '{"schema":' + self._debezium_schema() + ',"payload":' if self.schemas else ""
        tail = "}" if self.schemas else ""
        payload = pl.concat_str(
            [
                pl.lit(head + '{"before":'),
                before,
                pl.lit(',"after":'),
                after,
                pl.lit(',"op":'),
                code,
                pl.lit(f',"ts_ms":{ts},"source":{source}}}' + tail),
            ]
        )
        out = df.filter(op != Op.UPDATE_DELETE).select(
            pl.col("key"), payload.alias("value"), (op == Op.DELETE).alias("del")
        )
        keys_out: list[Any] = []
        vals_out: list[Any] = []
        for k, v, d in out.iter_rows():  # deletes are followed by a tombstone
            keys_out.append(k)
            vals_out.append(v)
            if d:
                keys_out.append(k)
                vals_out.append(None)
        return keys_out, vals_out

    def _debezium_schema(self) -> str:
        cols = [
            {"type": _SCHEMA_TYPES.get(f.type.kind, "string"), "optional": True, "field": f.name}
            for f in self.spec.fields
        ]
        name = f"RisingWave.dev.{self.spec.name}"
        return orjson.dumps(
            {
                "type": "struct",
                "fields": [
                    {
                        "type": "struct",
                        "fields": cols,
                        "optional": True,
                        "field": "before",
                        "name": f"{name}.Key",
                    },
                    {
                        "type": "struct",
                        "fields": cols,
                        "optional": True,
                        "field": "after",
                        "name": f"{name}.Key",
                    },
                    {"type": "string", "optional": False, "field": "op"},
                    {"type": "int64", "optional": False, "field": "ts_ms"},
                ],
                "optional": False,
                "name": f"{name}.Envelope",
            }
        ).decode()

    # -- delivery ---------------------------------------------------------------------------
    def write(self, chunk: StreamChunk, epoch: int) -> None:
        keys, values = self.encode(chunk)
        with self._lock:
            self._unsent.extend(zip(keys, values))
        self._send()

    def _send(self) -> int:
        """Hand `_unsent` to librdkafka until its queue is full; returns how many are left."""
        if self._fatal is not None:
            self._replace_producer()
        with self._lock:
            batch, self._unsent = self._unsent, []
        produce = self.producer.produce
        topic = self.topic
        i = 0
        try:
            for i, (k, v) in enumerate(batch):  # noqa: B007 - i is the resume point
                produce(topic, v, k)
            i = len(batch)
        except BufferError:
            self.producer.poll(0)
        finally:
            if i < len(batch):
                with self._lock:
                    self._unsent[:0] = batch[i:]
            st = self.spec.status.extra
            st["messages_queued"] = st.get("messages_queued", 0) + i
        self.producer.poll(0)
        return len(self._unsent)

    def _replace_producer(self) -> None:
        log.warning(
            "kafka sink %s: fatal producer error (%s); new producer", self.spec.name, self._fatal
        )
        old = self.producer
        self._fatal = None
        if old is not None:
            try:
                old.purge()  # undelivered messages come back through _on_delivery
                old.flush(0)
            except Exception as e:  # the old producer is gone either way
                log.warning("kafka sink %s: purge failed: %s", self.spec.name, e)
        self.producer = self._new_producer()

    def pre_commit(self, epoch: int) -> bytes | None:
        retrying = self.spec.status.state == "retrying"
        wait = min(1.0, self.flush_timeout) if retrying else self.flush_timeout
        deadline = time.monotonic() + wait
        while True:
            left = self._send()
            in_flight = self.producer.flush(max(0.0, min(1.0, deadline - time.monotonic())))
            with self._lock:
                left = len(self._unsent)
            if not left and not in_flight:
                break
            if time.monotonic() >= deadline:
                raise ConnectorError(
                    f"kafka sink {self.spec.name}: {left + in_flight} messages not yet "
                    f"delivered to {self.conf['bootstrap.servers']}"
                    + (f" ({self._kafka_error})" if self._kafka_error else "")
                )
        st = self.spec.status.extra
        st["messages_delivered"] = st.get("messages_queued", 0) - st.get("delivery_errors", 0)
        return None
