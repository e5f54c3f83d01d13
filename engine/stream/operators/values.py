"""ValuesOp: the constant rows of a view (`VALUES ...`, a SELECT without FROM, a table
function over constants in FROM such as `generate_series(1, 10)`), emitted exactly once.

Like RisingWave's StreamValues, the operator has no upstream: it asks to be stepped
(`time_driven`) until it has emitted, sends every row as an insert in the job's first
epoch, and never again. Exactly once across restarts: the same step writes ("emitted",)
into its `meta` state table, which commits in the checkpoint that also commits the rows
in the view (and in every downstream operator's state); after kill -9 either both are
there (recovery reads the mark and the operator stays silent) or neither (the job
restarts from the previous checkpoint, before the rows, and emits them then). The node
is never partitioned (engine.stream.parallel.fragment), so a parallel job has one.

Rows: `rows` are bound constant expressions, evaluated once (the planner adds each row's
number as the hidden last column, the view's key); a table function runs once through
the batch executor's `run_table_function` and its rows get their number appended as the
hidden last column.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from engine import expr as ex
from engine.chunk import StreamChunk
from engine.numeric import array_of
from engine.plan.logical import TableFunction
from engine.stream.operator import Operator
from engine.types import Field, arrow_schema

_EMITTED = ("emitted",)


class ValuesOp(Operator):
    """Constant rows, once (see the module docstring)."""

    def __init__(
        self,
        schema: list[Field],
        stream_key: list[int],
        rows: list[list[Any]],
        func: str,
        func_args: list[Any],
        func_ordinality: bool,
        ctx: ex.EvalContext,
        alloc: Any,
    ) -> None:
        self.schema = list(schema)
        self.stream_key = list(stream_key)
        self.rows = rows
        self.func = func
        self.func_args = func_args
        self.func_ordinality = func_ordinality
        self.ctx = ctx
        self._meta = alloc.table("meta")
        self._done: bool | None = None  # read from the state table on first use

    def state_tables(self) -> list[Any]:
        return [self._meta]

    @property
    def emitted(self) -> bool:
        if self._done is None:
            self._done = self._meta.get(_EMITTED) is not None
        return self._done

    @property
    def time_driven(self) -> bool:
        """Step me even without input, until the rows are out."""
        return not self.emitted

    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        if self.emitted:
            return None
        batch = self._batch()
        self._meta.put(_EMITTED, (True,))
        self._done = True
        return StreamChunk.inserts(batch) if batch.num_rows else None

    def _batch(self) -> pa.RecordBatch:
        schema = arrow_schema(self.schema)
        if self.func:
            fn = TableFunction(
                self.schema[:-1],
                None,
                name=self.func,
                args=self.func_args,
                ordinality=self.func_ordinality,
            )
            from engine.batch.table_functions import run_table_function

            t = run_table_function(fn, self.ctx).combine_chunks()
            cols = [t.column(i).combine_chunks() for i in range(t.num_columns)]
            cols.append(pa.array(np.arange(t.num_rows, dtype=np.int64)))
            cols = [c if c.type == f.type else c.cast(f.type) for c, f in zip(cols, schema)]
            return pa.RecordBatch.from_arrays(cols, schema=schema)
        values: list[list[Any]] = [[] for _ in self.schema]
        for r in self.rows:
            for j, e in enumerate(r):
                values[j].append(ex.evaluate_constant(e, self.ctx))
        arrays = [array_of(v, f.type) for v, f in zip(values, schema, strict=True)]
        return pa.RecordBatch.from_arrays(arrays, schema=schema)

    def explain(self) -> str:
        what = f"{self.func}(...)" if self.func else f"rows: {len(self.rows)}"
        return f"StreamValues {{ {what} }}"
