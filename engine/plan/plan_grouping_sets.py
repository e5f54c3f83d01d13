"""GROUP BY GROUPING SETS / CUBE / ROLLUP and grouping(), ad hoc and in materialized views.

A query grouped by several grouping sets is the UNION ALL of one ordinary grouped query
per set, as PostgreSQL defines it: in the branch of set S, a grouping expression outside S
reads as NULL (outside aggregate arguments, which still see the rows' values), and
`grouping(e1, ..., en)` is the constant bit mask whose bit for e_i (e1 the most
significant) is 1 when e_i is not in S. The rewrite works on the sqlglot tree before
planning, so each branch is planned by the ordinary aggregation planner; in a view the
union is the streaming UNION ALL, each branch keyed by its own group keys.

Set expansion follows PostgreSQL: `ROLLUP (a, b)` is `(a, b), (a), ()`; `CUBE (a, b)` is
every subset, largest first; several items in GROUP BY multiply (`x, ROLLUP (a)` is
`(x, a), (x)`). The output columns take the names the select list gives them in any
branch. ORDER BY / LIMIT / OFFSET of the query apply to the union (by output column name
or position); DISTINCT groups the union.

Lifecycle: `has_grouping_sets` / `rewrite_grouping_sets` are pure functions called by the
planner on each SELECT.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

from sqlglot import exp

from engine.errors import GroupingError, not_supported
from engine.plan.helpers import _output_name
from engine.plan.plan_agg import is_named_aggregate

MAX_SETS = 4096  # PostgreSQL's limit on the expanded grouping sets


def has_grouping_sets(q: exp.Select) -> bool:
    group = q.args.get("group")
    if group is None:
        return False
    return any(
        isinstance(g, (exp.GroupingSets, exp.Rollup, exp.Cube)) or _is_empty_set(g)
        for g in group.expressions
    )


def _is_empty_set(g: exp.Expression) -> bool:
    """`GROUP BY ()`: the empty grouping set (one group over every row, as no GROUP BY
    would give, but an aggregate query: ungrouped columns are refused)."""
    return isinstance(g, exp.Tuple) and not g.expressions


def _items_of(node: exp.Expression) -> list[exp.Expression]:
    """The expressions of one grouping element: `(a, b)`, `(a)`, `a`, `()`."""
    if isinstance(node, exp.Tuple):
        return list(node.expressions)
    if isinstance(node, exp.Paren):
        return _items_of(node.this)
    return [node]


def _sets_of(g: exp.Expression) -> list[list[exp.Expression]]:
    if _is_empty_set(g):
        return [[]]
    if isinstance(g, exp.GroupingSets):
        out: list[list[exp.Expression]] = []
        for e in g.expressions:
            if isinstance(e, (exp.Rollup, exp.Cube, exp.GroupingSets)):
                out.extend(_sets_of(e))
            else:
                out.append(_items_of(e))
        return out
    if isinstance(g, exp.Rollup):
        elems = [_items_of(e) for e in g.expressions]
        return [[x for part in elems[:k] for x in part] for k in range(len(elems), -1, -1)]
    if isinstance(g, exp.Cube):
        elems = [_items_of(e) for e in g.expressions]
        n = len(elems)
        if n > 12:
            raise not_supported("CUBE with more than 12 elements")
        out = []
        for size in range(n, -1, -1):
            for combo in combinations(range(n), size):
                out.append([x for i in combo for x in elems[i]])
        return out
    return [[g]]


def expand_sets(group: exp.Group) -> list[list[exp.Expression]]:
    sets: list[list[exp.Expression]] = [[]]
    for g in group.expressions:
        nxt = []
        for left in sets:
            for right in _sets_of(g):
                nxt.append(left + right)
                if len(nxt) > MAX_SETS:
                    raise not_supported(f"more than {MAX_SETS} grouping sets")
        sets = nxt
    return sets


def _key(e: exp.Expression) -> str:
    while isinstance(e, exp.Paren):
        e = e.this
    return e.sql(dialect="risingwave")


_AGGS = (exp.AggFunc, exp.WithinGroup)  # WITHIN GROUP: an ordered-set aggregate


def _is_agg(node: exp.Expression) -> bool:
    """An aggregate call: a sqlglot aggregate class or one it parses as a plain function
    (`every`, `jsonb_agg`), whose arguments see the rows' values in every branch."""
    return isinstance(node, _AGGS) or is_named_aggregate(node)


