"""CREATE / DROP SCHEMA and DROP CONNECTION: statement text to a `Statement`'s fields.

These have no sqlglot tree; `engine.sql.parser` hands them here by their first words, and
the handlers (`engine.handlers.schema`, `engine.handlers.connection`) execute them.
"""

from __future__ import annotations

import re
from typing import Any

from engine.errors import SqlSyntaxError
from engine.sql.identifiers import fold_ident as _ident
from engine.sql.statement import Statement

_IDENT = r'(?:"(?:[^"]|"")+"|[A-Za-z_][\w$]*)'
_CREATE = re.compile(
    rf"^CREATE\s+SCHEMA\s+(?P<ine>IF\s+NOT\s+EXISTS\s+)?(?P<name>{_IDENT})"
    rf"(?:\s+AUTHORIZATION\s+{_IDENT})?\s*;?\s*$",
    re.I | re.S,
)
_DROP = re.compile(
    rf"^DROP\s+SCHEMA\s+(?P<ie>IF\s+EXISTS\s+)?(?P<names>{_IDENT}(?:\s*,\s*{_IDENT})*)"
    r"(?:\s+(?P<mode>CASCADE|RESTRICT))?\s*;?\s*$",
    re.I | re.S,
)

_NAME = r'(?:"[^"]+"|[A-Za-z_][\w$]*)'
_DROP_CONNECTION = re.compile(
    rf"^\s*DROP\s+CONNECTION\s+(?P<ie>IF\s+EXISTS\s+)?(?:(?P<schema>{_NAME})\s*\.\s*)?"
    rf"(?P<name>{_NAME})\s*(?:CASCADE|RESTRICT)?\s*$",
    re.I,
)


def parse_schema_statement(head: str, body: str, text: str) -> Statement:
    if head == "CREATE":
        m = _CREATE.match(body)
        if not m:
            raise SqlSyntaxError(
                'syntax error at or near "SCHEMA"',
                detail="Swell supports CREATE SCHEMA [IF NOT EXISTS] name [AUTHORIZATION role].",
            )
        args = {"name": _ident(m["name"]), "if_not_exists": bool(m["ine"])}
        return Statement("create_schema", text, args=args)
    m = _DROP.match(body)
    if not m:
        raise SqlSyntaxError('syntax error at or near "SCHEMA"')
    names = [_ident(n) for n in re.findall(_IDENT, m["names"])]
    args = {
        "names": names,
        "if_exists": bool(m["ie"]),
        "cascade": (m["mode"] or "").upper() == "CASCADE",
    }
    return Statement("drop_schema", text, args=args)


def _unquote(raw: str | None) -> str | None:
    if raw is None:
        return None
    return raw[1:-1] if raw.startswith('"') else raw.lower()


def parse_drop_connection(body: str) -> dict[str, Any]:
    m = _DROP_CONNECTION.match(body)
    if not m:
        raise SqlSyntaxError('syntax error at or near "CONNECTION"')
    return {
        "name": _unquote(m["name"]),
        "schema": _unquote(m["schema"]),
        "if_exists": bool(m["ie"]),
    }
