"""Functions about the session, privileges and the server that clients and their drivers
call: current_setting / set_config, current_schemas, has_*_privilege, obj/col_description,
pg_typeof, quote_ident / quote_literal / parse_ident, format, pg_size_pretty, and the
constant answers PostgreSQL's catalog functions give where Swell has no such object (sizes,
rules, triggers, recovery state).

asyncpg's pool release runs `SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *;
RESET ALL;`. Swell has no advisory locks (no session ever holds one), so
pg_advisory_unlock_all() has nothing to release: it returns void, rendered as an empty
string like PostgreSQL's void output.

Session-dependent functions are `volatile` so they are never folded at bind time, and read
the session from the `EvalContext`. Registered in the function table at import.
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
from sqlglot import exp

from engine.catalog import privileges as pv
from engine.catalog.databases import database_entry
from engine.catalog.system import FIRST_USER_OID
from engine.errors import (
    InvalidParameterName,
    InvalidParameterValue,
    UndefinedDatabase,
    UndefinedObject,
    UndefinedTable,
)
from engine.expr import fn_catalog as cat
from engine.expr.coerce import cast, implicit_cast, is_untyped
from engine.expr.core import EvalContext, Expr, Func, Literal
from engine.expr.fn_catalog import NAME, OID, TEXT, define
from engine.expr.registry import NODE_BINDERS, call, no_function, register, simple
from engine.types import (
    BIGINT,
    BOOLEAN,
    INT,
    SMALLINT,
    TIMESTAMPTZ,
    VARCHAR,
    SqlType,
    TypeKind,
)

K = TypeKind
NAME_ARRAY = SqlType(K.LIST, NAME, "_name")


def _parse_ident(s: str, strict: bool = True) -> list[str]:
    parts: list[str] = []
    cur, quoted, was_quoted = "", False, False
    i = 0
    while i < len(s):
        ch = s[i]
        if ch == '"':
            if quoted and i + 1 < len(s) and s[i + 1] == '"':
                cur += '"'
                i += 2
                continue
            quoted, was_quoted = not quoted, True
        elif ch == "." and not quoted:
            parts.append(cur if was_quoted else cur.strip().lower())
            cur, was_quoted = "", False
        else:
            cur += ch
        i += 1
    parts.append(cur if was_quoted else cur.strip().lower())
    return parts


@register("pg_advisory_unlock_all")
def _advisory_unlock_all(args: list[Expr]) -> Expr:
    return simple(
        "pg_advisory_unlock_all", args, [], VARCHAR, lambda x, n, c: pa.scalar("", pa.string())
    )


# -- session --
def _session_var(ctx: EvalContext, name: str, missing_ok: bool = False) -> str | None:
    s = ctx.session
    key = name.lower()
    from engine.session_vars import DEFAULT_VARS

    vars_ = s.vars if s is not None else DEFAULT_VARS
    if key in vars_:
        return str(vars_[key])
    if key == "is_superuser":
        return "on"
    if missing_ok:
        return None
    raise InvalidParameterName(f'unrecognized configuration parameter "{name}"')


def _current_setting(ctx: EvalContext, name: str | None, missing_ok: bool = False) -> str | None:
    if name is None:
        return None
    return _session_var(ctx, name, bool(missing_ok))


def _set_config(ctx: EvalContext, name: str, value: str | None, is_local: bool) -> str | None:
    s = ctx.session
    if s is None:
        raise InvalidParameterName(f'unrecognized configuration parameter "{name}"')
    s._set(name, value if value is not None else "")
    return _session_var(ctx, name)


define(
    ("current_setting",),
    [[TEXT], [TEXT, BOOLEAN]],
    TEXT,
    _current_setting,
    ctx_arg=True,
    strict=False,
)
define(("set_config",), [[TEXT, TEXT, BOOLEAN]], TEXT, _set_config, ctx_arg=True, strict=False)


def _current_schemas(ctx: EvalContext, implicit: bool) -> list[str]:
    path = cat.search_path(ctx)[:-1]  # without rw_catalog, as PostgreSQL would show
    from engine.catalog.system import NAMESPACE_OIDS

    known = set(NAMESPACE_OIDS)
    s = ctx.session
    if s is not None:
        known |= {r.schema_name for r in s.db.catalog.visible()}
    out = [p for p in path if p in known]
    return out if implicit else [p for p in out if p != "pg_catalog"]


define(("current_schemas",), [[BOOLEAN]], NAME_ARRAY, _current_schemas, ctx_arg=True)


def _bind_current_schemas(b: Any, node: exp.Expression) -> Expr | None:
    return call("current_schemas", [b._bind(node.this)])


# -- constant answers --
def _privilege(*args: Any) -> bool:
    return True


_PRIV_SIGS: list[list[SqlType]] = [
    [TEXT, TEXT],
    [OID, TEXT],
    [NAME, TEXT, TEXT],
    [NAME, OID, TEXT],
    [OID, OID, TEXT],
    [OID, TEXT, TEXT],
    [TEXT, TEXT, TEXT],
    [OID, SMALLINT, TEXT],
    [TEXT, TEXT, TEXT, TEXT],
]


def _priv_letters(text: str, table: dict[str, str]) -> list[tuple[str, bool]]:
    """'SELECT, INSERT WITH GRANT OPTION' -> [('r', False), ('a', True)]; 22023 for an
    unknown privilege name, as PostgreSQL."""
    out = []
    for part in text.split(","):
        words = part.strip().upper().split()
        if not words:
            continue
        grant = words[1:] == ["WITH", "GRANT", "OPTION"]
        if words[0] not in table or (len(words) > 1 and not grant):
            raise InvalidParameterValue(f'unrecognized privilege type: "{part.strip()}"')
        out.append((table[words[0]], grant))
    return out


def _role_and_rest(ctx: EvalContext, args: tuple[Any, ...]) -> tuple[Any, int, list[Any]]:
    s = ctx.session
    catalog = s.db.catalog
    if len(args) == 2:
        return catalog, pv.user_oid(catalog, s.user), list(args)
    who = args[0]
    if isinstance(who, str):
        u = catalog.users.find(who)
        if u is None:
            raise UndefinedObject(f'role "{who}" does not exist')
        return catalog, int(u.oid), list(args[1:])
    return catalog, int(who), list(args[1:])


def _table_privilege(ctx: EvalContext, *args: Any) -> bool | None:
    """has_table_privilege([role,] table, privileges) against the catalog's ACLs."""
    if ctx.session is None:
        return True
    catalog, oid, (table, privs) = _role_and_rest(ctx, args)
    if isinstance(table, str):
        schema, _, name = table.rpartition(".")
        rel = catalog.find(name.strip('"'), schema.strip('"') or None)
        if rel is None:
            if _is_system(table):
                return True
            raise UndefinedTable(f'relation "{table}" does not exist')
    else:
        rel = catalog.relations.get(int(table) - FIRST_USER_OID)
        if rel is None:
            return True if int(table) < FIRST_USER_OID else None
    letters = _priv_letters(privs, pv.TABLE_PRIVILEGES)
    return any(pv.has_privilege(catalog, oid, rel, ch, g) for ch, g in letters)


