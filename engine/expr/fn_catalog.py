"""Functions over the system catalog: format_type, pg_get_*def, visibility, reg* casts.

These answer questions about objects by OID, the way psql, pgjdbc, SQLAlchemy and asyncpg
ask them (`format_type(atttypid, atttypmod)`, `pg_get_indexdef(i.indexrelid)`,
`'pg_class'::regclass`, `t.oid::regtype::text`). Types and functions come from the static
tables in `engine.catalog.pg_builtin`; relations, indexes and constraints from
`engine.catalog.pg_catalog.CatalogModel`, built once per statement from the session in the
`EvalContext` (without a lock: the catalog is copy-on-write) and cached on it.

Kernels here work a row at a time: they map a handful of OIDs from catalog relations to
names, never user data in a hot path.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from engine.catalog.pg_builtin import PROCS, TYPES
from engine.catalog.pg_names import index_definition
from engine.catalog.pg_names import quote_ident as quote_ident  # also a SQL function
from engine.catalog.system import FIRST_USER_OID as _FIRST_USER_OID
from engine.errors import UndefinedFunction, UndefinedObject, UndefinedTable
from engine.expr.core import Datum, EvalContext, Expr, Func, as_array
from engine.expr.registry import coerce_to, no_function, register
from engine.types import BOOLEAN, INT, VARCHAR, SqlType, TypeKind, pg_alias

OID = pg_alias(INT, "oid")
TEXT = pg_alias(VARCHAR, "text")
NAME = pg_alias(VARCHAR, "name")
REG_TYPES = ("regclass", "regtype", "regproc", "regnamespace", "regrole")

# -- types --
_TYPE_BY_OID = {row[0]: row for row in TYPES}
_TYPE_BY_NAME = {row[1]: row[0] for row in TYPES}
# format_type's names where they differ from typname
_FORMAT_NAMES = {
    "bool": "boolean",
    "int2": "smallint",
    "int4": "integer",
    "int8": "bigint",
    "float4": "real",
    "float8": "double precision",
    "varchar": "character varying",
    "bpchar": "character",
    "time": "time without time zone",
    "timestamp": "timestamp without time zone",
    "timestamptz": "timestamp with time zone",
    "char": '"char"',
}
_NAME_TO_OID = dict(_TYPE_BY_NAME)
for _typname, _shown in _FORMAT_NAMES.items():
    _NAME_TO_OID[_shown] = _TYPE_BY_NAME[_typname]
_NAME_TO_OID.update(
    {
        "int": 23,
        "integer": 23,
        "decimal": 1700,
        "double": 701,
        "float": 701,
        "character": 1042,
        "char": 1042,
        "string": 1043,
        "timestamp": 1114,
    }
)


def format_type(oid: int | None, typmod: int | None = None) -> str | None:
    """PostgreSQL's format_type: the SQL name of type `oid` with its modifier."""
    if oid is None:
        return None
    row = _TYPE_BY_OID.get(oid)
    if row is None:
        return "???"
    name, elem, cat = row[1], row[8], row[5]
    if cat == "A" and elem:
        inner = format_type(elem, typmod)
        return f"{inner}[]" if inner is not None else None
    shown = _FORMAT_NAMES.get(name, name)
    if typmod is not None and typmod >= 0:
        if name in ("varchar", "bpchar") and typmod >= 4:
            return f"{shown}({typmod - 4})"
        if name == "numeric" and typmod >= 4:
            p, s = (typmod - 4) >> 16, (typmod - 4) & 0xFFFF
            return f"numeric({p},{s})"
        if name in ("timestamp", "timestamptz", "time"):
            base, _, rest = shown.partition(" ")
            return f"{base}({typmod}) {rest}".strip()
    return shown


def type_oid(name: str) -> int | None:
    """OID of a type name as to_regtype/::regtype read it (`int4`, `integer[]`...)."""
    n = " ".join(name.strip().lower().split())
    if n.startswith("pg_catalog."):
        n = n[len("pg_catalog.") :]
    n = n.strip('"') if n != '"char"' else n
    if n.endswith("[]"):
        elem = type_oid(n[:-2])
        if elem is None:
            return None
        row = _TYPE_BY_OID.get(elem)
        return row[9] if row is not None and row[9] else None
    if "(" in n:
        n = n[: n.index("(")].strip()
    return _NAME_TO_OID.get(n)


# -- functions --
_PROC_BY_OID = {p[0]: p for p in PROCS}
_PROC_BY_NAME: dict[str, int] = {}
for _p in PROCS:
    _PROC_BY_NAME.setdefault(_p[1], _p[0])


def proc_oid(name: str) -> int | None:
    n = name.strip().lower()
    if "(" in n:
        n = n[: n.index("(")]
    if n.startswith("pg_catalog."):
        n = n[len("pg_catalog.") :]
    return _PROC_BY_NAME.get(n.strip('"'))


