"""Bind a sqlglot query against the catalog into a logical plan.

Binding order for one SELECT (PostgreSQL's): FROM (scans, subqueries, views, joins) ->
WHERE -> GROUP BY / aggregates -> HAVING -> select list -> DISTINCT -> ORDER BY ->
LIMIT/OFFSET. Scalar expressions are bound by `engine.expr.ExprBinder`; the planner hooks
into it for what only the planner knows: aggregate calls, GROUP BY expressions,
subqueries and session functions.

With `streaming=True` the planner keeps every upstream stream key column alive (as
hidden output columns) so the materialized view has a primary key, and refuses what the
dataflow cannot maintain yet with `Not supported: ...` and a hint.

Uncorrelated subqueries in ad-hoc queries are evaluated first (through `subquery_runner`)
and replaced by their values, so a scalar subquery or `IN (SELECT ...)` costs one extra
batch query.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlglot import exp

from engine import expr as ex
from engine.catalog import Catalog, Relation
from engine.errors import (
    DatatypeMismatch,
    EngineError,
    GroupingError,
    InvalidColumnReference,
    InvalidRowCountInLimit,
    InvalidRowCountInOffset,
    SqlSyntaxError,
    not_supported,
)
from engine.plan.helpers import (
    _Col,
    _explicit_nulls,
    _mapped_key,
    _output_name,
    _pos,
    _select_columns,
    _visible,
    check_unique_names,
)
from engine.plan.logical import (
    Agg,
    Filter,
    Limit,
    PlanNode,
    Project,
    Sort,
    SortKey,
    UnionAll,
    Values,
)
from engine.plan.logical_window import OverWindow
from engine.plan.plan_agg import AGG_CLASSES, AggPlannerMixin, agg_result_type
from engine.plan.plan_from import FromPlannerMixin
from engine.plan.plan_grouping_sets import (
    grouping_expressions,
    has_grouping_sets,
    rewrite_grouping_sets,
)
from engine.plan.plan_join import pushable_where, rebuild_where
from engine.plan.plan_prune import ScanPruning
from engine.plan.plan_semijoin import SubqueryPlannerMixin
from engine.plan.plan_udf import bind_scalar, rewrite_udaf_calls, table_function_names
from engine.plan.plan_window import WindowPlannerMixin, find_windows
from engine.types import BIGINT, Field, SqlType, TypeKind

__all__ = ["AGG_CLASSES", "Planner", "agg_result_type", "check_unique_names"]

SessionFunc = Callable[[str], Any]  # name -> (value, SqlType) or None


class Planner(FromPlannerMixin, AggPlannerMixin, WindowPlannerMixin, SubqueryPlannerMixin):
    """Plans one statement. Not reused across statements."""

    def __init__(
        self,
        catalog: Catalog,
        *,
        params: ex.ParamContext | None = None,
        streaming: bool = False,
        subquery_runner: Callable[[PlanNode], list[tuple[Any, ...]]] | None = None,
        session_func: SessionFunc | None = None,
    ) -> None:
        self.catalog = catalog
        self.params = params
        self.streaming = streaming
        self.subquery_runner = subquery_runner
        self.session_func = session_func
        self.ctes: list[dict[str, PlanNode]] = []
        self.dependencies: list[Relation] = []
        self._sq_node: PlanNode | None = None  # FROM node scalar subqueries join onto
        self._sq_cols: list[_Col] | None = None

    # ======================================================================================
    # queries
    # ======================================================================================
    def plan_query(self, q: exp.Expression) -> PlanNode:
        """Plan a SELECT / set operation / VALUES; output schema = the result columns."""
        with_ = q.args.get("with_") or q.args.get("with")
        pushed = False
        if with_ is not None:
            scope: dict[str, PlanNode] = {}
            self.ctes.append(scope)
            pushed = True
            for cte in with_.expressions:
                if with_.args.get("recursive"):
                    from engine.plan.plan_recursive import is_recursive, plan_recursive_cte

                    if is_recursive(cte):
                        scope[cte.alias_or_name.lower()] = plan_recursive_cte(self, cte, scope)
                        continue
                scope[cte.alias_or_name.lower()] = self._rename(
                    self.plan_query(cte.this), cte.args.get("alias")
                )
        try:
            if isinstance(q, exp.Select):
                return self._plan_select(q)
            if isinstance(q, exp.Union):
                return self._plan_union(q)
            if isinstance(q, exp.Subquery):
                return self.plan_query(q.this)
            if isinstance(q, exp.Values):
                if any(q.args.get(k) for k in ("order", "limit", "offset")):
                    return self._plan_select(_values_as_select(q))
                return self._plan_values(q)
            if isinstance(q, (exp.Intersect, exp.Except)):
                from engine.plan.plan_setop import plan_intersect_except

                return plan_intersect_except(self, q)
            raise SqlSyntaxError(f"unexpected query form {type(q).__name__}")
        finally:
            if pushed:
                self.ctes.pop()

    def _rename(self, node: PlanNode, alias: exp.Expression | None) -> PlanNode:
        if not isinstance(alias, exp.TableAlias) or not alias.columns:
            return node
        names = [c.name for c in alias.columns]
        visible = [i for i, f in enumerate(node.schema) if not f.hidden]
        fields = list(node.schema)
        for pos, name in zip(visible, names, strict=False):
            fields[pos] = Field(name, fields[pos].type, fields[pos].hidden)
        node.schema = fields
        return node

    # -- VALUES --------
    def _plan_values(self, q: exp.Values) -> PlanNode:
        rows: list[list[ex.Expr]] = []
        for tup in q.expressions:
            items = tup.expressions if isinstance(tup, exp.Tuple) else [tup]
            rows.append([self._bind(i, ex.Scope([])) for i in items])
        width = len(rows[0])
        if any(len(r) != width for r in rows):
            raise SqlSyntaxError("VALUES lists must all be the same length")
        # quoted literals are `unknown` and take the other rows' type ('inf' in a numeric
        # column), as PostgreSQL resolves VALUES columns
        unknown = SqlType(TypeKind.UNKNOWN)
        types = [
            ex.common_type([unknown if ex.is_untyped(r[i]) else r[i].type for r in rows], "VALUES")
            for i in range(width)
        ]
        types = [t if t.kind is not TypeKind.UNKNOWN else SqlType(TypeKind.VARCHAR) for t in types]
        rows = [
            [ex.cast(e, t) if e.type != t else e for e, t in zip(r, types, strict=True)]
            for r in rows
        ]
        alias = q.args.get("alias")
        names = (
            [c.name for c in alias.columns]
            if isinstance(alias, exp.TableAlias) and alias.columns
            else [f"column{i + 1}" for i in range(width)]
        )
        fields = [Field(n, t) for n, t in zip(names, types, strict=False)]
        if self.streaming:  # a view's rows need a key: each row's number, hidden
            fields.append(Field("_row", BIGINT, hidden=True))
            rows = [[*r, ex.Literal(i, BIGINT)] for i, r in enumerate(rows)]
            return Values(fields, [width], rows=rows)
        return Values(fields, None, rows=rows)

    # -- set operations --------
    def _plan_union(self, q: exp.Union) -> PlanNode:
        left = self.plan_query(q.this)
        right = self.plan_query(q.expression)
        lv = _visible(left)
        rv = _visible(right)
        if len(lv) != len(rv):
            raise SqlSyntaxError("each UNION query must have the same number of columns")
        types = [
            ex.common_type([_branch_type(left, a), _branch_type(right, b)], "UNION")
            for a, b in zip(lv, rv, strict=True)
        ]
        children: list[PlanNode] = []
        for node, vis in ((left, lv), (right, rv)):
            exprs = [
                self._coerce(
                    ex.InputRef(index=i, type=node.schema[i].type, name=node.schema[i].name), t
                )
                for i, t in zip(vis, types, strict=True)
            ]
            fields = [Field(left.schema[i].name, t) for i, t in zip(lv, types, strict=True)]
            children.append(Project(fields, None, input=node, exprs=exprs))
        fields = children[0].schema
        first = children[0]
        if isinstance(left, UnionAll) and isinstance(first, Project) and _is_identity(first, left):
            # `a UNION ALL b UNION ALL c` nests to the left: one flat union, so each chunk
            # passes one union, not one per branch (1,000 branches stay linear)
            children = [*left.children, children[1]]
        node: PlanNode = UnionAll(fields, None, children=children)
        if self.streaming:
            from engine.plan.plan_union import stream_union_all

            node = stream_union_all(left, right, lv, rv, types)
        if q.args.get("distinct"):
            node = Agg(
                list(fields),
                list(range(len(fields))),
                input=node,
                group_keys=list(range(len(fields))),
                aggs=[],
            )
        return self._order_limit_simple(node, q)

    def _coerce(self, e: ex.Expr, t: SqlType) -> ex.Expr:
        return e if e.type == t else ex.cast(e, t)

    # -- SELECT --------
    def _plan_select(self, q: exp.Select) -> PlanNode:
        q = rewrite_udaf_calls(self.catalog, q)  # type: ignore[assignment]
        if has_grouping_sets(q):
            return self.plan_query(rewrite_grouping_sets(q, self._grouping_types(q)))
        from_ = q.args.get("from_") or q.args.get("from")
        where = q.args.get("where")
        where_ast = where.this if where is not None else None
        if from_ is not None:
            pruning = ScanPruning.of(q) if self.streaming else None
            node, cols = self._plan_from(from_.this)
            if pruning is not None:  # join state keeps only the columns the query reads
                node, cols = pruning.prune(from_.this, node, cols)
            pending = pushable_where(q, where_ast)
            for j in q.args.get("joins") or []:
                node, cols = self._plan_join(node, cols, j, pending, pruning)
            if pending is not None:  # conjuncts not moved into a join's ON stay here
                where_ast = rebuild_where(pending)
        elif self.streaming:  # one constant row in a view: a hidden column carries it
            one = Field("_row", BIGINT, hidden=True)
            node = Values([one], [0], rows=[[ex.Literal(0, BIGINT)]])
            cols = [_Col(one.name, one.type, None, hidden=True)]
        else:
            node, cols = Values([], None, rows=[[]]), []
            node.stream_key = []

        scope = self._scope(cols)
        if self.streaming and where_ast is not None and where_ast.find(exp.Exists, exp.In, exp.Any):
            where_ast, node = self._plan_where_subqueries(where_ast, node, cols)
        if self.streaming and where_ast is not None and where_ast.find(exp.Subquery):
            from engine.plan.plan_dynamic import plan_dynamic_filters

            node, where_ast = plan_dynamic_filters(self, node, cols, where_ast)
        if where_ast is not None:
            self._sq_node, self._sq_cols = node, cols  # scalar subqueries join onto node
            pred = self._bind(where_ast, scope)
            node = self._sq_node
            self._check_bool(pred, "WHERE")
            if self.streaming and pred.has_now():
                from engine.plan.plan_time import split_temporal

                node = split_temporal(node, pred)
            else:
                node = Filter(node.schema, node.stream_key, input=node, predicate=pred)
                if self.streaming:
                    node = self._maybe_group_topn(node)

        from engine.plan.plan_srf import has_select_srfs, plan_select_srfs

        udtfs = table_function_names(self.catalog)
        if has_select_srfs(q, udtfs):  # unnest(...) / generate_series(...) in the select list
            q, node, cols = plan_select_srfs(self, q, node, cols, udtfs)
            scope = self._scope(cols)

        select_items = self._expand_star(q.expressions, cols)
        group = q.args.get("group")
        having = q.args.get("having")
        agg_nodes = self._collect_aggs(
            [e for _, e in select_items] + ([having.this] if having is not None else [])
        )
        distinct = q.args.get("distinct")
        distinct_on = distinct.args.get("on") if distinct is not None else None

        bind_scope, bind_hook = scope, None
        if group is not None or agg_nodes:
            node, out_hook = self._plan_agg(node, scope, group, agg_nodes, select_items)
            bind_scope, bind_hook = ex.Scope([]), out_hook
            bind_out = lambda n: self._bind(n, bind_scope, bind_hook)  # noqa: E731
            if having is not None:
                pred = bind_out(having.this)
                self._check_bool(pred, "HAVING")
                if self.streaming and pred.has_now():
                    from engine.plan.plan_time import split_temporal

                    node = split_temporal(node, pred)
                else:
                    node = Filter(node.schema, node.stream_key, input=node, predicate=pred)
        else:
            bind_out = lambda n: self._bind(n, scope)  # noqa: E731
        order_nodes = [o.this for o in q.args["order"].expressions] if q.args.get("order") else []
        if any(find_windows(e) for _, e in select_items) or any(map(find_windows, order_nodes)):
            node, bind_out = self._plan_windows(node, q, select_items, bind_scope, bind_hook)

        exprs: list[ex.Expr] = []
        fields: list[Field] = []
        plain = group is None and not agg_nodes and not isinstance(node, OverWindow)
        self._sq_node, self._sq_cols = (node, cols) if plain else (None, None)
        for name, item in select_items:
            e = bind_out(item)
            if e.type.kind is TypeKind.UNKNOWN:
                e = ex.cast(e, SqlType(TypeKind.VARCHAR))
            exprs.append(e)
            src = (
                node.schema[e.index]
                if isinstance(e, ex.InputRef) and bind_hook is None and e.index < len(node.schema)
                else None
            )
            fields.append(Field(name, e.type, origin=src.origin if src is not None else None))
        if plain and self._sq_node is not None:
            node = self._sq_node
        self._sq_node = self._sq_cols = None
        n_out = len(exprs)

        order = q.args.get("order")
        order_keys: list[SortKey] = []
        if order is not None:
            for o in order.expressions:
                idx = self._order_target(
                    o.this, fields, exprs, bind_out, distinct is not None and not distinct_on
                )
                if idx is None:
                    e = bind_out(o.this)
                    exprs.append(e)
                    fields.append(Field(f"_order{len(exprs)}", e.type, hidden=True))
                    idx = len(exprs) - 1
                nf = o.args.get("nulls_first")
                order_keys.append(
                    SortKey(
                        idx,
                        bool(o.args.get("desc")),
                        None if nf is None or not _explicit_nulls(o) else bool(nf),
                    )
                )

        on_idx = self._distinct_on_columns(distinct_on, exprs, fields, bind_out)
        key = None
        if self.streaming and (distinct is None or distinct_on):
            exprs, fields, key = self._keep_stream_key(node, exprs, fields)
        else:
            key = _mapped_key(node.stream_key, exprs)
        node = Project(fields, key, input=node, exprs=exprs)

        if distinct_on:
            node = self._distinct_on(node, on_idx, order_keys)
            if self.streaming and q.args.get("limit") is None:
                order_keys = []  # consumed by DISTINCT ON (a view has no row order)
        elif distinct is not None:
            if len(fields) != n_out:
                raise InvalidColumnReference(
                    "for SELECT DISTINCT, ORDER BY expressions must appear in select list"
                )
            node = Agg(
                list(fields), list(range(n_out)), input=node, group_keys=list(range(n_out)), aggs=[]
            )

        if (
            self.streaming
            and order_keys
            and q.args.get("limit") is None
            and q.args.get("offset") is None
            and all(k.index < n_out for k in order_keys)
        ):
            order_keys = []  # allowed and ignored as in RisingWave: a view has no row order
        if order_keys or q.args.get("limit") or q.args.get("offset"):
            if self.streaming and not order_keys:
                raise not_supported(
                    "LIMIT / OFFSET without ORDER BY in a materialized view",
                    hint="Add ORDER BY so the view keeps a well-defined top N.",
                )
            if self.streaming and q.args.get("limit") is None:
                raise not_supported(
                    "ORDER BY without LIMIT in a materialized view",
                    hint="Add LIMIT for a top-N view, or order the rows when you query the view.",
                )
            if order_keys:
                node = Sort(node.schema, node.stream_key, input=node, keys=order_keys)
            node = self._limit(node, q)
        if len(node.schema) != n_out and not self.streaming:
            node = _select_columns(node, list(range(n_out)))
        return node

    def _grouping_types(self, q: exp.Select) -> list[str]:
        """SQL types of the grouping-set expressions, from planning them over the query's
        FROM clause ad hoc (types only; the plan is discarded)."""
        probe = q.copy()
        for arg in ("group", "having", "order", "limit", "offset", "distinct", "where"):
            probe.set(arg, None)
        probe.set("expressions", [e.copy() for e in grouping_expressions(q)])
        p = Planner(
            self.catalog,
            params=self.params,
            session_func=self.session_func,
            subquery_runner=self.subquery_runner,
        )
        p.ctes = self.ctes
        node = p.plan_query(probe)
        return [f.type.display for f in node.schema if not f.hidden]

    def _order_limit_simple(self, node: PlanNode, q: exp.Expression) -> PlanNode:
        order = q.args.get("order")
        if order is not None:
            keys = []
            for o in order.expressions:
                idx = self._order_target(o.this, node.schema, None, None, True)
                if idx is None:
                    raise InvalidColumnReference(
                        "invalid UNION/INTERSECT/EXCEPT ORDER BY clause",
                        detail="Only result column names can be used, not expressions.",
                    )
                keys.append(SortKey(idx, bool(o.args.get("desc"))))
            node = Sort(node.schema, node.stream_key, input=node, keys=keys)
        return self._limit(node, q)

    def _limit(self, node: PlanNode, q: exp.Expression) -> PlanNode:
        lim = q.args.get("limit")
        off = q.args.get("offset")
        if lim is None and off is None:
            return node
        ties = False
        if isinstance(lim, exp.Fetch):  # FETCH FIRST [n] ROW[S] {ONLY | WITH TIES}
            opts = lim.args.get("limit_options")
            if opts is not None and opts.args.get("percent"):
                raise not_supported("FETCH FIRST ... PERCENT")
            ties = opts is not None and bool(opts.args.get("with_ties"))
            count = lim.args.get("count")
            limit = 1 if count is None else self._const_int(count, "LIMIT")
            if ties and not isinstance(node, Sort):
                raise SqlSyntaxError("WITH TIES cannot be specified without ORDER BY clause")
            if ties and self.streaming:
                raise not_supported("FETCH FIRST ... WITH TIES in a materialized view")
        else:
            limit = self._const_int(lim.expression if lim is not None else None, "LIMIT")
        offset = self._const_int(off.expression if off is not None else None, "OFFSET") or 0
        if limit is not None and limit < 0:
            raise InvalidRowCountInLimit("LIMIT must not be negative")
        if offset < 0:
            raise InvalidRowCountInOffset("OFFSET must not be negative")
        return Limit(
            node.schema, node.stream_key, input=node, limit=limit, offset=offset, with_ties=ties
        )

    def _const_int(self, e: exp.Expression | None, what: str) -> int | None:
        if e is None:
            return None
        bound = ex.ExprBinder(ex.Scope([]), self.params).bind(e)
        v = ex.evaluate_constant(bound)
        if v is None:
            return None
        if not isinstance(v, int) or isinstance(v, bool):
            raise DatatypeMismatch(f"argument of {what} must be type bigint")
        return v

    def _order_target(
        self,
        node: exp.Expression,
        fields: list[Field],
        exprs: list[ex.Expr] | None,
        bind_out: Any,
        strict: bool,
    ) -> int | None:
        if isinstance(node, exp.Literal) and not node.is_string:
            n = int(node.this)
            visible = [i for i, f in enumerate(fields) if not f.hidden]
            if not 1 <= n <= len(visible):
                raise InvalidColumnReference(f"ORDER BY position {n} is not in select list")
            return visible[n - 1]
        if isinstance(node, exp.Column) and not node.table:
            cname = node.name if node.this.args.get("quoted") else node.name.lower()
            matches = [i for i, f in enumerate(fields) if f.name == cname and not f.hidden]
            if len(matches) == 1:
                return matches[0]
        if exprs is not None and bind_out is not None:
            try:
                e = bind_out(node)
            except EngineError:
                if strict:
                    raise
                return None
            s = str(e)
            for i, existing in enumerate(exprs):
                if str(existing) == s and existing.type == e.type:
                    return i
        return None

    # -- streaming keys --------
    def _keep_stream_key(
        self, node: PlanNode, exprs: list[ex.Expr], fields: list[Field]
    ) -> tuple[list[ex.Expr], list[Field], list[int]]:
        if node.stream_key is None:
            raise not_supported("this query has no stream key")
        key: list[int] = []
        exprs = list(exprs)
        fields = list(fields)
        for k in node.stream_key:
            pos = next(
                (i for i, e in enumerate(exprs) if isinstance(e, ex.InputRef) and e.index == k),
                None,
            )
            if pos is None:
                f = node.schema[k]
                exprs.append(ex.InputRef(index=k, type=f.type, name=f.name))
                fields.append(
                    Field(
                        f"_{f.name}" if not f.name.startswith("_") else f.name, f.type, hidden=True
                    )
                )
                pos = len(exprs) - 1
            key.append(pos)
        # hidden names must not clash with visible ones
        names: set[str] = set()
        for i, f in enumerate(fields):
            n = f.name
            while f.hidden and n in names:
                n = "_" + n
            if n != f.name:
                fields[i] = Field(n, f.type, f.hidden)
            names.add(n)
        return exprs, fields, key

    # -- binding helpers --------
    def _scope(self, cols: list[_Col]) -> ex.Scope:
        return ex.Scope(
            [
                ex.ColumnBinding(
                    name=c.name,
                    type=c.type,
                    index=i,
                    table=c.table,
                    hidden=c.hidden,
                    qualified_only=c.qualified_only,
                )
                for i, c in enumerate(cols)
            ]
        )

    def _bind(
        self,
        node: exp.Expression,
        scope: ex.Scope,
        hook: Callable[[exp.Expression], ex.Expr | None] | None = None,
    ) -> ex.Expr:
        """Bind with the planner's hooks: `hook` first (aggregation context), then subqueries
        and session functions; without `hook`, aggregate calls are refused here."""
        binder_ref: list[ex.ExprBinder] = []

        def full_hook(n: exp.Expression) -> ex.Expr | None:
            if hook is not None:
                r = hook(n)
                if r is not None:
                    return r
            elif isinstance(n, tuple(AGG_CLASSES)) or (
                isinstance(n, exp.Filter) and isinstance(n.this, tuple(AGG_CLASSES))
            ):
                raise GroupingError("aggregate functions are not allowed here", position=_pos(n))
            if isinstance(n, exp.Window):  # the select-list binder maps windows itself
                from engine.errors import WindowingError

                raise WindowingError("window functions are not allowed here", position=_pos(n))
            return self._common_hook(n, binder_ref[0])

        binder = ex.ExprBinder(scope, self.params, full_hook)
        binder_ref.append(binder)
        return binder.bind(node)

    def _hook_factory(self, scope: ex.Scope | None) -> Callable[[exp.Expression], ex.Expr | None]:
        def hook(n: exp.Expression) -> ex.Expr | None:
            if isinstance(n, tuple(AGG_CLASSES)) or (
                isinstance(n, exp.Filter) and isinstance(n.this, tuple(AGG_CLASSES))
            ):
                raise GroupingError("aggregate functions are not allowed here", position=_pos(n))
            return None

        return hook

    def _common_hook(self, n: exp.Expression, binder: ex.ExprBinder) -> ex.Expr | None:
        if isinstance(n, (exp.Subquery, exp.Exists)) or (
            isinstance(n, exp.In) and n.args.get("query") is not None
        ):
            return self._subquery(n, binder)
        any_ = n.expression if isinstance(n, exp.EQ) else None
        if isinstance(any_, exp.Any) and isinstance(any_.this, exp.Subquery):
            # x = ANY (subquery) is x IN (subquery)
            return self._subquery(exp.In(this=n.this, query=any_.this), binder)
        all_ = n.expression if isinstance(n, exp.NEQ) else None
        if isinstance(all_, exp.All) and isinstance(all_.this, (exp.Subquery, exp.Select)):
            # x <> ALL (subquery) is NOT (x IN (subquery)) (sqlglot: ALL over a bare Select)
            sub = all_.this if isinstance(all_.this, exp.Subquery) else exp.Subquery(this=all_.this)
            return ex.ops.bind_not(self._subquery(exp.In(this=n.this, query=sub), binder))
        if (
            isinstance(n, exp.Array)
            and n.expressions
            and isinstance(n.expressions[0], (exp.Select, exp.Subquery, exp.Union))
        ):
            return self._subquery(n, binder)  # ARRAY(SELECT ...)
        if isinstance(n, exp.Column) and getattr(self, "outer_scope", None) is not None:
            from engine.plan.plan_subquery import outer_column

            ref = outer_column(self, n, binder.scope)  # correlated subquery
            if ref is not None:
                return ref
        if isinstance(n, exp.Anonymous):
            udf = bind_scalar(self, n, binder)  # a user-defined function (plan_udf.py)
            if udf is not None:
                return udf
        if self.session_func is not None and isinstance(n, (exp.Anonymous, exp.Func)):
            name = (n.name if isinstance(n, exp.Anonymous) else n.sql_name()).lower()
            if isinstance(n, exp.CurrentUser):
                name = "current_user"
            if isinstance(n, exp.CurrentSchema):
                name = "current_schema"
            got = (
                self.session_func(name)
                if not n.expressions or isinstance(n, (exp.CurrentSchema,))
                else None
            )
            if got is not None:
                value, t = got
                return ex.Literal(value=value, type=t)
        return None

    def _subquery(self, n: exp.Expression, binder: ex.ExprBinder) -> ex.Expr:
        if self.streaming:
            if isinstance(n, exp.Subquery):
                return self._scalar_join(n, self._sq_cols)
            raise not_supported(
                "EXISTS / IN (subquery) here in a materialized view",
                hint="Use EXISTS, NOT EXISTS and IN (subquery) as top-level AND conditions "
                "of WHERE (they become semi/anti joins).",
            )
        from engine.plan.plan_subquery import plan_subquery

        return plan_subquery(self, n, binder)

    def _check_bool(self, e: ex.Expr, where: str) -> None:
        if e.type.kind not in (TypeKind.BOOLEAN, TypeKind.UNKNOWN):
            raise DatatypeMismatch(
                f"argument of {where} must be type boolean, not type {e.type.display}"
            )

    def _expand_star(
        self, items: list[exp.Expression], cols: list[_Col]
    ) -> list[tuple[str, exp.Expression]]:
        out: list[tuple[str, exp.Expression]] = []
        for it in items:
            if isinstance(it, exp.Star) or (
                isinstance(it, exp.Column) and isinstance(it.this, exp.Star)
            ):
                table = it.table if isinstance(it, exp.Column) else None
                star = it.this if isinstance(it, exp.Column) else it
                excluded = self._star_except(star, cols)
                chosen = [
                    c
                    for i, c in enumerate(cols)
                    if not c.hidden
                    and (c.table == table if table else not c.qualified_only)
                    and i not in excluded
                ]
                if table and not chosen and not any(c.table == table for c in cols):
                    from engine.errors import UndefinedTable

                    raise UndefinedTable(f'missing FROM-clause entry for table "{table}"')
                if not cols and not table:
                    raise SqlSyntaxError("SELECT * with no tables specified is not valid")
                for c in chosen:
                    col = exp.Column(
                        this=exp.Identifier(this=c.name, quoted=True),
                        table=exp.Identifier(this=c.table, quoted=True) if c.table else None,
                    )
                    out.append((c.name, col))
                continue
            out.append((_output_name(it), it.this if isinstance(it, exp.Alias) else it))
        return out

    def _star_except(self, star: exp.Expression, cols: list[_Col]) -> set[int]:
        """The FROM columns `* EXCEPT (a, t.b)` leaves out (RisingWave: each item is a
        column of the FROM clause, resolved like any column reference; no duplicates)."""
        items = star.args.get("except_") or []
        if star.args.get("replace") or star.args.get("rename"):
            raise SqlSyntaxError('syntax error at or near "REPLACE"', position=_pos(star))
        if not items:
            return set()
        scope = self._scope(cols)
        out: set[int] = set()
        for item in items:
            if not isinstance(item, exp.Column) or isinstance(item.this, exp.Star):
                raise SqlSyntaxError(
                    "only column names are allowed in the EXCEPT list of *", position=_pos(item)
                )
            b = scope.resolve(item.name, item.table or None, _pos(item))
            if b.index in out:
                raise InvalidColumnReference(
                    f'column "{item.name}" appears more than once in the EXCEPT list',
                    position=_pos(item),
                )
            out.add(b.index)
        return out


# ==========================================================================================
# small helpers
# ==========================================================================================


def _is_identity(p: Project, over: PlanNode) -> bool:
    """True when `p` passes every column of `over` through unchanged (same order, types)."""
    return len(p.exprs) == len(over.schema) and all(
        isinstance(e, ex.InputRef) and e.index == i and e.type == over.schema[i].type
        for i, e in enumerate(p.exprs)
    )


def _branch_type(node: PlanNode, i: int) -> SqlType:
    """Column i's type for UNION resolution: a branch's quoted literal (`SELECT 'inf'`) is
    `unknown` and takes the other branch's type, as in PostgreSQL."""
    if isinstance(node, Project) and i < len(node.exprs) and ex.is_untyped(node.exprs[i]):
        return SqlType(TypeKind.UNKNOWN)
    return node.schema[i].type


def _values_as_select(q: exp.Values) -> exp.Select:
    """`VALUES ... ORDER BY ... LIMIT ... OFFSET ...` as the SELECT * over the bare VALUES
    list that PostgreSQL's grammar makes of it (the planner of a VALUES list does not sort
    or cut; a scalar subquery `(VALUES (1), (2) LIMIT 1)` is one row)."""
    bare = q.copy()
    clauses = {k: bare.args.get(k) for k in ("order", "limit", "offset")}
    for k in clauses:
        bare.set(k, None)
    first = bare.expressions[0]
    width = len(first.expressions) if isinstance(first, exp.Tuple) else 1
    bare.set(
        "alias",
        exp.TableAlias(
            this=exp.to_identifier("*VALUES*"),
            columns=[exp.to_identifier(f"column{i + 1}") for i in range(width)],
        ),
    )
    sel = exp.Select(expressions=[exp.Star()]).from_(bare)
    for k, v in clauses.items():
        if v is not None:
            sel.set(k, v)
    return sel
