"""Parsers for GRANT, REVOKE and ALTER ... OWNER TO, which sqlglot does not cover.

    GRANT { priv [, ...] | ALL [PRIVILEGES] } ON [TABLE | VIEW | MATERIALIZED VIEW | SOURCE]
          name [, ...] | ALL { TABLES | VIEWS | MATERIALIZED VIEWS | SOURCES } IN SCHEMA s [, ...]
          TO role [, ...] [WITH GRANT OPTION]
    GRANT { USAGE | CREATE | ALL [PRIVILEGES] } [, ...] ON SCHEMA s [, ...] TO role [, ...]
    GRANT { USAGE | ALL [PRIVILEGES] } ON LANGUAGE python TO role [, ...]
    GRANT { CONNECT | CREATE | TEMP[ORARY] | ALL [PRIVILEGES] } [, ...] ON DATABASE d [, ...]
          TO role [, ...] [WITH GRANT OPTION]
    REVOKE [GRANT OPTION FOR] ... FROM role [, ...] [CASCADE | RESTRICT]
    ALTER { TABLE | VIEW | MATERIALIZED VIEW | SOURCE | SINK | SCHEMA | DATABASE } name
          OWNER TO role

A role is a name, PUBLIC, CURRENT_USER or SESSION_USER. Produces
`Statement("grant", text, args={...})` with `action` (`grant` / `revoke`), `privileges`
(upper-case names; `["ALL"]`), `target` (`relation` / `all_in_schema` / `schema` /
`database` / `language`), `kind` (the relation kind word or None), `names` ([(schema or
None, name)]), `grantees`, `grant_option`; or `Statement("alter_owner", ...)` with
`kind`, `name`, `schema`, `owner`. Lifecycle: pure functions called by `engine.sql.parser`.
"""

from __future__ import annotations

from typing import Any

from engine.errors import SqlSyntaxError, not_supported
from engine.sql.user_stmts import _Cursor

_RELATION_KINDS = {"TABLE": "table", "VIEW": "view", "SOURCE": "source", "SINK": "sink"}
_ALL_KINDS = {"TABLES": "table", "VIEWS": "view", "SOURCES": "source"}
_PRIVILEGES = (
    "SELECT",
    "INSERT",
    "UPDATE",
    "DELETE",
    "TRUNCATE",
    "REFERENCES",
    "TRIGGER",
    "USAGE",
    "CREATE",
    "CONNECT",
    "TEMPORARY",
    "TEMP",
    "ALL",
)


def _qualified(c: _Cursor) -> tuple[str | None, str]:
    first = c.name()
    t = c.peek()
    if t is not None and t[1] == ".":
        c.take()
        return first, c.name()
    return None, first


def _role(c: _Cursor) -> str:
    w = c.word()
    if w in ("PUBLIC", "CURRENT_USER", "SESSION_USER", "CURRENT_ROLE"):
        c.take()
        return w
    if w == "GROUP":
        c.take()
    return c.name()


def _comma(c: _Cursor) -> bool:
    t = c.peek()
    if t is not None and t[1] == ",":
        c.take()
        return True
    return False


def _syntax(c: _Cursor) -> SqlSyntaxError:
    t = c.peek()
    return SqlSyntaxError(
        f'syntax error at or near "{t[1]}"' if t else "syntax error at end of input"
    )


