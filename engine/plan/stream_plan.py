"""Stream plan nodes: the typed, stored form of a streaming job (materialized view or sink).

The logical plan (`engine.plan.logical`) says what a query computes; the stream plan says
how a view computes it incrementally: one node per dataflow operator, each carrying
everything needed to build that operator, including the **state tables the planner
decided** (`TableDesc`: a stable table id, the table's columns, its key columns in order,
its value columns and its distribution key).

Lifecycle:

1. `engine.plan.stream_lower.lower_stream_plan` lowers a logical plan at CREATE (and for
   EXPLAIN), allocating state-table ids;
2. `engine.plan.stream_codec` stores the plan as versioned JSON in the relation's catalog
   entry (`extra["stream_plan"]`);
3. at recovery the stored plan is decoded and built (`engine.stream.build`); the view is
   never re-planned from its SQL, so a changed planner cannot attach old state to the
   wrong operator;
4. `explain_lines` renders it for EXPLAIN in RisingWave's style.

Nodes are listed in topological (post-) order; a node's inputs are upstream relations
(`("rel", relation_id)`, a table scan) or earlier nodes (`("node", index)`). The state
tables of node `i` are named `n<i>.<name>` (the materialize node's `mat.<name>`), the
names operators ask their allocator for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from engine.expr.temporal import format_interval
from engine.plan.logical import AggSpec, SortKey
from engine.plan.logical_window import DEFAULT_FRAME, WindowCall
from engine.plan.time_nodes import TimeBound, floor_to, monotone
from engine.types import Field

#: (out column, [(input port, input column)], monotone map or None); see time_nodes
Transfer = list[tuple[int, list[tuple[int, int]], Any]]


@dataclass
class TableDesc:
    """One state table as the planner decided it.

    `columns` are descriptive names (the operator encodes its own row layout); `key` lists
    the key columns in order (indexes into `columns`), every other column is a value
    column; `dist_key` (indexes into `columns`) is what rows will be sharded by.
    """

    name: str  # n<i>.<local name>, as recorded in the relation's `state_tables`
    id: int
    columns: list[str]
    key: list[int]
    dist_key: list[int]

    @property
    def local(self) -> str:
        return self.name.split(".", 1)[1]

    @property
    def values(self) -> list[int]:
        return [i for i in range(len(self.columns)) if i not in self.key]

    def describe(self) -> str:
        cols = ", ".join(self.columns)
        pk = ", ".join(f"${i} ASC" for i in self.key)
        vals = ", ".join(str(i) for i in self.values)
        dist = ", ".join(str(i) for i in self.dist_key)
        return (
            f"Table {self.id} {{ name: {self.name}, columns: [{cols}], primary key: [{pk}], "
            f"value indices: [{vals}], distribution key: [{dist}] }}"
        )


Input = tuple[str, int]  # ("rel", relation id) or ("node", index)


@dataclass(eq=False)
class StreamNode:
    """One dataflow operator. `input_schemas[j]` is the schema of `inputs[j]`."""

    kind: ClassVar[str] = "StreamNode"
    inputs: list[Input]
    input_schemas: list[list[Field]]
    schema: list[Field]
    stream_key: list[int] | None
    tables: list[TableDesc] = field(default_factory=list)

    # -- explain -------------------------------------------------------------------------
    def details(self) -> list[tuple[str, str]]:
        return []

    def line(self) -> str:
        parts = [f"{k}: {v}" for k, v in self.details()]
        if self.stream_key is not None:
            parts.append(f"stream_key: [{_names(self.schema, self.stream_key)}]")
        if self.tables:
            parts.append(
                "state tables: [" + ", ".join(f"{t.local}: {t.id}" for t in self.tables) + "]"
            )
        return f"{self.kind} {{ {', '.join(parts)} }}"

    def in_names(self, port: int, cols: list[int]) -> str:
        return _names(self.input_schemas[port], cols)

    # -- watermarks ----------------------------------------------------------------------
    def watermark_transfer(self) -> Transfer:
        return []


def _names(schema: list[Field], cols: list[int]) -> str:
    return ", ".join(schema[c].name if c < len(schema) else f"${c}" for c in cols)


def _order(schema: list[Field], keys: list[SortKey]) -> str:
    out = []
    for k in keys:
        s = f"{_names(schema, [k.index])} {'DESC' if k.desc else 'ASC'}"
        if k.nulls_first is not None:
            s += " NULLS FIRST" if k.nulls_first else " NULLS LAST"
        out.append(s)
    return ", ".join(out)


def _identity(n: int) -> Transfer:
    return [(i, [(0, i)], None) for i in range(n)]


@dataclass(eq=False)
class StreamValues(StreamNode):
    """ValuesOp: constant rows with no upstream (VALUES, a SELECT without FROM, a table
    function over constants in FROM), emitted once, in the job's first epoch.

    Either `rows` (bound constant expressions, one list per row; the planner adds each
    row's number as a hidden last column) or the table function `func` over `func_args`
    (`engine.plan.logical.TableFunction`), whose rows get their number appended as the
    hidden last column. The operator records in its `meta` table that it has emitted, in
    the same checkpoint as the rows it sent downstream, so recovery never sends them again.
    """

    kind: ClassVar[str] = "StreamValues"
    rows: list[list[Any]] = field(default_factory=list)  # engine.expr.Expr
    func: str = ""
    func_args: list[Any] = field(default_factory=list)  # engine.expr.Expr
    func_ordinality: bool = False

    def details(self) -> list[tuple[str, str]]:
        if self.func:
            return [("function", f"{self.func}({', '.join(str(a) for a in self.func_args)})")]
        shown = ", ".join("(" + ", ".join(str(e) for e in r) + ")" for r in self.rows[:8])
        more = ", ..." if len(self.rows) > 8 else ""
        return [("rows", f"[{shown}{more}]")]


@dataclass(eq=False)
class StreamFilter(StreamNode):
    kind: ClassVar[str] = "StreamFilter"
    predicate: Any = None  # engine.expr.Expr

    def details(self) -> list[tuple[str, str]]:
        return [("predicate", str(self.predicate))]

    def watermark_transfer(self) -> Transfer:
        return _identity(len(self.schema))


@dataclass(eq=False)
class StreamProject(StreamNode):
    kind: ClassVar[str] = "StreamProject"
    exprs: list[Any] = field(default_factory=list)  # engine.expr.Expr

    def details(self) -> list[tuple[str, str]]:
        shown = []
        for e, f in zip(self.exprs, self.schema, strict=True):
            s = str(e)
            shown.append(s if s == f.name else f"{s} as {f.name}")
        return [("exprs", f"[{', '.join(shown)}]")]

    def watermark_transfer(self) -> Transfer:
        out: Transfer = []
        for i, e in enumerate(self.exprs):
            t = monotone(e)
            if t is not None:
                out.append((i, [(0, t[0])], t[1]))
        return out


@dataclass(eq=False)
class StreamProjectSet(StreamNode):
    """ProjectSetOp: set-returning calls of the select list (`srfs`: (name, argument
    exprs)); `udtfs[i]` is the call of a Python table function for `srfs[i]` (a UdfCall
    that carries its routine, bound again from the catalog at recovery) or None."""

    kind: ClassVar[str] = "StreamProjectSet"
    srfs: list[Any] = field(default_factory=list)
    udtfs: list[Any] = field(default_factory=list)

    def details(self) -> list[tuple[str, str]]:
        calls = ", ".join(f"{n}({', '.join(str(a) for a in args)})" for n, args in self.srfs)
        return [("select_list", f"[{calls}]")]


@dataclass(eq=False)
class StreamHashAgg(StreamNode):
    """HashAggOp; `StreamSimpleAgg` in EXPLAIN when there are no group keys."""

    kind: ClassVar[str] = "StreamHashAgg"
    group_keys: list[int] = field(default_factory=list)
    aggs: list[AggSpec] = field(default_factory=list)
    # min/max calls over an append-only input: one value per group, no multiset table
    # (engine.plan.append_only); empty in plans stored before this field existed
    append_only_extremes: list[int] = field(default_factory=list)

    def line(self) -> str:
        s = super().line()
        return s if self.group_keys else s.replace("StreamHashAgg", "StreamSimpleAgg", 1)

    def details(self) -> list[tuple[str, str]]:
        out = [("aggs", f"[{', '.join(_agg_str(a, self.input_schemas[0]) for a in self.aggs)}]")]
        if self.group_keys:
            out.insert(0, ("group_key", f"[{self.in_names(0, self.group_keys)}]"))
        return out

    def watermark_transfer(self) -> Transfer:
        return [(j, [(0, g)], None) for j, g in enumerate(self.group_keys)]


def _agg_str(a: AggSpec, schema: list[Field]) -> str:
    name = "count" if a.kind == "count_star" else a.kind
    inner = "*" if a.arg is None else _names(schema, [a.arg])
    if a.arg is not None and a.arg2 is not None:
        inner = _names(schema, [a.arg, a.arg2])
    if a.udf is not None:  # a user-defined aggregate over its argument columns
        name, inner = a.udf.name, _names(schema, [r.index for r in a.udf.args])
    if a.distinct:
        inner = "distinct " + inner
    s = f"{name}({inner})"
    if a.order:
        s = (
            s[:-1]
            + " order_by("
            + ", ".join(f"{_names(schema, [c])} {'DESC' if d else 'ASC'}" for c, d, _ in a.order)
            + "))"
        )
    if a.filter is not None:
        s += f" filter({_names(schema, [a.filter])})"
    return s


@dataclass(eq=False)
class StreamCollectAgg(StreamHashAgg):
    """string_agg/array_agg/jsonb_agg: per touched group recompute (CollectAggOp)."""

    kind: ClassVar[str] = "StreamCollectAgg"
    input_key: list[int] = field(default_factory=list)

    def line(self) -> str:
        return StreamNode.line(self)


@dataclass(eq=False)
class StreamEowcAgg(StreamHashAgg):
    """EMIT ON WINDOW CLOSE aggregation (EowcAggOp)."""

    kind: ClassVar[str] = "StreamEowcAgg"
    wm_key: int = 0

    def line(self) -> str:
        return StreamNode.line(self)

    def details(self) -> list[tuple[str, str]]:
        wm = self.in_names(0, [self.group_keys[self.wm_key]])
        return [*super().details(), ("emit_on_window_close", "true"), ("watermark_key", wm)]


@dataclass(eq=False)
class StreamHashJoin(StreamNode):
    kind: ClassVar[str] = "StreamHashJoin"
    join_type: str = "inner"
    left_keys: list[int] = field(default_factory=list)
    right_keys: list[int] = field(default_factory=list)
    condition: Any = None
    left_stream_key: list[int] = field(default_factory=list)
    right_stream_key: list[int] = field(default_factory=list)
    # both inputs never retract (engine.plan.append_only): the sides only insert and the
    # output is inserts only; False in plans stored before this field existed
    append_only: bool = False

    def line(self) -> str:
        s = super().line()
        return s.replace(self.kind, f"{self.kind} [append_only]", 1) if self.append_only else s

    def details(self) -> list[tuple[str, str]]:
        ls, rs = self.input_schemas
        eq = " AND ".join(
            f"{_names(ls, [a])} = {_names(rs, [b])}"
            for a, b in zip(self.left_keys, self.right_keys, strict=True)
        )
        out = [("type", _JOIN_TYPES.get(self.join_type, self.join_type))]
        out.append(("predicate", eq or "true"))
        if self.condition is not None:
            out.append(("condition", str(self.condition)))
        return out

    def watermark_transfer(self) -> Transfer:
        if self.join_type != "inner":
            return []
        nl = len(self.input_schemas[0])
        out: Transfer = []
        for a, b in zip(self.left_keys, self.right_keys, strict=True):
            srcs = [(0, a), (1, b)]
            out += [(a, srcs, None), (nl + b, srcs, None)]
        return out


_JOIN_TYPES = {
    "inner": "Inner",
    "left": "LeftOuter",
    "right": "RightOuter",
    "full": "FullOuter",
    "cross": "Inner",
    "semi": "LeftSemi",
    "anti": "LeftAnti",
}


@dataclass(eq=False)
class StreamIntervalJoin(StreamHashJoin):
    """An inner join whose residual bounds `left.t - right.t` (IntervalJoinOp)."""

    kind: ClassVar[str] = "StreamIntervalJoin"
    left_time: int = 0
    right_time: int = 0
    lo: int | None = None
    hi: int | None = None

    def details(self) -> list[tuple[str, str]]:
        ls, rs = self.input_schemas
        band = f"{_names(ls, [self.left_time])} - {_names(rs, [self.right_time])}"
        lo = "-inf" if self.lo is None else f"{self.lo}us"
        hi = "+inf" if self.hi is None else f"{self.hi}us"
        return [*super().details(), ("band", f"{lo} <= {band} <= {hi}")]


@dataclass(eq=False)
class StreamTopN(StreamNode):
    """TopNOp: ORDER BY .. LIMIT (no groups) or a group top-N with a rank column."""

    kind: ClassVar[str] = "StreamTopN"
    order_by: list[SortKey] = field(default_factory=list)
    limit: int | None = None
    offset: int = 0
    group_keys: list[int] = field(default_factory=list)
    input_key: list[int] = field(default_factory=list)
    with_rank: bool = False
    rank_name: str = "rn"
    # the input never retracts: each group keeps only its first offset + limit rows
    # (AppendOnlyTopNOp); False in plans stored before that operator existed
    append_only: bool = False

    def line(self) -> str:
        s = super().line()
        name = "StreamGroupTopN" if self.with_rank else "StreamTopN"
        if self.append_only:
            name = name.replace("Stream", "StreamAppendOnly", 1)
        return s.replace("StreamTopN", name, 1)

    def details(self) -> list[tuple[str, str]]:
        out = [
            ("order", f"[{_order(self.input_schemas[0], self.order_by)}]"),
            ("limit", str(self.limit)),
            ("offset", str(self.offset)),
        ]
        if self.with_rank:
            out.insert(0, ("group_key", f"[{self.in_names(0, self.group_keys)}]"))
            out.append(("output_rank", self.rank_name))
        return out


@dataclass(eq=False)
class StreamOverWindow(StreamNode):
    kind: ClassVar[str] = "StreamOverWindow"
    partition_by: list[int] = field(default_factory=list)
    order_by: list[SortKey] = field(default_factory=list)
    calls: list[WindowCall] = field(default_factory=list)
    tiebreak: list[int] = field(default_factory=list)
    input_key: list[int] = field(default_factory=list)

    def details(self) -> list[tuple[str, str]]:
        ins = self.input_schemas[0]
        n = len(ins)
        calls = []
        for j, c in enumerate(self.calls):
            s = str(c)
            for a in sorted(c.args, reverse=True):
                s = s.replace(f"${a}", _names(ins, [a]))
            frame = "" if c.frame == DEFAULT_FRAME else f" {c.frame}"
            calls.append(f"{s}{frame} as {self.schema[n + j].name}")
        return [
            ("partition_by", f"[{self.in_names(0, self.partition_by)}]"),
            ("order_by", f"[{_order(ins, self.order_by)}]"),
            ("window_functions", f"[{', '.join(calls)}]"),
        ]


@dataclass(eq=False)
class StreamUnion(StreamNode):
    kind: ClassVar[str] = "StreamUnion"

    def details(self) -> list[tuple[str, str]]:
        return [("all", "true")]


@dataclass(eq=False)
class StreamTimeWindow(StreamNode):
    """TUMBLE/HOP (sizes in microseconds)."""

    kind: ClassVar[str] = "StreamTimeWindow"
    ts_col: int = 0
    window_kind: str = "tumble"
    hop: int = 0
    size: int = 0
    offset: int = 0

    def line(self) -> str:
        s = super().line()
        name = "StreamTumble" if self.window_kind == "tumble" else "StreamHopWindow"
        return s.replace("StreamTimeWindow", name, 1)

    def details(self) -> list[tuple[str, str]]:
        def iv(us: int) -> str:
            return format_interval(0, 0, us * 1000)

        out = [("time_col", self.in_names(0, [self.ts_col]))]
        if self.window_kind == "hop":
            out.append(("slide", iv(self.hop)))
        out.append(("size", iv(self.size)))
        if self.offset:
            out.append(("offset", iv(self.offset)))
        return out

    def window_start(self, wm: int) -> int:
        if self.window_kind == "tumble":
            return floor_to(wm, self.size, self.offset)
        return floor_to(wm, self.hop, self.offset) - self.size + self.hop

    def watermark_transfer(self) -> Transfer:
        n = len(self.input_schemas[0])
        size = self.size
        out = _identity(n)
        out.append((n, [(0, self.ts_col)], self.window_start))
        out.append((n + 1, [(0, self.ts_col)], lambda v: self.window_start(v) + size))
        return out


@dataclass(eq=False)
class StreamTemporalFilter(StreamNode):
    kind: ClassVar[str] = "StreamTemporalFilter"
    bounds: list[TimeBound] = field(default_factory=list)

    def details(self) -> list[tuple[str, str]]:
        return [("predicate", " AND ".join(str(b) for b in self.bounds))]

    def watermark_transfer(self) -> Transfer:
        return _identity(len(self.schema))


@dataclass(eq=False)
class StreamDynamicFilter(StreamNode):
    """Left rows compared with the right input's single value (DynamicFilterOp)."""

    kind: ClassVar[str] = "StreamDynamicFilter"
    predicate: Any = None  # column len(left schema) is the right value
    right_col: int = 0
    left_expr: Any = None

    def details(self) -> list[tuple[str, str]]:
        return [("predicate", str(self.predicate))]

    def watermark_transfer(self) -> Transfer:
        return _identity(len(self.schema))


@dataclass(eq=False)
class StreamEowcSort(StreamNode):
    kind: ClassVar[str] = "StreamEowcSort"
    wm_col: int = 0

    def details(self) -> list[tuple[str, str]]:
        return [("sort_column", _names(self.schema, [self.wm_col]))]

    def watermark_transfer(self) -> Transfer:
        return _identity(len(self.schema))


@dataclass(eq=False)
class StreamMaterialize(StreamNode):
    """The view's rows keyed by `pk` (ColumnarMaterializeOp), always the last node."""

    kind: ClassVar[str] = "StreamMaterialize"
    pk: list[int] = field(default_factory=list)

    def details(self) -> list[tuple[str, str]]:
        cols = ", ".join(f.name for f in self.schema if not f.hidden)
        return [("columns", f"[{cols}]"), ("pk_columns", f"[{_names(self.schema, self.pk)}]")]

    def watermark_transfer(self) -> Transfer:
        return _identity(len(self.schema))


NODE_TYPES: dict[str, type[StreamNode]] = {
    c.__name__: c
    for c in (
        StreamFilter,
        StreamProjectSet,
        StreamProject,
        StreamHashAgg,
        StreamCollectAgg,
        StreamEowcAgg,
        StreamHashJoin,
        StreamIntervalJoin,
        StreamTopN,
        StreamOverWindow,
        StreamUnion,
        StreamTimeWindow,
        StreamTemporalFilter,
        StreamDynamicFilter,
        StreamEowcSort,
        StreamValues,
        StreamMaterialize,
    )
}


@dataclass(eq=False)
class StreamPlan:
    """A streaming job's operators in topological order; the last one is its output.

    `scans` names the upstream relations the plan reads (relation id -> name, columns),
    for EXPLAIN; the rows come from the live relations at run time.
    """

    nodes: list[StreamNode]
    scans: dict[int, tuple[str, list[str]]] = field(default_factory=dict)
    sink: bool = False

    @property
    def tables(self) -> list[TableDesc]:
        return [t for n in self.nodes for t in n.tables]

    def upstream(self) -> set[int]:
        return {i for n in self.nodes for k, i in n.inputs if k == "rel"}


def explain_lines(
    plan: StreamPlan, *, verbose: bool = False, header: str | None = None
) -> list[str]:
    """RisingWave-style tree, root first; with `verbose`, one line per state table after it.

    `header` is a root line above the plan (a sink's StreamSink)."""
    lines: list[str] = []

    def emit(ref: Input, prefix: str, child_prefix: str) -> None:
        kind, i = ref
        if kind == "rel":
            name, cols = plan.scans.get(i, (f"relation {i}", []))
            lines.append(
                f"{prefix}StreamTableScan {{ table: {name}, columns: [{', '.join(cols)}] }}"
            )
            return
        node = plan.nodes[i]
        lines.append(prefix + node.line())
        for j, inp in enumerate(node.inputs):
            last = j == len(node.inputs) - 1
            emit(
                inp,
                child_prefix + ("└─" if last else "├─"),
                child_prefix + ("  " if last else "│ "),
            )

    if header is not None:
        lines.append(header)
        emit(("node", len(plan.nodes) - 1), "└─", "  ")
    else:
        emit(("node", len(plan.nodes) - 1), "", "")
    if verbose:
        for t in sorted(plan.tables, key=lambda t: t.id):
            lines.append(t.describe())
    return lines


#: state-table ids by stable name (`engine.plan.stream_lower` asks one per state table)
IdFn = Callable[[str], int]


def local_ids(start: int = 0) -> IdFn:
    """Ids for a plan that is only shown (EXPLAIN, planner tests): 0, 1, 2... by name."""
    seen: dict[str, int] = {}

    def ids(name: str) -> int:
        if name not in seen:
            seen[name] = start + len(seen)
        return seen[name]

    return ids
