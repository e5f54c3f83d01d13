"""Sources: relations fed by an external connector (Kafka topics), and how epochs consume them.

Two relation kinds read a connector (`WITH (connector = '...')`, anything but webhook):

- a SOURCE keeps no rows. Each epoch the views built on it get the rows read since the
  previous barrier as their input delta (inserts only), exactly like a table's delta;
- a TABLE with a connector stores what it reads: its rows go through the table's
  MaterializeOp as pending chunks (upserts and deletes for `FORMAT UPSERT`).

Engine/connector contract (connectors register an object in `engine.connector_registry`):

`SourceConnector`
  - `columns(clauses) -> (include_fields, hidden_fields, key_names)` at CREATE: the fields
    the INCLUDE clauses add (visible), the connector's hidden columns (`_rw_kafka_offset`...)
    and the hidden columns that identify a message (the stream key of a SOURCE);
  - `check(rel)`: validate options and format at CREATE (raise engine errors);
  - `open_reader(rel, position, status) -> SourceReader`: start consuming from `position`
    (the opaque JSON-able dict a reader reported, restored from a checkpoint) or from the
    startup options when it is None; the reader keeps `status` (bad messages, offsets, lag:
    engine.stream.source_status, shown in rw_catalog.rw_source_errors / rw_source_lag)
    up to date;
  - `read_now(rel, upto, bounds) -> pa.Table`: the rows of the topic as it is now (ad-hoc
    SELECT, `upto=None`) or up to an exact position (backfill of a new view); `bounds`
    are seek hints (`SeekBounds`) extracted from the query's WHERE.

`SourceReader` (runs its own poll thread; never blocks the barrier for long)
  - `take() -> (chunks, position)`: every chunk decoded since the last take, and the
    position right after them. The runtime calls it under the epoch lock at each barrier
    and commits `position` in the same checkpoint as the state the chunks produced, so
    recovery resumes exactly where the committed state ends (exactly-once into views);
  - `has_data() -> bool`, `close()`;
  - optional `committed(position)`: called after the checkpoint holding `position` is
    durable (a CDC reader confirms the LSN to the upstream only then).

Optional on the connector: `release(rel)` when a relation's position is forgotten for good
(DROP: a CDC table drops its replication slot); `default_columns(options) -> fields` for
generators that know their columns (`CREATE SOURCE s WITH (connector = 'nexmark', ...)`
without a column list); `shared_source = True` for connectors
whose SOURCE has no columns and only holds options for its tables
(`CREATE TABLE t (...) FROM src TABLE 'schema.table'`).

Lifecycle of a `SourceFlow` (one per source relation, owned by the runtime):
created with the relation (or at recovery with the checkpointed position); its reader runs
while something consumes it (a TABLE always; a SOURCE while at least one materialized view
depends on it) and is closed when the last dependent is dropped, which also forgets the
position: a view created later reads the topic again from the startup position (the new
view is backfilled with `read_now(upto=position)` while the reader runs).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from engine.catalog import Relation, RelationKind
from engine.chunk import StreamChunk
from engine.stream.source_status import SourceStatus
from engine.types import arrow_schema

log = logging.getLogger("swell.source")

SOURCE_EXTRA = "source"  # Relation.extra key: {"connector", "format", "encode", "include"}
CHECKPOINT_EXTRA = "source_offsets"


class SourceReader(Protocol):
    def take(self) -> tuple[list[StreamChunk], dict[str, Any]]: ...

    def has_data(self) -> bool: ...

    def close(self) -> None: ...


class SourceConnector(Protocol):
    def check(self, rel: Relation) -> None: ...

    def open_reader(
        self, rel: Relation, position: dict[str, Any] | None, status: SourceStatus
    ) -> SourceReader: ...

    def read_now(
        self, rel: Relation, upto: dict[str, Any] | None, bounds: SeekBounds | None
    ) -> pa.Table: ...


@dataclass
class SeekBounds:
    """Bounds on hidden message columns from a WHERE clause, used to seek instead of scan.

    `lo_*` are inclusive lower bounds, `hi_*` inclusive upper bounds; None = unbounded.
    Timestamps are epoch milliseconds. The filter itself still runs after decoding, so a
    connector may read more than the bounds but never less.
    """

    lo_ts: int | None = None
    hi_ts: int | None = None
    lo_offset: int | None = None
    hi_offset: int | None = None
    partitions: set[int] | None = None
    # applied by the connector to each decoded batch (rows the query's filter would drop)
    row_filter: Callable[[pa.RecordBatch], pa.RecordBatch] | None = None
    # field indexes the query reads (None = all); connectors may leave the others NULL
    columns: set[int] | None = None


def is_connector_relation(rel: Relation) -> bool:
    return SOURCE_EXTRA in rel.extra


def connector_for(rel: Relation) -> SourceConnector:
    from engine.connector_registry import source_connector

    c: SourceConnector = source_connector(rel.extra[SOURCE_EXTRA]["connector"])
    return c


@dataclass
class SourceFlow:
    """One connector-fed relation in the runtime: its reader and committed position."""

    rel: Relation
    position: dict[str, Any] | None = None
    reader: SourceReader | None = None
    status: SourceStatus = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.status is None:
            self.status = SourceStatus(self.rel.name, self.rel.options.get("topic", ""))

    @property
    def running(self) -> bool:
        return self.reader is not None

    def ensure_running(self) -> None:
        if self.reader is None:
            self.status.set_state("starting")  # the reader moves it on once it hears back
            self.reader = connector_for(self.rel).open_reader(self.rel, self.position, self.status)
            log.info("source %s: reader started position=%s", self.rel.name, self.position)

    def stop(self, forget: bool = False) -> None:
        if self.reader is not None:
            try:
                self.reader.close()
            finally:
                self.reader = None
                self.status.set_state("idle")
        if forget:
            self.position = None
            release = getattr(connector_for(self.rel), "release", None)
            if release is not None:  # upstream resources (a replication slot)
                release(self.rel)

    def committed(self) -> None:
        """The checkpoint holding `position` is durable: readers that acknowledge what
        they consumed upstream (a replication slot's flush LSN) may do so now."""
        hook = getattr(self.reader, "committed", None)
        if hook is not None:
            hook(self.position)

    def has_data(self) -> bool:
        return self.reader is not None and self.reader.has_data()

    def take(self) -> list[StreamChunk]:
        """The chunks read since the last barrier; advances the position to match them."""
        if self.reader is None:
            return []
        chunks, pos = self.reader.take()
        self.position = pos
        return chunks

    def backfill(self) -> pa.Table:
        """Rows a new dependent view starts from: the topic up to the current position."""
        return self.read_upto(self.backfill_point())

    def backfill_point(self) -> dict[str, Any] | None:
        """The position a new dependent view's one-shot read ends at (take it under the
        epoch lock: the deltas of later barriers start exactly there); None: nothing."""
        if self.reader is None or not self.position:
            return None
        return dict(self.position)

    def read_upto(self, point: dict[str, Any] | None) -> pa.Table:
        """The topic's rows up to `point` (a `backfill_point`). Talks to the broker, so the
        backfill calls it without the epoch lock."""
        if point is None:
            return arrow_schema(self.rel.fields).empty_table()
        return connector_for(self.rel).read_now(self.rel, point, None)


def source_delta(chunks: list[StreamChunk]) -> StreamChunk | None:
    chunks = [c for c in chunks if len(c)]
    if not chunks:
        return None
    return StreamChunk.concat(chunks)


def needs_reader(rel: Relation, dependents: list[Relation]) -> bool:
    """A TABLE always reads; a SOURCE only while a materialized view or sink reads it."""
    if rel.kind is RelationKind.TABLE:
        return True
    return any(d.kind in (RelationKind.MATERIALIZED_VIEW, RelationKind.SINK) for d in dependents)
