"""CREATE INDEX, DROP INDEX and SHOW INDEXES, RisingWave's forms, parsed by us.

sqlglot reads PostgreSQL's CREATE INDEX but not RisingWave's `DISTRIBUTED BY`, and the
statement is small, so it is matched here and handed to `engine.handlers.index` as
plain arguments (names already case-folded as identifiers are everywhere else):

    CREATE INDEX [IF NOT EXISTS] name ON object (col [ASC | DESC], ...)
        [INCLUDE (col, ...)] [DISTRIBUTED BY (col, ...)]
    DROP INDEX [IF EXISTS] name [, ...] [CASCADE | RESTRICT]
    SHOW INDEXES FROM object
"""

from __future__ import annotations

import re
from typing import Any

from engine.errors import SqlSyntaxError

_IDENT = r'(?:"(?:[^"]|"")+"|[A-Za-z_][\w$]*)'
_QNAME = rf"{_IDENT}(?:\s*\.\s*{_IDENT})?"

_CREATE_RE = re.compile(
    rf"^CREATE\s+INDEX\s+(?P<ine>IF\s+NOT\s+EXISTS\s+)?(?P<name>{_QNAME})\s+ON\s+"
    rf"(?P<on>{_QNAME})\s*\((?P<cols>[^()]*)\)"
    r"(?:\s*INCLUDE\s*\((?P<include>[^()]*)\))?"
    r"(?:\s*DISTRIBUTED\s+BY\s*\((?P<dist>[^()]*)\))?\s*;?\s*$",
    re.I | re.S,
)
_DROP_RE = re.compile(
    r"^DROP\s+INDEX\s+(?P<ie>IF\s+EXISTS\s+)?(?P<names>.+?)\s*(?P<mode>CASCADE|RESTRICT)?\s*;?\s*$",
    re.I | re.S,
)
_SHOW_RE = re.compile(rf"^SHOW\s+INDEXES\s+(?:FROM|IN)\s+(?P<on>{_QNAME})\s*;?\s*$", re.I | re.S)


def is_index_statement(head: str, words: list[str]) -> bool:
    return (head in ("CREATE", "DROP") and words[1:2] == ["INDEX"]) or (
        head == "SHOW" and words[1:2] == ["INDEXES"]
    )


def parse_index_statement(head: str, body: str) -> tuple[str, dict[str, Any]]:
    """(statement kind, arguments) of one of the statements above."""
    if head == "CREATE":
        m = _CREATE_RE.match(body)
        if m is None:
            raise SqlSyntaxError(
                "syntax error in CREATE INDEX",
                hint="CREATE INDEX name ON object (col [ASC | DESC], ...) "
                "[INCLUDE (col, ...)] [DISTRIBUTED BY (col, ...)]",
            )
        cols = []
        for part in _split(m["cols"]):
            pm = re.match(rf"^({_IDENT})(?:\s+(ASC|DESC))?$", part, re.I)
            if pm is None:
                raise SqlSyntaxError(
                    f'syntax error at or near "{part}"',
                    detail="Index columns are column names (expressions are not supported).",
                )
            cols.append((_ident(pm.group(1)), (pm.group(2) or "").upper() == "DESC"))
        include = None if m["include"] is None else [_ident(p) for p in _split(m["include"])]
        dist = None if m["dist"] is None else [_ident(p) for p in _split(m["dist"])]
        name, name_schema = _qname(m["name"])
        on, on_schema = _qname(m["on"])
        return "create_index", {
            "name": name,
            "name_schema": name_schema,
            "on": on,
            "on_schema": on_schema,
            "columns": cols,
            "include": include,
            "distributed_by": dist,
            "if_not_exists": bool(m["ine"]),
        }
    if head == "DROP":
        m = _DROP_RE.match(body)
        if m is None:
            raise SqlSyntaxError("syntax error in DROP INDEX")
        names = [_qname(p) for p in _split(m["names"])]
        return "drop_index", {
            "names": names,
            "if_exists": bool(m["ie"]),
            "cascade": (m["mode"] or "").upper() == "CASCADE",
        }
    m = _SHOW_RE.match(body)
    if m is None:
        raise SqlSyntaxError("syntax error in SHOW INDEXES", hint="SHOW INDEXES FROM table")
    on, on_schema = _qname(m["on"])
    return "show_indexes", {"on": on, "on_schema": on_schema}


def _split(text: str) -> list[str]:
    parts = [p.strip() for p in text.split(",")]
    if not parts or any(not p for p in parts):
        raise SqlSyntaxError(f'syntax error at or near "{text.strip() or ")"}"')
    return parts


def _ident(text: str) -> str:
    text = text.strip()
    if text.startswith('"'):
        return text[1:-1].replace('""', '"')
    if not re.fullmatch(r"[A-Za-z_][\w$]*", text):
        raise SqlSyntaxError(f'syntax error at or near "{text}"')
    return text.lower()


def _qname(text: str) -> tuple[str, str | None]:
    m = re.fullmatch(rf"\s*({_IDENT})(?:\s*\.\s*({_IDENT}))?\s*", text)
    if m is None:
        raise SqlSyntaxError(f'syntax error at or near "{text.strip()}"')
    if m.group(2) is None:
        return _ident(m.group(1)), None
    return _ident(m.group(2)), _ident(m.group(1))
