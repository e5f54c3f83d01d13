"""Sinks: a streaming flow whose output delta goes to a connector's `SinkWriter`.

A sink is planned like a materialized view (`CREATE SINK s FROM obj` is `AS SELECT * FROM
obj`) and its operators keep their state in state tables like a view's, but the plan root
has no MaterializeOp: each epoch's output delta, projected to the visible columns and
shaped for the sink type (below), is handed to the writer.

Writer contract (`SinkWriter`), in call order:

1. `factory(spec: SinkSpec) -> SinkWriter` (registered with
   `engine.connector_registry.register_sink(name, factory)`): keep the spec; no I/O.
2. `validate()` at CREATE SINK only, under the DDL: check options and reach the external
   system; raise an `engine.errors.EngineError` to refuse the statement synchronously.
3. `open()` at CREATE (after validate) and at every restart: create clients. Must not fail
   because the external system is down (retries belong to write/pre_commit).
4. `recover(last_checkpoint_epoch, state)` at restart only, after open: `state` is the bytes
   the writer's last `pre_commit` returned in the last committed checkpoint (None if none).
   Epochs after `last_checkpoint_epoch` are re-computed from the WAL and written again.
5. per epoch, under the runtime lock: `write(chunk, epoch)` with the epoch's rows (at most
   once per epoch; skipped when nothing changed), then `pre_commit(epoch) -> bytes | None`
   BEFORE the RocksDB checkpoint commit: make everything written so far durable downstream
   (Kafka: flush and wait for acks) or staged (Iceberg: data files); the returned bytes are
   stored in the same checkpoint. Then the checkpoint commits; then `post_commit(epoch)`
   (Iceberg: commit the staged snapshot). pre_commit runs on every checkpoint, even ones
   without a write.
6. `close()` on DROP SINK and shutdown.

Errors: an exception from `write` keeps the chunk in the flow's backlog; an exception from
`write`/`pre_commit` is recorded in the status and retried with capped exponential
backoff until it succeeds, holding back the checkpoint (so nothing is lost: at-least-once),
unless the sink is being dropped or the runtime stops (timer barriers try once per tick
and keep the epoch uncommitted meanwhile, see `Runtime.barrier`; `pre_commit` may thus
be called again for the same epoch). `post_commit` errors are recorded
and retried on the next checkpoint by the writer itself (it is told the epoch again).

Sink types (`SinkSpec.sink_type`): `append-only` (the input never retracts), `force-append-
only` (DELETE and U- rows dropped, U+ becomes INSERT), `upsert` and `debezium` (all four
ops reach the writer; `pk` names the key columns). Chunks reaching the writer carry only
the visible columns, in `spec.fields` order.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from engine.catalog import Catalog, Relation
from engine.chunk import Op, StreamChunk
from engine.connector_registry import register_sink, sink_connector
from engine.errors import ConnectorError, UndefinedObject
from engine.expr import EvalContext
from engine.plan.stream_plan import StreamPlan
from engine.state.table import StateTable
from engine.stream.build import build_plan
from engine.stream.graph import ViewFlow

# the writer contract (engine.stream.sink_base), re-exported: writers import it from here
from engine.stream.sink_base import APPEND_ONLY as APPEND_ONLY
from engine.stream.sink_base import DEBEZIUM as DEBEZIUM
from engine.stream.sink_base import FORCE_APPEND_ONLY as FORCE_APPEND_ONLY
from engine.stream.sink_base import UPSERT as UPSERT
from engine.stream.sink_base import BaseSinkWriter as BaseSinkWriter
from engine.stream.sink_base import SinkSpec as SinkSpec
from engine.stream.sink_base import SinkStatus as SinkStatus
from engine.stream.sink_base import SinkWriter as SinkWriter

log = logging.getLogger("swell.sink")


class BlackholeSinkWriter(BaseSinkWriter):
    """`connector = 'blackhole'`: accepts and discards everything (RisingWave has it too)."""

    def write(self, chunk: StreamChunk, epoch: int) -> None:
        self.spec.status.extra["discarded"] = self.spec.status.extra.get("discarded", 0) + len(
            chunk
        )


register_sink("blackhole", BlackholeSinkWriter)


# -- shaping a delta for the sink type -------------------------------------------------------
def shape_for_sink(chunk: StreamChunk, visible: list[int], sink_type: str) -> StreamChunk | None:
    """Project to the visible columns; for force-append-only drop deletes, U+ -> INSERT."""
    data = chunk.data
    if len(visible) != data.num_columns:
        data = data.select(visible)
    ops = chunk.ops
    if sink_type == FORCE_APPEND_ONLY:
        o = ops.to_numpy(zero_copy_only=False)
        keep = (o == Op.INSERT) | (o == Op.UPDATE_INSERT)
        if not keep.all():
            data = data.filter(pa.array(keep))
        ops = pa.array(np.full(data.num_rows, Op.INSERT, dtype=np.int8))
    if data.num_rows == 0:
        return None
    return StreamChunk(ops, data)


# -- the flow ----------------------------------------------------------------------------
class SinkNotReady(ConnectorError):
    """A sink could not write or flush this epoch; its checkpoint must wait."""


_BACKOFF_START = 0.1
_BACKOFF_MAX = 5.0


@dataclass
class SinkFlow:
    """One sink in the runtime: operator nodes (no MaterializeOp) + its writer."""

    spec: SinkSpec
    graph: ViewFlow  # the operators (stepped like a view's, without a MaterializeOp)
    writer: SinkWriter
    visible: list[int]  # output columns of the last node that reach the writer
    backlog: list[tuple[StreamChunk, int]] = field(default_factory=list)
    cancelled: threading.Event = field(default_factory=threading.Event)
    stopping: threading.Event | None = None  # the runtime's stop flag
    needs_open: tuple[int, bytes | None] | None = None  # recover() arguments, until it worked

    @property
    def status(self) -> SinkStatus:
        return self.spec.status

    @property
    def tables(self) -> list[StateTable]:
        """The operators' state tables plus the writer's own (a subscription's log), all
        committed with each checkpoint and deleted when the sink is dropped."""
        own: list[StateTable] = getattr(self.writer, "state_tables", [])
        return [*self.graph.tables, *own] if own else self.graph.tables

    def upstream(self) -> set[int]:
        return self.graph.upstream()

    def step(
        self,
        deltas: dict[int, StreamChunk | None],
        epoch: int,
        *,
        force: bool = False,
        emit: bool = True,
        watermarks: dict[int, dict[int, int]] | None = None,
    ) -> None:
        """Step the operators; queue the shaped output for the writer and write it."""
        out = self.graph.step(deltas, force=force, watermarks=watermarks)
        if out is not None and len(out) > 0:
            out = shape_for_sink(out, self.visible, self.spec.sink_type)
        else:
            out = None
        if out is not None and emit:
            self.backlog.append((out, epoch))
        self._drain_backlog(retry=False)

    def _drain_backlog(self, *, retry: bool) -> None:
        if self.needs_open is not None:
            return
        while self.backlog:
            chunk, epoch = self.backlog[0]
            ok = self._call(lambda c=chunk, e=epoch: self.writer.write(c, e), retry=retry)
            if not ok:
                return
            self.backlog.pop(0)
            st = self.status
            st.rows += len(chunk)
            st.epochs += 1
            st.last_write_at = time.time()

    def wants_checkpoint(self) -> bool:
        """True while the writer holds data that later checkpoints commit (Iceberg counts
        checkpoints, so idle barriers must still checkpoint until it has committed)."""
        fn = getattr(self.writer, "wants_checkpoint", None)
        return bool(fn()) if fn is not None else False

    def pre_commit(self, epoch: int, *, block: bool = True) -> bytes | None:
        """Deliver the backlog and flush the writer.

        `block`: retry with backoff until it works. Otherwise one attempt. Raises
        `SinkNotReady` if it did not work (or the sink gave up: dropped, shutting down);
        the checkpoint must then not commit (the runtime retries it, or the WAL replays
        the epoch after a restart).
        """
        name = self.spec.name
        if self.needs_open is not None and not self._call(self._reopen, retry=block):
            raise SinkNotReady(f'sink "{name}" could not be opened: {self.status.last_error}')
        self._drain_backlog(retry=block)
        if self.backlog:
            raise SinkNotReady(
                f'sink "{name}" could not deliver epoch {epoch}: {self.status.last_error}'
            )
        result: list[bytes | None] = [None]

        def flush() -> None:
            result[0] = self.writer.pre_commit(epoch)

        if not self._call(flush, retry=block):
            raise SinkNotReady(
                f'sink "{name}" could not flush epoch {epoch}: {self.status.last_error}'
            )
        self.status.last_flush_at = time.time()
        return result[0]

    def reopen(self, last_checkpoint_epoch: int, state: bytes | None) -> None:
        """At restart: open the writer and let it recover; on failure retry at the next write."""
        self.needs_open = (last_checkpoint_epoch, state)
        self._call(self._reopen, retry=False)

    def _reopen(self) -> None:
        assert self.needs_open is not None
        self.writer.open()
        self.writer.recover(*self.needs_open)
        self.needs_open = None

    def post_commit(self, epoch: int) -> None:
        st = self.status
        st.last_commit_epoch = epoch
        st.last_commit_at = time.time()
        try:
            self.writer.post_commit(epoch)
        except Exception as e:  # the writer retries at its next post_commit
            st.error(e)
            log.warning("sink %s: post-commit of epoch %s failed: %s", self.spec.name, epoch, e)

    def _call(self, fn: Any, *, retry: bool) -> bool:
        delay = _BACKOFF_START
        while True:
            try:
                fn()
            except Exception as e:
                st = self.status
                st.error(e)
                if not retry:
                    st.state = "retrying"
                    st.retries += 1
                    return False
                if self.cancelled.is_set() or (
                    self.stopping is not None and self.stopping.is_set()
                ):
                    log.error("sink %s: giving up after error: %s", self.spec.name, e)
                    return False
                st.state = "retrying"
                st.retries += 1
                log.warning("sink %s: %s; retrying in %.1fs", self.spec.name, e, delay)
                if self.cancelled.wait(delay):
                    return False
                delay = min(delay * 2, _BACKOFF_MAX)
                continue
            if self.status.state == "retrying":
                self.status.state = "running"
            return True

    def close(self) -> None:
        self.cancelled.set()
        self.status.state = "stopped"
        try:
            self.writer.close()
        except Exception as e:
            log.warning("sink %s: close failed: %s", self.spec.name, e)


# -- construction from the catalog -------------------------------------------------------------
def resolve_options(
    options: dict[str, str], secret_refs: dict[str, str], catalog: Catalog, database: str
) -> dict[str, str]:
    """WITH options with `k = secret s` references replaced by the values of database
    `database`'s secrets."""
    out = dict(options)
    secrets = catalog.objects_of(database).secrets
    for k, name in secret_refs.items():
        sec = secrets.get(name)
        if sec is None:
            raise UndefinedObject(f'secret "{name}" does not exist')
        out[k] = sec.value
    return out


def spec_from_relation(rel: Relation, catalog: Catalog, data_dir: str | None) -> SinkSpec:
    """The writer's spec from a sink's catalog entry (`rel.extra["sink"]`, see handlers.sink)."""
    d = rel.extra["sink"]
    visible = [f for f in rel.fields if not f.hidden]
    names = [f.name for f in visible]
    wdir = None
    if data_dir is not None:
        import os

        wdir = os.path.join(data_dir, "sinks", str(rel.id))
    return SinkSpec(
        sink_id=rel.id,
        name=rel.name,
        connector=d["connector"],
        fields=visible,
        pk=[names.index(n) for n in d.get("pk", [])],
        sink_type=d["sink_type"],
        options=resolve_options(rel.options, d.get("secret_options", {}), catalog, rel.database),
        format=d.get("format"),
        encode=d.get("encode"),
        format_options=dict(d.get("format_options", {})),
        key_encode=d.get("key_encode"),
        data_dir=wdir,
        into=d.get("into"),
        into_columns=list(d.get("into_columns", [])),
        writer_options=dict(d.get("writer_options", {})),
    )


def build_sink_flow(
    rel: Relation,
    plan: StreamPlan,
    store: Any | None,
    ctx: EvalContext,
    catalog: Catalog,
    data_dir: str | None,
    runtime: Any = None,
    status: SinkStatus | None = None,
    build: Callable[[StreamPlan, Any | None], tuple[list[Any], list[Any]]] | None = None,
) -> SinkFlow:
    """Operators for the sink's stream plan (state loaded from `store` on recovery) plus
    its connector's writer (not yet validated/opened); `status`: the counters of the flow
    this one replaces (a rollback keeps them); `build(plan, store)`: how the operators are
    built when not by `build_plan` (a parallel job, `engine.stream.parallel.flow`)."""
    spec = spec_from_relation(rel, catalog, data_dir)
    spec.runtime = runtime
    if status is not None:
        status.state = "running"
        spec.status = status
    factory = sink_connector(spec.connector)
    disk = getattr(runtime, "disk_tables", None)
    if build is not None:
        nodes, tables = build(plan, store)
    else:
        nodes, tables = build_plan(plan, rel.name, store, ctx, disk)
    visible = [i for i, f in enumerate(plan.nodes[-1].schema) if not f.hidden]
    return SinkFlow(spec, ViewFlow(rel, nodes, tables=tables), factory(spec), visible)


import engine.stream.sink_into_table  # noqa: E402,F401  (registers the "table" writer)
import engine.stream.sink_status  # noqa: E402,F401  (registers rw_catalog.rw_sink_status)
import engine.stream.subscription  # noqa: E402,F401  (registers the "subscription" writer)
