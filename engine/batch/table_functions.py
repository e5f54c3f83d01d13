"""Run set-returning functions in FROM (`engine.plan.logical.TableFunction`).

The arguments are evaluated once over a one-row batch; unnest flattens the array with
pyarrow, generate_series builds the range with numpy.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InvalidParameterValue
from engine.expr import EvalContext
from engine.expr.core import as_array
from engine.expr.fn_regex import regexp_matches_columns
from engine.expr.series import series_columns
from engine.plan.logical import TableFunction
from engine.types import arrow_schema


def run_table_function(p: TableFunction, ctx: EvalContext) -> pa.Table:
    one = pa.RecordBatch.from_pydict({"_": [None]})
    schema = arrow_schema(p.schema)
    if p.udf is not None:  # a Python table function (engine.expr.udf)
        _, out = p.udf.table_rows([a.eval(one, ctx) for a in p.args], 1)
        arrays = [
            p.udf.to_arrow(col, f.type, None, p.name, {})
            for col, f in zip(out, p.schema, strict=True)
        ]
        return pa.Table.from_arrays(arrays, schema=schema)
    vals = [a.eval(one, ctx)[0] for a in p.args]
    cols: list[pa.Array]
    if p.name == "scalar":  # one row (and its ordinality, 1)
        cols = [pa.array([vals[0].as_py()], schema.field(0).type)]
        if p.ordinality:
            cols.append(pa.array([1], pa.int64()))
        return pa.Table.from_arrays(cols, schema=schema)
    if p.name == "generate_series":
        _lens, flat, _offs = series_columns([pa.array([v]) for v in vals], p.schema[0].type, 1)
        cols = [flat]
    elif p.name == "regexp_matches":
        _lens, flat, _offs = regexp_matches_columns([pa.array([v]) for v in vals], 1)
        cols = [flat]
    else:
        arr = vals[0]
        if not arr.is_valid:
            return schema.empty_table()
        values = pa.array(arr.values) if arr.values is not None else pa.array([])
        if p.name == "pg_options_to_table":
            pairs = [str(v).partition("=") for v in values.to_pylist() if v is not None]
            cols = [
                pa.array([k for k, _, _ in pairs], pa.string()),
                pa.array([v for _, _, v in pairs], pa.string()),
            ]
            return pa.Table.from_arrays(cols, schema=schema)
        values = values.cast(schema.field(0).type)
        cols = [values]
        if p.name == "_pg_expandarray":
            cols.append(pa.array(np.arange(1, len(values) + 1, dtype=np.int32)))
    if p.ordinality:
        cols.append(pa.array(np.arange(1, len(cols[0]) + 1, dtype=np.int64)))
    return pa.Table.from_arrays(cols, schema=schema)


def _srf_columns(
    name: str, args: list[pa.Array], n: int, series_type: Any
) -> tuple[np.ndarray, list[tuple[pa.Array, np.ndarray]]]:
    """Per input row: the number of rows the call yields, and for each output column the
    flat values plus each row's offset into them (`series_type`: the call's first output
    column's type)."""
    if name == "generate_series":
        lens, flat, offs = series_columns(args, series_type, n)
        return lens, [(flat, offs)]
    if name == "regexp_matches":
        lens, flat, offs = regexp_matches_columns(args, n)
        return lens, [(flat, offs)]
    lists = args[0]
    lens = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    lens = lens.astype(np.int64)
    offs = np.concatenate([[0], np.cumsum(lens)])[:-1]
    if name == "generate_subscripts":
        total = int(lens.sum())
        flat = pa.array((np.arange(total) - np.repeat(offs, lens) + 1).astype(np.int32))
        return lens, [(flat, offs)]
    flat = pc.list_flatten(lists)
    if name == "_pg_expandarray":
        total = int(lens.sum())
        nums = pa.array((np.arange(total) - np.repeat(offs, lens) + 1).astype(np.int32))
        return lens, [(flat, offs), (nums, offs)]
    return lens, [(flat, offs)]


def run_project_set(p: Any, t: pa.Table, batch: pa.RecordBatch, ctx: EvalContext) -> pa.Table:
    if not p.position:
        return expand_project_set(p.srfs, p.routines, p.schema, t, batch, ctx)[0]
    out, _parent, pos = expand_project_set(p.srfs, p.routines, p.schema[:-1], t, batch, ctx)
    return out.append_column(p.schema[-1].name, pa.array(pos, pa.int64()))