def _is_system(name: str) -> bool:
    return name.split(".")[0] in ("pg_catalog", "information_schema", "rw_catalog") or (
        "." not in name and name.startswith(("pg_", "rw_"))
    )


def _schema_privilege(ctx: EvalContext, *args: Any) -> bool | None:
    """has_schema_privilege([role,] schema, privileges) against the schemas' ACLs."""
    if ctx.session is None:
        return True
    catalog, oid, (schema, privs) = _role_and_rest(ctx, args)
    if not isinstance(schema, str):
        names = {o: n for n, o in _namespace_oids(ctx).items()}
        schema = names.get(int(schema))
        if schema is None:
            return None
    if schema in ("pg_catalog", "information_schema", "rw_catalog"):
        return True
    letters = _priv_letters(privs, pv.SCHEMA_PRIVILEGES)
    return any(pv.has_schema_privilege(catalog, oid, schema, ch) for ch, _ in letters)


def _namespace_oids(ctx: EvalContext) -> dict[str, int]:
    from engine.catalog.pg_catalog import CatalogModel
    from engine.catalog.system import SystemContext

    s = ctx.session
    return dict(CatalogModel.of(SystemContext(s.db, s)).namespaces())


_TABLE_SIGS: list[list[SqlType]] = [
    [TEXT, TEXT],
    [OID, TEXT],
    [NAME, TEXT, TEXT],
    [NAME, OID, TEXT],
    [OID, OID, TEXT],
    [OID, TEXT, TEXT],
    [TEXT, TEXT, TEXT],
]
define(("has_table_privilege",), _TABLE_SIGS, BOOLEAN, _table_privilege, ctx_arg=True)
define(("has_schema_privilege",), _TABLE_SIGS, BOOLEAN, _schema_privilege, ctx_arg=True)