def _substitute(
    node: exp.Expression, absent: dict[str, str], present_all: list[str], current: set[str]
) -> exp.Expression:
    """A copy of `node` where grouping expressions outside the current set read NULL and
    grouping(...) is its constant; aggregate arguments keep the real values."""
    if isinstance(node, exp.Grouping):
        mask = 0
        for arg in node.expressions:
            k = _key(arg)
            if k not in present_all:
                raise GroupingError(
                    "arguments to GROUPING must be grouping expressions of the associated "
                    "query level"
                )
            mask = (mask << 1) | (0 if k in current else 1)
        return exp.Literal.number(mask)
    if (
        _is_agg(node)
        or isinstance(node, exp.Window)
        or (isinstance(node, exp.Filter) and _is_agg(node.this))
    ):
        return node.copy()
    if not isinstance(node, exp.Paren) and _key(node) in absent:
        return exp.cast(exp.Null(), absent[_key(node)], dialect="risingwave")
    out = node.copy()
    for key, value in list(out.args.items()):
        if isinstance(value, exp.Expression):
            out.set(key, _substitute(node.args[key], absent, present_all, current))
        elif isinstance(value, list):
            out.set(
                key,
                [
                    _substitute(v, absent, present_all, current)
                    if isinstance(v, exp.Expression)
                    else v
                    for v in node.args[key]
                ],
            )
    return out


def grouping_expressions(q: exp.Select) -> list[exp.Expression]:
    """Every distinct expression of the query's grouping sets."""
    out: list[exp.Expression] = []
    keys: list[str] = []
    for s in expand_sets(q.args["group"]):
        for e in s:
            if _key(e) not in keys:
                keys.append(_key(e))
                out.append(e)
    return out


def rewrite_grouping_sets(q: exp.Select, types: list[str]) -> exp.Expression:
    """The UNION ALL of one grouped SELECT per grouping set (see module docstring);
    `types` are the SQL types of `grouping_expressions(q)` (a NULL in a branch has it)."""
    group = q.args["group"]
    sets = expand_sets(group)
    all_keys = [_key(e) for e in grouping_expressions(q)]
    type_of = dict(zip(all_keys, types, strict=True))
    names = [_output_name(item) for item in q.expressions]
    branches: list[exp.Select] = []
    for s in sets:
        current = {_key(e) for e in s}
        absent = {k: type_of[k] for k in all_keys if k not in current}
        b = q.copy()
        for arg in ("with_", "with", "order", "limit", "offset", "distinct"):
            b.set(arg, None)
        items = []
        for item, name in zip(q.expressions, names, strict=True):
            inner = item.this if isinstance(item, exp.Alias) else item
            if isinstance(inner, exp.Star) or (
                isinstance(inner, exp.Column) and isinstance(inner.this, exp.Star)
            ):
                raise not_supported("* in the select list of a query with GROUPING SETS")
            new = _substitute(inner, absent, all_keys, current)
            items.append(exp.alias_(new, exp.to_identifier(name, quoted=True), copy=False))
        b.set("expressions", items)
        uniq: list[exp.Expression] = []
        seen: set[str] = set()
        for e in s:
            if _key(e) not in seen:
                seen.add(_key(e))
                uniq.append(e.copy())
        b.set("group", exp.Group(expressions=uniq) if uniq else None)
        having = q.args.get("having")
        if having is not None:
            b.set("having", exp.Having(this=_substitute(having.this, absent, all_keys, current)))
        if not uniq and having is None and not _has_agg(items):
            # the empty set is one group; without aggregates a constant key makes it one
            b.set("group", exp.Group(expressions=[exp.true()]))
        branches.append(b)
    union: exp.Expression = branches[0]
    for b in branches[1:]:
        union = exp.Union(this=union, expression=b, distinct=False)
    if len(branches) == 1 and not any(
        q.args.get(a) for a in ("order", "limit", "offset", "distinct")
    ):
        return union
    outer = exp.select("*").from_(
        exp.Subquery(this=union, alias=exp.TableAlias(this=exp.to_identifier("_grouping_sets")))
    )
    for arg in ("order", "limit", "offset", "distinct"):
        if q.args.get(arg) is not None:
            outer.set(arg, q.args[arg].copy())
    return outer


def _has_agg(items: list[Any]) -> bool:
    return any(_is_agg(n) for i in items for n in i.walk())