def parse_grant(text: str) -> dict[str, Any]:
    """args of a GRANT or REVOKE statement (see the module docstring)."""
    c = _Cursor(text)
    action = c.expect_word("GRANT", "REVOKE").lower()
    option_only = False
    if action == "revoke" and c.word() == "GRANT":
        c.take()
        c.expect_word("OPTION")
        c.expect_word("FOR")
        option_only = True
    privileges: list[str] = []
    while True:
        w = c.word()
        if w not in _PRIVILEGES:
            if w is not None and c.toks[c.i + 1 : c.i + 2] and c.toks[c.i + 1][1].upper() == "TO":
                raise not_supported("GRANT of role membership", hint="Grant privileges on objects.")
            raise _syntax(c)
        c.take()
        if w == "ALL" and c.word() == "PRIVILEGES":
            c.take()
        t = c.peek()
        if t is not None and t[1] == "(":
            raise not_supported("column privileges", hint="Grant on the whole table.")
        privileges.append(w)
        if not _comma(c):
            break
    if "ALL" in privileges:
        privileges = ["ALL"]
    c.expect_word("ON")
    target, kind = "relation", None
    names: list[tuple[str | None, str]] = []
    w = c.word()
    if w in ("SCHEMA", "DATABASE"):
        c.take()
        target = w.lower()
        names.append((None, c.name()))
        while _comma(c):
            names.append((None, c.name()))
    elif w == "ALL":
        c.take()
        w = c.word()
        if w == "MATERIALIZED":
            c.take()
            c.expect_word("VIEWS")
            kind = "materialized view"
        elif w in _ALL_KINDS:
            c.take()
            kind = _ALL_KINDS[w]
        else:
            raise _syntax(c)
        c.expect_word("IN")
        c.expect_word("SCHEMA")
        target = "all_in_schema"
        names.append((None, c.name()))
        while _comma(c):
            names.append((None, c.name()))
    elif w == "LANGUAGE":  # USAGE ON LANGUAGE python: who may create Python functions
        c.take()
        target = "language"
        names.append((None, c.name()))
    else:
        if w in ("FUNCTION", "SEQUENCE", "SECRET", "CONNECTION", "TYPE"):
            raise not_supported(f"GRANT ON {w}", hint="Grant on tables, views, sources, schemas.")
        if w == "MATERIALIZED":
            c.take()
            c.expect_word("VIEW")
            kind = "materialized view"
        elif w in _RELATION_KINDS:
            c.take()
            kind = _RELATION_KINDS[w]
        names.append(_qualified(c))
        while _comma(c):
            names.append(_qualified(c))
    c.expect_word("TO" if action == "grant" else "FROM")
    grantees = [_role(c)]
    while _comma(c):
        grantees.append(_role(c))
    grant_option = False
    if action == "grant" and c.word() == "WITH":
        c.take()
        c.expect_word("GRANT")
        c.expect_word("OPTION")
        grant_option = True
    cascade = False
    if action == "revoke" and c.word() in ("CASCADE", "RESTRICT"):
        cascade = c.take()[1].upper() == "CASCADE"
    if c.word() == "GRANTED":
        c.take()
        c.expect_word("BY")
        _role(c)
    t = c.peek()
    if t is not None and t[1] != ";":
        raise _syntax(c)
    return {
        "action": action,
        "privileges": privileges,
        "target": target,
        "kind": kind,
        "names": names,
        "grantees": grantees,
        "grant_option": grant_option,
        "option_only": option_only,
        "cascade": cascade,
    }


def parse_alter_owner(text: str) -> dict[str, Any] | None:
    """args of `ALTER <kind> name OWNER TO role`, None for any other ALTER."""
    c = _Cursor(text)
    c.expect_word("ALTER")
    w = c.word()
    if w == "MATERIALIZED":
        c.take()
        c.expect_word("VIEW")
        kind = "materialized view"
    elif w in _RELATION_KINDS or w in ("SCHEMA", "DATABASE"):
        c.take()
        kind = w.lower() if w in ("SCHEMA", "DATABASE") else _RELATION_KINDS[w]
    else:
        return None
    schema, name = (None, c.name()) if kind in ("schema", "database") else _qualified(c)
    if c.word() != "OWNER":
        return None
    c.take()
    c.expect_word("TO")
    owner = _role(c)
    t = c.peek()
    if t is not None and t[1] != ";":
        raise _syntax(c)
    return {"kind": kind, "schema": schema, "name": name, "owner": owner}
