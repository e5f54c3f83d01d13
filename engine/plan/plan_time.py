"""Time in queries: TUMBLE/HOP windows, temporal filters, EMIT ON WINDOW CLOSE, watermarks.

Planner hooks (called from the shared planner files, which stay small):

* `plan_time_window` plans `FROM TUMBLE(t, ts, size [, offset])` and `FROM HOP(t, ts, hop,
  size [, offset])` into a `TimeWindow` node adding `window_start` and `window_end`;
* `split_temporal` pulls `ts > now() - INTERVAL ...`-style conjuncts out of a streaming
  WHERE clause into a `TemporalFilter` node, and refuses any other use of `now()` with
  RisingWave's message;
* `apply_eowc` turns the aggregation of an `EMIT ON WINDOW CLOSE` view into an `EowcAgg`,
  refusing a query without a watermark column in its GROUP BY.

The plan nodes these build (`TimeWindow`, `TemporalFilter`, `EowcAgg`, `EowcSort`) and the
watermark derivation (`watermark_transfer`, `watermark_columns`) are plan IR and live in
`engine.plan.time_nodes`, which the executors import without the planner.

Batch execution of these nodes: `engine.batch.time_exec`; streaming operators:
`engine.stream.build_time`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from engine import expr as ex
from engine.errors import InvalidParameterValue, SqlSyntaxError, not_supported
from engine.plan.helpers import _Col, _pos
from engine.plan.logical import Agg, Filter, Join, PlanNode, Project
from engine.plan.time_nodes import (
    EowcAgg,
    EowcSort,
    TemporalFilter,
    TimeBound,
    TimeWindow,
    mdn_us,
    watermark_columns,
)
from engine.types import Field, TypeKind

NOW_HINT = (
    "Streaming `now()` is currently only supported in GenerateSeries and TemporalFilter patterns."
)
EOWC_HINT = (
    "Group by a column with a watermark (such as window_start of TUMBLE over a table with a "
    "WATERMARK), or remove EMIT ON WINDOW CLOSE."
)


# ==========================================================================================
# TUMBLE / HOP
# ==========================================================================================
def plan_time_window(planner: Any, item: exp.Table) -> tuple[PlanNode, list[_Col]]:
    fn = item.this
    name = (fn.name if isinstance(fn, exp.Anonymous) else fn.sql_name()).lower()
    args = list(fn.expressions) if isinstance(fn, exp.Anonymous) else list(fn.args.values())
    if name not in ("tumble", "hop"):
        raise not_supported(f"table function {fn.sql()} is not supported yet")
    n_iv = (1, 2) if name == "tumble" else (2, 3)
    if len(args) < 2 + n_iv[0] or len(args) > 2 + n_iv[1]:
        want = (
            "TUMBLE(table, time_col, size [, offset])"
            if name == "tumble"
            else ("HOP(table, time_col, slide, size [, offset])")
        )
        raise SqlSyntaxError(f"wrong number of arguments for {name.upper()}, expected {want}")
    rel_arg = args[0]
    if not isinstance(rel_arg, (exp.Column, exp.Table, exp.Identifier)):
        raise not_supported(f"{name.upper()} over {rel_arg.sql()}", hint="Pass a table name.")
    ident = exp.Identifier(this=rel_arg.name, quoted=False)
    src = rel_arg.this if isinstance(rel_arg, (exp.Column, exp.Table)) else rel_arg
    ident.meta.update(getattr(src, "meta", None) or {})  # the name's position, for errors
    tbl = exp.Table(this=ident)
    if isinstance(rel_arg, exp.Column) and rel_arg.table:
        tbl.set("db", exp.Identifier(this=rel_arg.table))
    node, cols = planner._plan_from(tbl)
    alias = item.alias or rel_arg.name
    cols = [_Col(c.name, c.type, alias, c.hidden) for c in cols]
    ts_arg = args[1]
    if not isinstance(ts_arg, exp.Column):
        raise not_supported(f"{name.upper()} time column {ts_arg.sql()}", hint="Name a column.")
    matches = [i for i, c in enumerate(cols) if c.name == ts_arg.name and not c.hidden]
    if not matches:
        from engine.errors import UndefinedColumn

        raise UndefinedColumn(f'column "{ts_arg.name}" does not exist', position=_pos(ts_arg))
    ts_col = matches[0]
    ts_type = cols[ts_col].type
    if ts_type.kind not in (TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ):
        raise InvalidParameterValue(
            f"the time column of {name.upper()} must be of type timestamp or timestamptz, "
            f"not {ts_type.display}"
        )
    ivs = [interval_us(planner, a, name.upper()) for a in args[2:]]
    if name == "tumble":
        hop = size = ivs[0]
        offset = ivs[1] if len(ivs) > 1 else 0
    else:
        hop, size = ivs[0], ivs[1]
        offset = ivs[2] if len(ivs) > 2 else 0
    if size <= 0 or hop <= 0:
        raise InvalidParameterValue(
            f"Invalid arguments for {name.upper()} window function: window size must be positive"
        )
    if size % hop:
        raise InvalidParameterValue(
            f"Invalid arguments for HOP window function: window_size {_iv(size)} cannot be "
            f"divided by window_slide {_iv(hop)}"
        )
    fields = list(node.schema) + [
        Field("window_start", ts_type),
        Field("window_end", ts_type),
    ]
    n = len(node.schema)
    key = None
    if node.stream_key is not None:
        key = list(node.stream_key) + ([n] if name == "hop" else [])
    tw = TimeWindow(
        fields, key, input=node, ts_col=ts_col, kind=name, hop=hop, size=size, offset=offset
    )
    cols = cols + [_Col("window_start", ts_type, alias), _Col("window_end", ts_type, alias)]
    return tw, cols


def _iv(us: int) -> str:
    from engine.expr.temporal import format_interval

    return format_interval(0, 0, us * 1000)


def interval_us(planner: Any, node: exp.Expression, what: str) -> int:
    """A constant INTERVAL argument as microseconds (month intervals are refused)."""
    bound = ex.ExprBinder(ex.Scope([]), planner.params).bind(node)
    if bound.type.kind is TypeKind.UNKNOWN:
        bound = ex.cast(bound, ex.parse_data_type(exp.DataType.build("interval")))
    if bound.type.kind is not TypeKind.INTERVAL or not bound.is_constant():
        raise InvalidParameterValue(f"the window arguments of {what} must be constant intervals")
    v = ex.evaluate_constant(bound)
    if v is None:
        raise InvalidParameterValue(f"the window arguments of {what} must not be NULL")
    return mdn_us(v, what)


# ==========================================================================================
# temporal filters
# ==========================================================================================
_FLIP = {">": "<", ">=": "<=", "<": ">", "<=": ">="}
_CMP = {"greater": ">", "greater_equal": ">=", "less": "<", "less_equal": "<="}


def split_temporal(node: PlanNode, pred: ex.Expr) -> PlanNode:
    """Plan a streaming WHERE: temporal-filter conjuncts become a `TemporalFilter` node."""
    parts = _and_parts(pred)
    bounds: list[TimeBound] = []
    rest: list[ex.Expr] = []
    for p in parts:
        if not p.has_now():
            rest.append(p)
            continue
        b = _time_bounds(p)
        if b is None:
            raise not_supported("General `now()` function in streaming queries", hint=NOW_HINT)
        bounds.extend(b)
    if rest:
        from engine.expr import ops

        cond = rest[0]
        for r in rest[1:]:
            cond = ops.bind_and_or("AND", cond, r)
        node = Filter(node.schema, node.stream_key, input=node, predicate=cond)
    # batch execution evaluates the whole WHERE (the rest again, harmlessly)
    return TemporalFilter(node.schema, node.stream_key, input=node, bounds=bounds, predicate=pred)


def _and_parts(e: ex.Expr) -> list[ex.Expr]:
    if isinstance(e, ex.Func) and e.name == "and":
        return [x for a in e.args for x in _and_parts(a)]
    if type(e).__name__ == "_AndAll":
        return [x for a in e.children() for x in _and_parts(a)]
    return [e]


def _time_bounds(p: ex.Expr) -> list[TimeBound] | None:
    if isinstance(p, ex.Func) and p.name == "between" and len(p.args) == 3:
        lo = _bound(p.args[0], ">=", p.args[1])
        hi = _bound(p.args[0], "<=", p.args[2])
        return None if lo is None or hi is None else [lo, hi]
    if not isinstance(p, ex.Func) or p.name not in _CMP or len(p.args) != 2:
        return None
    b = _bound(p.args[0], _CMP[p.name], p.args[1])
    return None if b is None else [b]


def _bound(a: ex.Expr, cmp: str, b: ex.Expr) -> TimeBound | None:
    if a.has_now() and not b.has_now():
        a, b, cmp = b, a, _FLIP[cmp]
    if a.has_now() or not b.has_now():
        return None
    off = _now_offset(b)
    if off is None or not a.input_refs():
        return None
    if a.type.kind not in (TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ):
        return None
    return TimeBound(_strip_tz_cast(a), cmp, off)


def _strip_tz_cast(a: ex.Expr) -> ex.Expr:
    # timestamp -> timestamptz under the UTC session zone keeps the microseconds
    if isinstance(a, ex.Func) and a.name == "cast" and len(a.args) == 1:
        inner = a.args[0]
        if inner.type.kind in (TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ):
            return inner
    return a


def _now_offset(e: ex.Expr) -> int | None:
    """`now()`, `now() + c`, `now() - c` (c a constant interval) -> offset in microseconds."""
    if isinstance(e, ex.Func) and e.name == "now" and not e.args:
        return 0
    if isinstance(e, ex.Func) and e.name == "cast" and len(e.args) == 1:
        return _now_offset(e.args[0])
    if isinstance(e, ex.Func) and e.name in ("add", "subtract") and len(e.args) == 2:
        base, c = e.args
        if not c.is_constant() and e.name == "add" and base.is_constant():
            base, c = c, base
        if not c.is_constant() or c.type.kind is not TypeKind.INTERVAL:
            return None
        inner = _now_offset(base)
        v = ex.evaluate_constant(c)
        if inner is None or v is None or v.months:
            return None
        us = mdn_us(v, "temporal filters")
        return inner + us if e.name == "add" else inner - us
    return None


# ==========================================================================================
# EMIT ON WINDOW CLOSE
# ==========================================================================================
def apply_eowc(plan: PlanNode) -> PlanNode:
    """Make the view's aggregation emit on window close (or refuse, as RisingWave does)."""
    _refuse_over_window_eowc(plan)
    node = plan
    parent: PlanNode | None = None
    while isinstance(node, (Project, Filter)) and not isinstance(node, Agg):
        parent, node = node, node.input
    if isinstance(node, Agg) and node.group_keys:
        wcols = watermark_columns(node.input)
        hits = [j for j, g in enumerate(node.group_keys) if g in wcols]
        if hits:
            eo = EowcAgg(
                node.schema,
                node.stream_key,
                input=node.input,
                group_keys=node.group_keys,
                aggs=node.aggs,
                wm_key=hits[0],
            )
            if parent is None:
                return eo
            parent.input = eo  # type: ignore[attr-defined]
            return plan
    if not isinstance(node, Agg):
        wcols = watermark_columns(plan)
        if wcols and plan.stream_key is not None:
            return EowcSort(plan.schema, plan.stream_key, input=plan, wm_col=min(wcols))
    raise not_supported(
        "Emit-On-Window-Close mode requires a watermark column in GROUP BY.", hint=EOWC_HINT
    )