def _user_function(ctx: EvalContext, oid: int) -> Any:
    """The user-defined function (engine/catalog/functions.py) with pg_proc.oid `oid`."""
    s = ctx.session
    fns = getattr(getattr(s, "db", None), "catalog", None)
    fns = getattr(fns, "functions", None) or {}
    return fns.get(oid - _FIRST_USER_OID)


def function_arguments(ctx: EvalContext, oid: int | None) -> str | None:
    if oid is not None and oid >= _FIRST_USER_OID:
        fn = _user_function(ctx, oid)
        if fn is None:
            return None
        return ", ".join(
            f"{n} {t.display}" if n else t.display
            for n, t in zip(fn.arg_names, fn.arg_types, strict=True)
        )
    p = _PROC_BY_OID.get(oid) if oid is not None else None
    if p is None:
        return None
    return ", ".join(format_type(int(a)) or "" for a in p[4].split())


def function_result(ctx: EvalContext, oid: int | None) -> str | None:
    if oid is not None and oid >= _FIRST_USER_OID:
        fn = _user_function(ctx, oid)
        if fn is None:
            return None
        if fn.kind == "table":
            return (
                "TABLE(" + ", ".join(f"{c.name} {c.type.display}" for c in fn.return_columns) + ")"
            )
        return str(fn.return_type.display)
    p = _PROC_BY_OID.get(oid) if oid is not None else None
    if p is None:
        return None
    shown = format_type(p[3]) or ""
    return f"SETOF {shown}" if p[6] else shown


# -- relations (need the session's catalog) --
def catalog_model(ctx: EvalContext) -> Any:
    """The statement's CatalogModel (cached on the EvalContext)."""
    cached = getattr(ctx, "_catalog_model", None)
    if cached is not None:
        return cached
    from engine.catalog.pg_catalog import CatalogModel
    from engine.catalog.system import SystemContext

    s = ctx.session
    if s is None:
        raise UndefinedObject("catalog functions need a session")
    model = CatalogModel(SystemContext(s.db, s))  # the catalog is read without a lock
    ctx._catalog_model = model  # type: ignore[attr-defined]
    return model


def search_path(ctx: EvalContext) -> list[str]:
    """The schemas unqualified names are looked up in, in order (pg_catalog first)."""
    s = ctx.session
    raw = s.vars.get("search_path", "public") if s is not None else "public"
    out = ["pg_catalog"]
    for part in raw.split(","):
        p = part.strip().strip('"')
        if p == "$user":
            p = s.user if s is not None else "root"
        if p and p not in out:
            out.append(p)
    out.append("rw_catalog")
    return out


def relation_visible(ctx: EvalContext, oid: int | None) -> bool | None:
    if oid is None:
        return None
    r = catalog_model(ctx).by_oid.get(oid)
    if r is None:
        return None
    # rw_catalog resolves unqualified names but, like information_schema, its relations
    # are not listed as visible (tools would show them among the user's tables)
    path = search_path(ctx)[:-1]
    if r.schema not in path:
        return False
    # visible unless an earlier schema on the path has a relation of the same name
    first = getattr(ctx, "_first_on_path", None)
    if first is None:
        first = {}
        for sch in path:
            for other in catalog_model(ctx).relations:
                if other.schema == sch:
                    first.setdefault(other.name, sch)
        ctx._first_on_path = first  # type: ignore[attr-defined]
    return bool(first.get(r.name) == r.schema)


def _split_qualified(text: str) -> tuple[str | None, str]:
    parts: list[str] = []
    cur = ""
    quoted = False
    was_quoted = False
    for ch in text.strip():
        if ch == '"':
            quoted = not quoted
            was_quoted = True
            continue
        if ch == "." and not quoted:
            parts.append(cur if was_quoted else cur.lower())
            cur, was_quoted = "", False
            continue
        cur += ch
    parts.append(cur if was_quoted else cur.lower())
    if len(parts) == 1:
        return None, parts[0]
    return parts[-2], parts[-1]


def relation_oid_of(ctx: EvalContext, text: str, missing_ok: bool) -> int | None:
    t = text.strip()
    if t.isdigit():
        return int(t)
    schema, name = _split_qualified(t)
    model = catalog_model(ctx)
    path = [schema] if schema is not None else search_path(ctx)
    for sch in path:
        for r in model.relations:
            if r.name == name and r.schema == sch:
                return int(r.oid)
    if missing_ok:
        return None
    raise UndefinedTable(f'relation "{t}" does not exist')


def relation_name(ctx: EvalContext, oid: int | None) -> str | None:
    if oid is None:
        return None
    r = catalog_model(ctx).by_oid.get(oid)
    if r is None:
        return str(oid)
    if relation_visible(ctx, oid):
        return quote_ident(r.name)
    return f"{quote_ident(r.schema)}.{quote_ident(r.name)}"


def constraint_definition(ctx: EvalContext, oid: int | None) -> str | None:
    from engine.catalog.pg_catalog import PK_CONSTRAINT_OID_BASE, PK_INDEX_OID_BASE

    if oid is None:
        return None
    idx = catalog_model(ctx).by_oid.get(oid - PK_CONSTRAINT_OID_BASE + PK_INDEX_OID_BASE)
    if idx is None or idx.index_of is None:
        return None
    return "PRIMARY KEY (" + ", ".join(quote_ident(a.name) for a in idx.attrs) + ")"


