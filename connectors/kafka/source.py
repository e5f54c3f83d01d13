"""`KafkaSourceConnector`: the Kafka implementation of `engine.stream.source.SourceConnector`.

- `columns`: INCLUDE clauses -> fields, plus the hidden message columns every Kafka
  source/table has: `_rw_kafka_partition INT`, `_rw_kafka_offset BIGINT`,
  `_rw_kafka_timestamp TIMESTAMPTZ` (RisingWave shows partition/offset as VARCHAR; Swell
  keeps them numeric so offset bounds compare as numbers). `INCLUDE partition|offset|
  timestamp` without AS makes the hidden column visible.
- `check`: options parse (connector.kafka.config), formats allowed: PLAIN JSON, PLAIN
  BYTES (exactly one BYTEA column), UPSERT JSON (needs INCLUDE KEY AS k, PRIMARY KEY (k)).
  Then the brokers are asked for the topic's metadata (`rdlog.probe`): an unreachable
  broker refuses the statement, as RisingWave does and as Kafka sinks do; a topic that
  does not exist yet is accepted, so a source can be declared before its topic.
- `open_reader`: a `KafkaReader` (its own poll thread).
- `read_now`: one bounded pass over the topic (ad-hoc SELECT, backfill of a new view).

End of a partition: Tansu's high watermark is wrong (it reports about the last batch's
base offset), so a bounded read never trusts watermarks: it consumes with
`enable.partition.eof` and a partition ends at its first EOF event (which librdkafka raises
from the fetch position, correct on Tansu and Kafka) or, for backfill, at the exact
offset it must stop at. Messages produced after a partition's EOF are not read.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pyarrow as pa
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    TopicPartition,
)

from connectors.kafka.config import KafkaOptions
from connectors.kafka.decode import HIDDEN, OFFSET_COL, PARTITION_COL, TS_COL, Decoder
from connectors.kafka.rdlog import probe
from connectors.kafka.reader import KafkaReader
from engine.catalog import Relation
from engine.errors import ConnectorError, InvalidParameterValue, not_supported
from engine.expr import parse_data_type
from engine.stream.source import SeekBounds
from engine.stream.source_status import SourceStatus
from engine.types import BIGINT, BYTEA, INT, JSONB, TIMESTAMPTZ, Field, TypeKind

_DEFAULT_NAMES = {
    "key": "_rw_kafka_key",
    "partition": PARTITION_COL,
    "offset": OFFSET_COL,
    "timestamp": TS_COL,
    "header": "_rw_kafka_header",
}
READ_TIMEOUT_S = 120.0


class KafkaSourceConnector:
    name = "kafka"

    def columns(
        self, includes: list[Any], fmt: str, enc: str
    ) -> tuple[list[Field], list[Field], list[str]]:
        out: list[Field] = []
        for c in includes:
            what = c.what.lower()
            if what not in _DEFAULT_NAMES:
                raise not_supported(f"INCLUDE {what} for kafka")
            name = c.alias or _DEFAULT_NAMES[what]
            if what == "header" and c.inner and not c.alias:
                name = f"_rw_kafka_header_{c.inner}"
            t = None
            if c.type_sql:
                import sqlglot

                t = parse_data_type(sqlglot.parse_one(f"CAST(x AS {c.type_sql})").args["to"])
            if what == "key":
                t = t or BYTEA
                if t.kind not in (TypeKind.BYTEA, TypeKind.VARCHAR):
                    raise not_supported("INCLUDE KEY with a type other than bytea or varchar")
            elif what == "partition":
                t = INT
            elif what == "offset":
                t = BIGINT
            elif what == "timestamp":
                t = TIMESTAMPTZ
            elif what == "header":
                t = (t or BYTEA) if c.inner else JSONB
                if c.inner and t.kind not in (TypeKind.BYTEA, TypeKind.VARCHAR):
                    raise not_supported("INCLUDE header with a type other than bytea or varchar")
            out.append(Field(name, t))
        hidden = [
            Field(PARTITION_COL, INT, hidden=True),
            Field(OFFSET_COL, BIGINT, hidden=True),
            Field(TS_COL, TIMESTAMPTZ, hidden=True),
        ]
        return out, hidden, [PARTITION_COL, OFFSET_COL]

    def check(self, rel: Relation) -> None:
        opts = KafkaOptions.parse(rel.options)
        meta = rel.extra["source"]
        fmt, enc = meta["format"], meta["encode"]
        if (fmt, enc) not in (("PLAIN", "JSON"), ("PLAIN", "BYTES"), ("UPSERT", "JSON")):
            raise not_supported(
                f"FORMAT {fmt} ENCODE {enc} for kafka sources",
                hint="Use FORMAT PLAIN ENCODE JSON, FORMAT PLAIN ENCODE BYTES or FORMAT UPSERT "
                "ENCODE JSON.",
            )
        special = {m["column"] for m in meta["include"]} | set(HIDDEN)
        values = [f for f in rel.fields if f.name not in special]
        if enc == "BYTES" and (len(values) != 1 or values[0].type.kind is not TypeKind.BYTEA):
            raise InvalidParameterValue("ENCODE BYTES needs exactly one column of type bytea")
        if fmt == "UPSERT":
            keys = [m["column"] for m in meta["include"] if m["what"] == "key"]
            pk = [rel.fields[i].name for i in rel.pk]
            if not keys or pk != keys:
                raise InvalidParameterValue(
                    "FORMAT UPSERT needs INCLUDE KEY AS k and PRIMARY KEY (k)",
                    hint="The message key identifies the row; a null value deletes it.",
                )
        probe(opts.consumer_config("probe"), opts.topic)

    def open_reader(
        self, rel: Relation, position: dict[str, Any] | None, status: SourceStatus
    ) -> KafkaReader:
        return KafkaReader(rel, position, status)

    # -- bounded read ----------------------------------------------------------------------
    def read_now(
        self, rel: Relation, upto: dict[str, Any] | None, bounds: SeekBounds | None
    ) -> pa.Table:
        try:
            return self._read_now(rel, upto, bounds)
        except KafkaException as e:
            raise ConnectorError(f"kafka source {rel.name}: {e}") from e

    def _read_now(
        self, rel: Relation, upto: dict[str, Any] | None, bounds: SeekBounds | None
    ) -> pa.Table:
        opts = KafkaOptions.parse(rel.options)
        dec = Decoder(rel, bounds.columns if bounds is not None else None)
        c = Consumer(opts.consumer_config(f"{rel.name}-read-{uuid.uuid4().hex[:8]}"))
        try:
            plan = self._plan_read(c, opts, upto, bounds)
            batches = []
            todo = {p for p, (s, e) in plan.items() if e is None or s == OFFSET_BEGINNING or s < e}
            if not todo:
                return dec.schema.empty_table()
            c.assign([TopicPartition(opts.topic, p, plan[p][0]) for p in sorted(todo)])
            deadline = time.monotonic() + READ_TIMEOUT_S
            while todo:
                if time.monotonic() > deadline:
                    raise ConnectorError(
                        f"reading topic {opts.topic} timed out after {READ_TIMEOUT_S:.0f} s"
                    )
                msgs = c.consume(20000, 0.2)
                good = []
                for m in msgs:
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            todo.discard(m.partition())
                        elif err.fatal():
                            raise ConnectorError(f"kafka: {err}")
                        continue
                    p = m.partition()
                    end = plan[p][1]
                    if p not in todo or (end is not None and m.offset() >= end):
                        todo.discard(p)
                        continue
                    good.append(m)
                    if end is not None and m.offset() >= end - 1:
                        todo.discard(p)
                if good:
                    b, deletes, _errors = dec.decode(good)
                    if deletes is not None and deletes.any():
                        b = b.filter(pa.array(~deletes))
                    if bounds is not None and bounds.row_filter is not None:
                        b = bounds.row_filter(b)
                    batches.append(b)
            return pa.Table.from_batches(batches, schema=dec.schema)
        finally:
            c.close()

    def _plan_read(
        self, c: Any, opts: KafkaOptions, upto: dict[str, Any] | None, b: SeekBounds | None
    ) -> dict[int, tuple[int, int | None]]:
        """partition -> (start offset or OFFSET_BEGINNING, end offset exclusive or None)."""
        if upto is not None:
            ends = {int(p): int(o) for p, o in upto.get("offsets", {}).items()}
            starts = {int(p): int(o) for p, o in upto.get("start", {}).items()}
            return {p: (starts.get(p, OFFSET_BEGINNING), e) for p, e in ends.items()}
        md = c.list_topics(opts.topic, timeout=10)
        t = md.topics.get(opts.topic)
        if t is None or t.error is not None:
            raise ConnectorError(
                f"kafka topic {opts.topic} is not available",
                detail=str(t.error) if t is not None else None,
            )
        parts = sorted(t.partitions)
        if b is not None and b.partitions is not None:
            parts = [p for p in parts if p in b.partitions]
        plan: dict[int, tuple[int, int | None]] = {p: (OFFSET_BEGINNING, None) for p in parts}
        if b is None:
            return plan
        if b.lo_ts is not None and parts:
            found = c.offsets_for_times(
                [TopicPartition(opts.topic, p, b.lo_ts) for p in parts], timeout=10
            )
            for tp in found:
                if tp.offset >= 0:
                    plan[tp.partition] = (tp.offset, None)
        if b.lo_offset is not None:
            for p, (s, e) in plan.items():
                start = max(s, b.lo_offset) if s >= 0 else b.lo_offset
                # a start past the partition's end never sees an EOF (Tansu) or is reset to
                # the beginning (Kafka): start at the end instead. Tansu's high watermark
                # can be too low; that only reads more, the filter still applies.
                _lo, hi = c.get_watermark_offsets(TopicPartition(opts.topic, p), timeout=10)
                if hi is not None and 0 <= hi < start:
                    start = hi
                plan[p] = (start, e)
        if b.hi_offset is not None:
            for p, (s, _e) in plan.items():
                plan[p] = (s, b.hi_offset + 1)
        return plan
