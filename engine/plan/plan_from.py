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
from engine.catalog.privileges import check_read, reading_as_owner
from engine.errors import (
    InvalidColumnReference,
    SqlSyntaxError,
    UndefinedTable,
    WrongObjectType,
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
from engine.plan.plan_join import (
    PRESENT_COLUMN,
    drop_keys,
    mark_full_join,
    merge_using,
    natural_columns,
    project_keys,
    split_join_condition,
    take_where,
)
from engine.plan.plan_lateral import plan_lateral
from engine.plan.plan_prune import ScanPruning
from engine.plan.plan_system import plan_system_from
from engine.plan.plan_tablefunc import is_table_function, plan_table_function
from engine.plan.plan_udf import plan_udtf
from engine.types import BIGINT, Field


class FromPlannerMixin:
    """FROM half of `Planner` (see module docstring)."""

    def _plan_from(self, item: exp.Expression) -> tuple[PlanNode, list[_Col]]:
        udtf = plan_udtf(self, item)  # a user-defined table function (plan_udf.py)
        if udtf is not None:
            return udtf
        if is_table_function(item):
            node, cols = plan_table_function(self, item)
            if self.streaming:  # constant rows in a view (StreamValues): numbered, hidden
                row = Field("_row", BIGINT, hidden=True)
                node.schema = [*node.schema, row]
                node.stream_key = [len(node.schema) - 1]
                cols = [*cols, _Col(row.name, row.type, cols[0].table if cols else None, True)]
            return node, cols
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
            if rel.extra.get("creating"):  # still backfilling: not readable (RisingWave)
                shown = f"{schema_name}.{name}" if schema_name else name
                raise UndefinedTable(f'relation "{shown}" does not exist', position=_pos(item))
            if rel.extra.get("index"):  # read through its table (engine.plan.index_scan)
                raise WrongObjectType(f'"{rel.name}" is an index', position=_pos(item))
            check_read(rel)  # 42501 without SELECT (engine/catalog/privileges.py)
            if rel.kind is RelationKind.VIEW:
                from engine.sql.parser import parse_one

                inner = parse_one(rel.query)
                assert inner.ast is not None
                with reading_as_owner(rel):  # a view reads with its owner's rights
                    node = self.plan_query(inner.ast)
                return node, self._cols_of(node, alias)
            if rel.kind in (RelationKind.SINK, RelationKind.SUBSCRIPTION):
                raise not_supported(f'cannot read from {rel.kind.value} "{rel.name}"')
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
        self,
        left: PlanNode,
        lcols: list[_Col],
        j: exp.Join,
        where: list[exp.Expression] | None = None,
        pruning: ScanPruning | None = None,
    ) -> tuple[PlanNode, list[_Col]]:
        """Add one JOIN; `where`: pending WHERE conjuncts a comma/CROSS join may take as its
        ON condition (plan_join.pushable_where; the taken ones are removed); `pruning`: the
        columns the SELECT reads, for the right side's scan (plan_prune)."""
        lateral = plan_lateral(self, left, lcols, j)  # a table function over the left side
        if lateral is not None:
            return lateral
        right, rcols = self._plan_from(j.this)
        if pruning is not None:
            right, rcols = pruning.prune(j.this, right, rcols)
        side = (j.args.get("side") or "").lower()
        kind = j.args.get("kind")
        kind = (kind or "").lower() if isinstance(kind, str) else ""
        jkind = {"left": "left", "right": "right", "full": "full"}.get(side, "inner")
        cols = lcols + rcols
        on = j.args.get("on")
        using = [u.name for u in j.args.get("using") or []]
        if str(j.args.get("method") or "").upper() == "NATURAL":
            using = natural_columns(lcols, rcols)
        nl, nr = len(lcols), len(rcols)
        scope = self._scope(cols)
        conjs: list[exp.Expression] = []
        pairs: list[tuple[int, int]] = []
        for name in using:
            li = [i for i, c in enumerate(lcols) if c.name == name and not c.hidden]
            ri = [i for i, c in enumerate(rcols) if c.name == name and not c.hidden]
            if len(li) != 1 or len(ri) != 1:
                raise InvalidColumnReference(
                    f'column "{name}" specified in USING clause does not exist in both tables'
                )
            pairs.append((li[0], nl + ri[0]))
        if on is not None:
            conjs = _conjuncts(on)
        elif where and not using and jkind == "inner":
            conjs = take_where(self, where, scope, nl)
        elif kind != "cross" and jkind != "inner" and not using:
            raise SqlSyntaxError("syntax error: JOIN requires an ON or USING clause")
        keys = split_join_condition(self, conjs, scope, nl, self.streaming)
        for li, ri in pairs:
            lf, rf = left.schema[li], right.schema[ri - nl]
            if lf.type == rf.type or not self.streaming:
                keys.lkeys.append(li)
                keys.rkeys.append(ri - nl)
            else:
                t = ex.common_type([lf.type, rf.type], "JOIN/USING")
                keys.lexprs.append(ex.cast(ex.InputRef(li, lf.type, lf.name), t))
                keys.rexprs.append(ex.cast(ex.InputRef(ri - nl, rf.type, rf.name), t))
        if not self.streaming:
            # batch: equalities between different types (int2 = int4) become residual
            # conditions, compared after the usual numeric promotion
            for i in reversed(range(len(keys.lkeys))):
                lf, rf = left.schema[keys.lkeys[i]], right.schema[keys.rkeys[i]]
                if lf.type != rf.type:
                    keys.residual.append(
                        ex.ops.bind_compare(
                            "=",
                            ex.InputRef(keys.lkeys[i], lf.type, lf.name),
                            ex.InputRef(keys.rkeys[i] + nl, rf.type, rf.name),
                        )
                    )
                    del keys.lkeys[i], keys.rkeys[i]
        if self.streaming and not keys:
            raise not_supported(
                "streaming nested-loop join",
                hint="The join condition needs at least one equality between the two sides "
                "(a hash join key). Consider rewriting the query to use a dynamic filter.",
            )
        if self.streaming and (left.stream_key is None or right.stream_key is None):
            raise not_supported("join input without a stream key")
        left, right, xl, _ = project_keys(left, right, keys)
        marked = mark_full_join(self, left, right, jkind)
        if marked is not None:
            right = marked
            cols = cols + [_Col(PRESENT_COLUMN, marked.schema[-1].type, None, True)]
        cond = _and_all(keys.residual)
        fields = list(left.schema) + list(right.schema)
        nl2 = len(left.schema)
        if jkind in ("left", "full"):
            fields = fields[:nl2] + [Field(f.name, f.type, f.hidden) for f in fields[nl2:]]
        key = None
        if left.stream_key is not None and right.stream_key is not None:
            key = list(left.stream_key) + [k + nl2 for k in right.stream_key]
        node: PlanNode = Join(
            fields,
            key,
            left=left,
            right=right,
            kind=jkind if keys or cond is not None or jkind != "inner" else "cross",
            left_keys=keys.lkeys,
            right_keys=keys.rkeys,
            condition=cond,
        )
        node = drop_keys(node, nl, nr, xl, 1 if marked is not None else 0)
        if pairs:
            node, cols = merge_using(node, cols, pairs, jkind)
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
