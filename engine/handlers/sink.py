"""CREATE SINK: plan the sink's query for streaming, decide its type, validate, backfill.

The statement is parsed by `engine.sql.create_sink`. Here:

1. the query is `SELECT * FROM obj` for `FROM obj`, else the `AS` query; it is planned
   with the streaming planner (like a materialized view) and its regenerated text is what
   the catalog keeps, so recovery re-plans the same operators and state tables;
2. the sink type follows RisingWave (`FORMAT PLAIN` = append-only, `UPSERT`, `DEBEZIUM`;
   legacy `type = '...'`; no format = derived from the stream): a PLAIN sink over a stream
   that can retract is refused unless `force_append_only = 'true'`;
3. the connector's writer is found in `engine.connector_registry` and validated synchronously by
   `Runtime.create_sink`, which then backfills the current contents (skipped for
   `snapshot = 'false'`) and commits, like every DDL.

DROP / SHOW / DESCRIBE / SHOW CREATE SINK go through the generic relation handlers;
`interrupt_sinks` lets DROP SINK stop a writer that is retrying before DROP takes the
runtime lock. Lifecycle: stateless functions called by the session per statement.
"""

from __future__ import annotations

from typing import Any

from engine.api import Notice, QueryResult
from engine.catalog import Relation, RelationKind
from engine.catalog.privileges import require, require_secret, session_owner
from engine.errors import (
    EngineError,
    InvalidParameterValue,
    SqlSyntaxError,
    UndefinedColumn,
    WrongObjectType,
    not_supported,
)
from engine.handlers.jobs import job_options, wait_for_job
from engine.plan.append_only import derived_append_only
from engine.plan.plan_udf import functions_used
from engine.plan.planner import check_unique_names
from engine.plan.stream_lower import lower_stream_plan
from engine.sql.create_sink import CreateSink
from engine.sql.parser import Statement, parse_one
from engine.stream.job_plan import state_ids
from engine.stream.parallel.fragment import PARALLELISM, parse_parallelism
from engine.stream.sink import APPEND_ONLY, DEBEZIUM, FORCE_APPEND_ONLY, UPSERT

_FORMATS = {"PLAIN": APPEND_ONLY, "UPSERT": UPSERT, "DEBEZIUM": DEBEZIUM}
_LEGACY_TYPES = {"append-only": APPEND_ONLY, "upsert": UPSERT, "debezium": DEBEZIUM}


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _truthy(v: str | None) -> bool:
    return v is not None and v.strip().lower() == "true"


def sink_type(d: CreateSink, options: dict[str, str], derived: bool) -> str:
    c = d.clauses
    legacy = c.format is None
    force = _truthy(c.format_options.get("force_append_only")) or _truthy(
        options.get("force_append_only")
    )
    force = (
        force
        or _truthy(c.format_options.get("ignore_delete"))
        or _truthy(options.get("ignore_delete"))
    )
    user: str | None
    if c.format is not None:
        user = _FORMATS.get(c.format)
        if user is None:
            raise not_supported(
                f"sink format {c.format}", hint="Use FORMAT PLAIN, UPSERT or DEBEZIUM."
            )
    elif options.get("type") is not None:
        user = _LEGACY_TYPES.get(options["type"].lower())
        if user is None:
            raise InvalidParameterValue(
                f"sink type '{options['type']}' is not supported",
                hint="Use type = 'append-only', 'upsert' or 'debezium'.",
            )
    else:
        user = None
    if force and user != APPEND_ONLY:
        what = "type='append-only'" if legacy else "FORMAT PLAIN"
        raise InvalidParameterValue(f'Cannot force the sink to be append-only without "{what}".')
    if user is None:
        return APPEND_ONLY if derived else UPSERT
    if user == APPEND_ONLY:
        if force:
            return FORCE_APPEND_ONLY
        if not derived:
            where = "WITH" if legacy else "FORMAT ENCODE"
            raise InvalidParameterValue(
                "The sink cannot be append-only. Please add \"force_append_only='true'\" in "
                f"{where} options to force the sink to be append-only. Notice that this will "
                "cause the sink executor to drop DELETE messages and convert UPDATE messages "
                "to INSERT."
            )
        return APPEND_ONLY
    return user


