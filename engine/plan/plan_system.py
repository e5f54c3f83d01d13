"""FROM resolution of system relations (`engine.catalog.system`) for the planner.

Called by `FromPlannerMixin._plan_from` for a table name before user relations are looked
up: a name qualified with a system schema must be a system relation; an unqualified name
is a `pg_catalog` relation first (PostgreSQL puts `pg_catalog` implicitly in front of the
search path), then a user relation, then an `rw_catalog` relation.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from engine.catalog.system import SYSTEM_SCHEMAS, resolve_system
from engine.errors import UndefinedTable, not_supported
from engine.plan.helpers import _Col, _pos
from engine.plan.logical import PlanNode, SystemScan
from engine.types import INT, Field, pg_alias


def plan_system_from(
    planner: Any, name: str, schema: str | None, item: exp.Table
) -> tuple[PlanNode, list[_Col]] | None:
    """The scan of the system relation `item` names, or None if it names a user relation."""
    if schema is not None:
        schema = schema if item.args["db"].args.get("quoted") else schema.lower()
        if schema not in SYSTEM_SCHEMAS:
            return None
        rel = resolve_system(name, schema, True)
        if rel is None:
            raise UndefinedTable(f'relation "{schema}.{name}" does not exist', position=_pos(item))
    else:
        rel = resolve_system(name, None, True)
        if rel is None and planner.catalog.find(name) is None:
            rel = resolve_system(name, None, False)
        if rel is None:
            return None
    if planner.streaming:
        raise not_supported(
            f'materialized view on system relation "{rel.schema}.{rel.name}"',
            hint="System relations describe the catalog; query them ad hoc instead.",
        )
    fields = [
        Field(f.name, f.type, f.hidden, origin=(rel.oid, i + 1)) for i, f in enumerate(rel.fields)
    ]
    # PostgreSQL's `tableoid` system column (psql's \dL joins on it)
    fields.append(Field("tableoid", pg_alias(INT, "oid"), hidden=True))
    node = SystemScan(fields, None, relation=rel)
    tname = item.alias or rel.name
    cols = [_Col(f.name, f.type, tname, f.hidden) for f in fields]
    alias_node = item.args.get("alias")
    if isinstance(alias_node, exp.TableAlias) and alias_node.columns:
        for pos, c in enumerate(alias_node.columns[: len(cols)]):
            cols[pos].name = c.name
    return node, cols
