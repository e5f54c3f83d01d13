"""Watermarks: definition on tables and sources, per-epoch values, propagation.

A watermark says "no row with a smaller value in this column is expected any more". Swell
follows RisingWave: `WATERMARK FOR ts AS ts - INTERVAL '5' SECOND` in CREATE TABLE (and
CREATE SOURCE: `define_watermark` is the one definition both DDL paths call) makes the
relation's watermark the largest value of the expression over all rows seen so far.

Per epoch (the runtime's barrier), alongside the chunks:

1. `WatermarkTracker.on_relation_delta` folds the epoch's inserted rows of a relation with
   a watermark into its value (a vectorised max, then `max(old, new)`: watermarks never go
   back). Rows are kept in the table even when late; the operators that need it (EOWC
   aggregation) drop late rows themselves, as RisingWave's do.
2. `propagate` computes each dataflow node's output watermarks from its inputs' with the
   plan's transfer (`engine.plan.time_nodes.watermark_transfer`): a per-column message
   `{column: value}` per epoch, like RisingWave's `Message::Watermark` after the chunk.
   Project/filter pass watermark columns through (and shift them for `ts - INTERVAL`),
   aggregations keep those in the group key, inner joins take the minimum of the two sides
   on equal keys, TUMBLE/HOP derive `window_start`/`window_end`.
3. A materialized view's output watermark becomes its relation's, for views on views.

Values are the int64 behind the column (microseconds since the epoch for timestamps).
Table watermarks are saved with each checkpoint (`snapshot`/`restore`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from engine.chunk import Op, StreamChunk
from engine.errors import DatatypeMismatch, InvalidColumnReference, not_supported
from engine.types import Field, TypeKind

Watermarks = dict[int, int]  # column index -> value


def define_watermark(items: list[exp.Expression], fields: list[Field]) -> dict[str, Any] | None:
    """The catalog form of `WATERMARK FOR col AS expr` (None without one).

    Returns `{"column": index, "expr": sql}`; the expression is re-bound from its SQL when
    the relation's flow is built, so it survives restarts with the catalog.
    """
    if not items:
        return None
    if len(items) > 1:
        raise not_supported("more than one WATERMARK clause", hint="Define one watermark.")
    item = items[0]
    col = item.this
    name = col.name if col.this.args.get("quoted") else col.name.lower()
    idx = next((i for i, f in enumerate(fields) if f.name == name), None)
    if idx is None:
        raise InvalidColumnReference(f'column "{name}" named in WATERMARK does not exist')
    t = fields[idx].type
    if t.kind not in (TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ):
        raise DatatypeMismatch(
            f'the watermark column "{name}" must be of type timestamp or timestamptz, '
            f"not {t.display}"
        )
    sql = item.expression.sql(dialect="risingwave")
    e = bind_watermark_expr(sql, fields)
    if e.type != t:
        raise DatatypeMismatch(
            f'the watermark expression must have the type of column "{name}" '
            f"({t.display}), not {e.type.display}"
        )
    return {"column": idx, "expr": sql}


def bind_watermark_expr(sql: str, fields: list[Field]) -> Any:
    import sqlglot

    from engine import expr as ex

    scope = ex.Scope(
        [
            ex.ColumnBinding(name=f.name, type=f.type, index=i, table=None, hidden=f.hidden)
            for i, f in enumerate(fields)
        ]
    )
    e = ex.ExprBinder(scope).bind(sqlglot.parse_one(sql, read="risingwave"))
    if e.has_now():
        raise not_supported("now() in a WATERMARK expression")
    return e


def _max_us(arr: pa.Array) -> int | None:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    if len(arr) == 0 or arr.null_count == len(arr):
        return None
    m = pc.max(arr.cast(pa.int64()))
    return None if not m.is_valid else int(m.as_py())


class WatermarkTracker:
    """The runtime's current watermark per relation (tables, sources and views)."""

    def __init__(self) -> None:
        self.current: dict[int, Watermarks] = {}
        self._exprs: dict[int, tuple[int, Any]] = {}

    def on_relation_delta(self, rel: Any, delta: StreamChunk | None, ctx: Any) -> None:
        spec = rel.extra.get("watermark")
        if spec is None or delta is None or len(delta) == 0:
            return
        got = self._exprs.get(rel.id)
        if got is None:
            got = (int(spec["column"]), bind_watermark_expr(spec["expr"], rel.fields))
            self._exprs[rel.id] = got
        col, e = got
        ops = delta.ops.to_numpy(zero_copy_only=False)
        ins = (ops == Op.INSERT) | (ops == Op.UPDATE_INSERT)
        if not ins.any():
            return
        data = delta.data if ins.all() else delta.data.filter(pa.array(ins))
        v = _max_us(e.eval(data, ctx))
        if v is None:
            return
        cur = self.current.setdefault(rel.id, {})
        if cur.get(col) is None or v > cur[col]:
            cur[col] = v

    def set_view(self, rel_id: int, wms: Watermarks) -> None:
        if wms:
            self.current[rel_id] = dict(wms)

    def forget(self, rel_id: int) -> None:
        self.current.pop(rel_id, None)
        self._exprs.pop(rel_id, None)

    def snapshot(self) -> dict[str, dict[str, int]]:
        return {str(r): {str(c): v for c, v in w.items()} for r, w in self.current.items()}

    def restore(self, saved: dict[str, dict[str, int]] | None) -> None:
        for r, w in (saved or {}).items():
            self.current[int(r)] = {int(c): int(v) for c, v in w.items()}


def propagate(transfer: list[Any] | None, ins: list[Watermarks]) -> Watermarks:
    """A node's output watermarks from its inputs' (see `watermark_transfer`)."""
    out: Watermarks = {}
    if not transfer:
        return out
    for col, srcs, fn in transfer:
        vals = []
        for port, c in srcs:
            v = ins[port].get(c) if port < len(ins) else None
            if v is None:
                break
            vals.append(v)
        else:
            v = min(vals)
            out[col] = v if fn is None else int(fn(v))
    return out


def as_int64(col: pa.Array) -> np.ndarray:
    """A timestamp/integer column as int64 values (NULL -> min int64) for cut comparisons."""
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    ints = col.cast(pa.int64())
    if ints.null_count:
        ints = ints.fill_null(np.iinfo(np.int64).min)
    return ints.to_numpy(zero_copy_only=False)
