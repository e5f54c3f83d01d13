"""Window-function planning: `f(...) OVER (PARTITION BY .. ORDER BY .. [frame])`.

A mixin of `Planner`. Window functions are evaluated after WHERE, GROUP BY and HAVING and
before the select list (PostgreSQL's order), so `_plan_windows` takes the node the select
list would be bound against and

1. pre-projects every input column plus the PARTITION BY / ORDER BY / argument
   expressions the calls need (bound like select-list items, so `rank() OVER (ORDER BY
   sum(v))` works in a grouped query);
2. adds one `OverWindow` node per distinct (PARTITION BY, ORDER BY), each appending its
   calls' result columns;
3. returns a binder for the select list / ORDER BY that maps each window call onto its
   result column.

`_maybe_group_topn` (streaming only) turns `Filter(rn <= N) / Project / OverWindow(
row_number)` into a `GroupTopN` (maintained by `TopNOp`, which keeps only the first N rows
of every partition in its output) — the `row_number() ... WHERE rn <= N` and `rn = 1`
deduplication patterns.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from engine import expr as ex
from engine.errors import (
    GroupingError,
    InvalidPrecedingOrFollowingSize,
    NullValueNotAllowed,
    SqlSyntaxError,
    UndefinedObject,
    WindowingError,
    not_supported,
)
from engine.plan.helpers import _explicit_nulls, _norm_sql, _pos
from engine.plan.logical import Filter, PlanNode, Project, SortKey
from engine.plan.logical_window import (
    DEFAULT_FRAME,
    GroupTopN,
    OverWindow,
    WindowCall,
    WindowFrame,
)
from engine.plan.plan_agg import AGG_CLASSES, agg_result_type
from engine.types import BIGINT, DOUBLE, Field, SqlType, TypeKind

RANKING: dict[type, str] = {
    exp.RowNumber: "row_number",
    exp.Rank: "rank",
    exp.DenseRank: "dense_rank",
    exp.PercentRank: "percent_rank",
    exp.CumeDist: "cume_dist",
    exp.Ntile: "ntile",
}
VALUE_FUNCS: dict[type, str] = {
    exp.Lag: "lag",
    exp.Lead: "lead",
    exp.FirstValue: "first_value",
    exp.LastValue: "last_value",
    exp.NthValue: "nth_value",
}


def find_windows(n: exp.Expression) -> list[exp.Window]:
    """Window calls in `n`, outside subqueries."""
    out: list[exp.Window] = []

    def walk(node: exp.Expression) -> None:
        if isinstance(node, exp.Window):
            out.append(node)
            return
        if isinstance(node, (exp.Subquery, exp.Select)):
            return
        for child in node.iter_expressions():
            walk(child)

    walk(n)
    return out


class WindowPlannerMixin:
    """Window half of `Planner` (see module docstring)."""

    def _plan_windows(
        self,
        node: PlanNode,
        q: exp.Select,
        select_items: list[tuple[str, exp.Expression]],
        scope: ex.Scope,
        base_hook: Callable[[exp.Expression], ex.Expr | None] | None,
    ) -> tuple[PlanNode, Callable[[exp.Expression], ex.Expr]]:
        self_: Any = self
        named = {w.alias_or_name.lower(): w for w in (q.args.get("windows") or [])}
        found: list[exp.Window] = []
        order = q.args.get("order")
        for e in [it for _, it in select_items] + (
            [o.this for o in order.expressions] if order is not None else []
        ):
            found.extend(find_windows(e))

        def base_bind(n: exp.Expression) -> ex.Expr:
            if find_windows(n):
                raise GroupingError("window function calls cannot be nested", position=_pos(n))
            return self_._bind(n, scope, base_hook)

        n_in = len(node.schema)
        exprs: list[ex.Expr] = [
            ex.InputRef(index=i, type=f.type, name=f.name) for i, f in enumerate(node.schema)
        ]
        fields = list(node.schema)
        seen: dict[tuple[str, SqlType], int] = {}

        def add(e: ex.Expr) -> int:
            if isinstance(e, ex.InputRef) and e.index < n_in:
                return e.index
            k = (str(e), e.type)
            if k not in seen:
                if e.type.kind is TypeKind.UNKNOWN:
                    e = ex.cast(e, SqlType(TypeKind.VARCHAR))
                exprs.append(e)
                fields.append(Field(f"_w{len(exprs)}", e.type, hidden=True))
                seen[k] = len(exprs) - 1
            return seen[k]

        groups: dict[tuple[Any, ...], tuple[list[int], list[SortKey], list[tuple[str, Any]]]] = {}
        for w in found:
            spec = _resolve_named(w, named)
            part = [add(base_bind(p)) for p in spec.args.get("partition_by") or []]
            okeys: list[SortKey] = []
            o = spec.args.get("order")
            for item in o.expressions if o is not None else []:
                nf = item.args.get("nulls_first")
                okeys.append(
                    SortKey(
                        add(base_bind(item.this)),
                        bool(item.args.get("desc")),
                        None if nf is None or not _explicit_nulls(item) else bool(nf),
                    )
                )
            call = self._window_call(w, spec, base_bind, add, bool(okeys))
            if okeys:
                check_range_offsets(call.frame, fields[okeys[0].index].type)
            gk = (tuple(part), tuple((k.index, k.desc, k.effective_nulls_first) for k in okeys))
            groups.setdefault(gk, (part, okeys, []))[2].append((_norm_sql(w), call))

        key = node.stream_key
        if len(exprs) > n_in:  # only when calls need computed arguments or keys
            node = Project(fields, key, input=node, exprs=exprs)
        tiebreak = list(key) if key else list(range(len(fields)))
        mapping: dict[str, int] = {}
        for part, okeys, calls in groups.values():
            base = len(node.schema)
            wfields = list(node.schema) + [
                Field(f"_win{base + i}", c.type, hidden=True) for i, (_, c) in enumerate(calls)
            ]
            node = OverWindow(
                wfields,
                node.stream_key,
                input=node,
                partition_by=part,
                order_by=okeys,
                calls=[c for _, c in calls],
                tiebreak=tiebreak,
            )
            for i, (sql, _) in enumerate(calls):
                mapping.setdefault(sql, base + i)
        final_schema = node.schema

        def hook(n: exp.Expression) -> ex.Expr | None:
            if isinstance(n, exp.Window):
                i = mapping[_norm_sql(n)]
                f = final_schema[i]
                return ex.InputRef(index=i, type=f.type, name=f.name)
            if base_hook is not None:
                return base_hook(n)
            if isinstance(n, tuple(AGG_CLASSES)) or (
                isinstance(n, exp.Filter) and isinstance(n.this, tuple(AGG_CLASSES))
            ):
                raise GroupingError("aggregate functions are not allowed here", position=_pos(n))
            return None

        return node, lambda n: self_._bind(n, scope, hook)

    def _window_call(
        self,
        w: exp.Window,
        spec: exp.Window,
        bind: Callable[[exp.Expression], ex.Expr],
        add: Callable[[ex.Expr], int],
        ordered: bool,
    ) -> WindowCall:
        self_: Any = self
        fn = w.this
        if isinstance(fn, exp.Filter):
            raise not_supported("FILTER in window function calls")
        frame = _frame(spec, self_)
        if type(fn) in RANKING:
            kind = RANKING[type(fn)]
            if kind == "ntile":
                n = self_._const_int(fn.this, "ntile")
                if n is None or n <= 0:
                    raise SqlSyntaxError("argument of ntile must be greater than zero")
                return WindowCall(kind, (), BIGINT, offset=n)
            t = DOUBLE if kind in ("percent_rank", "cume_dist") else BIGINT
            return WindowCall(kind, (), t)
        if type(fn) in VALUE_FUNCS:
            kind = VALUE_FUNCS[type(fn)]
            val = bind(fn.this)
            if val.type.kind is TypeKind.UNKNOWN:
                val = ex.cast(val, SqlType(TypeKind.VARCHAR))
            args = [add(val)]
            offset = 1
            if kind in ("lag", "lead"):
                off = fn.args.get("offset")
                if off is not None:
                    o = self_._const_int(off, kind)
                    offset = 1 if o is None else o
                    if offset < 0:
                        kind = "lead" if kind == "lag" else "lag"
                        offset = -offset
                d = fn.args.get("default")
                if d is not None:
                    de = bind(d)
                    if de.type != val.type:
                        de = ex.cast(de, val.type)
                    args.append(add(de))
            elif kind == "nth_value":
                o = self_._const_int(fn.args.get("offset"), "nth_value")
                if o is None or o <= 0:
                    raise SqlSyntaxError("argument of nth_value must be greater than zero")
                offset = o
            return WindowCall(kind, tuple(args), val.type, frame, offset)
        if type(fn) in AGG_CLASSES:
            kind = AGG_CLASSES[type(fn)]
            if kind == "udaf":
                raise not_supported(
                    "user-defined aggregates as window functions",
                    hint="Aggregate with GROUP BY, then join the result back.",
                )
            arg = fn.this
            if isinstance(arg, exp.Distinct):
                raise not_supported(
                    "DISTINCT in window function calls",
                    hint="Aggregate the distinct values in a subquery first.",
                )
            if kind == "count" and (arg is None or isinstance(arg, exp.Star)):
                return WindowCall("count_star", (), BIGINT, frame)
            val = bind(arg)
            if val.type.kind is TypeKind.UNKNOWN:
                val = ex.cast(val, SqlType(TypeKind.VARCHAR))
            return WindowCall(kind, (add(val),), agg_result_type(kind, val.type), frame)
        name = fn.name if isinstance(fn, exp.Anonymous) else fn.sql_name().lower()
        raise not_supported(
            f"window function {name.lower()}",
            hint="Supported: row_number, rank, dense_rank, percent_rank, cume_dist, ntile, "
            "lag, lead, first_value, last_value, nth_value, count, sum, avg, min, max.",
        )

    # -- DISTINCT ON (..) = row_number() OVER (PARTITION BY .. ORDER BY ..) = 1 -----------
    def _distinct_on_columns(
        self,
        on: exp.Expression | None,
        exprs: list[ex.Expr],
        fields: list[Field],
        bind: Callable[[exp.Expression], ex.Expr],
    ) -> list[int]:
        """Select-list positions of the DISTINCT ON expressions (appended hidden if new)."""
        if not on:
            return []
        items = on.expressions if isinstance(on, exp.Tuple) else [on]
        out: list[int] = []
        for it in items:
            if isinstance(it, exp.Literal) and not it.is_string:
                visible = [i for i, f in enumerate(fields) if not f.hidden]
                out.append(visible[int(it.this) - 1])
                continue
            if isinstance(it, exp.Column) and not it.table:
                named = [i for i, f in enumerate(fields) if f.name == it.name and not f.hidden]
                if len(named) == 1:
                    out.append(named[0])
                    continue
            e = bind(it)
            pos = next(
                (i for i, x in enumerate(exprs) if str(x) == str(e) and x.type == e.type), None
            )
            if pos is None:
                exprs.append(e)
                fields.append(Field(f"_on{len(exprs)}", e.type, hidden=True))
                pos = len(exprs) - 1
            out.append(pos)
        return out

    def _distinct_on(self, node: PlanNode, on: list[int], order: list[SortKey]) -> PlanNode:
        """First row of every DISTINCT ON group in ORDER BY order (ties: by stream key)."""
        n = len(node.schema)
        keep = [ex.InputRef(index=i, type=f.type, name=f.name) for i, f in enumerate(node.schema)]
        rn_fields = list(node.schema) + [Field("_distinct_rn", BIGINT, hidden=True)]
        if getattr(self, "streaming", False):
            top = GroupTopN(
                rn_fields,
                node.stream_key,
                input=node,
                group_keys=list(on),
                order_by=list(order),
                limit=1,
                offset=0,
            )
            return Project(list(node.schema), node.stream_key, input=top, exprs=keep)
        key = node.stream_key
        win = OverWindow(
            rn_fields,
            key,
            input=node,
            partition_by=list(on),
            order_by=list(order),
            calls=[WindowCall("row_number", (), BIGINT)],
            tiebreak=list(key) if key else list(range(n)),
        )
        one = ex.Literal(value=1, type=BIGINT)
        from engine.expr import ops

        pred = ops.bind_compare("=", ex.InputRef(index=n, type=BIGINT, name="rn"), one)
        filt = Filter(rn_fields, key, input=win, predicate=pred)
        return Project(list(node.schema), key, input=filt, exprs=keep)

    # -- streaming: row_number() ... WHERE rn <= N  ->  group top-N ------------------------
    def _maybe_group_topn(self, filt: Filter) -> PlanNode:
        proj = filt.input
        if not isinstance(proj, Project) or not isinstance(proj.input, OverWindow):
            return filt
        win = proj.input
        if len(win.calls) != 1 or win.calls[0].kind != "row_number" or not win.order_by:
            return filt
        if win.input.stream_key is None:
            return filt
        rn_in = len(win.input.schema)
        rn_cols = {
            i for i, e in enumerate(proj.exprs) if isinstance(e, ex.InputRef) and e.index == rn_in
        }
        if any(rn_in in e.input_refs() for e in proj.exprs if not isinstance(e, ex.InputRef)):
            return filt
        limit: int | None = None
        rest: list[ex.Expr] = []
        for c in _conjuncts(filt.predicate):
            n = _rn_bound(c, rn_cols)
            if n is None:
                rest.append(c)
            else:
                limit = n if limit is None else min(limit, n)
        if limit is None:
            return filt
        top = GroupTopN(
            list(win.schema),
            win.stream_key,
            input=win.input,
            group_keys=list(win.partition_by),
            order_by=list(win.order_by),
            limit=max(limit, 0),
            offset=0,
        )
        node: PlanNode = Project(proj.schema, proj.stream_key, input=top, exprs=proj.exprs)
        for c in rest:
            node = Filter(node.schema, node.stream_key, input=node, predicate=c)
        return node


def _resolve_named(w: exp.Window, named: dict[str, exp.Window]) -> exp.Window:
    alias = w.args.get("alias")
    if alias is None:
        return w
    ref = named.get(alias.name.lower())
    if ref is None:
        raise UndefinedObject(f'window "{alias.name}" does not exist', position=_pos(w))
    if w.args.get("spec") is None and w.args.get("order") is None:
        return ref
    merged = ref.copy()  # OVER (w ORDER BY .. / ROWS ..): the named window, extended
    for arg in ("order", "spec"):
        if w.args.get(arg) is not None:
            merged.set(arg, w.args[arg].copy())
    return merged


def _frame(spec: exp.Window, planner: Any) -> WindowFrame:
    ws = spec.args.get("spec")
    if ws is None:
        if spec.args.get("order") is None:
            return WindowFrame("rows", ("unbounded_preceding", 0), ("unbounded_following", 0))
        return DEFAULT_FRAME
    mode = str(ws.args.get("kind") or "range").lower()
    if mode not in ("rows", "range", "groups"):
        raise not_supported(f"{mode.upper()} frames", hint="Use ROWS BETWEEN ... instead.")
    if ws.args.get("exclude"):
        raise not_supported("EXCLUDE in window frames")
    order = spec.args.get("order")
    n_order = len(order.expressions) if order is not None else 0

    def bound(v: Any, side: Any, default: tuple[str, Any], what: str) -> tuple[str, Any]:
        if v is None:
            return default
        sd = str(side or "").lower()
        if isinstance(v, str):
            up = v.upper()
            if up == "UNBOUNDED":
                return ("unbounded_" + (sd or "preceding"), 0)
            if "CURRENT" in up:
                return ("current_row", 0)
            raise SqlSyntaxError(f'syntax error at or near "{v}"')
        if mode == "range":
            if n_order != 1:
                raise WindowingError(
                    "RANGE with offset PRECEDING/FOLLOWING requires exactly one ORDER BY column",
                    position=_pos(spec),
                )
            off = ex.evaluate_constant(ex.ExprBinder(ex.Scope([]), planner.params).bind(v))
        else:
            off = planner._const_int(v, "window frame")
        if off is None:
            raise NullValueNotAllowed(f"frame {what} offset must not be null")
        if _is_interval(off):
            neg = off.months < 0 or off.days < 0 or off.nanoseconds < 0
        else:
            neg = off < 0
        if neg:
            raise InvalidPrecedingOrFollowingSize(f"frame {what} offset must not be negative")
        return (sd or "preceding", off)

    if mode == "groups" and order is None:
        raise WindowingError("GROUPS mode requires an ORDER BY clause", position=_pos(spec))
    start = bound(
        ws.args.get("start"), ws.args.get("start_side"), ("unbounded_preceding", 0), "starting"
    )
    end = bound(ws.args.get("end"), ws.args.get("end_side"), ("current_row", 0), "ending")
    if start[0] == "unbounded_following" or end[0] == "unbounded_preceding":
        raise SqlSyntaxError("frame bound is not valid here")
    # PostgreSQL's grammar refuses a frame that ends before it starts by its bound kinds
    # (whatever the offsets): CURRENT ROW to n PRECEDING, n FOLLOWING to CURRENT ROW or
    # to n PRECEDING
    if start[0] == "current_row" and end[0] == "preceding":
        raise WindowingError(
            "frame starting from current row cannot have preceding rows", position=_pos(spec)
        )
    if start[0] == "following" and end[0] in ("current_row", "preceding"):
        raise WindowingError(
            "frame starting from following row cannot have preceding rows", position=_pos(spec)
        )
    return WindowFrame(mode, start, end)


def _is_interval(v: Any) -> bool:
    return hasattr(v, "months") and hasattr(v, "nanoseconds")


def check_range_offsets(frame: WindowFrame, order_type: Any) -> None:
    """Refuse a RANGE offset whose type does not fit the ORDER BY column (as PostgreSQL)."""
    if frame.mode != "range":
        return
    import pyarrow as pa

    from engine.stream.operators.window_frames import range_keys

    for kind, off in (frame.start, frame.end):
        if kind in ("preceding", "following"):
            range_keys(pa.array([], order_type.arrow), off, order_type.display)


def _conjuncts(e: ex.Expr) -> list[ex.Expr]:
    if isinstance(e, ex.Func) and e.name == "and":
        out: list[ex.Expr] = []
        for a in e.args:
            out.extend(_conjuncts(a))
        return out
    return [e]


def _rn_bound(c: ex.Expr, rn_cols: set[int]) -> int | None:
    """N when `c` is `rn <= N`, `rn < N`, `rn = 1`, `N >= rn` or `N > rn` (N constant)."""
    if not isinstance(c, ex.Func) or len(c.args) != 2:
        return None
    op = getattr(c, "op", None)
    a, b = c.args
    flip = {"<=": ">=", "<": ">", ">=": "<=", ">": "<", "=": "="}
    if isinstance(b, ex.InputRef) and not isinstance(a, ex.InputRef):
        a, b = b, a
        op = flip.get(op or "")
    if not (isinstance(a, ex.InputRef) and a.index in rn_cols) or not b.is_constant():
        return None
    v = ex.evaluate_constant(b)
    if not isinstance(v, int) or isinstance(v, bool):
        return None
    if op == "<=":
        return v
    if op == "<":
        return v - 1
    if op == "=" and v == 1:
        return 1
    return None
