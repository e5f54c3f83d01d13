"""Dataflow graphs: base tables and materialized views as steppable units.

A `TableFlow` is a base table: its rows live in a `MaterializeOp` keyed by the primary
key (or the hidden `_row_id`), and DML reaches it as pending chunks that the next barrier
pushes through that operator, in statement order, so "insert on an existing key
overwrites" and update pairs come out as real changes.

A `ViewFlow` is a materialized view: a list of operator nodes in topological order whose
inputs are either upstream relations' deltas or earlier nodes' outputs; the last node is
the view's `MaterializeOp`. Its output delta is what views built on top of it consume.
"""

from __future__ import annotations

import json
import struct
import threading
from dataclasses import dataclass, field
from time import thread_time
from typing import Any, cast

import numpy as np
import pyarrow as pa

from engine.catalog import Relation
from engine.catalog.catalog import type_from_json
from engine.chunk import Op, StreamChunk, TruncateChunk
from engine.errors import EngineError
from engine.numeric import array_of
from engine.state.disk_table import DiskTables
from engine.state.table import StateTable
from engine.stream.cpu import StreamCpu
from engine.stream.operator import Operator
from engine.stream.operators.watermark import propagate
from engine.types import arrow_schema

OP_COLUMN = "__op"


@dataclass
class Node:
    op: Operator
    # ("rel", relation_id) or ("node", index into the flow's nodes)
    inputs: list[tuple[str, int]]
    # watermark transfer of this node (engine.plan.time_nodes.watermark_transfer)
    wm: list[Any] | None = None


class Allocator:
    """Hands out state tables by stable name; ids recorded in the relation's catalog entry.

    On recovery the same names map to the same ids, and each table is loaded from the store.
    """

    def __init__(
        self,
        rel: Relation,
        new_id: callable,  # type: ignore[valid-type]
        store: object | None,
        disk: DiskTables | None = None,
    ) -> None:
        self.rel = rel
        self.new_id = new_id
        self.store = store
        self.disk = disk
        self.tables: list[StateTable] = []
        self.prefix = ""

    def table(self, name: str, *, disk: bool = False, dist: bool = True) -> StateTable:
        """The relation's table `name` (a disk table with `disk` when the runtime has a
        store; keyed by one vnode: these tables have no distribution key prefix)."""
        full = f"{self.prefix}{name}"
        tid = self.rel.state_tables.get(full)
        if tid is None:
            tid = self.new_id()
            self.rel.state_tables[full] = tid
        if disk and self.disk is not None:
            dt = cast(StateTable, self.disk.table(tid, f"{self.rel.name}.{full}", 0))
            self.tables.append(dt)
            return dt
        t = StateTable(tid, f"{self.rel.name}.{full}")
        if self.store is not None:
            t.load(self.store)  # type: ignore[arg-type]
        self.tables.append(t)
        return t


@dataclass
class TableFlow:
    rel: Relation
    mat: Operator  # MaterializeOp
    pending: list[StreamChunk] = field(default_factory=list)
    tables: list[StateTable] = field(default_factory=list)
    ttl_cleaned: int | None = None  # the watermark of the last TTL cleanup (stream/ttl.py)
    rows_in: int = 0  # rows of the chunks drained so far (engine.stream.overview)
    # the chunks the running barrier took from `pending` and has not stored yet: DML
    # evaluates against stored rows + in_flight + pending (Runtime.live_rows)
    in_flight: list[StreamChunk] = field(default_factory=list)
    broken: bool = False  # a drain failed half-way: the stored rows are not to be read

    def begin_drain(self) -> None:
        """Take the queued chunks for this epoch (under the runtime's queue lock)."""
        if self.pending:
            self.in_flight = [*self.in_flight, *self.pending]
            self.pending = []

    def drain(self) -> StreamChunk | None:
        """Push the chunks taken by `begin_drain` through the MaterializeOp, in order
        (under the table's DML lock)."""
        if not self.in_flight:
            return None
        self.rows_in += sum(len(c) for c in self.in_flight)
        try:
            outs = [self._step(c) for c in merge_inserts(self.in_flight)]
        except BaseException:
            self.broken = True  # the epoch is rolled back; recovery rebuilds the flow
            raise
        self.in_flight = []
        return StreamChunk.concat([o for o in outs if o is not None])

    def _step(self, chunk: StreamChunk) -> StreamChunk | None:
        if isinstance(chunk, TruncateChunk):  # every row stored so far goes
            rows = self.mat.snapshot()  # type: ignore[attr-defined]
            return self.mat.step([StreamChunk.deletes(rows)]) if rows.num_rows else None
        return self.mat.step([chunk])


