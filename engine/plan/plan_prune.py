"""Column pruning at the scans of a streaming join: keep only the columns the SELECT reads.

Why: a streaming join keeps its inputs' rows in state. Scanning `auction` whole into
`auction A JOIN bid B ON ...` stores every column of both sides (descriptions, urls,
padding), although the query reads four of them; the state, its encoding and its writes
then cost several times what the query needs (Nexmark q4: 3.4x the CPU).

What: before a SELECT with joins plans its FROM, `ScanPruning.of(q)` collects every column
reference anywhere in that SELECT (select list, WHERE, ON, GROUP BY, HAVING, ORDER BY,
subqueries included: a superset of what the scans must provide). A base table, source or
materialized view named directly in that FROM (not a view, a CTE, a subquery or a window
function's input) is then planned as its Scan under a Project onto the columns that some
reference may name (qualified by its alias or name, or unqualified with a matching name),
plus its stream key and its watermark column. Nothing is pruned when the SELECT has a `*`
(other than `count(*)`), USING / NATURAL joins, or a reference that could be a whole-row
reference to a FROM item, so every name still binds exactly as without pruning.

Only stream plans are pruned (the batch executor reads columns lazily anyway).
Lifecycle: one `ScanPruning` per planned SELECT, dropped with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlglot import exp

from engine import expr as ex
from engine.plan.helpers import _Col
from engine.plan.logical import PlanNode, Project, Scan


@dataclass
class ScanPruning:
    """The column names a SELECT may read, by qualifier (None: unqualified)."""

    qualified: set[tuple[str, str]]
    unqualified: set[str]

    @classmethod
    def of(cls, q: exp.Select) -> ScanPruning | None:
        joins = q.args.get("joins") or []
        if not joins:
            return None
        for j in joins:
            if j.args.get("using") or str(j.args.get("method") or "").upper() == "NATURAL":
                return None
        for star in q.find_all(exp.Star):
            if not isinstance(star.parent, exp.Count):
                return None
        names: set[str] = set()
        from_ = q.args.get("from_") or q.args.get("from")
        items = [from_.this] if from_ is not None else []
        items += [j.this for j in joins]
        for it in items:
            if isinstance(it, exp.Table):
                names |= {it.name.lower(), it.alias_or_name.lower()}
        qualified: set[tuple[str, str]] = set()
        unqualified: set[str] = set()
        for c in q.find_all(exp.Column):
            if isinstance(c.this, exp.Star):
                return None
            if _window_relation(c):
                continue  # `TUMBLE(bid, ...)` names a relation, not a column of one
            name = c.name.lower()
            if c.table:
                qualified.add((c.table.lower(), name))
            elif name in names:
                return None  # `SELECT a FROM t a ...` reads the whole row of `a`
            else:
                unqualified.add(name)
        return cls(qualified, unqualified)

    def prune(
        self, item: exp.Expression, node: PlanNode, cols: list[_Col]
    ) -> tuple[PlanNode, list[_Col]]:
        """`node`/`cols` of FROM item `item`, projected onto the columns it may be read for."""
        if not isinstance(item, exp.Table) or not isinstance(node, Scan):
            return node, cols
        rel = node.relation
        if rel is None:
            return node, cols
        quals = {item.name.lower(), item.alias_or_name.lower()}
        keep_idx = set(node.stream_key or ())
        wm = rel.extra.get("watermark")
        if isinstance(wm, dict) and isinstance(wm.get("column"), int):
            keep_idx.add(wm["column"])
        for i, c in enumerate(cols):
            n = c.name.lower()
            if n in self.unqualified or any((t, n) in self.qualified for t in quals):
                keep_idx.add(i)
        keep = sorted(keep_idx)
        if len(keep) == len(cols):
            return node, cols
        fields = [node.schema[i] for i in keep]
        exprs: list[ex.Expr] = [
            ex.InputRef(index=i, type=node.schema[i].type, name=node.schema[i].name) for i in keep
        ]
        back = {old: new for new, old in enumerate(keep)}
        key = [back[i] for i in node.stream_key] if node.stream_key is not None else None
        return Project(fields, key, input=node, exprs=exprs), [cols[i] for i in keep]


_WINDOW_TVFS = ("tumble", "hop")


def _window_relation(c: exp.Column) -> bool:
    """Is `c` the relation argument of a `TUMBLE(...)` / `HOP(...)` FROM item?"""
    f = c.parent
    if not isinstance(f, exp.Anonymous) or not isinstance(f.parent, exp.Table):
        return False
    args = f.expressions
    return str(f.this).lower() in _WINDOW_TVFS and bool(args) and args[0] is c
