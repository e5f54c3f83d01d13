"""Time in plans: the nodes of windows, temporal filters, EOWC and dynamic filters, and
how watermarks flow through a plan.

Plan IR (see docs/architecture.md, "Layers"): built by the planner (`engine.plan.plan_time`,
`engine.plan.plan_dynamic`), lowered to stream plan nodes (`engine.plan.stream_plan`, which
reuses `monotone` and `TimeBound`) and run by the batch executor (`engine.batch.time_exec`).

Watermarks are tracked per column: `watermark_transfer(node)` says, for each output column
of a plan node, which input columns' watermarks it derives from and how (a monotone map
over int64 microseconds); `watermark_columns` uses it statically for the EOWC check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine import expr as ex
from engine.civil import US_PER_DAY
from engine.errors import not_supported
from engine.plan.logical import Agg, Filter, Join, PlanNode, Project, Scan
from engine.types import TypeKind


def floor_to(v: int, step: int, offset: int) -> int:
    return v - (v - offset) % step


def mdn_us(v: Any, what: str) -> int:
    if v.months:
        raise not_supported(
            f"intervals with months or years in {what}",
            hint="Use days instead (INTERVAL '30' DAY).",
        )
    return int(v.days) * US_PER_DAY + int(v.nanoseconds) // 1000


@dataclass(eq=False)
class TimeWindow(PlanNode):
    """TUMBLE/HOP: input columns + window_start + window_end (all sizes in microseconds)."""

    input: PlanNode = None  # type: ignore[assignment]
    ts_col: int = 0
    kind: str = "tumble"  # or "hop"
    hop: int = 0
    size: int = 0
    offset: int = 0

    def inputs(self) -> list[PlanNode]:
        return [self.input]

    def window_start_watermark(self, wm: int) -> int:
        if self.kind == "tumble":
            return floor_to(wm, self.size, self.offset)
        return floor_to(wm, self.hop, self.offset) - self.size + self.hop

    def describe(self) -> str:
        from engine.expr.temporal import format_interval

        def iv(us: int) -> str:
            return format_interval(0, 0, us * 1000)

        if self.kind == "tumble":
            return f"Tumble {{ time_col: ${self.ts_col}, size: {iv(self.size)} }}"
        return (
            f"HopWindow {{ time_col: ${self.ts_col}, slide: {iv(self.hop)}, "
            f"size: {iv(self.size)} }}"
        )


@dataclass(frozen=True)
class TimeBound:
    """`expr CMP now() + offset_us` with CMP one of > >= < <= (expr never uses now())."""

    expr: Any  # engine.expr.Expr, type timestamp/timestamptz
    cmp: str
    offset_us: int

    def __str__(self) -> str:
        sign = "+" if self.offset_us >= 0 else "-"
        return f"{self.expr} {self.cmp} now() {sign} {abs(self.offset_us)}us"


@dataclass(eq=False)
class TemporalFilter(PlanNode):
    """Rows visible while their bounds against `now()` hold; they enter/expire with time."""

    input: PlanNode = None  # type: ignore[assignment]
    bounds: list[TimeBound] = field(default_factory=list)
    predicate: Any = None  # the same condition as a plain predicate (batch execution)

    def inputs(self) -> list[PlanNode]:
        return [self.input]

    def describe(self) -> str:
        return f"TemporalFilter {{ predicate: {' AND '.join(str(b) for b in self.bounds)} }}"


@dataclass(eq=False)
class EowcAgg(Agg):
    """A GROUP BY that emits each group once, when the watermark passes (EOWC)."""

    wm_key: int = 0  # position in group_keys of the watermark column

    def describe(self) -> str:
        d = super().describe()
        return d[:-2] + f", emit_on_window_close: true, watermark_key: ${self.wm_key} }}"


@dataclass(eq=False)
class EowcSort(PlanNode):
    """EOWC without aggregation: rows appear once, when the watermark passes `wm_col`."""

    input: PlanNode = None  # type: ignore[assignment]
    wm_col: int = 0

    def inputs(self) -> list[PlanNode]:
        return [self.input]

    def describe(self) -> str:
        return f"EowcSort {{ sort_column: ${self.wm_col} }}"


@dataclass(eq=False)
class DynamicFilter(PlanNode):
    """Left rows for which `predicate` (over left columns + the right value) holds."""

    left: PlanNode = None  # type: ignore[assignment]
    right: PlanNode = None  # type: ignore[assignment]
    right_col: int = 0  # the value's column in the right plan
    predicate: Any = None  # engine.expr.Expr; column len(left.schema) is the right value
    left_expr: Any = None  # the compared expression over the left columns

    def inputs(self) -> list[PlanNode]:
        return [self.left, self.right]

    def describe(self) -> str:
        return f"DynamicFilter {{ predicate: {self.predicate} }}"


# ==========================================================================================
# watermark derivation
# ==========================================================================================
WmFn = Callable[[int], int] | None
# (output column, [(input port, input column)], map); several sources take their minimum
Transfer = list[tuple[int, list[tuple[int, int]], WmFn]]


def relation_watermark_columns(rel: Any) -> dict[int, WmFn]:
    """Columns of a table/source/view that carry a watermark."""
    wm = rel.extra.get("watermark")
    if wm is not None:
        return {int(wm["column"]): None}
    return {int(c): None for c in rel.extra.get("watermark_columns", [])}


def watermark_transfer(p: PlanNode) -> Transfer:
    if isinstance(p, (Filter, TemporalFilter, DynamicFilter, EowcSort)):
        return [(i, [(0, i)], None) for i in range(len(p.schema))]
    if isinstance(p, Project):
        out: Transfer = []
        for i, e in enumerate(p.exprs):
            t = monotone(e)
            if t is not None:
                out.append((i, [(0, t[0])], t[1]))
        return out
    if isinstance(p, Agg):
        return [(j, [(0, g)], None) for j, g in enumerate(p.group_keys)]
    if isinstance(p, TimeWindow):
        n = len(p.input.schema)
        out = [(i, [(0, i)], None) for i in range(n)]
        ws = p.window_start_watermark
        size = p.size
        out.append((n, [(0, p.ts_col)], ws))
        out.append((n + 1, [(0, p.ts_col)], lambda v: ws(v) + size))
        return out
    if isinstance(p, Join) and p.kind == "inner":
        nl = len(p.left.schema)
        out = []
        for a, b in zip(p.left_keys, p.right_keys, strict=True):
            srcs = [(0, a), (1, b)]
            out += [(a, srcs, None), (nl + b, srcs, None)]
        return out
    return []


def monotone(e: ex.Expr) -> tuple[int, WmFn] | None:
    """`col`, `col::timestamptz`, `col +/- constant interval` -> (column, map)."""
    if isinstance(e, ex.InputRef):
        return e.index, None
    if isinstance(e, ex.Func) and e.name == "cast" and len(e.args) == 1:
        inner = e.args[0]
        kinds = (TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ)
        if inner.type.kind in kinds and e.type.kind in kinds:
            return monotone(inner)
        return None
    if isinstance(e, ex.Func) and e.name == "date_trunc" and len(e.args) == 2:
        unit, base = e.args
        t = monotone(base)
        if not unit.is_constant() or t is None or base.type != e.type:
            return None
        return t[0], _eval_map(e, base, t[1])
    if isinstance(e, ex.Func) and e.name in ("add", "subtract") and len(e.args) == 2:
        base, c = e.args
        if not c.is_constant() or c.type.kind is not TypeKind.INTERVAL:
            return None
        t = monotone(base)
        v = ex.evaluate_constant(c)
        if t is None or v is None or v.months:
            return None
        us = mdn_us(v, "watermarks") * (1 if e.name == "add" else -1)
        f = t[1]
        return t[0], (lambda x: x + us) if f is None else (lambda x: f(x) + us)
    return None


def _eval_map(e: ex.Func, base: ex.Expr, inner: WmFn) -> WmFn:
    """A monotone function of its time argument, applied to a watermark by evaluating it
    over a one-row batch (`date_trunc('minute', ts)` of the watermark)."""
    import pyarrow as pa

    arrow_t = base.type.arrow
    fn = e.with_children([e.args[0], ex.InputRef(0, base.type, "wm")])

    def apply(v: int) -> int:
        x = v if inner is None else inner(v)
        col = pa.array([x], pa.int64()).cast(arrow_t)
        out = fn.eval(pa.RecordBatch.from_arrays([col], names=["wm"]), ex.EvalContext())
        return int(out.cast(pa.int64())[0].as_py())

    return apply


def watermark_columns(p: PlanNode) -> set[int]:
    """Output columns of `p` that carry a watermark (static, for planning checks)."""
    if isinstance(p, Scan):
        return set(relation_watermark_columns(p.relation))
    ins = [watermark_columns(c) for c in p.inputs()]
    out: set[int] = set()
    for col, srcs, _fn in watermark_transfer(p):
        if all(c in ins[port] for port, c in srcs):
            out.add(col)
    return out
