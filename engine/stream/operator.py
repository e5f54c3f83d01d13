"""The operator protocol of the dataflow.

Swell runs the dataflow in epochs. Between two barriers, changes to tables (DML, webhook
rows, Kafka messages) accumulate; at the barrier the runtime takes the whole epoch's
changes and steps every operator once, in topological order:

1. each base relation hands its epoch delta (a `StreamChunk`, or None for no change)
   to the operators that read it;
2. `op.step(inputs)` gets one delta per input port (None where that input did not
   change) and returns its own output delta (None for no change), which becomes the input
   of its downstream operators;
3. once every operator has stepped, the runtime calls `write_dirty` on every
   `StateTable` returned by `state_tables()` and commits them in one atomic batch.

Because an operator sees an epoch's whole input at once it can consolidate it and touch
its state once per key per epoch: vectorised kernels over the delta, then one batched
pass over state. Chunks are Z-sets: only the net weight of a row within a delta matters.

`step` may also be called with backfill data (the snapshot of an upstream relation
as inserts) when a view is created over existing data: that is an ordinary step whose
input is large; the runtime may split it into several steps.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from engine.chunk import StreamChunk
from engine.state.table import StateTable
from engine.types import Field


class Operator(ABC):
    """A node of the dataflow; see the module docstring for the lifecycle."""

    #: output schema; column i of every output chunk has type `schema[i].type`
    schema: list[Field]
    #: output column indices that identify a row of the output (its stream key)
    stream_key: list[int]

    @abstractmethod
    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        """Consume this epoch's input deltas; return the output delta."""

    def state_tables(self) -> list[StateTable]:
        """State to commit at each checkpoint (empty for stateless operators)."""
        return []

    def explain(self) -> str:
        """One line for EXPLAIN: `StreamHashAgg { group_key: [k], aggs: [count] }`."""
        return type(self).__name__