def create_sink(session: Any, st: Statement) -> QueryResult:
    from engine.handlers.query import planner_for

    d: CreateSink = st.args["sink"]
    c = d.clauses
    if c.format_secret_refs:
        raise not_supported("secrets in FORMAT ... ENCODE options")
    options = dict(c.options)
    rt = session.db.runtime
    with rt.lock:
        for secret_name in c.secret_refs.values():  # only its owner hands a secret out
            if secret_name in session.db.catalog.secrets:
                require_secret(session.db.catalog.secrets[secret_name])
        cat = session.db.catalog
        from engine.handlers.connection import expand_connection

        options = expand_connection(cat, options)  # `connection = name`
        cat.check_schema(d.name, d.schema)
        if cat.find(d.name, d.schema) is not None:
            if d.if_not_exists:
                return QueryResult(
                    "CREATE_SINK",
                    notices=[Notice(f'relation "{d.name}" already exists, skipping')],
                )
            cat.check_free(d.name, d.schema)
        into: Relation | None = None
        if d.into is not None:
            into = cat.get(d.into, d.into_schema)
            require(into, "a")  # INSERT on the target (engine/catalog/privileges.py)
            from engine.handlers.iceberg_table import no_local_reads, sink_into_options

            options = sink_into_options(into, options)
            no_local_reads(into)
            connector = options.get("connector") or into.extra.get("sink_into_connector")
            if connector is None:
                if into.kind is not RelationKind.TABLE:
                    raise WrongObjectType(f'"{into.name}" is not a table')
                connector = "table"  # engine.stream.sink_into_table
        else:
            connector = options.get("connector")
            if connector is None:
                raise InvalidParameterValue(
                    "connector not specified",
                    hint="Add WITH (connector = 'kafka' | 'iceberg' | 'blackhole', ...).",
                )
        if d.from_name is not None:
            src = cat.get(d.from_name, d.from_schema)
            if src.kind is RelationKind.SINK:
                raise SqlSyntaxError(f'cannot create a sink from sink "{src.name}"')
            query_sql = f"SELECT * FROM {_quote(src.schema_name)}.{_quote(src.name)}"
        else:
            assert d.query is not None
            parsed = parse_one(d.query, d.query_offset)
            if parsed.kind != "select" or parsed.ast is None:
                raise SqlSyntaxError("CREATE SINK ... AS needs a SELECT query")
            query_sql = parsed.ast.sql(dialect="risingwave")
        planner = planner_for(session, None, streaming=True)
        ast = parse_one(query_sql).ast
        assert ast is not None
        try:
            plan = planner.plan_query(ast)
        except EngineError as e:
            if d.query is not None and e.position is not None:
                _query_position(session, e, d.query, d.query_offset)
            raise
        fields = list(plan.schema)
        check_unique_names([f for f in fields if not f.hidden])
        kind = sink_type(d, options, derived_append_only(plan))
        visible = [f.name for f in fields if not f.hidden]
        pk: list[str] = []
        if options.get("primary_key"):
            for n in (p.strip() for p in options["primary_key"].split(",")):
                if n not in visible:
                    raise UndefinedColumn(
                        f"Sink primary key column not found: {n}. Please use ',' as the "
                        "delimiter for different primary key columns."
                    )
                pk.append(n)
        snapshot = options.get("snapshot", "true").strip().lower() != "false"
        depends = [r.id for r in planner.dependencies]
        if into is not None:
            depends.append(into.id)
        rel = Relation(
            id=cat.allocate_relation_id(),
            name=d.name,
            kind=RelationKind.SINK,
            fields=fields,
            pk=[],
            definition=st.sql.strip(),
            owner=session_owner(session),
            schema_name=d.schema or "public",
            query=query_sql,
            append_only=kind in (APPEND_ONLY, FORCE_APPEND_ONLY),
            depends_on=depends,
            options=options,
            extra={
                "sink": {
                    "connector": connector,
                    "sink_type": kind,
                    "format": c.format,
                    "encode": c.encode,
                    "format_options": dict(c.format_options),
                    "key_encode": c.key_encode,
                    "pk": pk,
                    "snapshot": snapshot,
                    "into": into.id if into is not None else None,
                    "into_columns": list(d.into_columns),
                    "secret_options": dict(c.secret_refs),
                },
                "secret_refs": sorted(set(c.secret_refs.values())),
            },
        )
        used = functions_used(cat, query_sql)  # DROP FUNCTION refuses while they exist
        if used:
            rel.extra["functions"] = used
        # 0 ('adaptive'): the server's --parallelism, resolved and stored by the runtime
        rel.extra[PARALLELISM] = parse_parallelism(session.vars.get("streaming_parallelism"))
        job = rt.create_sink(
            rel,
            lower_stream_plan(plan, state_ids(rel, cat), materialize=False),
            snapshot,
            job_options(session, st.sql.strip()),
        )
    return wait_for_job(session, job, "CREATE_SINK")


def interrupt_sinks(session: Any, names: list[tuple[str, str | None]]) -> None:
    """Tell named sinks' retry loops to give up (no lock: DROP takes it right after)."""
    rt = session.db.runtime
    for name, schema in names:
        try:
            rel = session.db.catalog.find(name, schema)
        except RuntimeError:  # the catalog changed while we looked; DROP will see it
            continue
        if rel is not None and rel.kind is RelationKind.SINK:
            rt.interrupt_sink(rel.id)


def _query_position(session: Any, e: EngineError, query: str, offset: int) -> None:
    """Point a binder error into the user's statement: the sink is planned from the
    regenerated query text, so the position comes from planning the query as written
    (error path only), counted from where the query starts in the statement."""
    from engine.handlers.query import planner_for

    e.position = None
    tree = parse_one(query).ast
    if tree is None:
        return
    try:
        planner_for(session, None, streaming=True).plan_query(tree)
    except EngineError as e2:
        if type(e2) is type(e) and str(e2) == str(e) and e2.position is not None:
            e.position = e2.position + offset
