"""Table functions joined to the FROM items before them: `FROM t, LATERAL unnest(t.arr)`.

`SELECT t.id, u.x FROM t, LATERAL unnest(t.arr) AS u(x)`, `... CROSS JOIN LATERAL
generate_series(1, t.n) AS g` and a Python table function over a table's columns
(`FROM t, LATERAL f(t.a) AS r`) pair every row of the left side with each row the
function yields for it: PostgreSQL's lateral cross join, where a row for which the
function yields nothing (an empty or NULL array, an empty range) disappears. That is what
a `ProjectSet` over the left side computes for one set-returning call (the left columns,
then the function's), so the join is planned as one, ad hoc (`ProjectSet`) and in
materialized views (`StreamProjectSet`, stateless: a deleted left row is expanded again
into the rows it had, which are deleted; the function must be deterministic, as
RisingWave requires). In a view the output rows are keyed by the left row's stream key
and the hidden `_projected_row_id` (an output row's position among its left row's
outputs). The keyword LATERAL is optional before a function call, as in PostgreSQL, so
`FROM t CROSS JOIN unnest(t.arr) AS x` is the same join; a function over constants
joined this way (`FROM t, generate_series(1, 3) AS g`) is expanded per row as well.

Column names, as PostgreSQL: a one-column function's column is named by the alias
(`AS x`, or `AS u(x)`), else by the function (`unnest`, `generate_series`); a Python table
function's columns by its `RETURNS TABLE (...)`, renamed by `AS f(a, b)`. `WITH
ORDINALITY` adds a bigint column counting the rows of each left row from 1.

Refused, with a hint: `LEFT JOIN LATERAL` (an outer lateral join would keep rows with no
output), several arrays in one `unnest`, LATERAL subqueries. An `ON` condition of an inner
lateral join is a filter over the ProjectSet.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from engine import expr as ex
from engine.errors import not_supported
from engine.plan.helpers import _and_all, _Col, _conjuncts
from engine.plan.logical import Filter, PlanNode, Project, ProjectSet
from engine.plan.plan_srf import PROJECTED_ROW_ID, _fields, _srf_args, _srf_name, typed_args
from engine.plan.plan_udf import lateral_udtf, table_function_names
from engine.types import BIGINT, Field


def _call_of(item: exp.Expression) -> tuple[exp.Expression, Any, Any, bool] | None:
    """(call, alias, ordinality node, explicit LATERAL) of a table-function FROM item."""
    if isinstance(item, exp.Lateral):
        call = item.this
        alias = item.args.get("alias")
        offset = call.args.get("offset") if isinstance(call, exp.Unnest) else None
        if item.args.get("ordinality"):
            offset = offset or True
        return call, alias, offset, True
    if isinstance(item, exp.Unnest):
        return item, item.args.get("alias"), item.args.get("offset"), False
    if isinstance(item, exp.Table) and isinstance(
        item.this, (exp.Anonymous, exp.ExplodingGenerateSeries, exp.GenerateSeries)
    ):
        return item.this, item.args.get("alias"), item.args.get("ordinality") or None, False
    return None


def plan_lateral(
    planner: Any, left: PlanNode, lcols: list[_Col], j: exp.Join
) -> tuple[PlanNode, list[_Col]] | None:
    """The join `j` of a table function to `left` as a ProjectSet (module docstring), or
    None when `j` joins something else."""
    found = _call_of(j.this)
    if found is None:
        return None
    call, alias, offset, explicit = found
    udtfs = table_function_names(planner.catalog)
    name = "unnest" if isinstance(call, exp.Unnest) else _srf_name(call, udtfs)
    if name is None or name in ("_pg_expandarray", "generate_subscripts"):
        if isinstance(call, exp.Subquery):
            raise not_supported(
                "LATERAL subqueries",
                hint="LATERAL joins a table function (unnest, generate_series or a Python "
                "table function); write the subquery as a join.",
            )
        if explicit:
            raise not_supported(
                f"LATERAL {call.sql()}",
                hint="LATERAL joins a table function (unnest, generate_series or a Python "
                "table function).",
            )
        return None
    side = (j.args.get("side") or "").lower()
    if side:
        raise not_supported(
            f"{side.upper()} JOIN LATERAL",
            hint="Use CROSS JOIN LATERAL (or a comma): a row for which the function returns "
            "no rows is left out.",
        )
    arg_nodes = list(call.expressions) if isinstance(call, exp.Unnest) else _srf_args(call)
    if name == "unnest" and len(arg_nodes) != 1:
        raise not_supported("unnest of several arrays in FROM", hint="Unnest each array.")
    scope = planner._scope(lcols)
    args = [planner._bind(a, scope) for a in arg_nodes]
    routines: dict[str, Any] = {}
    if name in udtfs:
        routine, args, fields = lateral_udtf(planner, name, args)
        routines[name] = routine
    else:
        args = typed_args(name, args)
        fields = _fields(name, args, name)
    alias_name = alias.name if isinstance(alias, exp.TableAlias) and alias.name else None
    if alias_name and len(fields) == 1 and name not in udtfs:
        fields = [Field(alias_name, fields[0].type)]
    names = [c.name for c in alias.columns] if isinstance(alias, exp.TableAlias) else []
    fields = [Field(names[i] if i < len(names) else f.name, f.type) for i, f in enumerate(fields)]
    ordinality = offset not in (None, False)
    table = alias_name or name
    out_cols = [*lcols, *(_Col(f.name, f.type, table) for f in fields)]
    pos = Field(PROJECTED_ROW_ID, BIGINT, hidden=True)
    schema = [*left.schema, *fields, pos]
    if planner.streaming and left.stream_key is None:
        raise not_supported("a lateral table function over an input without a stream key")
    key = None if left.stream_key is None else [*left.stream_key, len(schema) - 1]
    node: PlanNode = ProjectSet(
        schema, key, input=left, srfs=[(name, args)], routines=routines, position=True
    )
    out_cols.append(_Col(pos.name, BIGINT, None, hidden=True))
    if ordinality:  # the position counted from 1, a visible column after the function's
        if len(names) > len(fields):
            oname = names[len(fields)]
        elif isinstance(offset, exp.Identifier):
            oname = offset.name
        else:
            oname = "ordinality"
        refs: list[ex.Expr] = [ex.InputRef(i, f.type, f.name) for i, f in enumerate(schema)]
        p = refs[-1]
        one = ex.Literal(1, BIGINT)
        refs.insert(len(schema) - 1, ex.ops.bind_arith("+", p, one))
        oschema = [*schema[:-1], Field(oname, BIGINT), schema[-1]]
        okey = None if key is None else [*left.stream_key, len(oschema) - 1]  # type: ignore[misc]
        node = Project(oschema, okey, input=node, exprs=refs)
        out_cols.insert(len(out_cols) - 1, _Col(oname, BIGINT, table))
    on = j.args.get("on")
    if on is not None and not (isinstance(on, exp.Boolean) and on.this is True):
        scope = planner._scope(out_cols)
        pred = _and_all([planner._bind(c, scope) for c in _conjuncts(on)])
        assert pred is not None
        node = Filter(node.schema, node.stream_key, input=node, predicate=pred)
    return node, out_cols
