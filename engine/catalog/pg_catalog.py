"""pg_catalog relations computed from Swell's live catalog.

Every relation has PostgreSQL 15's columns (`engine.catalog.pg_columns`). The objects they
describe come from `CatalogModel`, one snapshot of what clients can see: the schemas, user
relations with their OIDs and relkinds, their columns, primary-key indexes and
constraints, and the built-in types and functions (`engine.catalog.pg_builtin`).

How Swell's objects appear in pg_class: tables `r`, materialized views `m`, views `v`,
sources `f` (like a foreign table: rows come from outside), primary keys `i`. Sinks are
not relations one can read; they are listed in `rw_catalog.rw_sinks`.

Registered at import (by `engine.catalog.system._ensure_loaded`); each provider runs when
a query reads the relation, without a lock (the catalog's relation map is copy-on-write).
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.catalog import privileges as pv
from engine.catalog.catalog import Relation, RelationKind
from engine.catalog.databases import (
    database_names,
    database_oid,
)
from engine.catalog.indexes import index_info
from engine.catalog.pg_columns import PG_COLUMNS
from engine.catalog.pg_columns_types import parse_columns, rows_from_dicts
from engine.catalog.pg_names import index_definition
from engine.catalog.system import (
    FIRST_USER_OID,
    NAMESPACE_OIDS,
    PG_CATALOG,
    SystemContext,
    register_system_relation,
    relation_oid,
    system_relations,
)
from engine.types import Field, SqlType, TypeKind

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
    index_of: RelInfo | None = None  # for a primary-key or CREATE INDEX index: its table
    index_keys: list[int] | None = None  # a CREATE INDEX index's key attnums in its table


def _index_info(rel: Relation, index: dict[str, Any], base: RelInfo) -> RelInfo:
    """The pg_class row of a CREATE INDEX index: its key columns, in its table's order."""
    by_name = {a.name: a for a in base.attrs}
    keys = [by_name[c] for c in index["columns"] if c in by_name]
    return RelInfo(
        relation_oid(rel),
        rel.name,
        rel.schema_name,
        "i",
        [Attr(i + 1, a.name, a.type) for i, a in enumerate(keys)],
        rel,
        index_of=base,
        index_keys=[a.attnum for a in keys],
    )


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
        infos: dict[int, RelInfo] = {}
        for rel in ctx.catalog.visible():
            kind = RELKIND.get(rel.kind)
            if kind is None:
                continue
            index = index_info(rel)
            if index is not None:  # CREATE INDEX (engine.catalog.indexes)
                base = infos.get(index["on"])
                if base is not None:
                    self.relations.append(_index_info(rel, index, base))
                continue
            pk = _pk_attnums(rel) if rel.kind is RelationKind.TABLE else []
            info = RelInfo(
                relation_oid(rel), rel.name, rel.schema_name, kind, _user_attrs(rel, pk), rel
            )
            info.pk_attnums = pk
            infos[rel.id] = info
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

    @classmethod
    def of(cls, ctx: SystemContext) -> CatalogModel:
        """The model for this query (built once per SystemContext)."""
        m = ctx.cache.get("model")
        if m is None:
            m = ctx.cache["model"] = cls(ctx)
        return m  # type: ignore[no-any-return]

    def namespaces(self) -> dict[str, int]:
        out = dict(NAMESPACE_OIDS)
        names = {rel.schema_name for rel in self.ctx.catalog.visible()}
        names |= set(getattr(self.ctx.catalog, "schemas", None) or ())  # this database's
        for name in sorted(names - set(out)):
            # stable per name, in the initdb range below user OIDs
            oid = 14000 + zlib.crc32(name.encode()) % 2000
            while oid in out.values():
                oid += 1
            out[name] = oid
        return out

    def row_count(self, r: RelInfo) -> int | None:
        """Live rows of a table or materialized view (its materialize operator's count)."""
        if r.rel is None:
            return None
        rt = getattr(self.ctx.db, "runtime", None)
        return None if rt is None else rt.row_count(r.rel.id)

    def user_name(self) -> str:
        s = self.ctx.session
        return s.user if s is not None else "root"

    def owner_name(self, r: Any) -> str:
        """The name of the role owning a relation row's relation."""
        if r.rel is None:
            return "root"
        return pv.role_name(self.ctx.catalog, r.rel.owner)


# -- registration helpers ---------------------------------------------------------------------
def register_pg_relation(
    name: str,
    provider: Callable[[SystemContext, list[Field]], Iterable[Mapping[str, Any]]],
    schema: str = PG_CATALOG,
    kind: str = "r",
) -> None:
    """Register a pg_catalog (or `schema`) relation with PostgreSQL 15's columns, its rows
    built per query by `provider`. Call at import time."""
    fields = parse_columns(PG_COLUMNS[name])

    def rows(ctx: SystemContext) -> list[tuple]:
        return rows_from_dicts(fields, provider(ctx, fields))

    register_system_relation(schema, name, fields, rows, kind=kind)