# -- row-at-a-time kernels --
def rowwise(
    fn: Callable[..., Any], ret: SqlType, *, strict: bool = True, ctx_arg: bool = False
) -> Callable[[list[Datum], int, EvalContext], Datum]:
    """A kernel applying `fn` to each row's Python values (None in, None out if strict)."""

    def kernel(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
        cols = [as_array(a, n).to_pylist() for a in args]
        rows = zip(*cols, strict=True) if cols else (() for _ in range(n))
        out = []
        for row in rows:
            if strict and any(v is None for v in row):
                out.append(None)
            else:
                out.append(fn(ctx, *row) if ctx_arg else fn(*row))
        return pa.array(out, ret.arrow)

    return kernel


def define(
    names: tuple[str, ...],
    signatures: list[list[SqlType]],
    ret: SqlType,
    fn: Callable[..., Any],
    *,
    strict: bool = True,
    ctx_arg: bool = False,
) -> None:
    """Register a row-at-a-time function with the given argument signatures."""

    def resolve(args: list[Expr]) -> Expr:
        for sig in signatures:
            if len(sig) != len(args):
                continue
            try:
                bound = coerce_to(names[0], args, sig)
            except UndefinedFunction:
                continue
            return Func(
                names[0],
                tuple(bound),
                ret,
                rowwise(fn, ret, strict=strict, ctx_arg=ctx_arg),
                volatile=ctx_arg,
            )
        raise no_function(names[0], args)

    register(*names)(resolve)


def _format_type(oid: int | None, typmod: int | None = None) -> str | None:
    return format_type(oid, typmod)


define(("format_type",), [[OID, INT]], TEXT, _format_type, strict=False)
define(("pg_get_function_arguments", "pg_get_function_identity_arguments"), [[OID]], TEXT,
       function_arguments, ctx_arg=True)  # fmt: skip
define(("pg_get_function_result",), [[OID]], TEXT, function_result, ctx_arg=True)
define(("to_regtype",), [[TEXT]], pg_alias(INT, "regtype"), type_oid)
define(("to_regproc",), [[TEXT]], pg_alias(INT, "regproc"), proc_oid)
define(
    ("to_regclass",),
    [[TEXT]],
    pg_alias(INT, "regclass"),
    lambda ctx, t: relation_oid_of(ctx, t, True),
    ctx_arg=True,
)
define(("pg_table_is_visible",), [[OID]], BOOLEAN, relation_visible, ctx_arg=True)
define(
    ("pg_type_is_visible", "pg_function_is_visible", "pg_collation_is_visible",
     "pg_conversion_is_visible", "pg_operator_is_visible", "pg_opclass_is_visible"),
    [[OID]],
    BOOLEAN,
    lambda o: True,
)  # fmt: skip


def _indexdef(ctx: EvalContext, oid: int, *rest: Any) -> str | None:
    r = catalog_model(ctx).by_oid.get(oid)
    if r is None or r.index_of is None:
        return None
    if rest and rest[0]:
        col = int(rest[0])
        return quote_ident(r.attrs[col - 1].name) if 0 < col <= len(r.attrs) else ""
    return index_definition(r)


define(
    ("pg_get_indexdef",),
    [[OID], [OID, INT, BOOLEAN]],
    TEXT,
    _indexdef,
    ctx_arg=True,
)
define(
    ("pg_get_constraintdef",),
    [[OID], [OID, BOOLEAN]],
    TEXT,
    lambda ctx, oid, *_: constraint_definition(ctx, oid),
    ctx_arg=True,
)


def _viewdef(ctx: EvalContext, key: Any, *_: Any) -> str | None:
    model = catalog_model(ctx)
    if isinstance(key, str):
        oid = relation_oid_of(ctx, key, False)
    else:
        oid = key
    r = model.by_oid.get(oid)
    if r is None or r.rel is None or not r.rel.query:
        return None
    q: str = r.rel.query.strip()
    return " " + q + ("" if q.endswith(";") else ";")


define(
    ("pg_get_viewdef",),
    [[OID], [OID, BOOLEAN], [OID, INT], [TEXT], [TEXT, BOOLEAN]],
    TEXT,
    _viewdef,
    ctx_arg=True,
)


def _userbyid(ctx: EvalContext, oid: int) -> str:
    from engine.catalog.pg_catalog_objects import user_rows
    from engine.catalog.system import SystemContext

    s = ctx.session
    if s is not None:
        for u in user_rows(SystemContext(s.db, s)):
            if u.oid == oid:
                return str(u.name)
    elif oid == 10:
        return "root"
    return f"unknown (OID={oid})"


define(("pg_get_userbyid",), [[OID]], NAME, _userbyid, ctx_arg=True)

_ = TypeKind