def preview_chunks(stored: pa.Table, chunks: list[StreamChunk]) -> list[StreamChunk]:
    """`chunks` as a table's DML preview steps them (`Runtime.live_rows`): a TRUNCATE
    marker becomes deletes of the `stored` rows, and the chunks before it no longer
    matter (they are truncated too)."""
    last = max((i for i, c in enumerate(chunks) if isinstance(c, TruncateChunk)), default=-1)
    if last < 0:
        return chunks
    return [StreamChunk.deletes(stored), *chunks[last + 1 :]]


def _dropped_field(tomb: str) -> pa.Field:
    name, t = json.loads(tomb[1:])
    return pa.field(name, type_from_json(t).arrow)


def _project(batch: pa.RecordBatch, proj: list[int | pa.Field]) -> pa.RecordBatch:
    """The columns a job was planned with: by position, or NULLs for a dropped one."""
    if all(isinstance(p, int) for p in proj):
        return batch.select(proj)
    n = batch.num_rows
    cols = [batch.column(p) if isinstance(p, int) else pa.nulls(n, p.type) for p in proj]
    names = [batch.schema.field(p).name if isinstance(p, int) else p.name for p in proj]
    return pa.RecordBatch.from_arrays(cols, names=names)


MERGE_MAX_ROWS = 1 << 16
"""Runs of insert-only chunks are merged up to about this many rows; a bigger chunk (a
COPY's) is stepped on its own: merging only pays for small chunks, and copying millions
of rows into one batch holds the interpreter lock for long."""


def merge_inserts(chunks: list[StreamChunk]) -> list[StreamChunk]:
    """Consecutive insert-only chunks as one chunk: a table queued thousands of small
    ones (webhook flushes, single-row INSERTs) is stepped once per run (of at most about
    `MERGE_MAX_ROWS` rows), not once per chunk. Chunks with deletes or updates stay
    separate and in order."""
    if len(chunks) < 2:
        return chunks
    out: list[StreamChunk] = []
    run: list[StreamChunk] = []
    rows = 0
    for c in chunks:
        if (
            not isinstance(c, TruncateChunk)
            and (c.ops.to_numpy(zero_copy_only=False) == Op.INSERT).all()
        ):
            if run and rows + len(c) > MERGE_MAX_ROWS:
                out.extend(_joined(run))
                run, rows = [], 0
            run.append(c)
            rows += len(c)
            continue
        out.extend(_joined(run))
        run, rows = [], 0
        out.append(c)
    out.extend(_joined(run))
    return out


def _joined(run: list[StreamChunk]) -> list[StreamChunk]:
    if len(run) < 2:
        return run
    try:
        merged = StreamChunk.concat(run)
    except (pa.ArrowInvalid, pa.ArrowTypeError):  # differing schemas: step them one by one
        return run
    return [merged] if merged is not None else []


@dataclass
class ViewFlow:
    rel: Relation
    nodes: list[Node]
    tables: list[StateTable] = field(default_factory=list)
    out_watermarks: dict[int, int] = field(default_factory=dict)
    # per node, since the flow was built: rows out and thread CPU seconds of its steps
    # (read without the lock by engine.stream.overview; plain list item updates)
    node_rows: list[int] = field(default_factory=list)
    node_cpu: list[float] = field(default_factory=list)

    # per upstream relation: the columns (by name) the stored plan was planned with, and
    # where they are in the relation now (None: the same layout). A table that gained a
    # column (ALTER TABLE ... ADD COLUMN) feeds the job only the columns it knows.
    # A name starting with NUL is a dropped column the job never used (ALTER TABLE ...
    # DROP COLUMN, engine/handlers/alter_readers.py): it reads NULLs of the stored type.
    scan_names: dict[int, list[str]] = field(default_factory=dict)
    scan_proj: dict[int, list[int | pa.Field] | None] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.node_rows = [0] * len(self.nodes)
        self.node_cpu = [0.0] * len(self.nodes)

    @property
    def mat(self) -> Operator:
        return self.nodes[-1].op

    def bind_scans(self, relations: dict[int, Relation]) -> None:
        """Recompute `scan_proj` against the relations' current columns."""
        self.scan_proj = {}
        for rid, names in self.scan_names.items():
            rel = relations.get(rid)
            if rel is None or not names:
                continue
            now = [f.name for f in rel.fields]
            if now == names:
                continue
            pos = {n: i for i, n in enumerate(now)}
            proj: list[int | pa.Field] = []
            for n in names:
                if n in pos:
                    proj.append(pos[n])
                elif n.startswith("\x00"):
                    proj.append(_dropped_field(n))
                else:  # a layout the job cannot be fed: a bug in the ALTER that made it
                    raise EngineError(f'column "{n}" of relation "{rel.name}" is gone')
            self.scan_proj[rid] = proj

    def step(
        self,
        deltas: dict[int, StreamChunk | None],
        *,
        force: bool = False,
        watermarks: dict[int, dict[int, int]] | None = None,
        cpu: StreamCpu | None = None,
    ) -> StreamChunk | None:
        """Step every node; `watermarks` (relation id -> {column: value}) flow alongside
        the chunks (see `engine.stream.operators.watermark`), the view's own output
        watermarks end up in `self.out_watermarks`; `cpu` (the runtime's accounting)
        is charged each stepped node's thread CPU time under its operator class; the
        flow's own `node_rows`/`node_cpu` count every stepped node."""
        outs: list[StreamChunk | None] = []
        wms: list[dict[int, int]] = []
        rel_wms = watermarks or {}
        if self.scan_proj:
            deltas = dict(deltas)
            for rid, proj in self.scan_proj.items():
                d = deltas.get(rid)
                if d is not None and proj is not None:
                    deltas[rid] = d.with_data(_project(d.data, proj))
        for node in self.nodes:
            ins = [deltas.get(i) if kind == "rel" else outs[i] for kind, i in node.inputs]
            in_wms = [rel_wms.get(i, {}) if kind == "rel" else wms[i] for kind, i in node.inputs]
            wms.append(propagate(node.wm, in_wms))
            if hasattr(node.op, "input_watermarks"):
                node.op.input_watermarks = in_wms
            wake = getattr(node.op, "time_driven", False) or (
                hasattr(node.op, "input_watermarks") and any(in_wms)
            )
            if not force and not wake and all(c is None or len(c) == 0 for c in ins):
                outs.append(None)
                continue
            t = thread_time()
            out = node.op.step(ins)
            took = thread_time() - t
            outs.append(out)
            j = len(outs) - 1
            self.node_cpu[j] += took
            if out is not None:
                self.node_rows[j] += len(out)
            if cpu is not None:
                cpu.add_operator(type(node.op).__name__, took)
        self.out_watermarks = wms[-1] if wms else {}
        return outs[-1]

    @property
    def time_driven(self) -> bool:
        """Some operator changes its output as time passes (temporal filter)."""
        return any(getattr(n.op, "time_driven", False) for n in self.nodes)

    def upstream(self) -> set[int]:
        return {i for n in self.nodes for kind, i in n.inputs if kind == "rel"}


