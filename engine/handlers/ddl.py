"""CREATE TABLE / MATERIALIZED VIEW / VIEW and DROP.

Every DDL runs under the runtime lock and ends with a checkpoint, so when the statement
returns the catalog change is durable. A new materialized view then fills in the
background (`engine.stream.backfill`); CREATE waits for it outside the lock
(`engine.handlers.jobs.wait_for_job`) unless `background_ddl` is set.
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from engine.api import Notice, QueryResult
from engine.catalog import Relation, RelationKind
from engine.catalog.databases import current_database
from engine.catalog.indexes import index_info, is_index_of
from engine.catalog.privileges import require_owner, session_owner
from engine.errors import (
    DependentObjectsStillExist,
    EngineError,
    InvalidColumnReference,
    SqlSyntaxError,
    UndefinedTable,
    WrongObjectType,
    not_supported,
)
from engine.handlers import column_defaults
from engine.handlers.column_defs import column_field, key_names
from engine.handlers.index import index_job
from engine.handlers.jobs import job_options, wait_for_job
from engine.plan.append_only import derived_append_only
from engine.plan.logical import PlanNode
from engine.plan.plan_udf import functions_used
from engine.plan.planner import Planner, check_unique_names
from engine.plan.stream_lower import lower_stream_plan
from engine.sql.parser import Statement, parse_one
from engine.stream.job_plan import state_ids
from engine.stream.parallel.fragment import PARALLELISM, parse_parallelism
from engine.types import BIGINT, Field


def plan_view_query(db: Any, query_sql: str, eowc: bool = False) -> PlanNode:
    """Plan a materialized view's SELECT for streaming (also used on recovery)."""
    st = parse_one(query_sql)
    assert st.ast is not None
    from engine.handlers.query import session_func

    class _S:
        database = current_database()  # the job's (recovery enters it)
        user = "root"
        pid = 0

    plan = Planner(db.catalog, streaming=True, session_func=session_func(_S())).plan_query(st.ast)
    return _time_finish(plan, eowc)


def _time_finish(plan: PlanNode, eowc: bool) -> PlanNode:
    from engine.plan.plan_time import apply_eowc, check_streaming_now

    check_streaming_now(plan)
    return apply_eowc(plan) if eowc else plan


def _name(t: exp.Expression) -> tuple[str, str | None]:
    if isinstance(t, exp.Schema):
        t = t.this
    assert isinstance(t, exp.Table)
    quoted = t.this.args.get("quoted")
    return (t.name if quoted else t.name.lower()), (t.db or None)


def _exists_notice(kind: str, name: str) -> QueryResult:
    return QueryResult(
        f"CREATE_{kind}", notices=[Notice(f'relation "{name}" already exists, skipping')]
    )


