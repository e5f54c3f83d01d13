"""SELECT: planning (`planner_for`, `plan_select`) and running (`run_select`, `run_plan`).

The other handlers plan and run their queries through this module (it imports none of
them); EXPLAIN is `engine.handlers.explain_stream.explain`.

An ad-hoc SELECT takes no lock: it is planned against the catalog as it is (the catalog's
relation map is copy-on-write), its tables and materialized views are read from the last
committed epoch (`Runtime.committed()`, one epoch for every relation it reads) and its
system relations are computed from the catalog and the runtime's status at that moment.
So a SELECT never waits for a barrier, a DDL or a COPY. A relation that is in the catalog
but in no committed epoch yet (its CREATE is still running) is read once its CREATE
committed: that read takes the epoch lock, like the CREATE.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
from sqlglot import exp

from engine.api import QueryResult
from engine.batch import execute_plan, stream_plan
from engine.catalog import RelationKind
from engine.errors import ObjectNotInPrerequisiteState
from engine.expr import ParamContext
from engine.handlers.result_stream import first_rows, rows_of
from engine.plan.logical import PlanNode, Scan, load_system_scans, relations_scanned
from engine.plan.planner import Planner
from engine.sql.parser import Statement
from engine.types import INT, VARCHAR, SqlType
from engine.version import SERVER_VERSION, SWELL_VERSION


def session_func(session: Any) -> Any:
    def f(name: str) -> tuple[Any, SqlType] | None:
        if name in ("version", "current_version"):
            return (
                f"PostgreSQL {SERVER_VERSION}-Swell-{SWELL_VERSION} on x86_64-pc-linux-gnu, "
                f"compiled by Python",
                VARCHAR,
            )
        if name in ("current_database", "current_catalog"):
            return (session.database, VARCHAR)
        if name == "current_schema":
            return ("public", VARCHAR)
        if name in ("current_user", "session_user", "user", "current_role"):
            return (session.user, VARCHAR)
        if name == "pg_backend_pid":
            return (session.pid, INT)
        if name == "pg_postmaster_start_time":
            return None
        return None

    return f


def planner_for(session: Any, params: ParamContext | None, streaming: bool = False) -> Planner:
    return Planner(
        session.db.catalog,
        params=params,
        streaming=streaming,
        subquery_runner=lambda plan: rows_of(run_plan(session, plan)),
        session_func=session_func(session),
    )


def run_plan(
    session: Any, plan: PlanNode, time_travel: dict[str, tuple[str, str]] | None = None
) -> pa.Table:
    return execute_plan(plan, _snapshots(session, plan, time_travel), session.eval_ctx())


def _snapshots(
    session: Any, plan: PlanNode, time_travel: dict[str, tuple[str, str]] | None
) -> Callable[[int], pa.Table]:
    """The committed rows of every relation `plan` reads (one epoch for all of them)."""
    from engine.handlers.iceberg_table import iceberg_snapshots, is_iceberg_relation, reads_local

    rt = session.db.runtime
    rels = relations_scanned(plan)
    committed = rt.committed()
    layouts = _scan_layouts(plan)
    pins = {}
    for r in rels:
        local = reads_local(r, time_travel)
        if not local and (is_iceberg_relation(r) or r.kind is RelationKind.SOURCE):
            continue
        pin = committed.pins.get(r.id)
        if pin is None or not _same_layout(pin, layouts[r.id]):
            pin = _pin_created(session, r)  # being created or altered: wait for its DDL
            if not _same_layout(pin, layouts[r.id]):
                raise ObjectNotInPrerequisiteState(
                    f'table "{r.name}" was altered while the statement ran',
                    hint="Run the statement again.",
                )
        pins[r.id] = pin
    load_system_scans(plan, _system_ctx(session))
    _load_index_scans(session, plan, committed)
    snaps = {rid: p.table() for rid, p in pins.items()}
    snaps.update(iceberg_snapshots(plan, rels, time_travel))  # committed Iceberg snapshots
    for r in rels:  # a source is read from its topic, outside the epoch lock
        if r.kind is RelationKind.SOURCE and not is_iceberg_relation(r):
            from engine.stream.source_scan import read_source_now

            snaps[r.id] = read_source_now(r, plan, session.eval_ctx())
    session.check_cancel()
    return snaps.__getitem__


def _load_index_scans(session: Any, plan: PlanNode, committed: Any) -> None:
    """Answer each IndexScan from its index's rows of the query's committed epoch."""
    from engine.batch.index_lookup import fetch, lookup
    from engine.plan.index_scan import IndexScan

    stack = [plan]
    while stack:
        n = stack.pop()
        if isinstance(n, IndexScan):  # every run looks up again (a plan may run twice)
            pin = committed.pins.get(n.index.id)
            if pin is None:
                pin = _pin_created(session, n.index)
            one = pa.record_batch([pa.array([0])], names=["_"])
            ctx = session.eval_ctx()
            bounds = [(j, op, e.eval(one, ctx)[0].as_py()) for j, op, e in n.bounds]
            if n.points is None:
                n.table = lookup(pin, n.keys, bounds, n.columns)
            else:  # key IN (...): one point lookup per distinct value, NULL matching none
                values = {e.eval(one, ctx)[0].as_py() for e in n.points} - {None}
                found = [lookup(pin, n.keys, [*bounds, (0, "=", v)], n.columns) for v in values]
                empty = lookup(pin, n.keys, [(0, "=", None)], n.columns)
                n.table = pa.concat_tables([empty, *found]) if found else empty
            if n.fetch is not None:  # not covering: the relation's rows by primary key
                base = committed.pins.get(n.relation.id)
                if base is None or not _same_layout(base, [f.type.arrow for f in n.schema]):
                    base = _pin_created(session, n.relation)
                n.table = fetch(base, n.fetch, n.table)
        stack.extend(n.inputs())


def _scan_layouts(plan: PlanNode) -> dict[int, list[pa.DataType]]:
    """The column types each scanned relation had when the query was planned."""
    out: dict[int, list[pa.DataType]] = {}
    stack = [plan]
    while stack:
        n = stack.pop()
        if isinstance(n, Scan):
            out[n.relation.id] = [f.type.arrow for f in n.schema]
        stack.extend(n.inputs())
    return out


def _same_layout(pin: Any, types: list[pa.DataType]) -> bool:
    """Do the pinned rows have the columns the plan reads? Not while an ALTER TABLE ...
    ADD/DROP COLUMN has changed the catalog entry but not yet committed the new rows (the
    plan would read the columns by the wrong positions)."""
    schema = getattr(pin, "schema", None)
    if not isinstance(schema, pa.Schema):
        schema = pin.table().schema
    return list(schema.types) == types


def _pin_created(session: Any, rel: Any) -> Any:
    """The rows of a relation no committed epoch has: its CREATE is running (wait for it,
    under the epoch lock the CREATE holds) or it was dropped meanwhile."""
    from engine.errors import UndefinedTable

    try:
        return session.db.runtime.pin(rel.id)
    except KeyError:
        raise UndefinedTable(f'relation "{rel.name}" does not exist') from None


def _system_ctx(session: Any) -> Any:
    from engine.catalog.system import SystemContext

    return SystemContext(session.db, session)


def plan_select(session: Any, ast: exp.Expression, params: ParamContext | None) -> PlanNode:
    from engine.plan.index_scan import use_indexes

    return use_indexes(planner_for(session, params).plan_query(ast), session.db.catalog)


def run_select(
    session: Any, st: Statement, params: ParamContext | None, stream: bool = False
) -> QueryResult:
    """Run a SELECT. With `stream`, a large result comes back with its first rows and the
    rest in `result.more` (engine/handlers/result_stream.py), produced as pgwire pulls."""
    assert st.ast is not None
    plan = plan_select(session, st.ast, params)
    vis = [i for i, f in enumerate(plan.schema) if not f.hidden]
    if stream:
        snaps = _snapshots(session, plan, st.args.get("time_travel"))
        fields = [plan.schema[i] for i in vis]
        parts = stream_plan(plan, snaps, session.eval_ctx())
        keep = vis if len(vis) != len(plan.schema) else None
        return first_rows(session, QueryResult("", fields), parts, keep)
    t = run_plan(session, plan, st.args.get("time_travel"))
    if len(vis) != t.num_columns:
        t = t.select(vis)
    fields = [plan.schema[i] for i in vis]
    rows = rows_of(t)
    return QueryResult(f"SELECT {len(rows)}", fields, rows)


def _indent(lines: list[str]) -> list[str]:
    return lines