# -- WAL records: table id + Arrow IPC stream of the chunk with its ops -------------------------
def encode_wal_record(table_id: int, chunk: StreamChunk) -> bytes:
    # an IPC stream without its end marker (schema message + batch message): readers
    # accept it, and it costs a third of a stream writer for the small chunks DML makes
    batch = chunk.data.append_column(OP_COLUMN, chunk.ops)
    return b"".join((table_id.to_bytes(4, "big"), batch.schema.serialize(), batch.serialize()))


TXN_MARK = b"\xff\xff\xff\xff"
"""In a record's table-id field: the record commits a WAL transaction (`engine.state.wal`)
whose parts are `encode_wal_record` records of one write, cut into slices."""
_COMMIT = struct.Struct(">4sQII")


def encode_commit_record(table_id: int, txn: int, parts: int) -> bytes:
    return _COMMIT.pack(TXN_MARK, txn, parts, table_id)


def commit_of(payload: bytes) -> tuple[int, int, int] | None:
    """(table id, transaction, part count) of a commit record; None for a chunk's record."""
    if payload[:4] != TXN_MARK:
        return None
    _, txn, parts, tid = _COMMIT.unpack(payload)
    return tid, txn, parts


def decode_wal_record(payload: bytes) -> tuple[int, StreamChunk]:
    tid = int.from_bytes(payload[:4], "big")
    reader = pa.ipc.open_stream(payload[4:])
    batch = reader.read_all().combine_chunks().to_batches()[0]
    ops = batch.column(batch.num_columns - 1)
    data = batch.drop_columns([OP_COLUMN])
    return tid, StreamChunk(ops, data)


def rows_to_table(rows: list[tuple[object, ...]], rel_fields: list) -> pa.Table:  # type: ignore[type-arg]
    schema = arrow_schema(rel_fields)
    if not rows:
        return schema.empty_table()
    cols = list(zip(*rows, strict=True))
    return pa.Table.from_arrays(
        [array_of(list(c), schema.field(i).type) for i, c in enumerate(cols)], schema=schema
    )


class RowIdGen:
    """Hidden `_row_id` values: unique, increasing, never reused across restarts.

    Ids start from the wall clock in microseconds so a restart that lost the counter
    (it is persisted with each checkpoint and raised by WAL replay) still moves forward.
    """

    def __init__(self, last: int = 0) -> None:
        self.last = last
        self._lock = threading.Lock()  # writers of different tables draw concurrently

    def take(self, n: int) -> np.ndarray:
        import time

        with self._lock:
            base = max(self.last + 1, time.time_ns() // 1000)
            self.last = base + n - 1
        return np.arange(base, base + n, dtype=np.int64)

    def observe(self, ids: np.ndarray) -> None:
        if len(ids):
            with self._lock:
                self.last = max(self.last, int(ids.max()))
