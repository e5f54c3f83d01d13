"""MaterializeOp: the stored rows of a materialized view (or a table), keyed by primary key.

It is the terminal operator of a view's dataflow and the storage of a table's rows. Each
step applies the epoch's delta and returns the *effective* change, which is what
downstream views consume; for a consistent input it equals the input up to consolidation.

How a delta is applied (vectorised consolidation, then one state touch per pk):

1. rows are consolidated by their full value (Z-set net weight; the last position of each
   distinct row is kept); rows whose net weight is 0 vanish;
2. a pk with a negative row deletes the stored row of that pk (whatever its values);
3. a pk with positive rows takes the last of them in input order: it is inserted, or it
   overwrites the stored row (emitted as `U-` stored / `U+` new). This gives tables their
   "a conflicting insert overwrites the row with that primary key" behaviour.

Deleting a pk that is not stored is ignored (logged at debug level) unless `strict`.

State: table `rows`, pk tuple -> full row tuple (Python values per `engine.types`).
Lifecycle: constructed with an allocator; the runtime loads `rows` on recovery;
`snapshot()` serves ad-hoc SELECT and the backfill of views created over this relation.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa

from engine.chunk import Op, StreamChunk
from engine.errors import InternalError
from engine.state.table import StateTable
from engine.stream.operator import Operator
from engine.stream.operators.base import StateAllocator
from engine.stream.operators.frames import (
    INDEX,
    WEIGHT,
    batch_from_rows,
    col_name,
    key_tuples,
    ops_array,
    polars_frame,
)
from engine.types import Field, arrow_schema

log = logging.getLogger(__name__)

Row = tuple[Any, ...]


class MaterializeOp(Operator):
    """Stores rows by pk and emits the effective change; see the module docstring."""

    def __init__(
        self,
        input_schema: list[Field],
        pk: list[int],
        alloc: StateAllocator,
        strict: bool = False,
    ) -> None:
        self.schema = list(input_schema)
        self.stream_key = list(pk)
        self.pk = list(pk)
        self.strict = strict
        self._rows = alloc.table("rows")
        self._arrow_schema = arrow_schema(self.schema)
        self._all = list(range(len(input_schema)))
        self._pk_names = list(dict.fromkeys(col_name(i) for i in pk))

    def state_tables(self) -> list[StateTable]:
        return [self._rows]

    def explain(self) -> str:
        cols = ", ".join(f.name for f in self.schema)
        pk = ", ".join(self.schema[i].name for i in self.pk)
        return f"StreamMaterialize {{ columns: [{cols}], pk_columns: [{pk}] }}"

    def __len__(self) -> int:
        return len(self._rows)

    # -- reads --------------------------------------------------------------------------
    def snapshot(self) -> pa.Table:
        """All stored rows as a table of the input schema (row order unspecified)."""
        rows = list(self._rows.values())
        return pa.Table.from_batches([batch_from_rows(self.schema, rows)], self._arrow_schema)

    def get(self, pk: Row) -> Row | None:
        return self._rows.get(pk)

    # -- step ---------------------------------------------------------------------------
    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        chunk = inputs[0]
        if chunk is None or len(chunk) == 0:
            return None
        batch = chunk.data
        w = chunk.weights()
        frame = polars_frame(batch, self._all, weights=w, index=True)
        df = frame.df
        last = pl.col(INDEX).max()
        if (w > 0).all():
            del_idx = np.empty(0, dtype=np.int64)
            ins_idx = df.group_by(self._pk_names).agg(last).get_column(INDEX).to_numpy()
        else:
            names = [col_name(i) for i in self._all]
            net = df.group_by(names).agg(pl.col(WEIGHT).sum(), last).filter(pl.col(WEIGHT) != 0)
            del_idx = net.filter(pl.col(WEIGHT) < 0).get_column(INDEX).to_numpy()
            pos = net.filter(pl.col(WEIGHT) > 0)
            ins_idx = pos.group_by(self._pk_names).agg(last).get_column(INDEX).to_numpy()
        ins_idx = np.sort(ins_idx)  # apply in input order (deterministic output)
        return self._apply(batch, del_idx, ins_idx)

    def _pk_tuples(self, batch: pa.RecordBatch, idx: np.ndarray) -> list[Row]:
        sub = batch.take(pa.array(idx))
        return key_tuples([_hashable(sub.column(i)) for i in self.pk], len(idx))

    def _apply(
        self, batch: pa.RecordBatch, del_idx: np.ndarray, ins_idx: np.ndarray
    ) -> StreamChunk | None:
        del_pks = self._pk_tuples(batch, del_idx)
        ins_batch = batch.take(pa.array(ins_idx))
        ins_rows = key_tuples([c.to_pylist() for c in ins_batch.columns], len(ins_idx))
        ins_pks = key_tuples([_hashable(ins_batch.column(i)) for i in self.pk], len(ins_idx))

        ops: list[int] = []
        out: list[Row] = []
        inserting = set(ins_pks)
        del_k: list[Row] = []
        udel = list(dict.fromkeys(del_pks))
        for pk, stored in zip(udel, self._rows.get_many(udel), strict=True):
            if stored is None:
                self._missing(pk)
            elif pk not in inserting:
                ops.append(Op.DELETE)
                out.append(stored)
                del_k.append(pk)
        put_k: list[Row] = []
        put_v: list[Row] = []
        stored_rows = self._rows.get_many(ins_pks)
        for pk, row, stored in zip(ins_pks, ins_rows, stored_rows, strict=True):
            if stored is None:
                ops.append(Op.INSERT)
                out.append(row)
            elif stored != row:
                ops += (Op.UPDATE_DELETE, Op.UPDATE_INSERT)
                out += (stored, row)
            else:
                continue
            put_k.append(pk)
            put_v.append(row)
        self._rows.delete_many(del_k)
        self._rows.put_many(put_k, put_v)
        if not ops:
            return None
        return StreamChunk(ops_array(ops), batch_from_rows(self.schema, out))

    def _missing(self, pk: Row) -> None:
        if self.strict:
            raise InternalError(
                "materialize: deleting a row that does not exist",
                detail=f"Primary key {pk!r} of {self.explain()}.",
            )
        log.debug("%s: ignoring delete of missing pk %r", self.explain(), pk)


def _hashable(col: pa.Array) -> list[Any]:
    values = col.to_pylist()
    if pa.types.is_list(col.type) or pa.types.is_large_list(col.type):
        return [None if v is None else tuple(v) for v in values]
    return values