def expand_project_set(
    srfs: list[tuple[str, list[Any]]],
    routines: dict[str, Any],
    fields: list[Any],
    t: pa.Table,
    batch: pa.RecordBatch,
    ctx: EvalContext,
) -> tuple[pa.Table, np.ndarray, np.ndarray]:
    """Each input row repeated once per element of its longest call, with the calls'
    columns (`fields`: the input's then the calls'); also, per output row, its input row
    (`parent`) and its position among that row's outputs (`pos`, the streaming
    ProjectSet's `_projected_row_id`)."""
    n = t.num_rows
    schema = arrow_schema(fields)
    per_call = []
    at = len(t.columns)  # the output field of the next call
    for name, args in srfs:
        vals = [as_array(a.eval(batch, ctx), n) for a in args]
        routine = routines.get(name)
        if routine is not None:  # a Python table function: one generator call per row
            width = max(1, len(routine.columns))
            types = [f.type for f in fields[at : at + width]]
            per_call.append(_udtf_columns(routine, vals, n, types, ctx))
        else:
            per_call.append(_srf_columns(name, vals, n, fields[at].type))
        at += len(per_call[-1][1])
    lens = np.zeros(n, dtype=np.int64)
    for ln, _ in per_call:
        lens = np.maximum(lens, ln)
    parent = np.repeat(np.arange(n), lens)
    row_off = np.concatenate([[0], np.cumsum(lens)])[:-1]
    pos = np.arange(int(lens.sum())) - np.repeat(row_off, lens)
    out = [c.take(pa.array(parent, pa.int64())) for c in t.columns]
    for ln, columns in per_call:
        ok = pos < ln[parent]
        for flat, offs in columns:
            idx = np.where(ok, offs[parent] + pos, 0)
            taken = flat.take(pa.array(idx, pa.int64())) if len(flat) else pa.nulls(len(idx))
            mask = pa.array(~ok)
            out.append(pc.if_else(mask, pa.scalar(None, taken.type), taken))
    cols = [c.cast(f.type) for c, f in zip(out, schema, strict=True)]
    return pa.Table.from_arrays(cols, schema=schema), parent, pos


def _udtf_columns(
    routine: Any, vals: list[pa.Array], n: int, types: list[Any], ctx: Any = None
) -> tuple[np.ndarray, list[tuple[pa.Array, np.ndarray]]]:
    """A Python table function's rows per input row: their count per row and one flat
    column per declared column (`types`: the output fields' types)."""
    src, cols = routine.table_rows(vals, n, getattr(ctx, "errors", None))
    lens = np.bincount(src, minlength=n).astype(np.int64) if len(src) else np.zeros(n, np.int64)
    offs = np.concatenate([[0], np.cumsum(lens)])[:-1]
    flats = [routine.to_arrow(c, t, None, routine.name, {}) for c, t in zip(cols, types)]
    return lens, [(flat, offs) for flat in flats]


MAX_RECURSION = 10_000


def run_recursive_union(p: Any, run: Any) -> pa.Table:
    """Iterate a recursive CTE (engine.plan.logical.RecursiveUnion) to its fixpoint."""
    schema = arrow_schema(p.schema)
    vis = [i for i, f in enumerate(p.anchor.schema) if not f.hidden]

    def visible(t: pa.Table, node: Any) -> pa.Table:
        idx = [i for i, f in enumerate(node.schema) if not f.hidden]
        return pa.Table.from_arrays([t.column(i) for i in idx], schema=schema)

    first = visible(run(p.anchor), p.anchor)
    seen: set[tuple[Any, ...]] = set()

    def fresh(t: pa.Table) -> pa.Table:
        if not p.distinct:
            return t
        keep = []
        for i, row in enumerate(zip(*[c.to_pylist() for c in t.columns], strict=True)):
            key = tuple(tuple(v) if isinstance(v, list) else v for v in row)
            if key not in seen:
                seen.add(key)
                keep.append(i)
        return t.take(pa.array(keep, pa.int64())) if len(keep) != t.num_rows else t

    work = fresh(first)
    parts = [work]
    for _ in range(MAX_RECURSION):
        if work.num_rows == 0:
            break
        p.work.table = work
        work = fresh(visible(run(p.step), p.step))
        parts.append(work)
    else:
        raise InvalidParameterValue("recursive query did not finish after 10000 iterations")
    _ = vis
    return pa.concat_tables(parts)
