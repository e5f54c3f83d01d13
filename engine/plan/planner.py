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
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from engine import expr as ex
from engine.catalog import Catalog, Relation, RelationKind
from engine.errors import (
    DatatypeMismatch,
    DuplicateObject,
    EngineError,
    GroupingError,
    InvalidColumnReference,
    SqlSyntaxError,
    UndefinedFunction,
    not_supported,
)
from engine.plan.logical import (
    Agg,
    AggSpec,
    Filter,
    Join,
    Limit,
    PlanNode,
    Project,
    Scan,
    Sort,
    SortKey,
    UnionAll,
    Values,
)
from engine.types import BIGINT, DOUBLE, NUMERIC, REAL, Field, SqlType, TypeKind

AGG_CLASSES: dict[type, str] = {
    exp.Count: "count",
    exp.Sum: "sum",
    exp.Avg: "avg",
    exp.Min: "min",
    exp.Max: "max",
}

SessionFunc = Callable[[str], Any]  # name -> (value, SqlType) or None


@dataclass
class _Col:
    """A column visible in a FROM scope."""

    name: str
    type: SqlType
    table: str | None
    hidden: bool = False


def agg_result_type(kind: str, arg: SqlType | None) -> SqlType:
    if kind in ("count", "count_star"):
        return BIGINT
    assert arg is not None
    k = arg.kind
    if kind == "sum":
        if k in (TypeKind.SMALLINT, TypeKind.INT):
            return BIGINT
        if k in (TypeKind.BIGINT, TypeKind.NUMERIC):
            return NUMERIC
        if k in (TypeKind.REAL, TypeKind.DOUBLE, TypeKind.INTERVAL):
            return arg
    elif kind == "avg":
        if arg.is_integer or k is TypeKind.NUMERIC:
            return NUMERIC
        if k in (TypeKind.REAL, TypeKind.DOUBLE):
            return DOUBLE
        if k is TypeKind.INTERVAL:
            return arg
    elif kind in ("min", "max") and k is not TypeKind.JSONB:
        return arg
    raise UndefinedFunction(
        f"function {kind}({arg.display}) does not exist",
        hint="No function matches the given name and argument types. "
        "You might need to add explicit type casts.",
    )


_ = REAL  # re-exported type constants keep the import list stable


