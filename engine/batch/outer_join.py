"""Outer joins whose ON clause has more than column equalities (ad hoc queries only).

`LEFT JOIN pg_constraint con ON (conrelid = i.indrelid AND contype IN ('p','u','x'))`:
the rows that match on the equality keys (or every pair, without keys) are filtered by the
residual condition; left (right, both) rows left without a surviving match are then
added with NULLs on the other side, as SQL defines.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.expr import EvalContext
from engine.expr.ops import float_key as join_key
from engine.plan.logical import Join
from engine.types import arrow_schema


def _pairs(p: Join, left: pa.Table, right: pa.Table) -> tuple[np.ndarray, np.ndarray]:
    nl, nr = left.num_rows, right.num_rows
    if not p.left_keys:
        return np.repeat(np.arange(nl), nr), np.tile(np.arange(nr), nl)
    lk = [f"k{i}" for i in range(len(p.left_keys))]
    lt = pa.table(
        [join_key(left.column(i)) for i in p.left_keys] + [pa.array(np.arange(nl), pa.int64())],
        names=[*lk, "__li"],
    )
    rt = pa.table(
        [join_key(right.column(i)) for i in p.right_keys] + [pa.array(np.arange(nr), pa.int64())],
        names=[*lk, "__ri"],
    )
    m = lt.join(rt, keys=lk, join_type="inner", use_threads=False)
    return (
        m.column("__li").to_numpy().astype(np.int64),
        m.column("__ri").to_numpy().astype(np.int64),
    )


def outer_join_with_condition(
    p: Join, left: pa.Table, right: pa.Table, ctx: EvalContext
) -> pa.Table:
    schema = arrow_schema(p.schema)
    li, ri = _pairs(p, left, right)
    joined = pa.Table.from_arrays(
        left.take(pa.array(li)).columns + right.take(pa.array(ri)).columns, schema=schema
    )
    if joined.num_rows:
        batch = joined.combine_chunks().to_batches()[0]
        mask = pc.fill_null(p.condition.eval(batch, ctx), False)
        keep = mask.to_numpy(zero_copy_only=False).astype(bool)
        joined = joined.filter(mask)
        li, ri = li[keep], ri[keep]
    parts = [joined]
    nlc = left.num_columns
    if p.kind in ("left", "full"):
        missing = np.setdiff1d(np.arange(left.num_rows), li)
        if len(missing):
            lpart = left.take(pa.array(missing))
            cols = lpart.columns + [
                pa.nulls(len(missing), schema.field(nlc + j).type) for j in range(right.num_columns)
            ]
            parts.append(pa.Table.from_arrays(cols, schema=schema))
    if p.kind in ("right", "full"):
        missing = np.setdiff1d(np.arange(right.num_rows), ri)
        if len(missing):
            rpart = right.take(pa.array(missing))
            cols = [
                pa.nulls(len(missing), schema.field(j).type) for j in range(nlc)
            ] + rpart.columns
            parts.append(pa.Table.from_arrays(cols, schema=schema))
    return pa.concat_tables(parts)