# -- pg_namespace, pg_database ------------------------------------------------------------------
def _pg_namespace(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    m = CatalogModel.of(ctx)
    return [
        {
            "oid": oid,
            "nspname": name,
            "nspowner": pv.schema_owner(ctx.catalog, name),
            "nspacl": None
            if name in ("pg_catalog", "information_schema", "rw_catalog")
            else pv.acl_text(ctx.catalog, pv.schema_acl(ctx.catalog, name)),
        }
        for name, oid in sorted(m.namespaces().items(), key=lambda kv: kv[1])
    ]


def _pg_database(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    cat = ctx.catalog
    entries = getattr(cat, "databases", {})
    owners = {k: v.owner for k, v in entries.items()}
    return [
        {
            # NULL while the default applies, as PostgreSQL (psql's \l shows nothing)
            "datacl": pv.acl_text(cat, entries[name].acl)
            if name in entries and entries[name].acl
            else None,
            "oid": database_oid(cat, name),
            "datname": name,
            "datdba": owners.get(name, SUPERUSER_OID),
            "encoding": 6,
            "datlocprovider": "c",
            "datallowconn": True,
            "datconnlimit": -1,
            "dattablespace": 1663,
            "datcollate": "C.UTF-8",
            "datctype": "C.UTF-8",
        }
        for name in database_names(cat)
    ]


# -- pg_tables, pg_views, pg_matviews ---------------------------------------------------------
def _pg_tables(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    m = CatalogModel.of(ctx)
    return [
        {
            "schemaname": r.schema,
            "tablename": r.name,
            "tableowner": m.owner_name(r),
            "hasindexes": bool(r.pk_attnums),
        }
        for r in m.relations
        if r.relkind == "r"
    ]


def _pg_views(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    m = CatalogModel.of(ctx)
    return [
        {
            "schemaname": r.schema,
            "viewname": r.name,
            "viewowner": m.owner_name(r),
            "definition": r.rel.query if r.rel is not None else None,
        }
        for r in m.relations
        if r.relkind == "v" and r.rel is not None
    ]


def _pg_matviews(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    m = CatalogModel.of(ctx)
    return [
        {
            "schemaname": r.schema,
            "matviewname": r.name,
            "matviewowner": m.owner_name(r),
            "ispopulated": True,
            "definition": r.rel.query,
        }
        for r in m.relations
        if r.relkind == "m" and r.rel is not None
    ]


# -- pg_class, pg_attribute, pg_index, pg_constraint ------------------------------------------
def _pg_class(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    m = CatalogModel.of(ctx)
    ns = m.namespaces()
    out = []
    for r in m.relations:
        am = HEAP_AM_OID if r.relkind in ("r", "m") else BTREE_AM_OID if r.relkind == "i" else 0
        out.append(
            {
                "oid": r.oid,
                "relname": r.name,
                "relnamespace": ns.get(r.schema, 0),
                "relowner": r.rel.owner if r.rel is not None else SUPERUSER_OID,
                "relacl": pv.acl_text(ctx.catalog, r.rel.acl)
                if r.rel is not None and r.rel.acl
                else None,
                "relam": am,
                "relfilenode": r.oid if r.relkind in ("r", "m", "i") else 0,
                "reltuples": float(n) if (n := m.row_count(r)) is not None else -1.0,
                "relhasindex": bool(r.pk_attnums),
                "relpersistence": "p",
                "relkind": r.relkind,
                "relnatts": len(r.attrs),
                "relhasrules": r.relkind == "v",
                "relispopulated": True,
                "relreplident": "n"
                if r.relkind in ("v", "f")
                else "d"
                if r.relkind != "i"
                else "n",
            }
        )
    return out


def _typalign(t: SqlType) -> str:
    return {1: "c", 2: "s", 4: "i", 8: "d"}.get(t.typlen, "i")


def _collation_of(t: SqlType) -> int:
    return (
        100
        if t.kind is TypeKind.VARCHAR and t.pg not in ("char", "name")
        else (950 if t.pg == "name" else 0)
    )


def _pg_attribute(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    m = CatalogModel.of(ctx)
    out = []
    for r in m.relations:
        has_default = _defaults(r)
        for a in r.attrs:
            t = a.type
            out.append(
                {
                    "attrelid": r.oid,
                    "attname": a.name,
                    "atttypid": t.oid,
                    "attstattarget": -1,
                    "attlen": t.typlen,
                    "attnum": a.attnum,
                    "attndims": 1 if t.kind is TypeKind.LIST and t.pg is None else 0,
                    "attcacheoff": -1,
                    "atttypmod": -1,
                    "attbyval": t.typlen in (1, 2, 4, 8),
                    "attalign": _typalign(t),
                    "attstorage": "p" if t.typlen > 0 else "x",
                    "attcompression": "",
                    "attnotnull": a.notnull,
                    "atthasdef": a.attnum in has_default,
                    "attidentity": "",
                    "attgenerated": "",
                    "attislocal": True,
                    "attcollation": _collation_of(t),
                }
            )
    return out


ATTRDEF_OID_BASE = 3_000_000  # pg_attrdef.oid: the table's oid * 1000 + attnum, above it


def _default_sql(v: Any, t: SqlType) -> str | None:
    """The SQL text psql shows for a stored constant column default (kept as the JSON form
    of its value, engine/handlers/column_defaults.py): `7`, `'x'::character varying`."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, dict) and v.get("$") in ("f", "d"):
        return str(v["v"])
    if isinstance(v, str):
        return "'" + v.replace("'", "''") + "'::" + t.display
    if isinstance(v, dict) and v.get("$") in ("ts", "date", "time"):
        return "'" + str(v["v"]).replace("T", " ") + "'::" + t.display
    return None


def _defaults(r: RelInfo) -> dict[int, str]:
    """attnum -> default SQL of a table's columns with a stored default."""
    extra = r.rel.extra if r.rel is not None and r.relkind == "r" else {}
    stored = extra.get("defaults") or {}
    exprs = extra.get("default_exprs") or {}
    out: dict[int, str] = {}
    for a in r.attrs:
        if a.name in stored:
            text = _default_sql(stored[a.name], a.type)
            if text is not None:
                out[a.attnum] = text
        elif a.name in exprs:
            out[a.attnum] = exprs[a.name]
    return out


def _pg_attrdef(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    return [
        {"oid": ATTRDEF_OID_BASE + r.oid * 1000 + n, "adrelid": r.oid, "adnum": n, "adbin": text}
        for r in CatalogModel.of(ctx).relations
        for n, text in _defaults(r).items()
    ]


def _pg_index(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    m = CatalogModel.of(ctx)
    out = []
    for r in m.relations:
        if r.index_of is None:
            continue
        t = r.index_of
        pk = r.index_keys is None
        keys = list(t.pk_attnums) if pk else list(r.index_keys or [])
        n = len(keys)
        out.append(
            {
                "indexrelid": r.oid,
                "indrelid": t.oid,
                "indnatts": n,
                "indnkeyatts": n,
                "indisunique": pk,
                "indisprimary": pk,
                "indimmediate": True,
                "indisvalid": True,
                "indisready": True,
                "indislive": True,
                "indkey": keys,
                "indcollation": [_collation_of(t.attrs[k - 1].type) for k in keys],
                "indclass": [0] * n,
                "indoption": [0] * n,
            }
        )
    return out


def _pg_constraint(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    m = CatalogModel.of(ctx)
    ns = m.namespaces()
    out = []
    for r in m.relations:
        if r.index_of is None or r.index_keys is not None:
            continue  # only primary keys are constraints
        t = r.index_of
        assert t.rel is not None
        out.append(
            {
                "oid": PK_CONSTRAINT_OID_BASE + t.rel.id,
                "conname": r.name,
                "connamespace": ns.get(t.schema, 0),
                "contype": "p",
                "convalidated": True,
                "conrelid": t.oid,
                "conindid": r.oid,
                "confupdtype": " ",
                "confdeltype": " ",
                "confmatchtype": " ",
                "conislocal": True,
                "connoinherit": True,
                "conkey": list(t.pk_attnums),
            }
        )
    return out


def _pg_indexes(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    m = CatalogModel.of(ctx)
    return [
        {
            "schemaname": r.schema,
            "tablename": r.index_of.name,
            "indexname": r.name,
            "indexdef": index_definition(r),
        }
        for r in m.relations
        if r.index_of is not None
    ]


def _pg_depend(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for rel in ctx.catalog.visible():
        for dep in rel.depends_on:
            out.append(
                {
                    "classid": 1259,
                    "objid": relation_oid(rel),
                    "refclassid": 1259,
                    "refobjid": FIRST_USER_OID + dep,
                    "deptype": "n",
                }
            )
        if _pk_attnums(rel) and rel.kind is RelationKind.TABLE:
            out.append(
                {
                    "classid": 1259,
                    "objid": PK_INDEX_OID_BASE + rel.id,
                    "refclassid": 1259,
                    "refobjid": relation_oid(rel),
                    "deptype": "a",
                }
            )
    return out


register_pg_relation("pg_namespace", _pg_namespace)
register_pg_relation("pg_database", _pg_database)
register_pg_relation("pg_class", _pg_class)
register_pg_relation("pg_attribute", _pg_attribute)
register_pg_relation("pg_index", _pg_index)
register_pg_relation("pg_constraint", _pg_constraint)
register_pg_relation("pg_depend", _pg_depend)
register_pg_relation("pg_tables", _pg_tables, kind="v")
register_pg_relation("pg_views", _pg_views, kind="v")
register_pg_relation("pg_matviews", _pg_matviews, kind="v")
register_pg_relation("pg_indexes", _pg_indexes, kind="v")
register_pg_relation("pg_attrdef", _pg_attrdef)