# -- CREATE TABLE --------
def create_table(session: Any, st: Statement) -> QueryResult:
    ast = st.ast
    assert isinstance(ast, exp.Create)
    schema = ast.this
    if not isinstance(schema, exp.Schema):
        if ast.expression is not None:
            raise not_supported(
                "CREATE TABLE AS is not supported yet",
                hint="Create the table, then INSERT INTO ... SELECT.",
            )
        raise not_supported("CREATE TABLE without columns")
    name, sch = _name(schema)
    props = ast.args.get("properties")
    clauses = st.args.get("clauses")  # engine.sql.clauses.DdlClauses: WITH, VALIDATE, ...
    options: dict[str, str] = dict(clauses.options) if clauses is not None else {}
    iceberg_engine = False
    if props is not None:
        for p in props.expressions:
            if isinstance(p, exp.EngineProperty):
                engine_name = p.args["this"].name.lower()
                if engine_name != "iceberg":
                    raise not_supported(f"ENGINE = {engine_name}", hint="Use ENGINE = iceberg.")
                iceberg_engine = True
            elif isinstance(p, exp.Property):
                options[p.name.lower()] = (
                    p.args["value"].name
                    if isinstance(p.args.get("value"), exp.Literal)
                    else p.args["value"].sql()
                )
    if clauses is not None and clauses.from_source is not None:
        from engine.handlers.source_ddl import shared_source_options

        options = shared_source_options(session, clauses.from_source, clauses.from_table, options)
    connector = options.get("connector")
    if clauses is not None and clauses.validate is not None and connector != "webhook":
        raise SqlSyntaxError("VALIDATE is only supported for tables created with webhook source")
    fields: list[Field] = []
    pk_names: list[str] = []
    not_null: list[str] = []
    watermarks: list[exp.Expression] = []
    defaults: list[tuple[Field, exp.Expression]] = []
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            fields.append(column_field(item, fields))
            cname = fields[-1].name
            for c in item.constraints:
                ck = c.args.get("kind")
                if isinstance(ck, exp.PrimaryKeyColumnConstraint):
                    pk_names.append(cname)
                elif isinstance(ck, exp.NotNullColumnConstraint):
                    not_null.append(cname)
                elif isinstance(ck, exp.DefaultColumnConstraint):
                    defaults.append((fields[-1], ck.this))
                elif ck is not None:
                    raise not_supported(f"column constraint {ck.sql(dialect='postgres')}")
        elif isinstance(item, exp.PrimaryKey):
            if pk_names:
                raise InvalidColumnReference(
                    f'multiple primary keys for table "{name}" are not allowed'
                )
            pk_names.extend(key_names(item))
        elif isinstance(item, exp.WatermarkColumnConstraint):
            watermarks.append(item)
        else:
            raise not_supported(f"table element {item.sql(dialect='postgres')}")
    if len(set(pk_names)) != len(pk_names) or (
        len(pk_names) > 1
        and any(
            isinstance(i, exp.ColumnDef)
            and any(
                isinstance(c.args.get("kind"), exp.PrimaryKeyColumnConstraint)
                for c in i.constraints
            )
            for i in schema.expressions
        )
    ):
        raise InvalidColumnReference(f'multiple primary keys for table "{name}" are not allowed')
    source_meta = None
    if connector and connector != "webhook":  # Kafka & co: engine/handlers/source_ddl.py
        from engine.handlers.source_ddl import connector_layout

        fields, key_pk, source_meta = connector_layout(
            RelationKind.TABLE, fields, bool(pk_names), options, clauses
        )
    pk = []
    for pn in pk_names:
        pos = next((i for i, f in enumerate(fields) if f.name == pn), None)
        if pos is None:
            raise InvalidColumnReference(f'column "{pn}" named in key does not exist')
        if fields[pos].type.kind.name == "JSONB":
            raise not_supported("JSONB column cannot be part of a primary key")
        pk.append(pos)
    from engine.stream.operators.watermark import define_watermark

    watermark = define_watermark(watermarks, fields)
    if watermark is not None and st.args.get("watermark_ttl"):
        watermark["ttl"] = True  # rows below the watermark leave the table (engine/stream/ttl.py)
    notices: list[Notice] = []
    webhook: dict[str, Any] | None = None
    if connector == "webhook":
        from engine.handlers.webhook import webhook_table_spec

        webhook, notices = webhook_table_spec(
            session.db.catalog, fields, options, clauses, not_null
        )
    row_id_index = None
    if source_meta is not None and not pk:
        pk = key_pk
    if not pk:
        fields.append(Field("_row_id", BIGINT, hidden=True))
        row_id_index = len(fields) - 1
        pk = [row_id_index]
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        cat.check_schema(name, sch)
        if cat.find(name, sch) is not None:
            if ast.args.get("exists"):
                return _exists_notice("TABLE", name)
            cat.check_free(name, sch)
        rel = Relation(
            id=cat.allocate_relation_id(),
            name=name,
            kind=RelationKind.TABLE,
            fields=fields,
            pk=pk,
            definition=st.sql.strip(),
            owner=session_owner(session),
            schema_name=sch or "public",
            append_only=bool(st.args.get("append_only")),
            options=options,
            row_id_index=row_id_index,
            extra={"not_null": [i for i, f in enumerate(fields) if f.name in not_null]},
        )
        for f, node in defaults:  # checked (42804) and folded once: column_defaults.py
            column_defaults.define(rel, f, node, session.eval_ctx())
        column_defaults.check_connector(rel)
        if webhook is not None:
            rel.extra["webhook"] = webhook
        if watermark is not None:
            rel.extra["watermark"] = watermark
        if iceberg_engine:
            from engine.handlers import iceberg_table

            iceberg_table.prepare_engine_table(session, rel)
        if clauses is not None and clauses.from_source is not None:
            src = cat.find(clauses.from_source, None)
            if src is not None:  # DROP SOURCE refuses while its tables exist
                rel.depends_on = [src.id]
                # the source's `password = SECRET s` stays a reference in the table too
                cat.bind_secret_options(rel, dict(src.extra.get("secret_options") or {}))
        if source_meta is not None:
            from engine.stream.source import SOURCE_EXTRA, connector_for

            rel.extra[SOURCE_EXTRA] = source_meta
            if clauses is not None:  # `properties.sasl.password = SECRET s`
                cat.bind_secret_options(rel, clauses.secret_refs)
            connector_for(rel).check(rel)
        rt.create_table(rel)
    if iceberg_engine:
        try:
            from engine.handlers.sink import create_sink

            iceberg_table.create_hidden_sink(session, rel, create_sink)
        except BaseException:
            rt.drop([rel])
            raise
    return QueryResult("CREATE_TABLE", notices=notices)


# -- CREATE MATERIALIZED VIEW / VIEW --------------------------------------------------------------
def create_materialized_view(session: Any, st: Statement) -> QueryResult:
    return _create_view(session, st, materialized=True)


