"""Subqueries in materialized views as joins: `IN (SELECT ..)`, `EXISTS`, `NOT EXISTS`,
correlated or not, and scalar subqueries. (Ad-hoc subqueries: `plan_subquery`.)

A mixin of `Planner`. A WHERE conjunct `x IN (SELECT y ..)`, `EXISTS (SELECT ..)` or
`NOT EXISTS (SELECT ..)` becomes a semi (anti) join of the FROM node with the subquery:

1. the subquery's own WHERE conjuncts are split into local ones and correlated ones (those
   naming a column the subquery's FROM does not have, i.e. an outer column);
2. the subquery without its correlated conjuncts is planned on its own, selecting `y` (for
   IN) and all its columns;
3. correlated equalities `inner_expr = outer_expr` (and `x = y` for IN) become hash join
   keys: both sides are projected with the key expressions appended (cast to a common
   type); other correlated conjuncts become the join's residual condition;
4. `Join(kind=semi|anti)` keeps the outer columns; a projection drops the key columns.

Without any equality (uncorrelated EXISTS) both sides get a constant key. In views, a
correlation without an equality would need a nested-loop join and is refused with a hint.
The batch executor runs the same Join nodes, so ad-hoc queries and views agree. `NOT IN`
is not an anti join under SQL's NULL rules; ad hoc it keeps the value-list path, in views
it is refused with a hint to write NOT EXISTS.

Scalar subqueries in views (`(SELECT max(v) FROM t2)`, also correlated by equality:
`(SELECT sum(x) FROM t2 WHERE t2.k = t1.k)`) become a LEFT join with the subquery's one
row (per correlation key), see `_scalar_join`.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from engine import expr as ex
from engine.errors import (
    EngineError,
    SqlSyntaxError,
    UndefinedColumn,
    UndefinedTable,
    not_supported,
)
from engine.expr.binder import _coalesce_kernel
from engine.plan.helpers import _and_all, _append, _Col, _conjuncts, _visible
from engine.plan.logical import Agg, Join, PlanNode, Project
from engine.plan.plan_join import pushable_where
from engine.types import INT, Field, TypeKind

_HINT_EQ = (
    "Correlate the subquery with at least one equality between an inner and an outer "
    "column (a hash join key)."
)


class SubqueryPlannerMixin:
    """Subquery half of `Planner` (see module docstring)."""

    def _child_planner(self) -> Any:
        """A planner for a subquery: this planner's class (`Planner`, which mixes this class
        in) with the same catalog, parameters, CTEs and dependency list."""
        me: Any = self
        sub = type(me)(
            me.catalog,
            params=me.params,
            streaming=me.streaming,
            subquery_runner=me.subquery_runner,
            session_func=me.session_func,
        )
        sub.ctes = list(me.ctes)
        sub.dependencies = me.dependencies  # shared: a view depends on subquery tables too
        return sub

    # -- WHERE conjuncts -> semi / anti joins ---------------------------------------------
    def _plan_where_subqueries(
        self, where: exp.Expression, node: PlanNode, cols: list[_Col]
    ) -> tuple[exp.Expression | None, PlanNode]:
        rest: list[exp.Expression] = []
        for c in _conjuncts(where):
            neg = False
            inner = c
            while isinstance(inner, exp.Paren):
                inner = inner.this
            if isinstance(inner, exp.Not):
                neg, inner = True, inner.this
                while isinstance(inner, exp.Paren):
                    inner = inner.this
            if (
                isinstance(inner, exp.EQ)
                and isinstance(inner.expression, exp.Any)
                and isinstance(inner.expression.this, exp.Subquery)
            ):  # x = ANY (subquery) is x IN (subquery)
                inner = exp.In(this=inner.this, query=inner.expression.this)
            if (
                isinstance(inner, exp.NEQ)
                and isinstance(inner.expression, exp.All)
                and isinstance(inner.expression.this, (exp.Subquery, exp.Select))
            ):  # x <> ALL (subquery) is x NOT IN (subquery)
                sub = inner.expression.this
                sub = sub if isinstance(sub, exp.Subquery) else exp.Subquery(this=sub)
                neg, inner = not neg, exp.In(this=inner.this, query=sub)
            if isinstance(inner, exp.Exists):
                q = inner.this.this if isinstance(inner.this, exp.Subquery) else inner.this
                node = self._semi_join(node, cols, q, None, "anti" if neg else "semi")
                continue
            if isinstance(inner, exp.In) and inner.args.get("query") is not None:
                q = inner.args["query"]
                q = q.this if isinstance(q, exp.Subquery) else q
                if neg:
                    if self._streaming():
                        raise not_supported(
                            "NOT IN (subquery) in a materialized view",
                            hint="NOT IN is never true when the subquery returns a NULL; "
                            "write NOT EXISTS (SELECT ... WHERE inner = outer) instead.",
                        )
                    rest.append(c)  # ad hoc: evaluated as a value list
                    continue
                node = self._semi_join(node, cols, q, inner.this, "semi")
                continue
            rest.append(c)
        if not rest:
            return None, node
        out = rest[0]
        for r in rest[1:]:
            out = exp.And(this=out, expression=r)
        return out, node

    def _streaming(self) -> bool:
        return bool(getattr(self, "streaming", False))

    def _split_correlated(
        self, q: exp.Expression
    ) -> tuple[list[_Col], list[exp.Expression], list[exp.Expression]]:
        """(inner FROM columns, local WHERE conjuncts, correlated WHERE conjuncts)."""
        if not isinstance(q, exp.Select):
            return [], [], []
        from_ = q.args.get("from_") or q.args.get("from")
        where = q.args.get("where")
        if from_ is None or where is None:
            return [], [], []
        probe = self._child_planner()
        probe.dependencies = []
        inode, icols = probe._plan_from(from_.this)
        pending = pushable_where(q, where.this) if probe.streaming else None
        for j in q.args.get("joins") or []:  # comma joins keyed by local WHERE equalities
            inode, icols = probe._plan_join(inode, icols, j, pending)
        scope = probe._scope(icols)
        local: list[exp.Expression] = []
        corr: list[exp.Expression] = []
        for c in _conjuncts(where.this):
            try:
                probe._bind(c, scope)
                local.append(c)
            except (UndefinedColumn, UndefinedTable):
                corr.append(c)
        return icols, local, corr

    def _semi_join(
        self,
        node: PlanNode,
        cols: list[_Col],
        q: exp.Expression,
        in_expr: exp.Expression | None,
        kind: str,
    ) -> PlanNode:
        me: Any = self
        icols, local, corr = self._split_correlated(q)
        sub = self._child_planner()
        if corr:
            _refuse_complex_correlated(q)
            q = _keep_local_where(q, local)
            items: list[exp.Expression] = []
            if in_expr is not None:
                items.append(q.expressions[0].copy())
            items.append(exp.Star())
            q.set("expressions", items)
        inner = sub.plan_query(q)
        vis = _visible(inner)
        if in_expr is not None and not corr and len(vis) != 1:
            raise SqlSyntaxError("subquery has too many columns")
        # the scope for correlated conjuncts: outer columns, then the inner output columns
        icol_scope: list[_Col] = [
            _Col(f"?inner{i}", f.type, None, True) for i, f in enumerate(inner.schema)
        ]
        if corr:
            off = 1 if in_expr is not None else 0
            for j, c in enumerate([c for c in icols if not c.hidden]):
                icol_scope[off + j] = _Col(c.name, c.type, c.table, False)
        nl = len(node.schema)
        scope = me._scope(list(cols) + icol_scope)
        okeys: list[ex.Expr] = []
        ikeys: list[ex.Expr] = []
        residual: list[ex.Expr] = []
        if in_expr is not None:
            okeys.append(me._bind(in_expr, me._scope(cols)))
            f = inner.schema[vis[0]]
            ikeys.append(ex.InputRef(index=vis[0], type=f.type, name=f.name))
        for c in corr:
            b = me._bind(c, scope)
            pair = _equality_sides(b, nl)
            if pair is None:
                residual.append(b)
            else:
                okeys.append(pair[0])
                ikeys.append(pair[1].remap({i: i - nl for i in pair[1].input_refs()}))
        if not okeys:
            if residual and self._streaming():
                raise not_supported("correlated subquery without an equality", hint=_HINT_EQ)
            okeys = [ex.Literal(value=1, type=INT)]
            ikeys = [ex.Literal(value=1, type=INT)]
        _unify_key_types(okeys, ikeys, "IN")
        if self._streaming() and (node.stream_key is None or inner.stream_key is None):
            raise not_supported("subquery input without a stream key")
        k = len(okeys)
        left = _append(node, okeys, "_sq_l")
        right = _append(inner, ikeys, "_sq_r")
        cond = None
        if residual:
            shift = {i: (i + k if i >= nl else i) for i in range(nl + len(inner.schema))}
            cond = _and_all([r.remap(shift) for r in residual])
        ni = len(inner.schema)
        join = Join(
            list(left.schema),
            left.stream_key,
            left=left,
            right=right,
            kind=kind,
            left_keys=list(range(nl, nl + k)),
            right_keys=list(range(ni, ni + k)),
            condition=cond,
        )
        exprs = [ex.InputRef(index=i, type=f.type, name=f.name) for i, f in enumerate(node.schema)]
        return Project(list(node.schema), node.stream_key, input=join, exprs=exprs)

    # -- scalar subqueries in views -> LEFT join ------------------------------------------
    def _scalar_join(self, n: exp.Expression, outer_cols: list[_Col] | None) -> ex.Expr:
        """Join the current FROM node (`self._sq_node`) with a scalar subquery; return a
        reference to its value column."""
        me: Any = self
        node: PlanNode | None = getattr(self, "_sq_node", None)
        if node is None or outer_cols is None:
            raise not_supported(
                "a scalar subquery here in a materialized view",
                hint="Use the subquery in the select list or in WHERE of a query without "
                "GROUP BY, or join with it explicitly.",
            )
        q = n.this
        icols, local, corr = self._split_correlated(q)
        sub = self._child_planner()
        nl = len(node.schema)
        okeys: list[ex.Expr] = []
        ikey_asts: list[exp.Expression] = []
        if corr:
            if not isinstance(q, exp.Select) or q.args.get("group") or q.args.get("having"):
                raise not_supported("correlated scalar subquery with GROUP BY or HAVING")
            if not any(e.find(exp.AggFunc) for e in q.expressions):
                raise not_supported(
                    "a correlated scalar subquery that may return several rows",
                    hint="Aggregate it (e.g. SELECT max(..)) so it returns one row per outer "
                    "row, or join with it instead.",
                )
            scope_in = sub._scope(icols)
            scope_out = me._scope(outer_cols)
            for c in corr:
                if not isinstance(c, exp.EQ):
                    raise not_supported(
                        "correlated scalar subquery with a non-equality correlation",
                        hint=_HINT_EQ,
                    )
                sides = _ast_sides(c, sub, scope_in, me, scope_out)
                if sides is None:
                    raise not_supported("correlated scalar subquery", hint=_HINT_EQ)
                okeys.append(sides[0])
                ikey_asts.append(sides[1])
            q = _keep_local_where(q, local)
            # one row per correlation key: GROUP BY the inner key expressions
            q.set("expressions", list(q.expressions) + [a.copy() for a in ikey_asts])
            q.set("group", exp.Group(expressions=[a.copy() for a in ikey_asts]))
        inner = sub.plan_query(q)
        vis = _visible(inner)
        if len(vis) != 1 + len(ikey_asts):
            raise SqlSyntaxError("subquery must return only one column")
        if not corr and not _single_row(inner):
            raise not_supported(
                "a scalar subquery that may return several rows in a materialized view",
                hint="Aggregate it (e.g. SELECT max(..)) so it returns one row, or join "
                "with it instead.",
            )
        ikeys: list[ex.Expr] = [
            ex.InputRef(index=vis[1 + i], type=inner.schema[vis[1 + i]].type, name="k")
            for i in range(len(ikey_asts))
        ]
        if not okeys:
            okeys = [ex.Literal(value=1, type=INT)]
            ikeys = [ex.Literal(value=1, type=INT)]
        _unify_key_types(okeys, ikeys, "=")
        if self._streaming() and (node.stream_key is None or inner.stream_key is None):
            raise not_supported("subquery input without a stream key")
        k = len(okeys)
        left = _append(node, okeys, "_sq_l")
        right = _append(inner, ikeys, "_sq_r")
        ni = len(inner.schema)
        fields = list(left.schema) + [Field(f.name, f.type, True) for f in right.schema]
        key = None
        if left.stream_key is not None and right.stream_key is not None:
            key = list(left.stream_key) + [len(left.schema) + i for i in right.stream_key]
        join = Join(
            fields,
            key,
            left=left,
            right=right,
            kind="left",
            left_keys=list(range(nl, nl + k)),
            right_keys=list(range(ni, ni + k)),
        )
        self._sq_node = join  # type: ignore[attr-defined]
        pos = len(left.schema) + vis[0]
        value: ex.Expr = ex.InputRef(index=pos, type=fields[pos].type, name="?column?")
        if corr and _is_count(q, vis[0], inner):
            # count over no rows is 0, not NULL: the LEFT join pads with NULL
            t = value.type
            value = ex.Func(
                "coalesce",
                (value, ex.Literal(value=0, type=t)),
                t,
                lambda a, n, c: _coalesce_kernel(a, n, t),
            )
        return value


def _unify_key_types(okeys: list[ex.Expr], ikeys: list[ex.Expr], op: str) -> None:
    """Cast each outer/inner join key pair (in place) to their common type under `op`."""
    for i, (a, b) in enumerate(zip(okeys, ikeys, strict=True)):
        if a.type != b.type:
            t = ex.operator_type([a.type, b.type], op)
            okeys[i] = a if a.type == t else ex.cast(a, t)
            ikeys[i] = b if b.type == t else ex.cast(b, t)


def _equality_sides(b: ex.Expr, nl: int) -> tuple[ex.Expr, ex.Expr] | None:
    """(outer side, inner side) of `outer = inner` over outer ++ inner columns."""
    if not isinstance(b, ex.Func) or getattr(b, "op", None) != "=" or len(b.args) != 2:
        return None
    a, c = b.args
    ra, rc = a.input_refs(), c.input_refs()
    if ra and rc and max(ra) < nl <= min(rc):
        return a, c
    if ra and rc and max(rc) < nl <= min(ra):
        return c, a
    return None


def _ast_sides(
    c: exp.EQ, sub: Any, scope_in: ex.Scope, me: Any, scope_out: ex.Scope
) -> tuple[ex.Expr, exp.Expression] | None:
    """For `inner = outer` (either order): (bound outer expression, inner AST)."""
    for inner_ast, outer_ast in ((c.this, c.expression), (c.expression, c.this)):
        try:
            sub._bind(inner_ast, scope_in)
        except EngineError:
            continue
        try:
            return me._bind(outer_ast, scope_out), inner_ast
        except EngineError:
            continue
    return None


def _refuse_complex_correlated(q: exp.Expression) -> None:
    if not isinstance(q, exp.Select):
        raise not_supported("correlated set operation subquery")
    if q.args.get("group") or q.args.get("having") or q.args.get("limit") or q.args.get("distinct"):
        raise not_supported(
            "correlated subquery with GROUP BY, HAVING, DISTINCT or LIMIT",
            hint="Move the correlated condition out of the subquery into a join.",
        )
    if any(e.find(exp.AggFunc) for e in q.expressions):
        raise not_supported(
            "correlated EXISTS / IN subquery over an aggregate",
            hint="An aggregate without GROUP BY returns one row, so EXISTS is always true; "
            "to compare with an aggregate write x = (SELECT max(y) FROM t2 WHERE t2.k = t1.k).",
        )


def _single_row(node: PlanNode) -> bool:
    while isinstance(node, Project):
        node = node.input
    return isinstance(node, Agg) and not node.group_keys


def _is_count(q: exp.Expression, col: int, inner: PlanNode) -> bool:
    item = q.expressions[0] if isinstance(q, exp.Select) and q.expressions else None
    while isinstance(item, (exp.Alias, exp.Paren)):
        item = item.this
    return isinstance(item, exp.Count) and inner.schema[col].type.kind is TypeKind.BIGINT


def _keep_local_where(q: exp.Select, local: list[exp.Expression]) -> exp.Select:
    """A copy of the subquery whose WHERE keeps only its uncorrelated conjuncts `local`
    (the correlated ones become join keys or the residual)."""
    q = q.copy()
    if local:
        w = local[0]
        for c in local[1:]:
            w = exp.And(this=w, expression=c)
        q.set("where", exp.Where(this=w.copy()))
    else:
        q.set("where", None)
    return q
