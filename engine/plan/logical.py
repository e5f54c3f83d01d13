"""Logical plan nodes: the bound, typed form of a query, shared by streaming and batch.

The planner (`engine.plan.planner`) turns a sqlglot SELECT into a tree of these nodes.
`engine.stream.build` turns the tree into dataflow operators for a materialized view;
`engine.batch.executor` interprets the same tree once over committed snapshots for
ad-hoc SELECT. Because both start from one tree and share the expression compiler, a
view's contents equal its query run ad hoc.

Every node has an output `schema` (hidden fields are carried for stream keys but left out
of `SELECT *` results) and a `stream_key`: the output columns that identify a row (the
materialized view's primary key), or None where no key can be derived.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.catalog import Relation
from engine.types import Field, SqlType

#: aggregate kinds of the ordered-set aggregates (`percentile_cont(f) WITHIN GROUP (ORDER BY
#: x)`): planned by engine.plan.plan_ordered_set, computed over the collected group values
ORDERED_SET_KINDS = ("percentile_cont", "percentile_disc", "mode")


@dataclass(frozen=True)
class AggSpec:
    """One aggregate call: `kind` over input column `arg` (None for count(*))."""

    kind: str  # count_star, count, sum, avg, min, max
    arg: int | None
    type: SqlType
    distinct: bool = False
    filter: int | None = None  # input column holding the FILTER (WHERE ...) predicate
    # string_agg/array_agg (engine.batch.agg_batch): separator and ORDER BY keys
    # ((input column, desc, nulls_first), ...)
    separator: str | None = None
    order: tuple[tuple[int, bool, bool], ...] = ()
    # kind "udaf": the user-defined aggregate's call (engine.expr.udf.UdfCall) over the
    # input columns holding its arguments
    udf: Any = None
    # two-argument aggregates (corr, covar_*, regr_*: `kind(arg, arg2)`, arg the dependent Y)
    arg2: int | None = None
    # ordered-set aggregates (percentile_cont / percentile_disc): the constant fraction
    # (a float, or None for NULL) or a tuple of them for the array form
    direct: Any = None
    # sum/avg over floats count their NaN / Infinity / -Infinity apart, so a view that
    # deletes them gets the finite sum back (agg_calls._SumLike); False only in plans
    # stored before (their group rows have the older layout)
    float_specials: bool = True

    def __str__(self) -> str:
        inner = "*" if self.arg is None else f"${self.arg}"
        if self.arg2 is not None:
            inner += f", ${self.arg2}"
        if self.distinct:
            inner = "distinct " + inner
        name = "count" if self.kind == "count_star" else self.kind
        if self.udf is not None:
            name, inner = self.udf.name, ", ".join(str(a) for a in self.udf.args)
        if self.direct is not None or self.kind.startswith("percentile"):
            d = self.direct
            inner = f"{list(d) if isinstance(d, tuple) else d}) within group (order by {inner}"
        s = f"{name}({inner})"
        if self.filter is not None:
            s += f" filter(${self.filter})"
        return s


@dataclass(frozen=True)
class SortKey:
    index: int
    desc: bool = False
    nulls_first: bool | None = None  # None: PostgreSQL default (NULLS LAST for ASC)

    @property
    def effective_nulls_first(self) -> bool:
        return self.desc if self.nulls_first is None else self.nulls_first


@dataclass(eq=False)
class PlanNode:
    schema: list[Field]
    stream_key: list[int] | None

    def inputs(self) -> list[PlanNode]:
        return []

    def describe(self) -> str:
        return type(self).__name__

    def explain(self, indent: int = 0) -> list[str]:
        lines = ["  " * indent + ("└─" if indent else "") + self.describe()]
        for child in self.inputs():
            lines.extend(child.explain(indent + 1))
        return lines


@dataclass(eq=False)
class Scan(PlanNode):
    relation: Relation = None  # type: ignore[assignment]

    def describe(self) -> str:
        cols = ", ".join(f.name for f in self.schema)
        return f"Scan {{ table: {self.relation.name}, columns: [{cols}] }}"


@dataclass(eq=False)
class SystemScan(PlanNode):
    """A scan of a system relation (`engine.catalog.system`). `table` is filled by
    `load_system_scans` before the batch executor runs."""

    relation: Any = None  # engine.catalog.system.SystemRelation
    table: Any = None  # pyarrow.Table once loaded

    def describe(self) -> str:
        cols = ", ".join(f.name for f in self.schema)
        name = f"{self.relation.schema}.{self.relation.name}"
        return f"SystemScan {{ table: {name}, columns: [{cols}] }}"


@dataclass(eq=False)
class TableFunction(PlanNode):
    """A set-returning function in FROM (engine.plan.plan_tablefunc); `args` are evaluated
    once, when the node runs, over no input columns."""

    name: str = ""
    args: list[Any] = field(default_factory=list)  # engine.expr.Expr
    ordinality: bool = False
    udf: Any = None  # a Python table function's routine (engine.expr.udf.PythonRoutine)

    def describe(self) -> str:
        return f"TableFunction {{ {self.name}({', '.join(str(a) for a in self.args)}) }}"


@dataclass(eq=False)
class ProjectSet(PlanNode):
    """Input columns plus the rows of set-returning calls in the select list
    (engine.plan.plan_srf): each input row repeats once per element of its longest call."""

    input: PlanNode = None  # type: ignore[assignment]
    srfs: list[tuple[str, list[Any]]] = field(default_factory=list)
    # user-defined table functions among `srfs`: name -> engine.expr.udf.PythonRoutine
    routines: dict[str, Any] = field(default_factory=dict)
    # the last column is each row's position among its input row's outputs (bigint), in
    # batch plans too (a lateral table function's WITH ORDINALITY, engine.plan.plan_lateral)
    position: bool = False

    def inputs(self) -> list[PlanNode]:
        return [self.input]

    def describe(self) -> str:
        calls = ", ".join(f"{n}({', '.join(str(a) for a in args)})" for n, args in self.srfs)
        return f"ProjectSet {{ {calls} }}"


@dataclass(eq=False)
class WorkTable(PlanNode):
    """The rows of the previous iteration of a recursive CTE (engine.plan.plan_recursive)."""

    table: Any = None  # pyarrow.Table, set by the executor

    def describe(self) -> str:
        return "WorkTable"


@dataclass(eq=False)
class RecursiveUnion(PlanNode):
    """WITH RECURSIVE: `anchor`, then `step` over `work` until no new rows."""

    anchor: PlanNode = None  # type: ignore[assignment]
    step: PlanNode = None  # type: ignore[assignment]
    work: WorkTable = None  # type: ignore[assignment]
    distinct: bool = False

    def inputs(self) -> list[PlanNode]:
        return [self.anchor, self.step]

    def describe(self) -> str:
        return f"RecursiveUnion {{ distinct: {str(self.distinct).lower()} }}"


def load_system_scans(node: PlanNode, ctx: Any) -> None:
    """Compute every system relation `node` reads (no lock: providers read the copy-on-write
    catalog and the runtime's status as they are)."""
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, SystemScan) and n.table is None:
            t = n.relation.load(ctx)
            if len(n.schema) > t.num_columns:  # the hidden tableoid column
                import pyarrow as pa

                t = t.append_column("tableoid", pa.repeat(pa.scalar(n.relation.oid, pa.int32()),
                                                          t.num_rows))  # fmt: skip
            n.table = t
        stack.extend(n.inputs())


