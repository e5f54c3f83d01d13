"""The sink contract every writer is built on: `SinkSpec`, `SinkWriter`, `BaseSinkWriter`.

Why a module of its own: the built-in writers (`engine.stream.sink_into_table`,
`engine.stream.subscription`) and connectors' writers subclass `BaseSinkWriter`, while
`engine.stream.sink` (the flow) imports the built-in writers to register them; the
contract below is what both sides share, so neither imports the other's module back.
The call order of the hooks is documented in `engine.stream.sink`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.chunk import StreamChunk
from engine.types import Field

APPEND_ONLY = "append-only"
FORCE_APPEND_ONLY = "force-append-only"
UPSERT = "upsert"
DEBEZIUM = "debezium"


@dataclass
class SinkStatus:
    """Live counters of one sink (read without the runtime lock: plain attribute reads)."""

    state: str = "running"  # running | retrying | stopped
    rows: int = 0  # rows handed to the writer
    epochs: int = 0  # epochs with a write
    last_write_at: float | None = None
    last_flush_at: float | None = None  # last successful pre_commit
    last_commit_epoch: int | None = None  # last checkpoint committed with this sink
    last_commit_at: float | None = None
    errors: int = 0
    last_error: str | None = None
    retries: int = 0  # framework retries plus connector-reported (broker) retries
    extra: dict[str, Any] = field(default_factory=dict)  # connector-specific figures

    def error(self, e: BaseException) -> None:
        self.errors += 1
        self.last_error = f"{type(e).__name__}: {e}"


@dataclass
class SinkSpec:
    """Everything a writer needs, rebuilt from the catalog entry at restart."""

    sink_id: int
    name: str
    connector: str
    fields: list[Field]  # visible output columns, in order
    pk: list[int]  # indices into `fields` (upsert/debezium key; may be empty)
    sink_type: str  # APPEND_ONLY | FORCE_APPEND_ONLY | UPSERT | DEBEZIUM
    options: dict[str, str]  # WITH options, secrets resolved, lower-case keys
    format: str | None = None  # PLAIN | UPSERT | DEBEZIUM (None: legacy `type = ...`)
    encode: str | None = None  # JSON | ...
    format_options: dict[str, str] = field(default_factory=dict)
    key_encode: str | None = None
    data_dir: str | None = None  # a directory the writer may use for its own files
    into: int | None = None  # target relation id of `CREATE SINK ... INTO t`
    into_columns: list[str] = field(default_factory=list)  # `INTO t (a, b)`
    runtime: Any = None  # the engine's Runtime (built-in writers that feed tables use it)
    # built-in writers' own settings from the catalog entry (a subscription's log table id
    # and retention), not user options
    writer_options: dict[str, Any] = field(default_factory=dict)
    status: SinkStatus = field(default_factory=SinkStatus)


class SinkWriter(Protocol):
    """See the module docstring for when each method is called."""

    def validate(self) -> None: ...

    def open(self) -> None: ...

    def recover(self, last_checkpoint_epoch: int, state: bytes | None) -> None: ...

    def write(self, chunk: StreamChunk, epoch: int) -> None: ...

    def pre_commit(self, epoch: int) -> bytes | None: ...

    def post_commit(self, epoch: int) -> None: ...

    def close(self) -> None: ...


class BaseSinkWriter:
    """Convenience base: every hook a no-op. Connectors override what they need."""

    def __init__(self, spec: SinkSpec) -> None:
        self.spec = spec

    def validate(self) -> None:
        return None

    def open(self) -> None:
        return None

    def recover(self, last_checkpoint_epoch: int, state: bytes | None) -> None:
        return None

    def write(self, chunk: StreamChunk, epoch: int) -> None:
        return None

    def pre_commit(self, epoch: int) -> bytes | None:
        return None

    def post_commit(self, epoch: int) -> None:
        return None

    def close(self) -> None:
        return None
