"""FilterOp: keep the rows of each chunk whose predicate is true (NULL counts as false).

Stateless. The predicate is evaluated over the whole chunk at once; `StreamChunk.filter`
turns the surviving half of a split U-/U+ pair into a plain DELETE or INSERT, so the
output respects the update-pair invariant. Output schema and stream key equal the input's.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from engine.chunk import StreamChunk
from engine.errors import DatatypeMismatch
from engine.stream.operator import Operator
from engine.stream.operators.base import Expr
from engine.types import Field, TypeKind


class FilterOp(Operator):
    """`WHERE predicate` over one input."""

    def __init__(
        self,
        input_schema: list[Field],
        predicate: Expr,
        ctx: Any,
        stream_key: list[int],
    ) -> None:
        if predicate.type.kind not in (TypeKind.BOOLEAN, TypeKind.UNKNOWN):
            raise DatatypeMismatch(
                f"argument of WHERE must be type boolean, not type {predicate.type.display}"
            )
        self.schema = list(input_schema)
        self.predicate = predicate
        self.ctx = ctx
        self.stream_key = stream_key

    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        chunk = inputs[0]
        if chunk is None or len(chunk) == 0:
            return None
        mask = self.predicate.eval(chunk.data, self.ctx)
        if isinstance(mask, pa.ChunkedArray):
            mask = mask.combine_chunks()
        if mask.type != pa.bool_():
            mask = mask.cast(pa.bool_())
        out = chunk.filter(mask)
        return out if len(out) else None

    def explain(self) -> str:
        return f"StreamFilter {{ predicate: {self.predicate!r} }}"
