"""information_schema: schemata, tables, columns, views, table_constraints,
key_column_usage (PostgreSQL 15 columns; domain types shown as their base types).

Materialized views are listed in `tables` with table_type 'VIEW' (and in `views`), so that
tools filtering on `table_type IN ('BASE TABLE', 'VIEW')` (Grafana) find them; sources
are 'FOREIGN', like PostgreSQL's foreign tables. `_pg_expandarray` is a table function
(engine.plan.plan_tablefunc).

Registered at import by `engine.catalog.system._ensure_loaded`.
"""

from __future__ import annotations

from typing import Any

from engine.catalog import privileges as pv
from engine.catalog.pg_catalog import CatalogModel
from engine.catalog.pg_columns_types import parse_columns, rows_from_dicts
from engine.catalog.system import INFORMATION_SCHEMA, SystemContext, register_system_relation
from engine.types import SqlType, TypeKind

_COLUMNS = {
    "schemata": "catalog_name name, schema_name name, schema_owner name, "
    "default_character_set_catalog name, default_character_set_schema name, "
    "default_character_set_name name, sql_path character varying",
    "tables": "table_catalog name, table_schema name, table_name name, table_type character "
    "varying, self_referencing_column_name name, reference_generation character varying, "
    "user_defined_type_catalog name, user_defined_type_schema name, user_defined_type_name "
    "name, is_insertable_into character varying, is_typed character varying, commit_action "
    "character varying",
    "columns": "table_catalog name, table_schema name, table_name name, column_name name, "
    "ordinal_position integer, column_default character varying, is_nullable character "
    "varying, data_type character varying, character_maximum_length integer, "
    "character_octet_length integer, numeric_precision integer, numeric_precision_radix "
    "integer, numeric_scale integer, datetime_precision integer, interval_type character "
    "varying, interval_precision integer, character_set_catalog name, character_set_schema "
    "name, character_set_name name, collation_catalog name, collation_schema name, "
    "collation_name name, domain_catalog name, domain_schema name, domain_name name, "
    "udt_catalog name, udt_schema name, udt_name name, scope_catalog name, scope_schema "
    "name, scope_name name, maximum_cardinality integer, dtd_identifier name, "
    "is_self_referencing character varying, is_identity character varying, "
    "identity_generation character varying, identity_start character varying, "
    "identity_increment character varying, identity_maximum character varying, "
    "identity_minimum character varying, identity_cycle character varying, is_generated "
    "character varying, generation_expression character varying, is_updatable character "
    "varying",
    "views": "table_catalog name, table_schema name, table_name name, view_definition "
    "character varying, check_option character varying, is_updatable character varying, "
    "is_insertable_into character varying, is_trigger_updatable character varying, "
    "is_trigger_deletable character varying, is_trigger_insertable_into character varying",
    "table_constraints": "constraint_catalog name, constraint_schema name, constraint_name "
    "name, table_catalog name, table_schema name, table_name name, constraint_type "
    "character varying, is_deferrable character varying, initially_deferred character "
    "varying, enforced character varying, nulls_distinct character varying",
    "table_privileges": "grantor name, grantee name, table_catalog name, table_schema name, "
    "table_name name, privilege_type character varying, is_grantable character varying, "
    "with_hierarchy character varying",
    "key_column_usage": "constraint_catalog name, constraint_schema name, constraint_name "
    "name, table_catalog name, table_schema name, table_name name, column_name name, "
    "ordinal_position integer, position_in_unique_constraint integer",
}

_TABLE_TYPE = {"r": "BASE TABLE", "v": "VIEW", "m": "VIEW", "f": "FOREIGN"}


def _db(ctx: SystemContext) -> str:
    s = ctx.session
    return str(s.database) if s is not None else "dev"


def _schemata(ctx: SystemContext) -> list[dict[str, Any]]:
    m = CatalogModel.of(ctx)
    return [
        {
            "catalog_name": _db(ctx),
            "schema_name": name,
            "schema_owner": pv.role_name(ctx.catalog, pv.schema_owner(ctx.catalog, name)),
        }
        for name in sorted(m.namespaces())
    ]


def _tables(ctx: SystemContext) -> list[dict[str, Any]]:
    m = CatalogModel.of(ctx)
    return [
        {
            "table_catalog": _db(ctx),
            "table_schema": r.schema,
            "table_name": r.name,
            "table_type": _TABLE_TYPE[r.relkind],
            "is_insertable_into": "YES" if r.relkind == "r" and r.rel is not None else "NO",
            "is_typed": "NO",
        }
        for r in m.relations
        if r.relkind in _TABLE_TYPE
    ]


def _data_type(t: SqlType) -> tuple[str, str]:
    """(information_schema data_type, udt_name)."""
    if t.kind is TypeKind.LIST and t.pg is None:
        assert t.elem is not None
        return "ARRAY", "_" + t.elem.pg_name
    if t.pg in ("oid", "name", "char", "text", "regproc", "regclass", "regtype", "xid"):
        return t.display.strip('"'), t.pg_name
    if t.pg is not None:
        return "USER-DEFINED", t.pg_name
    return t.display, t.pg_name


def _precision(t: SqlType) -> tuple[int | None, int | None, int | None]:
    bits = {TypeKind.SMALLINT: 16, TypeKind.INT: 32, TypeKind.BIGINT: 64}
    if t.kind in bits and t.pg is None:
        return bits[t.kind], 2, 0
    if t.kind is TypeKind.REAL:
        return 24, 2, None
    if t.kind is TypeKind.DOUBLE:
        return 53, 2, None
    if t.kind is TypeKind.NUMERIC:
        return None, 10, None
    return None, None, None


