"""pg_catalog relations computed from Swell's live catalog.

Every relation has PostgreSQL 15's columns (`engine.catalog.pg_columns`). The objects they
describe come from `CatalogModel`, one snapshot of what clients can see: the schemas, user
relations with their OIDs and relkinds, their columns, primary-key indexes and
constraints, and the built-in types and functions (`engine.catalog.pg_builtin`).

How Swell's objects appear in pg_class: tables `r`, materialized views `m`, views `v`,
sources `f` (like a foreign table: rows come from outside), primary keys `i`. Sinks are
not relations one can read; they are listed in `rw_catalog.rw_sinks`.

Registered at import (by `engine.catalog.system._ensure_loaded`); each provider runs under
the runtime lock when a query reads the relation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.catalog.catalog import Relation, RelationKind
from engine.catalog.pg_builtin import PROCS, TYPES
from engine.catalog.pg_columns import PG_COLUMNS
from engine.catalog.pg_columns_types import parse_columns, rows_from_dicts
from engine.catalog.system import (
    FIRST_USER_OID,
    INFORMATION_SCHEMA,
    NAMESPACE_OIDS,
    PG_CATALOG,
    RW_CATALOG,
    SystemContext,
    register_system_relation,
    relation_oid,
    system_relations,
)
from engine.types import Field, SqlType, TypeKind

DATABASE_OID = 16384 - 1  # below user OIDs; PostgreSQL's template DBs are 1, 4, 5
SUPERUSER_OID = 10  # the bootstrap superuser (`root` here), as in PostgreSQL
PK_INDEX_OID_BASE = 1_000_000  # pg_class.oid of relation r's primary-key index
PK_CONSTRAINT_OID_BASE = 2_000_000
HEAP_AM_OID = 2
BTREE_AM_OID = 403

RELKIND = {
    RelationKind.TABLE: "r",
    RelationKind.MATERIALIZED_VIEW: "m",
    RelationKind.VIEW: "v",
    RelationKind.SOURCE: "f",
}


@dataclass
class Attr:
    attnum: int
    name: str
    type: SqlType
    notnull: bool = False


@dataclass
class RelInfo:
    """One pg_class row: a user relation, a primary-key index or a system relation."""

    oid: int
    name: str
    schema: str
    relkind: str
    attrs: list[Attr]
    rel: Relation | None = None
    system: Any = None  # SystemRelation
    pk_attnums: list[int] = field(default_factory=list)
    index_of: RelInfo | None = None  # for a primary-key index: its table


def _pk_attnums(rel: Relation) -> list[int]:
    if rel.row_id_index is not None or not rel.pk:
        return []
    vis = [i for i, f in enumerate(rel.fields) if not f.hidden]
    if any(i not in vis for i in rel.pk):
        return []
    return [vis.index(i) + 1 for i in rel.pk]


def _user_attrs(rel: Relation, pk: list[int]) -> list[Attr]:
    return [
        Attr(n, f.name, f.type, n in pk)
        for n, f in enumerate((f for f in rel.fields if not f.hidden), start=1)
    ]


class CatalogModel:
    """What pg_catalog shows, computed once per query (see module docstring)."""

    def __init__(self, ctx: SystemContext) -> None:
        self.ctx = ctx
        self.relations: list[RelInfo] = []
        for rel in ctx.catalog.ordered():
            kind = RELKIND.get(rel.kind)
            if kind is None:
                continue
            pk = _pk_attnums(rel) if rel.kind is RelationKind.TABLE else []
            info = RelInfo(
                relation_oid(rel), rel.name, rel.schema_name, kind, _user_attrs(rel, pk), rel
            )
            info.pk_attnums = pk
            self.relations.append(info)
            if pk:
                idx_attrs = [info.attrs[n - 1] for n in pk]
                self.relations.append(
                    RelInfo(
                        PK_INDEX_OID_BASE + rel.id,
                        f"{rel.name}_pkey",
                        rel.schema_name,
                        "i",
                        [Attr(i + 1, a.name, a.type) for i, a in enumerate(idx_attrs)],
                        index_of=info,
                    )
                )
        for srel in system_relations():
            self.relations.append(
                RelInfo(
                    srel.oid,
                    srel.name,
                    srel.schema,
                    srel.kind,
                    [Attr(i + 1, f.name, f.type) for i, f in enumerate(srel.fields)],
                    system=srel,
                )
            )
        self.by_oid = {r.oid: r for r in self.relations}

    def namespaces(self) -> dict[str, int]:
        out = dict(NAMESPACE_OIDS)
        for rel in self.ctx.catalog.relations.values():
            out.setdefault(rel.schema_name, FIRST_USER_OID - 100 + len(out))
        return out

    def user_name(self) -> str:
        s = self.ctx.session
        return s.user if s is not None else "root"


def _tables(ctx: SystemContext) -> CatalogModel:
    return CatalogModel(ctx)


# -- registration helpers ---------------------------------------------------------------------
def _register(
    name: str,
    provider: Callable[[SystemContext, list[Field]], Iterable[Mapping[str, Any]]],
    schema: str = PG_CATALOG,
    kind: str = "r",
) -> None:
    fields = parse_columns(PG_COLUMNS[name])

    def rows(ctx: SystemContext) -> list[tuple]:
        return rows_from_dicts(fields, provider(ctx, fields))

    register_system_relation(schema, name, fields, rows, kind=kind)


def _empty(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    return []


# -- pg_namespace, pg_database ------------------------------------------------------------------
def _pg_namespace(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    m = CatalogModel(ctx)
    return [
        {"oid": oid, "nspname": name, "nspowner": SUPERUSER_OID}
        for name, oid in sorted(m.namespaces().items(), key=lambda kv: kv[1])
    ]


def _pg_database(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    from engine.database import DATABASE_NAME

    return [
        {
            "oid": DATABASE_OID,
            "datname": DATABASE_NAME,
            "datdba": SUPERUSER_OID,
            "encoding": 6,
            "datlocprovider": "c",
            "datallowconn": True,
            "datconnlimit": -1,
            "dattablespace": 1663,
            "datcollate": "C.UTF-8",
            "datctype": "C.UTF-8",
        }
    ]


# -- pg_tables, pg_views, pg_matviews ---------------------------------------------------------
def _pg_tables(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    m = CatalogModel(ctx)
    return [
        {
            "schemaname": r.schema,
            "tablename": r.name,
            "tableowner": m.user_name(),
            "hasindexes": bool(r.pk_attnums),
        }
        for r in m.relations
        if r.relkind == "r"
    ]


def _pg_views(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    m = CatalogModel(ctx)
    return [
        {
            "schemaname": r.schema,
            "viewname": r.name,
            "viewowner": m.user_name(),
            "definition": r.rel.query if r.rel is not None else None,
        }
        for r in m.relations
        if r.relkind == "v" and r.rel is not None
    ]


def _pg_matviews(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    m = CatalogModel(ctx)
    return [
        {
            "schemaname": r.schema,
            "matviewname": r.name,
            "matviewowner": m.user_name(),
            "ispopulated": True,
            "definition": r.rel.query,
        }
        for r in m.relations
        if r.relkind == "m" and r.rel is not None
    ]


_register("pg_namespace", _pg_namespace)
_register("pg_database", _pg_database)
_register("pg_tables", _pg_tables, kind="v")
_register("pg_views", _pg_views, kind="v")
_register("pg_matviews", _pg_matviews, kind="v")

# what psql asks for even when the feature does not exist in Swell
for _name in (
    "pg_policy",
    "pg_statistic_ext",
    "pg_publication",
    "pg_publication_rel",
    "pg_publication_namespace",
    "pg_trigger",
    "pg_inherits",
    "pg_rewrite",
    "pg_partitioned_table",
    "pg_foreign_table",
    "pg_foreign_server",
    "pg_foreign_data_wrapper",
    "pg_user_mapping",
    "pg_event_trigger",
    "pg_default_acl",
    "pg_init_privs",
    "pg_seclabel",
    "pg_shseclabel",
    "pg_subscription",
    "pg_statistic_ext_data",
    "pg_transform",
    "pg_largeobject_metadata",
    "pg_enum",
    "pg_range",
    "pg_sequence",
    "pg_sequences",
    "pg_locks",
    "pg_conversion",
):
    _register(_name, _empty, kind="v" if _name in ("pg_sequences", "pg_locks") else "r")

_ = (INFORMATION_SCHEMA, RW_CATALOG, PROCS, TYPES, TypeKind)
