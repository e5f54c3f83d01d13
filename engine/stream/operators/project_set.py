"""ProjectSetOp: set-returning calls in a materialized view's select list.

`SELECT id, unnest(tags) AS tag FROM t` or a Python table function `SELECT n, f(n) FROM t`:
each input row becomes as many rows as its longest call yields (shorter calls padded with
NULLs, PostgreSQL 10+), computed per chunk by the same kernel as ad-hoc queries
(`engine.batch.table_functions.expand_project_set`). Stateless: a deleted input row is
expanded again into the same rows, which are deleted (the calls must be deterministic, as
RisingWave requires). Each output row carries its position among its input row's outputs
(the hidden `_projected_row_id`), which with the input's stream key is the output's key.
An update pair does not stay a pair (the two rows may expand to different counts): U- and
U+ go out as DELETE and INSERT.

Lifecycle: built by `engine.stream.build` from a `StreamProjectSet` node; nothing stored.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from engine.batch.table_functions import expand_project_set
from engine.chunk import Op, StreamChunk
from engine.stream.operator import Operator
from engine.types import Field, arrow_schema

_PLAIN = np.array([0, Op.INSERT, Op.DELETE, Op.DELETE, Op.INSERT], dtype=np.int8)


class ProjectSetOp(Operator):
    def __init__(
        self,
        schema: list[Field],
        srfs: list[tuple[str, list[Any]]],
        udtfs: list[Any],
        ctx: Any,
        stream_key: list[int],
    ) -> None:
        self.schema = schema
        self.stream_key = stream_key
        self.srfs = srfs
        self.routines = {
            name: call.routine for (name, _a), call in zip(srfs, udtfs, strict=True) if call
        }
        self.ctx = ctx
        self._fields = schema[:-1]  # without the ordinal
        self._arrow_schema = arrow_schema(schema)

    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        chunk = inputs[0]
        if chunk is None or len(chunk) == 0:
            return None
        batch = chunk.data
        table, parent, pos = expand_project_set(
            self.srfs, self.routines, self._fields, pa.Table.from_batches([batch]), batch, self.ctx
        )
        if not len(parent):
            return None
        ops = _PLAIN[chunk.ops.to_numpy(zero_copy_only=False)][parent]
        cols = [c.combine_chunks() for c in table.columns]
        cols.append(pa.array(pos, pa.int64()))
        out = pa.RecordBatch.from_arrays(cols, schema=self._arrow_schema)
        return StreamChunk(pa.array(ops, pa.int8()), out)

    def explain(self) -> str:
        calls = ", ".join(f"{n}({', '.join(str(a) for a in args)})" for n, args in self.srfs)
        return f"StreamProjectSet {{ select_list: [{calls}] }}"
