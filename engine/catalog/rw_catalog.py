"""rw_catalog: Swell's own catalog views, in the spirit of RisingWave's.

rw_relations, rw_tables, rw_materialized_views, rw_views, rw_sources, rw_sinks,
rw_subscriptions, rw_connections, rw_secrets (names only, never values), rw_schemas,
rw_databases, rw_users and
rw_streaming_jobs (every relation the dataflow maintains, with its status: `RUNNING`, or
the sink's state while it retries). `id` is the relation's pg_class OID, `schema_id` its
pg_namespace OID, `owner` the owner's pg_roles OID, as in RisingWave.

`rw_catalog` is on the search path after the user's schemas, so `SELECT * FROM rw_tables`
works unqualified. Registered at import by `engine.catalog.system._ensure_loaded`;
connectors add their own status relations (rw_sink_status, rw_iceberg_sinks...).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from engine.catalog.catalog import Relation, RelationKind
from engine.catalog.databases import database_names, database_oid
from engine.catalog.indexes import index_info
from engine.catalog.pg_catalog import SUPERUSER_OID, CatalogModel
from engine.catalog.pg_catalog_objects import user_rows
from engine.catalog.privileges import shown_definition
from engine.catalog.system import (
    NAMESPACE_OIDS,
    RW_CATALOG,
    SystemContext,
    register_system_relation,
    relation_oid,
)
from engine.types import BIGINT, BOOLEAN, DOUBLE, INT, TIMESTAMPTZ, VARCHAR, Field, list_of

_BASE = [
    Field("id", INT),
    Field("name", VARCHAR),
    Field("schema_id", INT),
    Field("owner", INT),
    Field("definition", VARCHAR),
]


def _schema_oid(ctx: SystemContext, rel: Relation) -> int:
    return CatalogModel.of(ctx).namespaces().get(rel.schema_name, 0)


def _definition(ctx: SystemContext, rel: Relation) -> str:
    """The definition as the asking user may see it (credentials are never in it; webhook
    VALIDATE literals only for the owner and superusers)."""
    viewer = ctx.session.user if ctx.session is not None else None
    return shown_definition(ctx.catalog, viewer, rel)


def _base(ctx: SystemContext, rel: Relation) -> list[Any]:
    return [relation_oid(rel), rel.name, _schema_oid(ctx, rel), rel.owner, _definition(ctx, rel)]


def _of_kind(ctx: SystemContext, kind: RelationKind) -> list[Relation]:
    """The relations of one kind; indexes (materialized-view entries) only in rw_indexes."""
    return [r for r in ctx.catalog.visible() if r.kind is kind and index_info(r) is None]


def _indexes(ctx: SystemContext) -> list[tuple[Any, ...]]:
    out = []
    for r in ctx.catalog.visible():
        i = index_info(r)
        if i is not None:
            base = ctx.catalog.relations.get(i["on"])
            on = relation_oid(base) if base is not None else None
            out.append(
                (relation_oid(r), r.name, on, _schema_oid(ctx, r), r.owner, _definition(ctx, r),
                 list(i["columns"]), list(i["include"]), list(i["distributed_by"]))
            )  # fmt: skip
    return out


def _tables(ctx: SystemContext) -> list[tuple[Any, ...]]:
    return [
        (*_base(ctx, r), r.append_only, r.options.get("connector"))
        for r in _of_kind(ctx, RelationKind.TABLE)
    ]


def _mvs(ctx: SystemContext) -> list[tuple[Any, ...]]:
    return [(*_base(ctx, r), r.append_only) for r in _of_kind(ctx, RelationKind.MATERIALIZED_VIEW)]


def _views(ctx: SystemContext) -> list[tuple[Any, ...]]:
    return [tuple(_base(ctx, r)) for r in _of_kind(ctx, RelationKind.VIEW)]


def _sources(ctx: SystemContext) -> list[tuple[Any, ...]]:
    return [
        (
            *_base(ctx, r),
            r.options.get("connector"),
            [f.name for f in r.visible_fields],
            r.extra.get("format"),
            r.extra.get("encode"),
            r.append_only,
        )
        for r in _of_kind(ctx, RelationKind.SOURCE)
    ]


def _sinks(ctx: SystemContext) -> list[tuple[Any, ...]]:
    return [
        (
            *_base(ctx, r),
            r.extra.get("sink", {}).get("connector") or r.options.get("connector"),
            r.extra.get("sink", {}).get("sink_type") or r.options.get("type"),
        )
        for r in _of_kind(ctx, RelationKind.SINK)
    ]


def _subscriptions(ctx: SystemContext) -> list[tuple[Any, ...]]:
    return [
        (
            relation_oid(r),
            r.name,
            _schema_oid(ctx, r),
            r.schema_name,
            r.owner,
            _definition(ctx, r),
            int(r.extra.get("sink", {}).get("writer_options", {}).get("retention_seconds", 0)),
            relation_oid(ctx.catalog.by_id(r.depends_on[0])) if r.depends_on else None,
        )
        for r in _of_kind(ctx, RelationKind.SUBSCRIPTION)
    ]


def _relations(ctx: SystemContext) -> list[tuple[Any, ...]]:
    return [
        (relation_oid(r), r.name, r.kind.value, _schema_oid(ctx, r), r.owner, _definition(ctx, r))
        for r in ctx.catalog.visible()
    ]


def _connections(ctx: SystemContext) -> list[tuple[Any, ...]]:
    conns = getattr(ctx.catalog, "connections", {}) or {}
    ns = CatalogModel.of(ctx).namespaces()
    return [
        (i, name, ns.get(c.get("schema", "public"), 0), c.get("owner", SUPERUSER_OID),
         c.get("options", {}).get("type"))
        for i, (name, c) in enumerate(sorted(conns.items()), start=1)
    ]  # fmt: skip


def _secrets(ctx: SystemContext) -> list[tuple[Any, ...]]:
    ns = CatalogModel.of(ctx).namespaces()
    return [
        (i, s.name, ns.get(s.schema_name, 0), s.owner)
        for i, s in enumerate(sorted(ctx.catalog.secrets.values(), key=lambda s: s.name), 1)
    ]


def _schemas(ctx: SystemContext) -> list[tuple[Any, ...]]:
    return [
        (oid, name, SUPERUSER_OID)
        for name, oid in sorted(CatalogModel.of(ctx).namespaces().items(), key=lambda kv: kv[1])
    ]


def _databases(ctx: SystemContext) -> list[tuple[Any, ...]]:
    cat = ctx.catalog
    entries = getattr(cat, "databases", {})
    return [
        (database_oid(cat, n), n, entries[n].owner if n in entries else SUPERUSER_OID)
        for n in database_names(cat)
    ]


def _users(ctx: SystemContext) -> list[tuple[Any, ...]]:
    return [
        (u.oid, u.name, bool(u.superuser), bool(getattr(u, "login", True))) for u in user_rows(ctx)
    ]


_JOB_KINDS = (RelationKind.TABLE, RelationKind.MATERIALIZED_VIEW, RelationKind.SINK)


def streaming_jobs(ctx: SystemContext) -> list[tuple[Any, ...]]:
    """(id, name, kind, status, definition) for everything the dataflow maintains."""
    rt = ctx.db.runtime
    sinks = dict(getattr(rt, "sinks", {}))
    out = []
    for r in ctx.catalog.visible():
        if r.kind not in _JOB_KINDS:
            continue
        status = "RUNNING"
        flow = sinks.get(r.id)
        if r.extra.get("creating"):  # backfilling (engine.stream.backfill)
            status = "CREATING"
        elif flow is not None:
            state = getattr(getattr(flow, "status", None), "state", "running")
            status = str(state).upper()
        out.append((relation_oid(r), r.name, r.kind.value.upper(), status, _definition(ctx, r)))
    return out


def _register(name: str, fields: list[Field], provider: Any) -> None:
    register_system_relation(RW_CATALOG, name, fields, provider)


_register("rw_tables", [*_BASE, Field("append_only", BOOLEAN), Field("connector", VARCHAR)],
          _tables)  # fmt: skip
_register("rw_materialized_views", [*_BASE, Field("append_only", BOOLEAN)], _mvs)
_register("rw_views", list(_BASE), _views)
_register(
    "rw_indexes",
    [
        Field("id", INT),
        Field("name", VARCHAR),
        Field("primary_table_id", INT),
        Field("schema_id", INT),
        Field("owner", INT),
        Field("definition", VARCHAR),
        Field("key_columns", list_of(VARCHAR)),
        Field("include_columns", list_of(VARCHAR)),
        Field("distributed_by", list_of(VARCHAR)),
    ],
    _indexes,
)
_register(
    "rw_sources",
    [
        *_BASE,
        Field("connector", VARCHAR),
        Field("columns", list_of(VARCHAR)),
        Field("format", VARCHAR),
        Field("row_encode", VARCHAR),
        Field("append_only", BOOLEAN),
    ],
    _sources,
)
_register("rw_sinks", [*_BASE, Field("connector", VARCHAR), Field("sink_type", VARCHAR)], _sinks)
_register(
    "rw_subscriptions",
    [
        Field("id", INT),
        Field("name", VARCHAR),
        Field("schema_id", INT),
        Field("schema_name", VARCHAR),
        Field("owner", INT),
        Field("definition", VARCHAR),
        Field("retention_seconds", BIGINT),
        Field("dependent_table_id", INT),
    ],
    _subscriptions,
)
_register(
    "rw_relations",
    [
        Field("id", INT),
        Field("name", VARCHAR),
        Field("relation_type", VARCHAR),
        Field("schema_id", INT),
        Field("owner", INT),
        Field("definition", VARCHAR),
    ],
    _relations,
)
_register(
    "rw_connections",
    [
        Field("id", INT),
        Field("name", VARCHAR),
        Field("schema_id", INT),
        Field("owner", INT),
        Field("type", VARCHAR),
    ],
    _connections,
)
_register(
    "rw_secrets",
    [Field("id", INT), Field("name", VARCHAR), Field("schema_id", INT), Field("owner", INT)],
    _secrets,
)
_register("rw_schemas", [Field("id", INT), Field("name", VARCHAR), Field("owner", INT)], _schemas)
_register(
    "rw_databases", [Field("id", INT), Field("name", VARCHAR), Field("owner", INT)], _databases
)
_register(
    "rw_users",
    [
        Field("id", INT),
        Field("name", VARCHAR),
        Field("is_super", BOOLEAN),
        Field("can_login", BOOLEAN),
    ],
    _users,
)
_register(
    "rw_streaming_jobs",
    [
        Field("job_id", INT),
        Field("name", VARCHAR),
        Field("kind", VARCHAR),
        Field("status", VARCHAR),
        Field("definition", VARCHAR),
    ],
    streaming_jobs,
)


def _ddl_progress(ctx: SystemContext) -> list[tuple[Any, ...]]:
    """rw_ddl_progress: one row per creating job (RisingWave's columns, then Swell's
    rows done / total and rate)."""
    backfill = getattr(ctx.db.runtime, "backfill", None)
    if backfill is None:
        return []
    out = []
    for job, stmt, create_type, progress, started, done, total, rate in backfill.progress_rows():
        out.append((
            relation_oid(job.rel), stmt, create_type, progress,
            datetime.fromtimestamp(started, UTC), False, "ARRANGEMENT",
            done, total, float(rate),
        ))  # fmt: skip
    return out


_register(
    "rw_ddl_progress",
    [
        Field("ddl_id", BIGINT),
        Field("ddl_statement", VARCHAR),
        Field("create_type", VARCHAR),
        Field("progress", VARCHAR),
        Field("initialized_at", TIMESTAMPTZ),
        Field("is_serverless_backfill", BOOLEAN),
        Field("backfill_type", VARCHAR),
        Field("rows_done", BIGINT),
        Field("rows_total", BIGINT),
        Field("rows_per_second", DOUBLE),
    ],
    _ddl_progress,
)

_ = NAMESPACE_OIDS