def create_view(session: Any, st: Statement) -> QueryResult:
    return _create_view(session, st, materialized=False)


def _user_position(session: Any, e: EngineError, query: exp.Expression, streaming: bool) -> None:
    """Point an error's position into the user's statement: views are planned from the
    regenerated query text, so a binder error's position is re-derived by planning the
    statement's own tree (error path only)."""
    from engine.handlers.query import planner_for

    if e.position is None:
        return
    e.position = None
    try:
        planner_for(session, None, streaming=streaming).plan_query(query)
    except EngineError as e2:
        if type(e2) is type(e) and str(e2) == str(e):
            e.position = e2.position


def create_index(session: Any, st: Statement) -> QueryResult:
    """CREATE INDEX: a materialized view marked `extra["index"]`, owned by the indexed
    object's owner (engine.handlers.index checks the statement and writes the query)."""
    job = index_job(session, st)
    if isinstance(job, QueryResult):  # IF NOT EXISTS of an existing name
        return job
    mv, info, owner = job
    return _create_view(session, mv, materialized=True, index=info, owner=owner)


def _create_view(
    session: Any,
    st: Statement,
    *,
    materialized: bool,
    index: dict[str, Any] | None = None,
    owner: int | None = None,
) -> QueryResult:
    """CREATE [MATERIALIZED] VIEW: plan the query (for streaming if materialized), record it.

    A materialized view's stream plan (with its state tables) is stored in its catalog
    entry and recovery builds it from there; the stored query text (sqlglot's regeneration
    of the user's SELECT) serves SHOW CREATE and plans entries stored without a plan.
    """
    from engine.handlers.query import planner_for

    ast = st.ast
    assert isinstance(ast, exp.Create)
    name, sch = _name(ast.this)
    query_sql = ast.expression.sql(dialect="risingwave")
    kind = RelationKind.MATERIALIZED_VIEW if materialized else RelationKind.VIEW
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        cat.check_schema(name, sch)
        if cat.find(name, sch) is not None:
            if ast.args.get("exists"):
                return _exists_notice(kind.tag_name, name)
            cat.check_free(name, sch)
        planner = planner_for(session, None, streaming=materialized)
        parsed = parse_one(query_sql).ast
        assert parsed is not None
        try:
            plan = planner.plan_query(parsed)
        except EngineError as e:
            _user_position(session, e, ast.expression, materialized)
            raise
        names = _column_list(ast)
        if names:
            query_sql = _renamed_query(query_sql, names, plan, materialized)
            planner = planner_for(session, None, streaming=materialized)
            parsed = parse_one(query_sql).ast
            assert parsed is not None
            plan = planner.plan_query(parsed)
        if materialized and any(r.extra.get("iceberg_source") for r in planner.dependencies):
            raise not_supported(
                "materialized views over Iceberg sources",
                hint="Iceberg sources serve ad-hoc SELECT; read them with a query instead.",
            )
        eowc = bool(st.args.get("emit_on_window_close"))
        if eowc and not materialized:
            raise not_supported("EMIT ON WINDOW CLOSE on a view", hint="Use a materialized view.")
        plan = _time_finish(plan, eowc)
        fields = list(plan.schema) if materialized else [f for f in plan.schema if not f.hidden]
        check_unique_names(fields)
        rel = Relation(
            id=cat.allocate_relation_id(),
            name=name,
            kind=kind,
            fields=fields,
            pk=list(plan.stream_key or []) if materialized else [],
            definition=st.sql.strip(),
            owner=session_owner(session) if owner is None else owner,
            schema_name=sch or "public",
            query=query_sql,
            depends_on=[r.id for r in planner.dependencies],
        )
        used = functions_used(cat, query_sql)  # DROP FUNCTION refuses while they exist
        if used:
            rel.extra["functions"] = used
        if materialized:
            from engine.plan.time_nodes import watermark_columns

            rel.append_only = eowc or derived_append_only(plan)  # what sinks on it may assume

            rel.extra["watermark_columns"] = sorted(watermark_columns(plan))
            if eowc:
                rel.extra["emit_on_window_close"] = True
        if index is not None:
            rel.extra["index"] = index
        splan = None
        if materialized:
            splan = lower_stream_plan(plan, state_ids(rel, cat))
            # 0 ('adaptive'): the server's --parallelism, resolved and stored by the runtime
            rel.extra[PARALLELISM] = parse_parallelism(session.vars.get("streaming_parallelism"))
        job = rt.create_view(rel, splan, job_options(session, st.sql.strip()))
    return wait_for_job(session, job, "CREATE_INDEX" if index else f"CREATE_{kind.tag_name}")


