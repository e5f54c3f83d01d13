"""Run set-returning functions in FROM (`engine.plan.logical.TableFunction`).

The arguments are evaluated once over a one-row batch; unnest flattens the array with
pyarrow, generate_series builds the range with numpy.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InvalidParameterValue
from engine.expr import EvalContext
from engine.plan.logical import TableFunction
from engine.types import arrow_schema


def run_table_function(p: TableFunction, ctx: EvalContext) -> pa.Table:
    one = pa.RecordBatch.from_pydict({"_": [None]})
    vals = [a.eval(one, ctx)[0] for a in p.args]
    schema = arrow_schema(p.schema)
    cols: list[pa.Array]
    if p.name == "generate_series":
        start, stop = vals[0].as_py(), vals[1].as_py()
        step = vals[2].as_py() if len(vals) > 2 else 1
        if start is None or stop is None or step is None:
            return schema.empty_table()
        if step == 0:
            raise InvalidParameterValue("step size cannot equal zero")
        end = stop + (1 if step > 0 else -1)
        cols = [pa.array(np.arange(start, end, step), schema.field(0).type)]
    else:
        arr = vals[0]
        if not arr.is_valid:
            return schema.empty_table()
        values = pa.array(arr.values) if arr.values is not None else pa.array([])
        values = values.cast(schema.field(0).type)
        cols = [values]
        if p.name == "_pg_expandarray":
            cols.append(pa.array(np.arange(1, len(values) + 1, dtype=np.int32)))
    if p.ordinality:
        cols.append(pa.array(np.arange(1, len(cols[0]) + 1, dtype=np.int64)))
    return pa.Table.from_arrays(cols, schema=schema)


_ = pc
