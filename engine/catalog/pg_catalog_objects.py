"""pg_catalog relations about objects other than relations: types, functions, languages,
collations, roles, settings, activity, foreign-data wrappers for sources, comments, and the
empty catalogs psql and JDBC drivers ask for even where Swell has no such feature.

The relations of tables, views and their columns, and the snapshot model they share
(`CatalogModel`), live in `engine.catalog.pg_catalog`. Registered at import (by
`engine.catalog.system._ensure_loaded`); each provider runs when a query reads the relation.
"""

from __future__ import annotations

import datetime
from typing import Any

from engine.catalog.catalog import Relation, RelationKind
from engine.catalog.credentials import redact_options
from engine.catalog.databases import DEFAULT_DATABASE, database_oid
from engine.catalog.pg_builtin import PROCS, TYPES
from engine.catalog.pg_catalog import (
    BTREE_AM_OID,
    HEAP_AM_OID,
    SUPERUSER_OID,
    CatalogModel,
    register_pg_relation,
)
from engine.catalog.system import (
    FIRST_USER_OID,
    NAMESPACE_OIDS,
    PG_CATALOG,
    SystemContext,
    relation_oid,
)
from engine.types import Field


# -- pg_type, pg_proc, pg_am, pg_collation, pg_language ---------------------------------------
def _pg_type(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    out = []
    for row in TYPES:
        (oid, name, ln, byval, tt, cat, pref, delim, elem, arr, tin, tout, trecv, tsend,
         align, storage, coll) = row  # fmt: skip
        out.append(
            {
                "oid": oid,
                "typname": name,
                "typnamespace": NAMESPACE_OIDS[PG_CATALOG],
                "typowner": SUPERUSER_OID,
                "typlen": ln,
                "typbyval": byval,
                "typtype": tt,
                "typcategory": cat,
                "typispreferred": pref,
                "typisdefined": True,
                "typdelim": delim,
                "typelem": elem,
                "typarray": arr,
                "typinput": tin,
                "typoutput": tout,
                "typreceive": trecv,
                "typsend": tsend,
                "typalign": align,
                "typstorage": storage,
                "typtypmod": -1,
                "typcollation": coll,
            }
        )
    return out


def _pg_proc(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    return [
        {
            "oid": oid,
            "proname": name,
            "pronamespace": NAMESPACE_OIDS[PG_CATALOG],
            "proowner": SUPERUSER_OID,
            "prolang": 12,
            "procost": 1.0,
            "prorows": 1000.0 if retset else 0.0,
            "prokind": kind,
            "proisstrict": True,
            "proretset": retset,
            "provolatile": "s",
            "proparallel": "s",
            "pronargs": nargs,
            "prorettype": ret,
            "proargtypes": [int(x) for x in args.split()],
            "prosrc": name,
        }
        for oid, name, nargs, ret, args, kind, retset in PROCS
    ] + _user_procs(ctx)


PYTHON_LANGUAGE_OID = 16383  # pg_language row of LANGUAGE python (untrusted, as plpython3u)


def function_oid(fn: Any) -> int:
    """pg_proc.oid of a user-defined function (stable: derived from its catalog oid)."""
    return FIRST_USER_OID + int(fn.oid)


def _user_procs(ctx: SystemContext) -> list[dict[str, Any]]:
    """CREATE FUNCTION / CREATE AGGREGATE entries (engine/catalog/functions.py), as psql's
    \\df reads them: kind `f`/`a`, result type, SETOF for table functions, the body."""
    fns = getattr(ctx.catalog, "functions", None) or {}
    if not fns:
        return []
    ns = CatalogModel.of(ctx).namespaces()
    out = []
    for fn in fns.values():
        out.append(
            {
                "oid": function_oid(fn),
                "proname": fn.name,
                "pronamespace": ns.get(fn.schema_name, NAMESPACE_OIDS["public"]),
                "proowner": fn.owner,
                "prolang": 14 if fn.language == "sql" else PYTHON_LANGUAGE_OID,
                "procost": 100.0,
                "prorows": 1000.0 if fn.kind == "table" else 0.0,
                "prokind": "a" if fn.kind == "aggregate" else "f",
                "proisstrict": fn.strict,
                "proretset": fn.kind == "table",
                "provolatile": "v",
                "proparallel": "u",
                "pronargs": len(fn.arg_types),
                "pronargdefaults": 0,
                "prorettype": 2249 if len(fn.return_columns) > 1 else fn.return_type.oid,
                "proargtypes": [t.oid for t in fn.arg_types],
                "proargnames": list(fn.arg_names) if any(fn.arg_names) else None,
                "prosrc": fn.body,
            }
        )
    return out


def _pg_am(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    return [
        {"oid": HEAP_AM_OID, "amname": "heap", "amhandler": 3, "amtype": "t"},
        {"oid": BTREE_AM_OID, "amname": "btree", "amhandler": 330, "amtype": "i"},
        {"oid": 405, "amname": "hash", "amhandler": 331, "amtype": "i"},
    ]


def _pg_collation(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    base = {"collnamespace": 11, "collowner": SUPERUSER_OID, "collisdeterministic": True}
    return [
        {**base, "oid": 100, "collname": "default", "collprovider": "d", "collencoding": -1},
        {**base, "oid": 950, "collname": "C", "collprovider": "c", "collencoding": -1,
         "collcollate": "C", "collctype": "C"},
        {**base, "oid": 951, "collname": "POSIX", "collprovider": "c", "collencoding": -1,
         "collcollate": "POSIX", "collctype": "POSIX"},
    ]  # fmt: skip


def _pg_language(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    return [
        {"oid": 12, "lanname": "internal", "lanowner": SUPERUSER_OID, "lanvalidator": 2246},
        {"oid": 13, "lanname": "c", "lanowner": SUPERUSER_OID, "lanvalidator": 2247},
        {"oid": 14, "lanname": "sql", "lanowner": SUPERUSER_OID, "lanpltrusted": True},
        {
            "oid": PYTHON_LANGUAGE_OID,
            "lanname": "python",
            "lanowner": SUPERUSER_OID,
            "lanispl": True,
            "lanpltrusted": False,
        },
    ]


def _pg_extension(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    return [
        {
            "oid": 13545,
            "extname": "plpgsql",
            "extowner": SUPERUSER_OID,
            "extnamespace": NAMESPACE_OIDS[PG_CATALOG],
            "extversion": "1.0",
        }
    ]


def _pg_tablespace(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    return [
        {"oid": 1663, "spcname": "pg_default", "spcowner": SUPERUSER_OID},
        {"oid": 1664, "spcname": "pg_global", "spcowner": SUPERUSER_OID},
    ]


# -- roles ------------------------------------------------------------------------------------
def user_rows(ctx: SystemContext) -> list[Any]:
    """Every user (engine.catalog.users.User: name, oid, superuser, createdb...)."""
    users = getattr(ctx.catalog, "users", None)
    if users is None:
        from types import SimpleNamespace

        return [SimpleNamespace(name="root", oid=SUPERUSER_OID, superuser=True, createdb=True,
                                createrole=True, login=True, password=None)]  # fmt: skip
    return list(users.list())


def _pg_roles(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    return [
        {
            "oid": u.oid,
            "rolname": u.name,
            "rolsuper": u.superuser,
            "rolinherit": True,
            "rolcreaterole": u.createrole,
            "rolcreatedb": u.createdb,
            "rolcanlogin": u.login,
            "rolreplication": u.superuser,
            "rolconnlimit": -1,
            "rolpassword": "********",
            "rolbypassrls": u.superuser,
        }
        for u in user_rows(ctx)
    ]


def _pg_user(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    return [
        {
            "usename": u.name,
            "usesysid": u.oid,
            "usecreatedb": u.createdb,
            "usesuper": u.superuser,
            "userepl": u.superuser,
            "usebypassrls": u.superuser,
            "passwd": "********",
        }
        for u in user_rows(ctx)
        if u.login
    ]


# -- settings and statistics ------------------------------------------------------------------
def _pg_settings(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    from engine.session_vars import DEFAULT_VARS, DISPLAY

    vars_ = ctx.session.vars if ctx.session is not None else DEFAULT_VARS
    return [
        {
            "name": DISPLAY.get(k, k),
            "setting": v,
            "category": "Swell",
            "short_desc": "",
            "context": "user",
            "vartype": "bool" if v in ("on", "off", "true", "false") else "string",
            "source": "default" if DEFAULT_VARS.get(k) == v else "session",
            "boot_val": DEFAULT_VARS.get(k, v),
            "reset_val": DEFAULT_VARS.get(k, v),
            "pending_restart": False,
        }
        for k, v in sorted(vars_.items())
    ]


def _pg_stat_activity(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    out = []
    for pid, s in sorted(ctx.db.sessions.items()):
        query = getattr(s, "active_query", None)
        start = getattr(s, "query_start", None)
        out.append(
            {
                "datid": database_oid(ctx.catalog, getattr(s, "database", DEFAULT_DATABASE)),
                "datname": getattr(s, "database", DEFAULT_DATABASE),
                "pid": pid,
                "usesysid": SUPERUSER_OID,
                "usename": getattr(s, "user", None),
                "application_name": s.vars.get("application_name", "")
                if hasattr(s, "vars")
                else "",
                "state": "active" if query is not None else "idle",
                "query": query or "",
                "query_start": None
                if start is None
                else datetime.datetime.fromtimestamp(start, datetime.UTC),
                "backend_type": "client backend",
            }
        )
    return out


def _pg_stat_user_tables(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    m = CatalogModel.of(ctx)
    return [
        {
            "relid": r.oid,
            "schemaname": r.schema,
            "relname": r.name,
            "n_live_tup": m.row_count(r) or 0,
        }
        for r in m.relations
        if r.relkind in ("r", "m") and r.rel is not None
    ]


# -- sources as foreign tables --------------------------------------------------------------------
FDW_OID = 13600  # the one foreign-data wrapper: "swell"
SERVER_OID_BASE = 13610  # one foreign server per source connector kind


def _servers(ctx: SystemContext) -> dict[str, int]:
    kinds = sorted(
        {
            r.options.get("connector", "unknown")
            for r in ctx.catalog.visible()
            if r.kind is RelationKind.SOURCE
        }
    )
    return {k: SERVER_OID_BASE + i for i, k in enumerate(kinds)}


def _pg_foreign_data_wrapper(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    return [{"oid": FDW_OID, "fdwname": "swell", "fdwowner": SUPERUSER_OID}]


def _pg_foreign_server(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    return [
        {"oid": oid, "srvname": name, "srvowner": SUPERUSER_OID, "srvfdw": FDW_OID}
        for name, oid in _servers(ctx).items()
    ]


def source_options(rel: Relation) -> list[str]:
    """A source's WITH options as `key=value` (credentials and values taken from secrets
    redacted, engine/catalog/credentials.py)."""
    out = []
    shown = redact_options(rel.options, frozenset(rel.extra.get("secret_options") or ()))
    for k in sorted(rel.options):
        if k == "connector":
            continue
        out.append(f"{k}={shown[k]}")
    return out


def _pg_foreign_table(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    servers = _servers(ctx)
    return [
        {
            "ftrelid": relation_oid(r),
            "ftserver": servers.get(r.options.get("connector", "unknown"), 0),
            "ftoptions": source_options(r),
        }
        for r in ctx.catalog.visible()
        if r.kind is RelationKind.SOURCE
    ]


register_pg_relation("pg_foreign_data_wrapper", _pg_foreign_data_wrapper)
register_pg_relation("pg_foreign_server", _pg_foreign_server)
register_pg_relation("pg_foreign_table", _pg_foreign_table)
register_pg_relation("pg_type", _pg_type)
register_pg_relation("pg_proc", _pg_proc)


def _pg_description(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    """COMMENT ON tables, views, sources, sinks and their columns (`Relation.extra`)."""
    out = []
    for rel in ctx.catalog.visible():
        oid = relation_oid(rel)
        if rel.extra.get("comment") is not None:
            out.append(
                {
                    "objoid": oid,
                    "classoid": 1259,
                    "objsubid": 0,
                    "description": rel.extra["comment"],
                }
            )
        comments = rel.extra.get("column_comments") or {}
        visible = [f for f in rel.fields if not f.hidden]
        for n, f in enumerate(visible, start=1):
            if f.name in comments:
                out.append(
                    {
                        "objoid": oid,
                        "classoid": 1259,
                        "objsubid": n,
                        "description": comments[f.name],
                    }
                )
    return out


register_pg_relation("pg_description", _pg_description)
register_pg_relation("pg_am", _pg_am)
register_pg_relation("pg_collation", _pg_collation)
register_pg_relation("pg_language", _pg_language)
register_pg_relation("pg_extension", _pg_extension)
register_pg_relation("pg_tablespace", _pg_tablespace)
register_pg_relation("pg_roles", _pg_roles, kind="v")
register_pg_relation("pg_user", _pg_user, kind="v")
register_pg_relation("pg_settings", _pg_settings, kind="v")
register_pg_relation("pg_stat_activity", _pg_stat_activity, kind="v")
register_pg_relation("pg_stat_user_tables", _pg_stat_user_tables, kind="v")


def _empty(ctx: SystemContext, fields: list[Field]) -> list[dict[str, Any]]:
    return []


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
    "pg_shdescription",
    "pg_auth_members",
    "pg_cast",
    "pg_operator",
    "pg_opclass",
    "pg_opfamily",
    "pg_amop",
    "pg_amproc",
    "pg_aggregate",
    "pg_authid",
    "pg_shadow",
    "pg_ts_config",
    "pg_ts_dict",
    "pg_ts_parser",
    "pg_ts_template",
    "pg_sequence",
    "pg_sequences",
    "pg_locks",
    "pg_conversion",
):
    register_pg_relation(
        _name,
        _empty,
        kind="v" if _name in ("pg_sequences", "pg_locks", "pg_shadow") else "r",
    )
