"""Ad-hoc execution of the time plan nodes (`engine.plan.time_nodes`).

`TimeWindow` (TUMBLE/HOP) runs the same vectorised kernel as the streaming operator;
`TemporalFilter` is an ordinary filter with `now()` taken from the statement's context;
`EowcAgg` aggregates like `Agg` (an ad-hoc query has no windows left to wait for).
Called from `engine.batch.executor` for node types it does not know.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import not_supported
from engine.numeric import array_of
from engine.plan.logical import Agg, PlanNode
from engine.plan.time_nodes import DynamicFilter, EowcAgg, EowcSort, TemporalFilter, TimeWindow
from engine.stream.operators.time_window import apply_windows
from engine.types import arrow_schema


def run_time_node(ex: Any, p: PlanNode) -> pa.Table:
    """`ex` is the batch executor (`run`, `_batch`, `ctx`)."""
    if isinstance(p, TimeWindow):
        t = ex.run(p.input)
        schema = arrow_schema(p.schema)
        _, out = apply_windows(ex._batch(t), p.ts_col, p.kind, p.hop, p.size, p.offset, schema)
        return pa.Table.from_batches([out], schema=schema)
    if isinstance(p, TemporalFilter):
        t = ex.run(p.input)
        if t.num_rows == 0 or p.predicate is None:
            return t
        mask = p.predicate.eval(ex._batch(t), ex.ctx)
        return t.filter(pc.fill_null(mask, False))
    if isinstance(p, DynamicFilter):
        t = ex.run(p.left)
        r = ex.run(p.right)
        if r.num_rows > 1:
            from engine.errors import EngineError

            raise EngineError("more than one row returned by a subquery used as an expression")
        v = r.column(p.right_col)[0].as_py() if r.num_rows else None
        if t.num_rows == 0 or v is None:
            return t.slice(0, 0)
        typ = p.right.schema[p.right_col].type.arrow
        b = ex._batch(t)
        b = pa.RecordBatch.from_arrays(
            [*b.columns, array_of([v] * b.num_rows, typ)], names=[*b.schema.names, "$subquery"]
        )
        mask = p.predicate.eval(b, ex.ctx)
        return t.filter(pc.fill_null(mask, False))
    if isinstance(p, EowcSort):
        return ex.run(p.input)
    if isinstance(p, EowcAgg):
        return ex._agg(
            Agg(p.schema, p.stream_key, input=p.input, group_keys=p.group_keys, aggs=p.aggs)
        )
    raise not_supported(f"{type(p).__name__} in ad-hoc queries")