def _columns(ctx: SystemContext) -> list[dict[str, Any]]:
    m = CatalogModel.of(ctx)
    out = []
    for r in m.relations:
        if r.relkind not in _TABLE_TYPE:
            continue
        for a in r.attrs:
            dt, udt = _data_type(a.type)
            prec, radix, scale = _precision(a.type)
            temporal = a.type.kind in (TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ, TypeKind.TIME)
            out.append(
                {
                    "table_catalog": _db(ctx),
                    "table_schema": r.schema,
                    "table_name": r.name,
                    "column_name": a.name,
                    "ordinal_position": a.attnum,
                    "is_nullable": "NO" if a.notnull else "YES",
                    "data_type": dt,
                    "character_octet_length": 1073741824
                    if a.type.kind is TypeKind.VARCHAR and a.type.pg is None
                    else None,
                    "numeric_precision": prec,
                    "numeric_precision_radix": radix,
                    "numeric_scale": scale,
                    "datetime_precision": 6 if temporal else 0 if a.type.kind is TypeKind.DATE
                    else None,
                    "udt_catalog": _db(ctx),
                    "udt_schema": "pg_catalog",
                    "udt_name": udt,
                    "dtd_identifier": str(a.attnum),
                    "is_self_referencing": "NO",
                    "is_identity": "NO",
                    "is_generated": "NEVER",
                    "is_updatable": "YES" if r.relkind == "r" and r.rel is not None else "NO",
                }
            )  # fmt: skip
    return out


def _views(ctx: SystemContext) -> list[dict[str, Any]]:
    m = CatalogModel.of(ctx)
    return [
        {
            "table_catalog": _db(ctx),
            "table_schema": r.schema,
            "table_name": r.name,
            "view_definition": r.rel.query if r.rel is not None else None,
            "check_option": "NONE",
            "is_updatable": "NO",
            "is_insertable_into": "NO",
            "is_trigger_updatable": "NO",
            "is_trigger_deletable": "NO",
            "is_trigger_insertable_into": "NO",
        }
        for r in m.relations
        if r.relkind in ("v", "m")
    ]


def _primary_keys(ctx: SystemContext) -> list[Any]:
    return [r for r in CatalogModel.of(ctx).relations if r.index_of is not None]


def _table_constraints(ctx: SystemContext) -> list[dict[str, Any]]:
    return [
        {
            "constraint_catalog": _db(ctx),
            "constraint_schema": r.schema,
            "constraint_name": r.name,
            "table_catalog": _db(ctx),
            "table_schema": r.index_of.schema,
            "table_name": r.index_of.name,
            "constraint_type": "PRIMARY KEY",
            "is_deferrable": "NO",
            "initially_deferred": "NO",
            "enforced": "YES",
            "nulls_distinct": None,
        }
        for r in _primary_keys(ctx)
    ]


def _key_column_usage(ctx: SystemContext) -> list[dict[str, Any]]:
    out = []
    for r in _primary_keys(ctx):
        for i, a in enumerate(r.attrs, start=1):
            out.append(
                {
                    "constraint_catalog": _db(ctx),
                    "constraint_schema": r.schema,
                    "constraint_name": r.name,
                    "table_catalog": _db(ctx),
                    "table_schema": r.index_of.schema,
                    "table_name": r.index_of.name,
                    "column_name": a.name,
                    "ordinal_position": i,
                    "position_in_unique_constraint": None,
                }
            )
    return out


def _table_privileges(ctx: SystemContext) -> list[dict[str, Any]]:
    """One row per (grantee, privilege) of every relation, as PostgreSQL: the owner's
    implicit privileges included, visible when the asking role is the grantor or the
    grantee or the grantee is PUBLIC (superusers see all)."""
    cat = ctx.catalog
    viewer = ctx.session.user if ctx.session is not None else None
    me = pv.user_oid(cat, viewer) if viewer is not None else None
    sees_all = viewer is None or pv.is_superuser(cat, viewer)
    out = []
    for r in cat.visible():
        if r.kind.value == "sink" or r.extra.get("hidden_for"):
            continue
        for grantee, grantor, privs in pv.relation_acl(r):
            if not (sees_all or me in (grantee, grantor) or grantee == pv.PUBLIC):
                continue
            for i, ch in enumerate(privs):
                if ch == "*" or ch not in pv.TABLE_PRIVILEGES.values():
                    continue
                grantable = i + 1 < len(privs) and privs[i + 1] == "*"
                if grantee == r.owner:
                    grantable = True
                out.append(
                    {
                        "grantor": pv.role_name(cat, grantor),
                        "grantee": pv.role_name(cat, grantee) or "PUBLIC",
                        "table_catalog": _db(ctx),
                        "table_schema": r.schema_name,
                        "table_name": r.name,
                        "privilege_type": pv.PRIVILEGE_NAMES[ch],
                        "is_grantable": "YES" if grantable else "NO",
                        "with_hierarchy": "YES" if ch == "r" else "NO",
                    }
                )
    return out


_FIELDS = {name: parse_columns(spec) for name, spec in _COLUMNS.items()}


def _make_provider(name: str, fn: Any) -> Any:
    def provider(ctx: SystemContext) -> list[tuple[Any, ...]]:
        return rows_from_dicts(_FIELDS[name], fn(ctx))

    return provider


for _name, _fn in (
    ("schemata", _schemata),
    ("tables", _tables),
    ("columns", _columns),
    ("views", _views),
    ("table_constraints", _table_constraints),
    ("key_column_usage", _key_column_usage),
    ("table_privileges", _table_privileges),
):
    register_system_relation(INFORMATION_SCHEMA, _name, _FIELDS[_name], _make_provider(_name, _fn))