class Planner:
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
                return self._plan_values(q)
            if isinstance(q, (exp.Intersect, exp.Except)):
                raise not_supported(f"{type(q).__name__.upper()}", hint="Use a join instead.")
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
        types = [ex.common_type([r[i].type for r in rows], "VALUES") for i in range(width)]
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
            ex.common_type([left.schema[a].type, right.schema[b].type], "UNION")
            for a, b in zip(lv, rv, strict=True)
        ]
        children = []
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
        if self.streaming:
            raise not_supported(
                "UNION in materialized views is not supported yet",
                hint="Create one materialized view per branch.",
            )
        node: PlanNode = UnionAll(fields, None, children=children)
        if q.args.get("distinct"):
            node = Agg(
                fields,
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
        if q.args.get("windows") or any(isinstance(n, exp.Window) for n in q.find_all(exp.Window)):
            raise not_supported(
                "window functions are not supported yet", hint="Use GROUP BY aggregation instead."
            )
        from_ = q.args.get("from_") or q.args.get("from")
        if from_ is not None:
            node, cols = self._plan_from(from_.this)
            for j in q.args.get("joins") or []:
                node, cols = self._plan_join(node, cols, j)
        else:
            node, cols = Values([], None, rows=[[]]), []
            node.stream_key = []

        scope = self._scope(cols)
        where = q.args.get("where")
        if where is not None:
            pred = self._bind(where.this, scope)
            self._check_bool(pred, "WHERE")
            node = Filter(node.schema, node.stream_key, input=node, predicate=pred)

        select_items = self._expand_star(q.expressions, cols)
        group = q.args.get("group")
        having = q.args.get("having")
        agg_nodes = self._collect_aggs(
            [e for _, e in select_items] + ([having.this] if having is not None else [])
        )
        distinct = q.args.get("distinct")
        if distinct is not None and distinct.args.get("on"):
            raise not_supported("DISTINCT ON is not supported yet")

        if group is not None or agg_nodes:
            node, out_hook = self._plan_agg(node, scope, group, agg_nodes, select_items)
            post_scope = ex.Scope([])
            bind_out = lambda n: self._bind(n, post_scope, out_hook)  # noqa: E731
            if having is not None:
                pred = bind_out(having.this)
                self._check_bool(pred, "HAVING")
                node = Filter(node.schema, node.stream_key, input=node, predicate=pred)
        else:
            bind_out = lambda n: self._bind(n, scope)  # noqa: E731

        exprs: list[ex.Expr] = []
        fields: list[Field] = []
        for name, item in select_items:
            e = bind_out(item)
            if e.type.kind is TypeKind.UNKNOWN:
                e = ex.cast(e, SqlType(TypeKind.VARCHAR))
            exprs.append(e)
            fields.append(Field(name, e.type))
        n_out = len(exprs)

        order = q.args.get("order")
        order_keys: list[SortKey] = []
        if order is not None:
            for o in order.expressions:
                idx = self._order_target(o.this, fields, exprs, bind_out, distinct is not None)
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

        key = None
        if self.streaming and distinct is None:
            exprs, fields, key = self._keep_stream_key(node, exprs, fields)
        else:
            key = _mapped_key(node.stream_key, exprs)
        node = Project(fields, key, input=node, exprs=exprs)

        if distinct is not None:
            if len(fields) != n_out:
                raise InvalidColumnReference(
                    "for SELECT DISTINCT, ORDER BY expressions must appear in select list"
                )
            node = Agg(
                list(fields), list(range(n_out)), input=node, group_keys=list(range(n_out)), aggs=[]
            )

        if order_keys or q.args.get("limit") or q.args.get("offset"):
            if self.streaming and (not order_keys or q.args.get("limit") is None):
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
            node = Sort(node.schema, None, input=node, keys=keys)
        return self._limit(node, q)

    def _limit(self, node: PlanNode, q: exp.Expression) -> PlanNode:
        lim = q.args.get("limit")
        off = q.args.get("offset")
        if lim is None and off is None:
            return node
        limit = self._const_int(lim.expression if lim is not None else None, "LIMIT")
        offset = self._const_int(off.expression if off is not None else None, "OFFSET") or 0
        return Limit(node.schema, node.stream_key, input=node, limit=limit, offset=offset)

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
            matches = [i for i, f in enumerate(fields) if f.name == node.name and not f.hidden]
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

    # -- FROM --------
    def _plan_from(self, item: exp.Expression) -> tuple[PlanNode, list[_Col]]:
        if isinstance(item, exp.Table):
            if isinstance(item.this, (exp.Anonymous, exp.Func)):
                raise not_supported(f"table function {item.this.sql()} is not supported yet")
            name = item.name.lower() if not item.this.args.get("quoted") else item.name
            schema_name = item.db or None
            alias = item.alias_or_name
            for scope in reversed(self.ctes):
                if schema_name is None and name in scope:
                    node = scope[name]
                    return node, self._cols_of(node, alias)
            rel = self.catalog.get(name, schema_name, position=_pos(item))
            if rel.kind is RelationKind.VIEW:
                from engine.sql.parser import parse_one

                inner = parse_one(rel.query)
                assert inner.ast is not None
                node = self.plan_query(inner.ast)
                return node, self._cols_of(node, alias)
            if rel.kind is RelationKind.SINK:
                raise not_supported(f'cannot read from sink "{rel.name}"')
            if all(r.id != rel.id for r in self.dependencies):
                self.dependencies.append(rel)
            node = Scan(list(rel.fields), list(rel.pk), relation=rel)
            tname = item.alias or rel.name
            cols = [_Col(f.name, f.type, tname, f.hidden) for f in rel.fields]
            alias_node = item.args.get("alias")
            if isinstance(alias_node, exp.TableAlias) and alias_node.columns:
                vis = [i for i, c in enumerate(cols) if not c.hidden]
                for pos, c in zip(vis, alias_node.columns, strict=False):
                    cols[pos].name = c.name
            return node, cols
        if isinstance(item, exp.Subquery):
            node = self.plan_query(item.this)
            node = self._rename(node, item.args.get("alias"))
            return node, self._cols_of(node, item.alias or None)
        if isinstance(item, exp.Values):
            node = self._plan_values(item)
            return node, self._cols_of(node, item.alias or None)
        raise not_supported(f"FROM item {item.sql()}")

    def _cols_of(self, node: PlanNode, table: str | None) -> list[_Col]:
        return [_Col(f.name, f.type, table, f.hidden) for f in node.schema]

    def _plan_join(
        self, left: PlanNode, lcols: list[_Col], j: exp.Join
    ) -> tuple[PlanNode, list[_Col]]:
        right, rcols = self._plan_from(j.this)
        side = (j.args.get("side") or "").lower()
        kind = j.args.get("kind")
        kind = (kind or "").lower() if isinstance(kind, str) else ""
        jkind = {"left": "left", "right": "right", "full": "full"}.get(side, "inner")
        cols = lcols + rcols
        fields = list(left.schema) + list(right.schema)
        on = j.args.get("on")
        using = j.args.get("using")
        nl = len(lcols)
        lkeys: list[int] = []
        rkeys: list[int] = []
        residual: list[ex.Expr] = []
        scope = self._scope(cols)
        if using:
            for u in using:
                name = u.name
                li = [i for i, c in enumerate(lcols) if c.name == name and not c.hidden]
                ri = [i for i, c in enumerate(rcols) if c.name == name and not c.hidden]
                if len(li) != 1 or len(ri) != 1:
                    raise InvalidColumnReference(
                        f'column "{name}" specified in USING clause does not exist in both tables'
                    )
                lkeys.append(li[0])
                rkeys.append(ri[0])
        elif on is not None:
            for conj in _conjuncts(on):
                if isinstance(conj, exp.EQ):
                    a = self._bind(conj.this, scope)
                    b = self._bind(conj.expression, scope)
                    ra, rb = a.input_refs(), b.input_refs()
                    if isinstance(a, ex.InputRef) and isinstance(b, ex.InputRef) and ra and rb:
                        if max(ra) < nl <= min(rb):
                            lkeys.append(a.index)
                            rkeys.append(b.index - nl)
                            continue
                        if max(rb) < nl <= min(ra):
                            lkeys.append(b.index)
                            rkeys.append(a.index - nl)
                            continue
                residual.append(self._bind(conj, scope))
        elif kind != "cross" and jkind != "inner":
            raise SqlSyntaxError("syntax error: JOIN requires an ON or USING clause")
        cond = _and_all(residual)
        if self.streaming and not lkeys:
            raise not_supported(
                "streaming nested-loop join",
                hint="The join condition needs at least one equality between the two sides "
                "(a hash join key). Consider rewriting the query to use a dynamic filter.",
            )
        if self.streaming and (left.stream_key is None or right.stream_key is None):
            raise not_supported("join input without a stream key")
        if cond is not None and jkind != "inner":
            raise not_supported("outer joins with non-equality conditions are not supported yet")
        for a, b in zip(lkeys, rkeys, strict=True):
            if left.schema[a].type != right.schema[b].type:
                t = ex.common_type([left.schema[a].type, right.schema[b].type], "JOIN")
                if left.schema[a].type != t or right.schema[b].type != t:
                    raise not_supported(
                        "join keys of different types", hint="Cast both sides to the same type."
                    )
        if jkind in ("left", "full"):
            fields = fields[:nl] + [Field(f.name, f.type, f.hidden) for f in fields[nl:]]
        key = None
        if left.stream_key is not None and right.stream_key is not None:
            key = list(left.stream_key) + [k + nl for k in right.stream_key]
        node = Join(
            fields,
            key,
            left=left,
            right=right,
            kind=jkind
            if lkeys or cond is not None or jkind != "inner"
            else "cross"
            if not lkeys
            else jkind,
            left_keys=lkeys,
            right_keys=rkeys,
            condition=cond,
        )
        if using:
            # USING hides the right-side copies of the join columns from SELECT *
            for rk in rkeys:
                cols[nl + rk] = _Col(
                    cols[nl + rk].name, cols[nl + rk].type, cols[nl + rk].table, True
                )
        return node, cols

    # -- aggregation --------
    def _collect_aggs(self, nodes: list[exp.Expression]) -> list[exp.Expression]:
        found: list[exp.Expression] = []
        seen: set[str] = set()
        for n in nodes:
            for a in _find_aggs(n):
                key = a.sql()
                if key not in seen:
                    seen.add(key)
                    found.append(a)
        return found

    def _plan_agg(
        self,
        node: PlanNode,
        scope: ex.Scope,
        group: exp.Group | None,
        agg_nodes: list[exp.Expression],
        select_items: list[tuple[str, exp.Expression]],
    ) -> tuple[PlanNode, Callable[[exp.Expression], ex.Expr | None]]:
        pre: list[ex.Expr] = []
        group_sql: list[str] = []
        group_exprs: list[exp.Expression] = []
        if group is not None:
            if (
                group.args.get("grouping_sets")
                or group.args.get("cube")
                or group.args.get("rollup")
            ):
                raise not_supported("GROUPING SETS, CUBE and ROLLUP are not supported yet")
            for g in group.expressions:
                g = self._resolve_group_item(g, select_items, scope)
                group_exprs.append(g)
                pre.append(self._bind(g, scope))
                group_sql.append(_norm_sql(g))
        ng = len(pre)
        specs: list[AggSpec] = []
        agg_index: dict[str, int] = {}
        for a in agg_nodes:
            spec_node = a
            filt = None
            if isinstance(a, exp.Filter):
                filt = a.expression.this if isinstance(a.expression, exp.Where) else a.expression
                spec_node = a.this
            kind = AGG_CLASSES[type(spec_node)]
            arg = spec_node.this
            distinct = False
            if isinstance(arg, exp.Distinct):
                distinct = True
                if len(arg.expressions) != 1:
                    raise not_supported("aggregates over several DISTINCT arguments")
                arg = arg.expressions[0]
            if kind == "count" and (arg is None or isinstance(arg, exp.Star)):
                if distinct:
                    raise SqlSyntaxError("syntax error: count(DISTINCT *)")
                arg_idx = None
                spec_kind = "count_star"
                arg_type = None
            else:
                bound = self._bind(arg, scope)
                if any(_find_aggs(arg)):
                    raise GroupingError("aggregate function calls cannot be nested")
                pre.append(bound)
                arg_idx = len(pre) - 1
                spec_kind = kind
                arg_type = bound.type
                if arg_type.kind is TypeKind.UNKNOWN:
                    pre[-1] = ex.cast(bound, SqlType(TypeKind.VARCHAR))
                    arg_type = pre[-1].type
            filt_idx = None
            if filt is not None:
                fb = self._bind(filt, scope)
                self._check_bool(fb, "FILTER")
                pre.append(fb)
                filt_idx = len(pre) - 1
            rtype = agg_result_type(spec_kind, arg_type)
            specs.append(AggSpec(spec_kind, arg_idx, rtype, distinct, filt_idx))
            agg_index[_norm_sql(a)] = ng + len(specs) - 1
        if not pre:
            # count(*) alone: keep one constant column so the row count survives projection
            pre.append(ex.Literal(value=True, type=SqlType(TypeKind.BOOLEAN)))
        pre_fields = [
            Field(f"_g{i}" if i >= ng else _name_of(group_exprs[i], i), e.type)
            for i, e in enumerate(pre)
        ]
        if self.streaming:
            key = list(range(ng))
        else:
            key = list(range(ng))
        proj = Project(pre_fields, None, input=node, exprs=pre)
        out_fields = pre_fields[:ng] + [Field(f"_a{i}", s.type) for i, s in enumerate(specs)]
        agg = Agg(out_fields, key, input=proj, group_keys=list(range(ng)), aggs=specs)
        agg_fields = out_fields

        def hook(n: exp.Expression) -> ex.Expr | None:
            s = _norm_sql(n)
            if s in agg_index:
                i = agg_index[s]
                return ex.InputRef(index=i, type=agg_fields[i].type, name=agg_fields[i].name)
            for i, gs in enumerate(group_sql):
                if s == gs:
                    return ex.InputRef(index=i, type=agg_fields[i].type, name=agg_fields[i].name)
            if isinstance(n, exp.Column):
                # a bare column that is not a group key
                try:
                    b = scope.resolve(
                        n.name.lower() if not _quoted(n) else n.name, n.table or None, _pos(n)
                    )
                except EngineError:
                    raise
                for i, g in enumerate(group_exprs):
                    if (
                        isinstance(g, exp.Column)
                        and g.name.lower() == n.name.lower()
                        and (not n.table or not g.table or g.table == n.table)
                    ):
                        return ex.InputRef(index=i, type=agg_fields[i].type, name=b.name)
                tbl = f"{b.table}." if b.table else ""
                raise GroupingError(
                    f'column "{tbl}{b.name}" must appear in the GROUP BY clause or be used '
                    "in an aggregate function",
                    position=_pos(n),
                )
            return None

        return agg, hook

    def _resolve_group_item(
        self, g: exp.Expression, select_items: list[tuple[str, exp.Expression]], scope: ex.Scope
    ) -> exp.Expression:
        if isinstance(g, exp.Literal) and not g.is_string:
            n = int(g.this)
            if not 1 <= n <= len(select_items):
                raise InvalidColumnReference(f"GROUP BY position {n} is not in select list")
            return select_items[n - 1][1]
        if isinstance(g, exp.Column) and not g.table:
            try:
                scope.resolve(g.name.lower(), None)
                return g
            except EngineError:
                for name, item in select_items:
                    if name == g.name.lower() or name == g.name:
                        return item
                raise
        return g

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
                ex.ColumnBinding(name=c.name, type=c.type, index=i, table=c.table, hidden=c.hidden)
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
            raise not_supported(
                "subqueries in materialized views are not supported yet",
                hint="Subqueries in streaming queries arrive with joins.",
            )
        if self.subquery_runner is None:
            raise not_supported("subqueries are not supported here")
        if isinstance(n, exp.Exists):
            sub = Planner(
                self.catalog,
                params=self.params,
                subquery_runner=self.subquery_runner,
                session_func=self.session_func,
            )
            plan = sub.plan_query(n.this.this if isinstance(n.this, exp.Subquery) else n.this)
            rows = self.subquery_runner(Limit(plan.schema, None, input=plan, limit=1, offset=0))
            return ex.Literal(value=bool(rows), type=SqlType(TypeKind.BOOLEAN))
        if isinstance(n, exp.In):
            q = n.args["query"]
            sub = Planner(
                self.catalog,
                params=self.params,
                subquery_runner=self.subquery_runner,
                session_func=self.session_func,
            )
            plan = sub.plan_query(q.this if isinstance(q, exp.Subquery) else q)
            vis = _visible(plan)
            if len(vis) != 1:
                raise SqlSyntaxError("subquery has too many columns")
            rows = self.subquery_runner(_select_columns(plan, vis))
            t = plan.schema[vis[0]].type
            values = [r[0] for r in rows]
            lit_nodes = [_literal_node(v, t) for v in values]
            if not lit_nodes:
                # x IN (empty) is false, even for NULL x
                return ex.Literal(value=False, type=SqlType(TypeKind.BOOLEAN))
            rewritten = exp.In(this=n.this, expressions=lit_nodes)
            return binder.bind(rewritten)
        # scalar subquery
        sub = Planner(
            self.catalog,
            params=self.params,
            subquery_runner=self.subquery_runner,
            session_func=self.session_func,
        )
        plan = sub.plan_query(n.this)
        vis = _visible(plan)
        if len(vis) != 1:
            raise SqlSyntaxError("subquery must return only one column")
        rows = self.subquery_runner(_select_columns(plan, vis))
        if len(rows) > 1:
            raise EngineError("more than one row returned by a subquery used as an expression")
        t = plan.schema[vis[0]].type
        return ex.Literal(value=rows[0][0] if rows else None, type=t)

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
                chosen = [c for c in cols if not c.hidden and (not table or c.table == table)]
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


# ==========================================================================================
# small helpers
# ==========================================================================================
def _explicit_nulls(o: exp.Ordered) -> bool:
    sql = o.sql(dialect="postgres").upper()
    return "NULLS FIRST" in sql or "NULLS LAST" in sql


def _visible(node: PlanNode) -> list[int]:
    return [i for i, f in enumerate(node.schema) if not f.hidden]


def _select_columns(node: PlanNode, idx: list[int]) -> PlanNode:
    exprs = [ex.InputRef(index=i, type=node.schema[i].type, name=node.schema[i].name) for i in idx]
    fields = [Field(node.schema[i].name, node.schema[i].type) for i in idx]
    return Project(fields, None, input=node, exprs=exprs)


def _mapped_key(key: list[int] | None, exprs: list[ex.Expr]) -> list[int] | None:
    if key is None:
        return None
    out = []
    for k in key:
        pos = next(
            (i for i, e in enumerate(exprs) if isinstance(e, ex.InputRef) and e.index == k), None
        )
        if pos is None:
            return None
        out.append(pos)
    return out


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    if isinstance(e, exp.Paren):
        return _conjuncts(e.this)
    return [e]


def _and_all(es: list[ex.Expr]) -> ex.Expr | None:
    if not es:
        return None
    if len(es) == 1:
        return es[0]
    return _AndAll(es)


class _AndAll(ex.Expr):
    """Conjunction of bound predicates (used for join residuals)."""

    def __init__(self, parts: list[ex.Expr]) -> None:
        from engine.types import BOOLEAN

        self.parts = parts
        self.type = BOOLEAN

    def eval(self, batch: Any, ctx: Any) -> Any:
        import pyarrow.compute as pc

        out = self.parts[0].eval(batch, ctx)
        for p in self.parts[1:]:
            out = pc.and_kleene(out, p.eval(batch, ctx))
        return out

    def children(self) -> list[ex.Expr]:
        return list(self.parts)

    def input_refs(self) -> set[int]:
        s: set[int] = set()
        for p in self.parts:
            s |= p.input_refs()
        return s

    def remap(self, mapping: dict[int, int]) -> ex.Expr:
        return _AndAll([p.remap(mapping) for p in self.parts])

    def is_constant(self) -> bool:
        return all(p.is_constant() for p in self.parts)

    def has_now(self) -> bool:
        return any(p.has_now() for p in self.parts)

    def __str__(self) -> str:
        return " AND ".join(f"({p})" for p in self.parts)


def _find_aggs(n: exp.Expression) -> list[exp.Expression]:
    out: list[exp.Expression] = []

    def walk(node: exp.Expression) -> None:
        if isinstance(node, exp.Filter) and isinstance(node.this, tuple(AGG_CLASSES)):
            out.append(node)
            return
        if isinstance(node, tuple(AGG_CLASSES)):
            out.append(node)
            return
        if isinstance(node, (exp.Subquery, exp.Select)):
            return
        if isinstance(node, exp.AggFunc) and not isinstance(node, tuple(AGG_CLASSES)):
            raise not_supported(
                f"aggregate function {node.sql_name().lower()} is not supported yet"
            )
        for child in node.iter_expressions():
            walk(child)

    walk(n)
    return out


def _norm_sql(n: exp.Expression) -> str:
    return n.sql(dialect="postgres", normalize=True).lower()


def _quoted(c: exp.Column) -> bool:
    ident = c.this
    return isinstance(ident, exp.Identifier) and bool(ident.args.get("quoted"))


def _pos(n: exp.Expression) -> int | None:
    meta = getattr(n, "meta", None) or {}
    start = meta.get("start")
    if start is None and isinstance(n, exp.Column) and isinstance(n.this, exp.Identifier):
        start = (n.this.meta or {}).get("start")
    if start is None and isinstance(n, exp.Table) and isinstance(n.this, exp.Identifier):
        start = (n.this.meta or {}).get("start")
    return start + 1 if isinstance(start, int) else None


def _name_of(e: exp.Expression, i: int) -> str:
    if isinstance(e, exp.Column):
        return e.name
    return f"_g{i}"


def _output_name(it: exp.Expression) -> str:
    if isinstance(it, exp.Alias):
        return it.alias
    node = it
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column):
        return node.name if _quoted(node) else node.name.lower()
    if isinstance(node, exp.Cast):
        inner = node.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, exp.Column):
            return inner.name.lower()
        if isinstance(inner, (exp.Anonymous, exp.Func)) and not isinstance(inner, exp.Cast):
            return _output_name(inner)
        return node.to.sql(dialect="postgres").lower().split("(")[0]
    if isinstance(node, exp.Count):
        return "count"
    if isinstance(node, exp.Filter):
        return _output_name(node.this)
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    if isinstance(node, (exp.JSONExtract, exp.JSONExtractScalar, exp.Dot)):
        return "?column?"
    if isinstance(node, exp.Case):
        return "case"
    if isinstance(node, exp.Func) and not isinstance(node, (exp.Binary, exp.Unary)):
        name = node.sql_name().lower()
        return {"current_timestamp": "now", "current_version": "version"}.get(name, name)
    if isinstance(node, exp.Boolean):
        return "bool"
    return "?column?"


def _literal_node(v: Any, t: SqlType) -> exp.Expression:
    if v is None:
        return exp.Null()
    if isinstance(v, bool):
        return exp.Boolean(this=v)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return exp.Cast(
            this=exp.Literal.string(str(v)), to=exp.DataType.build(t.display, dialect="postgres")
        )
    return exp.Cast(
        this=exp.Literal.string(str(v)),
        to=exp.DataType.build(
            t.display if t.kind is not TypeKind.JSONB else "jsonb", dialect="postgres"
        ),
    )


def check_unique_names(fields: list[Field]) -> None:
    seen: set[str] = set()
    for f in fields:
        if f.hidden:
            continue
        if f.name in seen:
            raise DuplicateObject(f'column "{f.name}" specified more than once')
        seen.add(f.name)
