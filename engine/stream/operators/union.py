"""UnionOp: UNION ALL of n inputs with the same schema, by concatenating their deltas.

Stateless. Each step concatenates the non-empty input deltas in port order; pairs stay
adjacent because each input's chunk is copied whole. The planner supplies a stream key
that stays unique across inputs (typically including a per-input discriminator column).
"""

from __future__ import annotations

from engine.chunk import StreamChunk
from engine.stream.operator import Operator
from engine.types import Field, arrow_schema


class UnionOp(Operator):
    """`a UNION ALL b ...`; inputs are cast to this schema's Arrow types if they differ."""

    def __init__(self, schema: list[Field], n_inputs: int, stream_key: list[int]) -> None:
        self.schema = list(schema)
        self.n_inputs = n_inputs
        self.stream_key = stream_key
        self._arrow_schema = arrow_schema(self.schema)

    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        if len(inputs) != self.n_inputs:
            raise ValueError(f"UnionOp expects {self.n_inputs} inputs, got {len(inputs)}")
        chunks = []
        for c in inputs:
            if c is None or len(c) == 0:
                continue
            if c.data.schema != self._arrow_schema:
                data = c.data.rename_columns(self._arrow_schema.names).cast(self._arrow_schema)
                c = c.with_data(data)
            chunks.append(c)
        return StreamChunk.concat(chunks)

    def explain(self) -> str:
        return f"StreamUnion {{ inputs: {self.n_inputs} }}"