def _database_privilege(ctx: EvalContext, *args: Any) -> bool | None:
    """has_database_privilege([role,] database, privileges) against the databases' ACLs."""
    if ctx.session is None:
        return True
    catalog, oid, (database, privs) = _role_and_rest(ctx, args)
    if isinstance(database, str):
        entry = database_entry(catalog, database)
        if entry is None:
            raise UndefinedDatabase(f'database "{database}" does not exist')
    else:
        entry = next((e for e in catalog.databases.values() if e.oid == int(database)), None)
        if entry is None:
            return None
    letters = _priv_letters(privs, pv.DATABASE_PRIVILEGES)
    return any(pv.has_database_privilege(catalog, oid, entry, ch) for ch, _ in letters)


define(("has_database_privilege",), _TABLE_SIGS, BOOLEAN, _database_privilege, ctx_arg=True)

for _p in (
    "has_column_privilege",
    "has_any_column_privilege",
    "has_function_privilege",
    "has_sequence_privilege",
    "has_type_privilege",
    "has_tablespace_privilege",
    "pg_has_role",
):
    define((_p,), _PRIV_SIGS, BOOLEAN, _privilege)

define(
    ("pg_encoding_to_char",),
    [[INT]],
    NAME,
    lambda e: {0: "SQL_ASCII", 6: "UTF8"}.get(e, ""),
)


@register("pg_typeof")
def _pg_typeof(args: list[Expr]) -> Expr:
    """The argument's type name, known at bind time: a constant (PostgreSQL's regtype,
    here as its text, without a type modifier: `numeric`, `character varying`)."""
    if len(args) != 1:
        raise no_function("pg_typeof", args)
    a = args[0]
    name = "unknown" if is_untyped(a) else re.sub(r"\(\d+(?:,\s*\d+)?\)", "", a.type.display)
    return Literal(name, TEXT)


define(("quote_ident",), [[TEXT]], TEXT, cat.quote_ident)
define(
    ("quote_literal",),
    [[TEXT]],
    TEXT,
    lambda v: ("E'" if "\\" in v else "'") + v.replace("\\", "\\\\").replace("'", "''") + "'",
)
define(("parse_ident",), [[TEXT], [TEXT, BOOLEAN]], SqlType(K.LIST, TEXT, "_text"), _parse_ident)


def _commented(ctx: EvalContext, oid: int | None) -> Any:
    """The user relation with pg_class.oid `oid` (COMMENT ON reads and writes its extra)."""
    if oid is None or oid < FIRST_USER_OID or ctx.session is None:
        return None
    return ctx.session.db.catalog.relations.get(int(oid) - FIRST_USER_OID)


def _obj_description(ctx: EvalContext, oid: int | None, catalog: str | None = None) -> Any:
    rel = _commented(ctx, oid)
    if rel is None or catalog not in (None, "pg_class"):
        return None
    return rel.extra.get("comment")


def _col_description(ctx: EvalContext, oid: int | None, attnum: int | None) -> Any:
    rel = _commented(ctx, oid)
    if rel is None or attnum is None:
        return None
    visible = [f for f in rel.fields if not f.hidden]
    if not 1 <= attnum <= len(visible):
        return None
    return (rel.extra.get("column_comments") or {}).get(visible[attnum - 1].name)


define(
    ("obj_description",), [[OID], [OID, NAME]], TEXT, _obj_description, strict=False, ctx_arg=True
)
define(("shobj_description",), [[OID, NAME]], TEXT, lambda *a: None, strict=False)
define(("col_description",), [[OID, INT]], TEXT, _col_description, strict=False, ctx_arg=True)
define(
    ("pg_get_expr",),
    [[TEXT, OID], [TEXT, OID, BOOLEAN]],
    TEXT,
    lambda expr, *_: expr,
)
define(("pg_get_serial_sequence",), [[TEXT, TEXT]], TEXT, lambda *a: None, strict=False)
define(("pg_get_partkeydef", "pg_get_statisticsobjdef_columns"), [[OID]], TEXT,
       lambda *a: None, strict=False)  # fmt: skip
