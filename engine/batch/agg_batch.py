"""string_agg and array_agg (with DISTINCT, FILTER and ORDER BY) in ad-hoc queries.

The streaming `HashAggOp` keeps invertible or extreme accumulators; these two order-
sensitive aggregates are computed here instead, for batch queries only (client catalog
queries use them: psql's `\\d`, asyncpg's type introspection). A GROUP BY with one of them
is evaluated entirely with one polars group-by: every aggregate of the query becomes a
polars expression over the group, `ORDER BY` inside an aggregate sorts by a precomputed
rank. Materialized views run the same kernel per touched group (`CollectAggOp`).

Lifecycle: `plan_ordered_agg` (called by the planner's aggregation mixin) binds the
argument, separator, ORDER BY keys and FILTER into the pre-projection; the executor calls
`run_agg_batch` for an `Agg` node that contains one of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from engine import expr as ex
from engine.errors import FeatureNotSupported, NumericValueOutOfRange, not_supported
from engine.expr.nonstrict import ErrorSink
from engine.numeric import has_special
from engine.plan.logical import ORDERED_SET_KINDS, Agg, AggSpec
from engine.sort_keys import sortable
from engine.stream.operators.agg_calls import REGR_KINDS, AggImpl, ExactRegrImpl, RegrImpl
from engine.types import BYTEA, JSONB, VARCHAR, SqlType, TypeKind, arrow_schema, list_of, pg_alias

TEXT = pg_alias(VARCHAR, "text")


def ordered_agg_type(kind: str, arg: SqlType) -> SqlType:
    if kind == "jsonb_agg":
        return JSONB
    if kind == "string_agg":
        if arg.kind is TypeKind.BYTEA:
            return BYTEA
        if arg.kind is TypeKind.VARCHAR:
            return TEXT
        from engine.errors import UndefinedFunction

        raise UndefinedFunction(
            f"function string_agg({arg.display}, text) does not exist",
            hint="No function matches the given name and argument types. "
            "You might need to add explicit type casts.",
        )
    if arg.kind is TypeKind.LIST:
        raise not_supported("array_agg of arrays")
    return list_of(arg)


def plan_ordered_agg(
    planner: Any,
    kind: str,
    node: exp.Expression,
    scope: ex.Scope,
    pre: list[ex.Expr],
    filt: exp.Expression | None,
) -> AggSpec:
    arg = node.this
    order: list[exp.Ordered] = []
    if isinstance(arg, exp.Order):
        order = list(arg.expressions)
        arg = arg.this
    distinct = False
    if isinstance(arg, exp.Distinct):
        distinct = True
        arg = arg.expressions[0]
    bound = planner._bind(arg, scope)
    if ex.is_untyped(bound):
        bound = ex.cast(bound, VARCHAR)
    if kind == "jsonb_agg":
        bound = ex.call("to_jsonb", [bound])
    pre.append(bound)
    arg_idx = len(pre) - 1
    separator = None
    if kind == "string_agg":
        sep_node = node.args.get("separator")
        sep = planner._bind(sep_node, scope) if sep_node is not None else None
        if sep is not None and not isinstance(sep, ex.Literal):
            raise not_supported("string_agg with a non-constant delimiter")
        separator = "" if sep is None or sep.value is None else str(sep.value)
    keys = []
    for o in order:
        kb = planner._bind(o.this, scope)
        pre.append(kb)
        desc = bool(o.args.get("desc"))
        nf = o.args.get("nulls_first")
        keys.append((len(pre) - 1, desc, bool(nf) if nf is not None else desc))
    filt_idx = None
    if filt is not None:
        fb = planner._bind(filt, scope)
        planner._check_bool(fb, "FILTER")
        pre.append(fb)
        filt_idx = len(pre) - 1
    rtype = ordered_agg_type(kind, bound.type)
    return AggSpec(kind, arg_idx, rtype, distinct, filt_idx, separator, tuple(keys))


def _rank(t: pa.Table, keys: tuple[tuple[int, bool, bool], ...]) -> np.ndarray:
    cols: dict[str, Any] = {}
    sort_keys = []
    for i, (col, desc, nulls_first) in enumerate(keys):
        c = t.column(col)
        cols[f"n{i}"] = pc.is_null(c)
        sort_keys.append((f"n{i}", "descending" if nulls_first else "ascending"))
        cols[f"v{i}"] = sortable(c)
        sort_keys.append((f"v{i}", "descending" if desc else "ascending"))
    idx = pc.sort_indices(pa.table(cols), sort_keys=sort_keys).to_numpy()
    rank = np.empty(len(idx), dtype=np.int64)
    rank[idx] = np.arange(len(idx))
    return rank


_PLAIN_KINDS = ("sum", "avg", "min", "max", "bool_and", "bool_or")


def _regr_impl(spec: AggSpec, t: pa.Table) -> AggImpl:
    """The regression accumulator the streaming operator would use for `spec` (exact
    over integer arguments, which the planner passes as bigint)."""
    assert spec.arg is not None and spec.arg2 is not None
    if pa.types.is_integer(t.schema.field(spec.arg).type):
        return ExactRegrImpl(spec.kind, f"c{spec.arg2}")
    return RegrImpl(spec.kind, f"c{spec.arg2}")


def _expr(spec: AggSpec, i: int, t: pa.Table) -> pl.Expr:
    ok = pl.col(f"f{spec.filter}") if spec.filter is not None else pl.col("__one").is_null()
    if spec.kind == "count_star":
        if spec.filter is None:
            return pl.len().cast(pl.Int64).alias(f"a{i}")
        return ok.cast(pl.Int64).sum().alias(f"a{i}")
    if spec.kind == "udaf":  # the rows of each group, in input order (run_agg_batch)
        return pl.col("__row").filter(ok).implode().alias(f"a{i}")
    col = pl.col(f"c{spec.arg}")
    ok_nn = ok & col.is_not_null()
    if spec.kind == "count":
        v = col.filter(ok_nn)
        return (v.n_unique() if spec.distinct else ok_nn.cast(pl.Int64).sum()).alias(f"a{i}")
    if spec.kind in ("string_agg", "array_agg", "jsonb_agg"):
        keep = ok_nn if spec.kind == "string_agg" else ok
        v = col.filter(keep)
        if spec.order:
            v = v.sort_by(pl.col(f"r{i}").filter(keep))
        if spec.distinct:
            v = v.unique(maintain_order=True)
        return v.implode().alias(f"a{i}")
    if spec.kind in REGR_KINDS:  # the incremental slots, over the group at once
        assert spec.arg2 is not None
        ok2 = ok_nn & pl.col(f"c{spec.arg2}").is_not_null()
        impl = _regr_impl(spec, t)
        slots = impl.delta_exprs(ok2, col, pl.lit(1, pl.Int64))
        if isinstance(impl, ExactRegrImpl):  # Arrow has no int128: exact as decimal(38, 0)
            slots = [e.cast(pl.Decimal(38, 0)) for e in slots]
        return pl.struct([e.alias(f"s{j}") for j, e in enumerate(slots)]).alias(f"a{i}")
    if spec.kind in ORDERED_SET_KINDS:
        return _ordered_set_expr(spec, col.filter(ok_nn)).alias(f"a{i}")
    if spec.kind not in _PLAIN_KINDS:
        raise not_supported(
            f"{spec.kind} together with string_agg, array_agg, jsonb_agg or a user-defined "
            "aggregate",
            hint="Aggregate it in a separate query or subquery.",
        )
    v = col.filter(ok_nn)
    if spec.distinct:
        v = v.unique()
    if spec.kind == "sum":  # integers summed wide (run_agg_batch): polars wraps in 32/64 bits
        v = pl.col(f"w{spec.arg}").filter(ok_nn)
        v = v.unique() if spec.distinct else v
    floats = pa.types.is_floating(t.schema.field(spec.arg).type)
    fn = {
        "sum": v.sum(),
        "avg": v.mean(),
        "min": v.min(),
        "max": v.nan_max() if floats else v.max(),  # NaN above every float, as PostgreSQL
        "bool_and": v.all(),
        "bool_or": v.any(),
    }[spec.kind]
    return pl.when(ok_nn.any()).then(fn).otherwise(None).alias(f"a{i}")


def _ordered_set_expr(spec: AggSpec, v: pl.Expr) -> pl.Expr:
    """percentile_cont / percentile_disc / mode over a group's counted values `v`, as
    PostgreSQL's orderedsetaggs.c computes them over the values sorted in the WITHIN
    GROUP direction (`spec.order`): NULL for a group without values."""
    desc = spec.order[0][1]
    if spec.kind == "mode":  # the first of the most frequent values in that order
        m = v.mode()
        return m.max() if desc else m.min()
    s = v.sort(descending=desc)
    n = v.len().cast(pl.Int64)
    d = spec.direct
    fractions = list(d) if isinstance(d, tuple) else [d]
    parts: list[pl.Expr] = []
    for f in fractions:
        if f is None:
            parts.append(pl.lit(None, pl.Float64 if spec.kind == "percentile_cont" else None))
        elif spec.kind == "percentile_disc":
            row = (n.cast(pl.Float64) * f).ceil().cast(pl.Int64)
            parts.append(s.get(pl.max_horizontal(row, pl.lit(1)) - 1, null_on_oob=True))
        else:
            pos = (n - 1).cast(pl.Float64) * f
            lo = pos.floor().cast(pl.Int64)
            hi = pos.ceil().cast(pl.Int64)
            a = s.get(lo, null_on_oob=True)
            b = s.get(hi, null_on_oob=True)
            frac = pos - lo.cast(pl.Float64)
            parts.append(pl.when(lo == hi).then(a).otherwise(a + (b - a) * frac))
    if not isinstance(d, tuple):
        return parts[0]
    if not parts:
        return pl.when(n > 0).then(pl.lit([], pl.List(pl.Float64))).otherwise(None)
    return pl.when(n > 0).then(pl.concat_list(parts)).otherwise(None)


def _check_numeric_sums(p: Agg, t: pa.Table) -> None:
    """polars sums numerics in 128 bits and wraps silently past about 1.7e28: refuse an
    input where one group's numeric magnitudes add up to 1.5e28 or more (22003) rather
    than answer a wrapped sum. (`HashAggOp`, which serves plain aggregations, splits such
    input instead.)"""
    for spec in p.aggs:
        if spec.arg is None or not pa.types.is_decimal(t.column(spec.arg).type):
            continue
        col = t.column(spec.arg)
        if has_special(col):
            raise FeatureNotSupported(
                "numeric NaN or Infinity in an aggregation together with string_agg, "
                "array_agg, jsonb_agg or a user-defined aggregate is not supported",
                hint="Aggregate the numeric column in a separate query or subquery.",
            )
        if spec.kind not in ("sum", "avg"):
            continue
        mag = pc.abs(col.cast(pa.float64()))
        total = pc.sum(mag).as_py()
        if total is not None and total >= 1.5e28 and p.group_keys:
            keys = {f"k{i}": t.column(k) for i, k in enumerate(p.group_keys)}
            per = pa.table({**keys, "m": mag}).group_by(list(keys)).aggregate([("m", "sum")])
            total = pc.max(per.column("m_sum")).as_py()
        if total is not None and total >= 1.5e28:
            raise NumericValueOutOfRange(
                "numeric field overflow",
                detail="The sum can exceed Swell's numeric range (28 digits before the "
                "decimal point) together with string_agg, array_agg or jsonb_agg.",
            )


def run_agg_batch(p: Agg, t: pa.Table, errors: ErrorSink | None = None) -> pa.Table:
    """The aggregation of `t`; `errors` (streaming jobs) makes a failing user-defined
    aggregate NULL for its group and reports it instead of raising."""
    schema = arrow_schema(p.schema)
    _check_numeric_sums(p, t)
    cols: dict[str, Any] = {}
    for k in p.group_keys:
        cols[f"k{k}"] = t.column(k)
    for i, spec in enumerate(p.aggs):
        if spec.arg is not None:
            cols[f"c{spec.arg}"] = t.column(spec.arg)
        if spec.arg2 is not None:
            cols[f"c{spec.arg2}"] = t.column(spec.arg2)
        if spec.kind == "sum" and spec.arg is not None:
            c = t.column(spec.arg)
            if pa.types.is_integer(c.type):  # sum(int) is bigint, sum(bigint) numeric
                wide = pa.int64() if spec.type.kind is TypeKind.BIGINT else pa.decimal128(38, 0)
                c = c.cast(wide)
            cols[f"w{spec.arg}"] = c
        if spec.filter is not None:
            cols[f"f{spec.filter}"] = t.column(spec.filter)
        if spec.order and spec.kind not in ORDERED_SET_KINDS:
            cols[f"r{i}"] = pa.array(_rank(t, spec.order))
    cols["__one"] = pa.nulls(t.num_rows, pa.bool_())
    cols["__row"] = pa.array(np.arange(t.num_rows, dtype=np.int64))
    df = pl.from_arrow(pa.table(cols))
    assert isinstance(df, pl.DataFrame)
    exprs = [_expr(s, i, t) for i, s in enumerate(p.aggs)]
    if p.group_keys:
        out = df.group_by([f"k{k}" for k in p.group_keys], maintain_order=True).agg(exprs)
    else:
        out = df.select(exprs)
    arrays: list[pa.Array] = []
    for j in range(len(p.group_keys)):
        arrays.append(out.get_column(f"k{p.group_keys[j]}").to_arrow().cast(schema.field(j).type))
    for i, spec in enumerate(p.aggs):
        a = out.get_column(f"a{i}").to_arrow()
        if isinstance(a, pa.ChunkedArray):
            a = a.combine_chunks()
        if spec.kind == "udaf":
            call = spec.udf
            arrays.append(
                call.routine.aggregate(
                    a.to_pylist(), [t.column(r.index) for r in call.args], errors, str(call)
                )
            )
            continue
        if spec.kind in REGR_KINDS:
            assert spec.arg2 is not None
            impl = _regr_impl(spec, t)
            deltas = [a.field(j).to_pylist() for j in range(impl.n_slots)]
            old: list[Sequence[Any]] = [[v] * len(a) for v in impl.init]
            values = impl.output(impl.merge(old, deltas))
            a = pa.array(values, schema.field(len(p.group_keys) + i).type)
        elif spec.kind == "string_agg":
            sep = spec.separator or ""
            a = pa.array(
                [None if not v else sep.join(v) for v in a.to_pylist()],
                schema.field(len(p.group_keys) + i).type,
            )
        elif spec.kind == "jsonb_agg":
            a = pa.array(
                [
                    "[" + ", ".join("null" if x is None else x for x in v) + "]" if v else None
                    for v in a.to_pylist()
                ],
                schema.field(len(p.group_keys) + i).type,
            )
        elif spec.kind == "array_agg":
            a = pa.array(
                [v if v else None for v in a.to_pylist()],
                schema.field(len(p.group_keys) + i).type,
            )
        arrays.append(a.cast(schema.field(len(p.group_keys) + i).type))
    return pa.Table.from_arrays(arrays, schema=schema)
