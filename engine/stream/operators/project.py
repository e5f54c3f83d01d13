"""ProjectOp: compute output columns from scalar expressions, row by row in Arrow kernels.

Stateless. Each step evaluates every expression over the input chunk's batch and keeps
the ops unchanged, so U-/U+ pairs stay adjacent (the planner chooses a `stream_key` that
the projection preserves). A projection may turn an update pair into two equal rows; that
is still a valid (no-op) update downstream.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from engine.chunk import StreamChunk
from engine.stream.operator import Operator
from engine.stream.operators.base import Expr
from engine.types import Field, arrow_schema


class ProjectOp(Operator):
    """`SELECT expr AS name, ...` over one input; output schema = (names, expr types)."""

    def __init__(
        self,
        input_schema: list[Field],
        exprs: list[Expr],
        names: list[str],
        ctx: Any,
        stream_key: list[int],
    ) -> None:
        if len(exprs) != len(names):
            raise ValueError("ProjectOp needs one name per expression")
        self.input_schema = input_schema
        self.exprs = exprs
        self.ctx = ctx
        self.schema = [Field(n, e.type) for n, e in zip(names, exprs, strict=True)]
        self.stream_key = stream_key
        self._arrow_schema = arrow_schema(self.schema)

    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        chunk = inputs[0]
        if chunk is None or len(chunk) == 0:
            return None
        batch = chunk.data
        arrays = []
        for e, f in zip(self.exprs, self._arrow_schema, strict=True):
            arr = e.eval(batch, self.ctx)
            if isinstance(arr, pa.ChunkedArray):
                arr = arr.combine_chunks()
            if arr.type != f.type:
                arr = arr.cast(f.type)
            arrays.append(arr)
        out = pa.RecordBatch.from_arrays(arrays, schema=self._arrow_schema)
        return StreamChunk(chunk.ops, out)

    def explain(self) -> str:
        pairs = zip(self.exprs, self.schema, strict=True)
        exprs = ", ".join(f"{e!r} AS {f.name}" for e, f in pairs)
        return f"StreamProject {{ exprs: [{exprs}] }}"