@dataclass(eq=False)
class Filter(PlanNode):
    input: PlanNode = None  # type: ignore[assignment]
    predicate: Any = None  # engine.expr.Expr

    def inputs(self) -> list[PlanNode]:
        return [self.input]

    def describe(self) -> str:
        return f"Filter {{ predicate: {self.predicate} }}"


@dataclass(eq=False)
class Project(PlanNode):
    input: PlanNode = None  # type: ignore[assignment]
    exprs: list[Any] = field(default_factory=list)  # engine.expr.Expr

    def inputs(self) -> list[PlanNode]:
        return [self.input]

    def describe(self) -> str:
        return f"Project {{ exprs: [{', '.join(str(e) for e in self.exprs)}] }}"


@dataclass(eq=False)
class Agg(PlanNode):
    input: PlanNode = None  # type: ignore[assignment]
    group_keys: list[int] = field(default_factory=list)
    aggs: list[AggSpec] = field(default_factory=list)

    def inputs(self) -> list[PlanNode]:
        return [self.input]

    def describe(self) -> str:
        kind = "HashAgg" if self.group_keys else "SimpleAgg"
        keys = ", ".join(f"${k}" for k in self.group_keys)
        aggs = ", ".join(str(a) for a in self.aggs)
        return f"{kind} {{ group_key: [{keys}], aggs: [{aggs}] }}"


@dataclass(eq=False)
class Join(PlanNode):
    left: PlanNode = None  # type: ignore[assignment]
    right: PlanNode = None  # type: ignore[assignment]
    kind: str = "inner"  # inner, left, right, full, cross
    left_keys: list[int] = field(default_factory=list)
    right_keys: list[int] = field(default_factory=list)
    condition: Any = None  # residual predicate over left ++ right columns

    def inputs(self) -> list[PlanNode]:
        return [self.left, self.right]

    def describe(self) -> str:
        eq = ", ".join(
            f"${a} = ${b + len(self.left.schema)}"
            for a, b in zip(self.left_keys, self.right_keys, strict=True)
        )
        cond = f", condition: {self.condition}" if self.condition is not None else ""
        return f"HashJoin {{ type: {self.kind}, predicate: [{eq}]{cond} }}"


@dataclass(eq=False)
class Sort(PlanNode):
    input: PlanNode = None  # type: ignore[assignment]
    keys: list[SortKey] = field(default_factory=list)

    def inputs(self) -> list[PlanNode]:
        return [self.input]

    def describe(self) -> str:
        ks = ", ".join(f"${k.index} {'DESC' if k.desc else 'ASC'}" for k in self.keys)
        return f"Sort {{ order: [{ks}] }}"


@dataclass(eq=False)
class Limit(PlanNode):
    input: PlanNode = None  # type: ignore[assignment]
    limit: int | None = None
    offset: int = 0
    #: FETCH FIRST n ROWS WITH TIES: also the rows after the n-th equal to it on the input
    #: Sort's keys (ad hoc only; the planner refuses it in views)
    with_ties: bool = False

    def inputs(self) -> list[PlanNode]:
        return [self.input]

    def describe(self) -> str:
        ties = ", with_ties: true" if self.with_ties else ""
        return f"Limit {{ limit: {self.limit}, offset: {self.offset}{ties} }}"


@dataclass(eq=False)
class Values(PlanNode):
    rows: list[list[Any]] = field(default_factory=list)  # rows of bound constant Exprs

    def describe(self) -> str:
        return f"Values {{ rows: {len(self.rows)} }}"


@dataclass(eq=False)
class UnionAll(PlanNode):
    children: list[PlanNode] = field(default_factory=list)

    def inputs(self) -> list[PlanNode]:
        return list(self.children)

    def describe(self) -> str:
        return "Union { all: true }"


def relations_scanned(node: PlanNode) -> list[Relation]:
    out: list[Relation] = []
    stack = [node]
    while stack:
        n = stack.pop()
        if isinstance(n, Scan) and all(r.id != n.relation.id for r in out):
            out.append(n.relation)
        stack.extend(n.inputs())
    return out
