"""FROM-clause planning: table, view, CTE, subquery and VALUES items, and joins.

A mixin of `Planner`: `_plan_from` resolves one FROM item into a plan node plus the columns
it makes visible (with their table qualifier), and `_plan_join` adds one JOIN, splitting its
ON condition into equality keys and a residual condition.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from engine import expr as ex
from engine.catalog import RelationKind
from engine.errors import (
    InvalidColumnReference,
    SqlSyntaxError,
    not_supported,
)
from engine.plan.helpers import (
    _and_all,
    _Col,
    _conjuncts,
    _pos,
)
from engine.plan.logical import (
    Join,
    PlanNode,
    Scan,
)
from engine.plan.plan_system import plan_system_from
from engine.plan.plan_tablefunc import is_table_function, plan_table_function
from engine.types import Field


class FromPlannerMixin:
    """FROM half of `Planner` (see module docstring)."""

    def _plan_from(self, item: exp.Expression) -> tuple[PlanNode, list[_Col]]:
        if is_table_function(item):
            if self.streaming:
                raise not_supported("set-returning functions in FROM of a materialized view")
            return plan_table_function(self, item)
        if isinstance(item, exp.Table):
            if isinstance(item.this, (exp.Anonymous, exp.Func)):
                from engine.plan.plan_time import plan_time_window

                return plan_time_window(self, item)
            name = item.name.lower() if not item.this.args.get("quoted") else item.name
            schema_name = item.db or None
            alias = item.alias_or_name
            for scope in reversed(self.ctes):
                if schema_name is None and name in scope:
                    node = scope[name]
                    return node, self._cols_of(node, alias)
            sys_node = plan_system_from(self, name, schema_name, item)
            if sys_node is not None:
                return sys_node
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
            node = Scan(_with_origin(rel), list(rel.pk), relation=rel)
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
                if isinstance(conj, exp.EQ) and not isinstance(conj.expression, (exp.Any, exp.All)):
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
        if not self.streaming:
            # batch: equalities between different types (int2 = int4) become residual
            # conditions, compared after the usual numeric promotion
            for i in reversed(range(len(lkeys))):
                lf, rf = left.schema[lkeys[i]], right.schema[rkeys[i]]
                if lf.type != rf.type:
                    residual.append(
                        ex.ops.bind_compare(
                            "=",
                            ex.InputRef(lkeys[i], lf.type, lf.name),
                            ex.InputRef(rkeys[i] + nl, rf.type, rf.name),
                        )
                    )
                    del lkeys[i], rkeys[i]
        cond = _and_all(residual)
        if self.streaming and not lkeys:
            raise not_supported(
                "streaming nested-loop join",
                hint="The join condition needs at least one equality between the two sides "
                "(a hash join key). Consider rewriting the query to use a dynamic filter.",
            )
        if self.streaming and (left.stream_key is None or right.stream_key is None):
            raise not_supported("join input without a stream key")
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


def _with_origin(rel: Any) -> list[Field]:
    """The relation's fields, each visible one tagged with (pg_class oid, attnum)."""
    from engine.catalog.system import relation_oid

    oid = relation_oid(rel)
    out = []
    n = 0
    for f in rel.fields:
        if f.hidden:
            out.append(f)
            continue
        n += 1
        out.append(Field(f.name, f.type, f.hidden, origin=(oid, n)))
    return out
