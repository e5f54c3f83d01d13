"""Answers for the few fixed driver queries the SQL engine is not meant to run.

asyncpg introspects every type it has no built-in codec for (arrays such as `int4[]`
included) with one large `WITH RECURSIVE` query over pg_type/pg_namespace/pg_range, after
probing `current_setting('jit')`. Both are driver plumbing, not user SQL, so pgwire
recognises them at Parse and answers from `engine.types` without calling the engine:

- the jit probe fails with 42704 (no such setting), which asyncpg treats as "jit off";
- the type lookup returns one row per requested OID plus, for arrays, the element type,
  in the column layout asyncpg's `INTRO_LOOKUP_TYPES` produces.

A shim statement satisfies the engine's `PreparedStatement` protocol, so the extended
protocol handles it like any other statement; only Execute dispatches to `run()`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from engine.api import QueryResult, StatementDescription
from engine.errors import UndefinedObject
from engine.types import INT, VARCHAR, Field, SqlType, TypeKind, list_of, type_from_oid


class ShimStatement:
    """A pgwire-answered statement: fixed description, result computed from the params."""

    def __init__(
        self,
        sql: str,
        description: StatementDescription,
        run: Callable[[list[Any]], QueryResult],
        param_oids: list[int] | None = None,
        column_oids: list[int] | None = None,
    ) -> None:
        self.sql = sql
        self.description = description
        self.run = run
        # Announced OIDs where the catalog type has no SqlType (oid[], text[]): asyncpg has
        # built-in codecs for those, so announcing them avoids introspecting its own query.
        self.param_oids = param_oids
        self.column_oids = column_oids


def _norm(sql: str) -> str:
    return re.sub(r"\s+", " ", sql).strip().lower()


_JIT_PROBE = _norm("SELECT current_setting('jit') AS cur, set_config('jit', 'off', false) AS new")

# oid columns travel as int4 (same 4-byte binary form); "char"/name as varchar (same bytes)
_TYPE_COLUMNS = [
    Field("oid", INT),
    Field("ns", VARCHAR),
    Field("name", VARCHAR),
    Field("kind", VARCHAR),
    Field("basetype", INT),
    Field("elemtype", INT),
    Field("elemdelim", VARCHAR),
    Field("range_subtype", INT),
    Field("attrtypoids", list_of(INT)),
    Field("attrnames", list_of(VARCHAR)),
    Field("depth", INT),
    Field("basetype_name", VARCHAR),
    Field("elemtype_name", VARCHAR),
    Field("range_subtype_name", VARCHAR),
]


_OID = 26
_OID_ARRAY = 1028
_TEXT = 25
_TEXT_ARRAY = 1009
_CHAR = 18
_TYPE_COLUMN_OIDS = [
    _OID,
    19,
    19,
    _CHAR,
    _OID,
    _OID,
    _CHAR,
    _OID,
    _OID_ARRAY,
    _TEXT_ARRAY,
    23,
    _TEXT,
    _TEXT,
    _TEXT,
]


def _type_row(oid: int, t: SqlType, depth: int) -> tuple[Any, ...]:
    if t.kind is TypeKind.LIST:
        assert t.elem is not None
        return (
            oid,
            "pg_catalog",
            t.pg_name,
            "b",
            None,
            t.elem.oid,
            ",",
            None,
            None,
            None,
            depth,
            None,
            t.elem.display,
            None,
        )
    return (
        oid,
        "pg_catalog",
        t.pg_name,
        "b",
        None,
        0,
        None,
        None,
        None,
        None,
        depth,
        None,
        "-",
        None,
    )


def _lookup_types(params: list[Any]) -> QueryResult:
    rows: list[tuple[Any, ...]] = []
    for oid in params[0] or []:
        if oid is None:
            continue
        t = type_from_oid(int(oid))
        if t is None:
            continue
        if t.kind is TypeKind.LIST and t.elem is not None:
            rows.append(_type_row(t.elem.oid, t.elem, 1))
        rows.append(_type_row(int(oid), t, 0))
    rows.sort(key=lambda r: -r[10])
    return QueryResult(f"SELECT {len(rows)}", _TYPE_COLUMNS, rows)


def _no_jit(params: list[Any]) -> QueryResult:
    raise UndefinedObject('unrecognized configuration parameter "jit"')


def match(sql: str) -> ShimStatement | None:
    """The shim for `sql` if it is one of the known driver queries, else None."""
    if "typeinfo_tree" in sql and "pg_catalog.pg_type" in sql and "$1" in sql:
        # $1 is oid[]: the same 4-byte binary elements as int4[] for every real OID
        desc = StatementDescription([list_of(INT)], _TYPE_COLUMNS)
        return ShimStatement(sql, desc, _lookup_types, [_OID_ARRAY], _TYPE_COLUMN_OIDS)
    if _norm(sql) == _JIT_PROBE:
        desc = StatementDescription([], [Field("cur", VARCHAR), Field("new", VARCHAR)])
        return ShimStatement(sql, desc, _no_jit)
    return None