def _column_list(ast: exp.Create) -> list[str]:
    """The names of `CREATE [MATERIALIZED] VIEW v (a, b) AS ...` (already case-folded)."""
    target = ast.this
    if not isinstance(target, exp.Schema):
        return []
    return [i.name for i in target.expressions if isinstance(i, exp.Identifier)]


def _renamed_query(query_sql: str, names: list[str], plan: PlanNode, materialized: bool) -> str:
    """The view's query with its output columns renamed by the column list.

    A materialized view needs one name per column (RisingWave); a view may name fewer,
    which renames the first columns only (PostgreSQL). The renaming is part of the stored
    query text (a derived table with a column alias list), so a restart and every reader
    of the view plan exactly the same columns.
    """
    width = sum(1 for f in plan.schema if not f.hidden)
    if len(names) > width:
        if materialized:
            raise SqlSyntaxError("too many column names were specified")
        raise SqlSyntaxError("CREATE VIEW specifies more column names than columns")
    if materialized and len(names) < width:
        raise SqlSyntaxError(
            "too few column names were specified",
            detail=f"The query returns {width} columns and the column list names {len(names)}.",
        )
    check_unique_names([Field(n, BIGINT) for n in names])
    cols = ", ".join(exp.to_identifier(n, quoted=True).sql(dialect="risingwave") for n in names)
    return f"SELECT * FROM ({query_sql}) AS _view_columns({cols})"


# -- DROP --------
_DROP_KIND = {
    ("TABLE", False): RelationKind.TABLE,
    ("VIEW", True): RelationKind.MATERIALIZED_VIEW,
    ("VIEW", False): RelationKind.VIEW,
    ("SOURCE", False): RelationKind.SOURCE,
    ("SINK", False): RelationKind.SINK,
}


def drop(session: Any, st: Statement) -> QueryResult:
    ast = st.ast
    assert isinstance(ast, exp.Drop)
    kw = (ast.args.get("kind") or "").upper()
    kind = _DROP_KIND.get((kw, bool(ast.args.get("materialized"))))
    if kind is None:
        raise not_supported(f"DROP {kw}")
    tables = ast.args.get("tables") or ([ast.this] if ast.this is not None else [])
    rt = session.db.runtime
    notices: list[Notice] = []
    if kind is RelationKind.SINK:  # a sink retrying a broken downstream holds the lock
        from engine.handlers.sink import interrupt_sinks

        interrupt_sinks(session, [_name(t) for t in tables])
    with rt.lock:
        cat = session.db.catalog
        to_drop: list[Relation] = []
        for t in tables:
            name, sch = _name(t)
            rel = cat.find(name, sch)
            if rel is None:
                if ast.args.get("exists"):
                    notices.append(Notice(f'{kind.value} "{name}" does not exist, skipping'))
                    continue
                raise UndefinedTable(f'{kind.value} "{name}" does not exist')
            if rel.kind is not kind or is_index(rel):
                shown = "index" if is_index(rel) else rel.kind.value
                raise WrongObjectType(
                    f'"{name}" is not a {kind.value}',
                    hint=f"Use DROP {shown.upper()} to remove a {shown}.",
                )
            require_owner(rel)  # 42501 must be owner of ...
            deps = _dependents_closure(cat, rel)
            # an ENGINE = iceberg table's own hidden sink and the object's indexes go with it
            blocking = [
                d for d in deps if d.extra.get("hidden_for") != rel.id and not is_index_of(d, rel)
            ]
            if blocking and not ast.args.get("cascade"):
                detail = "\n".join(
                    f"{d.kind.value} {d.name} depends on {rel.kind.value} {rel.name}" for d in deps
                )
                raise DependentObjectsStillExist(
                    f"cannot drop {rel.kind.value} {rel.name} because other objects depend on it",
                    detail=detail,
                    hint="Use DROP ... CASCADE to drop the dependent objects too.",
                )
            for d in reversed(deps):
                if d not in to_drop:
                    to_drop.append(d)
            if rel not in to_drop:
                to_drop.append(rel)
        if to_drop:
            rt.drop(to_drop)
    for r in to_drop:
        if r.extra.get("iceberg"):
            from engine.handlers.iceberg_table import drop_engine_table

            drop_engine_table(r)
    tag = "DROP_" + kind.tag_name
    return QueryResult(tag, notices=notices)


def is_index(rel: Relation) -> bool:
    return index_info(rel) is not None


def _dependents_closure(cat: Any, rel: Relation) -> list[Relation]:
    """All relations depending on `rel`, directly or not, in creation order."""
    out: list[Relation] = []
    frontier = [rel.id]
    seen = {rel.id}
    while frontier:
        rid = frontier.pop()
        for d in cat.dependents(rid):
            if d.id not in seen:
                seen.add(d.id)
                out.append(d)
                frontier.append(d.id)
    return sorted(out, key=lambda r: r.id)