def _refuse_over_window_eowc(plan: PlanNode) -> None:
    """Window functions (OVER) cannot emit on window close yet: a late row can change the
    values of rows after it, so they are maintained as updates instead."""
    from engine.plan.logical_window import GroupTopN, OverWindow

    stack = [plan]
    while stack:
        p = stack.pop()
        if isinstance(p, (OverWindow, GroupTopN)):
            raise not_supported(
                "Emit-On-Window-Close mode for window functions (OVER)",
                hint="Remove EMIT ON WINDOW CLOSE: the view keeps window function values "
                "up to date as rows arrive, change and are deleted.",
            )
        stack.extend(p.inputs())


# ==========================================================================================
# interval joins
# ==========================================================================================
@dataclass(frozen=True)
class IntervalSpec:
    """Band `lo <= left[lt] - right[rt] <= hi` of an inner join (microseconds)."""

    left_time: int
    right_time: int  # index into the right input
    lo: int | None
    hi: int | None


def interval_spec(p: Join) -> IntervalSpec | None:
    """The time band of an inner equi-join over watermarked columns, if it has one."""
    if p.kind != "inner" or p.condition is None or not p.left_keys:
        return None
    nl = len(p.left.schema)
    lw, rw = watermark_columns(p.left), watermark_columns(p.right)
    found: dict[tuple[int, int], list[int | None]] = {}
    for part in _and_parts(p.condition):
        if not isinstance(part, ex.Func) or part.name not in _CMP or len(part.args) != 2:
            continue
        a, b = _col_plus(part.args[0]), _col_plus(part.args[1])
        if a is None or b is None:
            continue
        cmp = _CMP[part.name]
        if a[0] >= nl > b[0]:
            a, b, cmp = b, a, _FLIP[cmp]
        if not (a[0] < nl <= b[0]) or a[0] not in lw or b[0] - nl not in rw:
            continue
        # left + ca CMP right + cb  <=>  left - right CMP cb - ca
        c = b[1] - a[1]
        band = found.setdefault((a[0], b[0] - nl), [None, None])
        if cmp in (">", ">="):
            band[0] = c if band[0] is None else max(band[0], c)
        else:
            band[1] = c if band[1] is None else min(band[1], c)
    for (lt, rt), (lo, hi) in found.items():
        return IntervalSpec(lt, rt, lo, hi)
    return None


