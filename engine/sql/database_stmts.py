"""CREATE DATABASE / DROP DATABASE / ALTER DATABASE ... RENAME TO statements parsed into
`Statement`s (run by `engine.handlers.database_ddl`; ALTER DATABASE ... OWNER TO is
`engine.sql.grant_stmts.parse_alter_owner`'s)."""

from __future__ import annotations

import re

from engine.errors import SqlSyntaxError, not_supported
from engine.sql.identifiers import fold_ident
from engine.sql.statement import Statement

_IDENT = r'(?:"(?:[^"]|"")+"|[A-Za-z_][\w$]*)'
_CREATE = re.compile(
    rf"^CREATE\s+DATABASE\s+(?P<ine>IF\s+NOT\s+EXISTS\s+)?(?P<name>{_IDENT})"
    r"(?P<rest>.*?)\s*;?\s*$",
    re.I | re.S,
)
_OWNER = re.compile(rf"^(?:WITH\s+)?OWNER\s*(?:=\s*)?(?P<owner>{_IDENT})$", re.I | re.S)
_RENAME = re.compile(
    rf"^ALTER\s+DATABASE\s+(?P<name>{_IDENT})\s+RENAME\s+TO\s+(?P<new>{_IDENT})\s*;?\s*$",
    re.I | re.S,
)
_DROP = re.compile(
    rf"^DROP\s+DATABASE\s+(?P<ie>IF\s+EXISTS\s+)?(?P<name>{_IDENT})\s*;?\s*$", re.I | re.S
)


def parse_database_statement(head: str, body: str, text: str) -> Statement:
    if head == "CREATE":
        m = _CREATE.match(body)
        if not m:
            raise SqlSyntaxError(
                'syntax error at or near "DATABASE"',
                detail="Swell supports CREATE DATABASE [IF NOT EXISTS] name [WITH OWNER role].",
            )
        rest = m["rest"].strip()
        owner = None
        if rest:
            o = _OWNER.match(rest)
            if o is None:
                word = rest.split()[0].upper()
                raise not_supported(
                    f"CREATE DATABASE option {word}",
                    hint="Swell's databases take an OWNER only; every database is UTF8.",
                )
            owner = fold_ident(o["owner"])
        args = {"name": fold_ident(m["name"]), "if_not_exists": bool(m["ine"]), "owner": owner}
        return Statement("create_database", text, args=args)
    if head == "ALTER":
        m = _RENAME.match(body)
        if not m:
            raise not_supported(
                "this form of ALTER DATABASE",
                hint="Swell supports ALTER DATABASE name RENAME TO new_name and OWNER TO role.",
            )
        args = {"name": fold_ident(m["name"]), "new_name": fold_ident(m["new"])}
        return Statement("rename_database", text, args=args)
    m = _DROP.match(body)
    if not m:
        raise SqlSyntaxError(
            'syntax error at or near "DATABASE"',
            detail="Swell supports DROP DATABASE [IF EXISTS] name.",
        )
    args = {"name": fold_ident(m["name"]), "if_exists": bool(m["ie"])}
    return Statement("drop_database", text, args=args)
