"""`CREATE SINK s INTO t [(cols)] FROM obj | AS query` for an ordinary table (connector "table").

The sink's output rows become changes of table `t`, applied by the table's own
MaterializeOp at the next barrier, exactly once:

* `write` converts each chunk to the table's columns (by position, or by the names in
  `INTO t (a, b)`; other columns NULL; values cast to the column types (non-strict: a
  value that does not fit is NULL and counted in rw_catalog.rw_event_logs); a hidden `_row_id`
  drawn like INSERT does) and keeps it for the epoch;
* `pre_commit` returns the epoch's rows as Arrow IPC bytes, so they are stored in the same
  checkpoint as the state that produced them;
* `post_commit` queues them on the table (its pending DML), so the next epoch applies them
  and its checkpoint contains them;
* `recover` (restart) queues the rows of the last checkpoint again: the table's state in
  that checkpoint does not contain them yet.

A table without a primary key only accepts append-only sinks (rows cannot be found for
deletes), as in RisingWave. Lifecycle: one writer per sink, built by the sink framework.
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import pyarrow as pa

from engine.chunk import StreamChunk
from engine.connector_registry import register_sink
from engine.errors import DatatypeMismatch, InvalidParameterValue, UndefinedColumn
from engine.expr import EvalContext, Expr, InputRef, cast
from engine.stream.graph import OP_COLUMN
from engine.stream.sink_base import APPEND_ONLY, FORCE_APPEND_ONLY, BaseSinkWriter
from engine.types import arrow_schema


class TableSinkWriter(BaseSinkWriter):
    def _target(self) -> Any:
        return self.spec.runtime.catalog.by_id(self.spec.into)

    def _mapping(self) -> list[int | None]:
        """For each column of the target: the sink output column feeding it (None: NULL)."""
        rel = self._target()
        visible = [i for i, f in enumerate(rel.fields) if not f.hidden]
        names = self.spec.into_columns or [rel.fields[i].name for i in visible]
        if len(names) != len(self.spec.fields):
            raise InvalidParameterValue(
                f"the sink has {len(self.spec.fields)} columns but {len(names)} target "
                f'columns of table "{rel.name}" are given',
                hint="Select as many columns as the table has, or list them: INTO t (a, b).",
            )
        out: list[int | None] = [None] * len(rel.fields)
        for j, n in enumerate(names):
            pos = next((i for i in visible if rel.fields[i].name == n), None)
            if pos is None:
                raise UndefinedColumn(f'column "{n}" of relation "{rel.name}" does not exist')
            out[pos] = j
        return out

    def validate(self) -> None:
        rel = self._target()
        if rel.row_id_index is not None and self.spec.sink_type not in (
            APPEND_ONLY,
            FORCE_APPEND_ONLY,
        ):
            raise InvalidParameterValue(
                "Only append-only sinks can sink to a table without primary keys.",
                hint="Sink an append-only query, or add force_append_only = 'true' with "
                "FORMAT PLAIN, or give the table a primary key.",
            )
        target = arrow_schema(rel.fields)
        for pos, j in enumerate(self._mapping()):
            if j is None:
                continue
            src = self.spec.fields[j].type.arrow
            try:
                pa.array([], src).cast(target.field(pos).type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                raise DatatypeMismatch(
                    f'column "{rel.fields[pos].name}" is of type {rel.fields[pos].type.display}'
                    f" but the sink's column is of type {self.spec.fields[j].type.display}"
                ) from None

    def open(self) -> None:
        self._epoch_chunks: list[StreamChunk] = []
        self._map = self._mapping()
        rel = self._target()
        self._schema = arrow_schema(rel.fields)
        # each fed column as a cast of the sink's column, evaluated in the sink's streaming
        # context: a value that does not fit the column is NULL and counted in the event
        # log (rw_catalog.rw_event_logs) instead of failing the write forever
        self._casts: dict[int, Expr] = {}
        for pos, j in enumerate(self._map):
            if j is None or pos == rel.row_id_index:
                continue
            src = self.spec.fields[j]
            # Arrow casts some pairs PostgreSQL's rules do not (validate checked them)
            with contextlib.suppress(DatatypeMismatch):
                self._casts[pos] = cast(InputRef(j, src.type, src.name), rel.fields[pos].type)
        self._ctx: EvalContext | None = None  # the sink's, once it is in the catalog

    def _eval_ctx(self) -> EvalContext:
        if self._ctx is None:
            runtime = self.spec.runtime
            me = runtime.catalog.relations.get(self.spec.sink_id) if runtime else None
            if me is None:
                return EvalContext()
            self._ctx = runtime.job_ctx(me)
        return self._ctx

    def write(self, chunk: StreamChunk, epoch: int) -> None:
        rel = self._target()
        n = len(chunk)
        cols = []
        for pos, j in enumerate(self._map):
            t = self._schema.field(pos).type
            if pos == rel.row_id_index:
                cols.append(pa.array(self.spec.runtime.row_ids.take(n), t))
            elif j is None:
                cols.append(pa.nulls(n, t))
            elif pos in self._casts:
                cols.append(self._casts[pos].eval(chunk.data, self._eval_ctx()).cast(t))
            else:
                cols.append(chunk.data.column(j).cast(t))
        data = pa.RecordBatch.from_arrays(cols, schema=self._schema)
        self._epoch_chunks.append(StreamChunk(chunk.ops, data))

    def pre_commit(self, epoch: int) -> bytes | None:
        c = StreamChunk.concat(self._epoch_chunks)
        if c is None:
            return None
        batch = c.data.append_column(OP_COLUMN, c.ops)
        buf = io.BytesIO()
        with pa.ipc.new_stream(buf, batch.schema) as w:
            w.write_batch(batch)
        return buf.getvalue()

    def post_commit(self, epoch: int) -> None:
        chunks, self._epoch_chunks = self._epoch_chunks, []
        if chunks and self.spec.runtime.enqueue(self.spec.into, chunks):
            self.spec.runtime.fed_tables = True

    def recover(self, last_checkpoint_epoch: int, state: bytes | None) -> None:
        if not state:
            return
        batch = pa.ipc.open_stream(state).read_all().combine_chunks().to_batches()[0]
        ops = batch.column(batch.num_columns - 1)
        chunk = StreamChunk(ops, batch.drop_columns([OP_COLUMN]))
        self.spec.runtime.enqueue(self.spec.into, [chunk])


register_sink("table", TableSinkWriter)