def _col_plus(e: ex.Expr) -> tuple[int, int] | None:
    """`col`, `col::timestamptz`, `col +/- constant interval` -> (column, offset us)."""
    if isinstance(e, ex.InputRef):
        if e.type.kind not in (TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ):
            return None
        return e.index, 0
    if isinstance(e, ex.Func) and e.name == "cast" and len(e.args) == 1:
        kinds = (TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ)
        return _col_plus(e.args[0]) if e.type.kind in kinds else None
    if isinstance(e, ex.Func) and e.name in ("add", "subtract") and len(e.args) == 2:
        base, c = e.args
        if not c.is_constant() or c.type.kind is not TypeKind.INTERVAL:
            return None
        t = _col_plus(base)
        v = ex.evaluate_constant(c)
        if t is None or v is None or v.months:
            return None
        us = mdn_us(v, "interval joins")
        return t[0], t[1] + (us if e.name == "add" else -us)
    return None


def check_streaming_now(plan: PlanNode) -> None:
    """Refuse `now()` outside temporal filters in a streaming plan (RisingWave's message)."""
    stack = [plan]
    while stack:
        p = stack.pop()
        exprs: list[Any] = []
        if isinstance(p, Project):
            exprs = list(p.exprs)
        elif isinstance(p, Filter):
            exprs = [p.predicate]
        elif isinstance(p, Join) and p.condition is not None:
            exprs = [p.condition]
        if any(e is not None and e.has_now() for e in exprs):
            raise not_supported("General `now()` function in streaming queries", hint=NOW_HINT)
        stack.extend(p.inputs())
