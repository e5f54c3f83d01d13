"""Field lists for system relations from PostgreSQL-style column specs.

`parse_columns("oid oid, relname name, relacl aclitem[]")` gives engine `Field`s whose types
present the PostgreSQL catalog types (`oid`, `name`, `"char"`, `aclitem[]`...) to clients
through `engine.types.PG_ALIASES`; `rows_from_dicts` turns provider rows given as dicts
into tuples in field order, filling the columns a provider leaves out with the
PostgreSQL-like zero value of their type (0 for OIDs and numbers, false, '' for "char",
NULL for everything else).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from engine.types import (
    BIGINT,
    BOOLEAN,
    BYTEA,
    DOUBLE,
    INT,
    INTERVAL,
    NUMERIC,
    REAL,
    SMALLINT,
    TIMESTAMPTZ,
    VARCHAR,
    Field,
    SqlType,
    TypeKind,
    list_of,
    pg_alias,
)

OID = pg_alias(INT, "oid")
NAME = pg_alias(VARCHAR, "name")
CHAR = pg_alias(VARCHAR, "char")
TEXT = pg_alias(VARCHAR, "text")
REGPROC = pg_alias(INT, "regproc")
REGCLASS = pg_alias(INT, "regclass")
REGTYPE = pg_alias(INT, "regtype")
XID = pg_alias(INT, "xid")
NODE_TREE = pg_alias(VARCHAR, "pg_node_tree")
ACLITEM = pg_alias(VARCHAR, "aclitem")
INT2VECTOR = SqlType(TypeKind.LIST, SMALLINT, "int2vector")
OIDVECTOR = SqlType(TypeKind.LIST, OID, "oidvector")
OID_ARRAY = SqlType(TypeKind.LIST, OID, "_oid")
TEXT_ARRAY = SqlType(TypeKind.LIST, TEXT, "_text")
NAME_ARRAY = SqlType(TypeKind.LIST, NAME, "_name")
CHAR_ARRAY = SqlType(TypeKind.LIST, CHAR, "_char")
ACL_ARRAY = SqlType(TypeKind.LIST, ACLITEM, "_aclitem")
INT2_ARRAY = SqlType(TypeKind.LIST, SMALLINT, "_int2")

_TYPES: dict[str, SqlType] = {
    "oid": OID,
    "name": NAME,
    '"char"': CHAR,
    "text": TEXT,
    "regproc": REGPROC,
    "regclass": REGCLASS,
    "regtype": REGTYPE,
    "xid": XID,
    "pg_node_tree": NODE_TREE,
    "aclitem": ACLITEM,
    "int2vector": INT2VECTOR,
    "oidvector": OIDVECTOR,
    "oid[]": OID_ARRAY,
    "text[]": TEXT_ARRAY,
    "name[]": NAME_ARRAY,
    '"char"[]': CHAR_ARRAY,
    "aclitem[]": ACL_ARRAY,
    "smallint[]": INT2_ARRAY,
    "boolean": BOOLEAN,
    "smallint": SMALLINT,
    "integer": INT,
    "bigint": BIGINT,
    "real": REAL,
    "double precision": DOUBLE,
    "numeric": NUMERIC,
    "bytea": BYTEA,
    "interval": INTERVAL,
    "timestamp with time zone": TIMESTAMPTZ,
    "character varying": VARCHAR,
}


def sql_type(spec: str) -> SqlType:
    """The engine type for a PostgreSQL type name as format_type prints it; types Swell
    cannot store (inet, pg_lsn, anyarray...) are presented as text."""
    return _TYPES.get(spec.strip(), TEXT)


def parse_columns(spec: str) -> list[Field]:
    out = []
    for part in spec.split(","):
        name, _, tname = part.strip().partition(" ")
        out.append(Field(name, sql_type(tname)))
    return out


def _zero(t: SqlType) -> Any:
    if t.pg in ("oid", "regproc", "regclass", "regtype", "xid"):
        return 0
    if t.kind is TypeKind.BOOLEAN:
        return False
    if t.pg == "char":
        return ""
    if t.kind in (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT):
        return 0
    if t.kind is TypeKind.REAL:
        return 0.0
    return None


def rows_from_dicts(fields: list[Field], rows: Iterable[Mapping[str, Any]]) -> list[tuple]:
    zeros = [_zero(f.type) for f in fields]
    names = [f.name for f in fields]
    return [tuple(r.get(n, z) for n, z in zip(names, zeros, strict=True)) for r in rows]


__all__ = [
    "CHAR",
    "NAME",
    "OID",
    "TEXT",
    "list_of",
    "parse_columns",
    "rows_from_dicts",
    "sql_type",
]