define(
    ("pg_table_size", "pg_relation_size", "pg_total_relation_size", "pg_indexes_size"),
    [[OID]],
    BIGINT,
    lambda oid: 0,
)


def _size_pretty(n: int) -> str:
    units = ["bytes", "kB", "MB", "GB", "TB"]
    v = float(n)
    for u in units:
        if abs(v) < 10 * 1024 or u == units[-1]:
            return f"{int(round(v))} {u}"
        v /= 1024
    return f"{n} bytes"


define(("pg_size_pretty",), [[BIGINT]], TEXT, _size_pretty)
define(("pg_database_size",), [[NAME], [OID]], BIGINT, lambda d: 0)
define(("pg_tablespace_location",), [[OID]], TEXT, lambda o: "")
define(
    ("pg_describe_object",),
    [[OID, OID, INT]],
    TEXT,
    lambda classid, objid, sub: f"object {objid} of catalog {classid}",
)
define(
    ("pg_stat_get_numscans", "pg_stat_get_tuples_returned", "pg_stat_get_live_tuples"),
    [[OID]],
    BIGINT,
    lambda oid: 0,
)
define(("pg_relation_is_publishable",), [[OID], [TEXT]], BOOLEAN, lambda r: False)
define(("pg_get_ruledef",), [[OID], [OID, BOOLEAN]], TEXT, lambda *a: None, strict=False)
define(("pg_get_triggerdef",), [[OID], [OID, BOOLEAN]], TEXT, lambda *a: None, strict=False)
define(("pg_is_in_recovery",), [[]], BOOLEAN, lambda: False)
define(("txid_current", "pg_current_xact_id"), [[]], BIGINT, lambda: 1)
define(
    ("pg_postmaster_start_time",),
    [[]],
    TIMESTAMPTZ,
    lambda ctx: (
        __import__("datetime").datetime.fromtimestamp(
            ctx.session.db.started_at, __import__("datetime").UTC
        )
        if ctx.session is not None
        else None
    ),
    ctx_arg=True,
)


def _pg_format(fmt: str | None, *args: Any) -> str | None:
    """format(): %s (text, NULL as empty), %I (identifier), %L (literal), %%."""
    if fmt is None:
        return None
    out: list[str] = []
    i = 0
    argi = 0
    while i < len(fmt):
        ch = fmt[i]
        if ch != "%" or i + 1 >= len(fmt):
            out.append(ch)
            i += 1
            continue
        spec = fmt[i + 1]
        i += 2
        if spec == "%":
            out.append("%")
            continue
        v = args[argi] if argi < len(args) else None
        argi += 1
        if isinstance(v, bool):  # boolean's output function (a cast to text says true)
            v = "t" if v else "f"
        if spec == "s":
            out.append("" if v is None else str(v))
        elif spec == "I":
            if v is None:
                from engine.errors import InvalidParameterValue

                raise InvalidParameterValue("null values cannot be formatted as an SQL identifier")
            out.append(cat.quote_ident(str(v)))
        elif spec == "L":
            out.append("NULL" if v is None else "'" + str(v).replace("'", "''") + "'")
        else:
            from engine.errors import InvalidParameterValue

            raise InvalidParameterValue(f'unrecognized format() type specifier "{spec}"')
    return "".join(out)


@register("format")
def _format(args: list[Expr]) -> Expr:
    if not args:
        raise no_function("format", args)
    bound = [implicit_cast(a, VARCHAR) if is_untyped(a) else a for a in args]
    if any(b is None for b in bound):
        raise no_function("format", args)
    # the values as their output functions write them (Infinity, {1,2}), not as Python's
    # str() does; booleans are written by _pg_format
    bound = [
        b if b is None or b.type.kind in (K.VARCHAR, K.BOOLEAN) or i == 0 else cast(b, VARCHAR)
        for i, b in enumerate(bound)
    ]
    fmt_arg = bound[0]
    assert fmt_arg is not None
    if fmt_arg.type.kind is not K.VARCHAR:
        raise no_function("format", args)
    return Func(
        "format",
        tuple(b for b in bound if b is not None),
        TEXT,
        cat.rowwise(_pg_format, TEXT, strict=False),
    )


@register("json_build_object")
def _json_build_object(args: list[Expr]) -> Expr:
    return call("jsonb_build_object", args)


NODE_BINDERS[exp.CurrentSchemas] = _bind_current_schemas
