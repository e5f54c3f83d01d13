"""EXPLAIN: of streaming jobs (`EXPLAIN [(VERBOSE)] CREATE MATERIALIZED VIEW / CREATE SINK`)
and of SELECT (`explain`, the statement's entry point, prints the batch plan).

The query is planned for streaming and lowered to its stream plan
(`engine.plan.stream_plan`), exactly as CREATE would do, and that plan is printed in
RisingWave's style: one `Stream...` line per operator with its keys and state tables,
table scans as leaves. No operator is built and nothing is allocated in the database:
state-table ids are local numbers (0, 1, ...). VERBOSE adds one line per state table (its
columns, primary key, value columns and distribution key). A materialized view that would
run in parallel (the session's `streaming_parallelism`, else the server's --parallelism,
above 1, and a partitionable node) shows its exchanges and one line per fragment
(`engine.stream.parallel.introspect.explain_parallel`).

Planner snapshot tests (`tests/planner/`) call `stream_plan_for` directly.
"""

from __future__ import annotations

from typing import Any

from engine.api import QueryResult
from engine.errors import SqlSyntaxError
from engine.handlers.ddl import plan_view_query
from engine.handlers.query import plan_select
from engine.handlers.sink import sink_type
from engine.plan.append_only import derived_append_only
from engine.plan.logical import PlanNode
from engine.plan.stream_lower import local_ids, lower_stream_plan
from engine.plan.stream_plan import StreamPlan, explain_lines
from engine.sql.parser import Statement, parse_one
from engine.stream.parallel.fragment import choose
from engine.stream.parallel.introspect import explain_parallel, planned_parallelism
from engine.types import VARCHAR, Field


def stream_plan_for(session: Any, inner: Statement) -> tuple[StreamPlan, str | None]:
    """The stream plan CREATE would store for `inner`, and the root line above it for a
    sink (planning reads the catalog, which needs no lock)."""
    if inner.kind == "create_mv":
        assert inner.ast is not None
        q = inner.ast.expression
        eowc = bool(inner.args.get("emit_on_window_close"))
        plan = plan_view_query(session.db, q.sql(dialect="risingwave"), eowc)
        return lower_stream_plan(plan, local_ids()), None
    d = inner.args["sink"]
    if d.from_name is not None:
        src = session.db.catalog.get(d.from_name, d.from_schema)
        query_sql = f'SELECT * FROM "{src.schema_name}"."{src.name}"'
    else:
        parsed = parse_one(d.query or "")
        if parsed.kind != "select" or parsed.ast is None:
            raise SqlSyntaxError("CREATE SINK ... AS needs a SELECT query")
        query_sql = parsed.ast.sql(dialect="risingwave")
    plan = plan_view_query(session.db, query_sql)
    return lower_stream_plan(plan, local_ids(), materialize=False), _sink_line(d, plan)


def _sink_line(d: Any, plan: PlanNode) -> str:
    options = dict(d.clauses.options)
    cols = ", ".join(f.name for f in plan.schema if not f.hidden)
    kind = sink_type(d, options, derived_append_only(plan))
    target = f"table: {d.into}" if d.into is not None else f"connector: {options.get('connector')}"
    return f"StreamSink {{ {target}, type: {kind}, columns: [{cols}] }}"


def explain_stream(session: Any, inner: Statement, verbose: bool) -> list[str]:
    splan, header = stream_plan_for(session, inner)  # catalog read: no lock (copy-on-write)
    if inner.kind in ("create_mv", "create_sink"):  # at the parallelism CREATE would use
        p = planned_parallelism(
            session.vars.get("streaming_parallelism"), session.db.runtime.parallelism
        )
        chosen = choose(splan) if p > 1 else []
        if chosen:
            return explain_parallel(splan, chosen, p, verbose=verbose, header=header)
    return explain_lines(splan, verbose=verbose, header=header)


def explain(session: Any, st: Statement) -> QueryResult:
    inner = parse_one(st.args["inner"])
    lines: list[str]
    if inner.kind in ("create_mv", "create_sink"):
        lines = explain_stream(session, inner, bool(st.args.get("verbose")))
    elif inner.kind == "select":
        assert inner.ast is not None
        plan = plan_select(session, inner.ast, None)
        lines = [
            "Batch" + ln if not ln.lstrip().startswith("└─") else ln.replace("└─", "└─Batch", 1)
            for ln in plan.explain()
        ]
    else:
        from engine.errors import not_supported

        raise not_supported(f"EXPLAIN of {inner.kind.replace('_', ' ').upper()}")
    return QueryResult("EXPLAIN", [Field("QUERY PLAN", VARCHAR)], [(ln,) for ln in lines])
