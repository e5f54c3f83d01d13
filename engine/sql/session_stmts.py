"""Parsers for the session-level statements clients send around their queries.

Transaction control beyond BEGIN/COMMIT (SAVEPOINT, RELEASE, ROLLBACK TO), cursors
(DECLARE, FETCH, MOVE, CLOSE) and COPY ... TO STDOUT / FROM STDIN. sqlglot does not parse these, and
they wrap a query rather than being one, so each becomes a `Statement` whose `args` name
what to do; DECLARE and COPY (query) keep the inner query as its own parsed `Statement`
(`args["query"]`), which the session runs with the normal SELECT path.

`parse_session_statement` returns None for anything else, so the main parser goes on.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from engine.errors import FeatureNotSupported, SqlSyntaxError
from engine.sql.identifiers import fold_ident as ident
from engine.sql.statement import Statement

_IDENT = r'(?:"(?:[^"]|"")+"|[A-Za-z_][\w$]*)'

_SAVEPOINT = re.compile(rf"^SAVEPOINT\s+(?P<name>{_IDENT})\s*$", re.I)
_RELEASE = re.compile(rf"^RELEASE\s+(?:SAVEPOINT\s+)?(?P<name>{_IDENT})\s*$", re.I)
_ROLLBACK_TO = re.compile(
    rf"^ROLLBACK\s+(?:(?:WORK|TRANSACTION)\s+)?TO\s+(?:SAVEPOINT\s+)?(?P<name>{_IDENT})\s*$",
    re.I,
)
_DECLARE = re.compile(
    rf"^DECLARE\s+(?P<name>{_IDENT})\s+(?P<opts>(?:(?:BINARY|ASENSITIVE|INSENSITIVE|NO\s+SCROLL"
    r"|SCROLL)\s+)*)CURSOR\s+(?:(?P<hold>WITH|WITHOUT)\s+HOLD\s+)?FOR\s+(?P<query>.+)$",
    re.I | re.S,
)
_FETCH = re.compile(
    rf"^(?P<verb>FETCH|MOVE)(?:\s+(?P<dir>.*?))??(?:\s+(?:FROM|IN))?\s+(?P<name>{_IDENT})\s*$",
    re.I | re.S,
)
_FETCH_WITH = re.compile(r"\s+WITH\s*\((?P<opts>[^)]*)\)\s*$", re.I)
_CLOSE = re.compile(rf"^CLOSE\s+(?P<name>{_IDENT})\s*$", re.I)
_COPY = re.compile(
    r"^COPY\s+(?:\((?P<query>.+)\)|(?P<table>[\w.\"]+)\s*(?:\((?P<cols>[^)]*)\))?)\s+"
    r"(?P<dir>TO|FROM)\s+(?P<target>\S+)(?:\s+(?P<opts>.*))?$",
    re.I | re.S,
)


def parse_session_statement(
    head: str, body: str, text: str, parse_one: Callable[[str], Statement]
) -> Statement | None:
    """A `Statement` for SAVEPOINT/RELEASE/ROLLBACK TO/DECLARE/FETCH/MOVE/CLOSE/COPY.

    `parse_one` is the main parser's entry point (passed in by `engine.sql.parser`, which
    calls this module): DECLARE and COPY (query) parse their inner query with it."""
    if head == "SAVEPOINT":
        m = _SAVEPOINT.match(body)
        if not m:
            raise SqlSyntaxError('syntax error at or near "SAVEPOINT"')
        return Statement("savepoint", text, args={"name": ident(m["name"])})
    if head == "RELEASE":
        m = _RELEASE.match(body)
        if not m:
            raise SqlSyntaxError('syntax error at or near "RELEASE"')
        return Statement("release", text, args={"name": ident(m["name"])})
    if head == "ROLLBACK":
        m = _ROLLBACK_TO.match(body)
        if m:
            return Statement("rollback_to", text, args={"name": ident(m["name"])})
        return None
    if head == "DECLARE":
        m = _DECLARE.match(body)
        if not m:
            raise SqlSyntaxError('syntax error at or near "DECLARE"')
        opts = " ".join(m["opts"].upper().split())
        query = parse_one(m["query"])
        if query.kind != "select":
            raise SqlSyntaxError(
                "DECLARE CURSOR must be a SELECT or VALUES", detail="Swell cursors read queries."
            )
        return Statement(
            "declare",
            text,
            args={
                "name": ident(m["name"]),
                "binary": "BINARY" in opts.split(),
                "scroll": "NO SCROLL" not in opts,
                "hold": (m["hold"] or "").upper() == "WITH",
                "query": query,
            },
        )
    if head in ("FETCH", "MOVE"):
        options: dict[str, str] = {}
        w = _FETCH_WITH.search(body)
        if w is not None:  # FETCH ... WITH (timeout = '5s'): subscription cursors
            from engine.sql.subscription_stmts import with_options

            options = with_options(w["opts"])
            body = body[: w.start()]
        m = _FETCH.match(body)
        if not m:
            raise SqlSyntaxError(f'syntax error at or near "{head}"')
        direction, count = parse_direction(m["dir"] or "")
        return Statement(
            "fetch",
            text,
            args={
                "move": m["verb"].upper() == "MOVE",
                "name": ident(m["name"]),
                "direction": direction,
                "count": count,
                "options": options,
            },
        )
    if head == "CLOSE":
        if re.match(r"^CLOSE\s+ALL\s*$", body, re.I):
            return Statement("close", text, args={"name": None})
        m = _CLOSE.match(body)
        if not m:
            raise SqlSyntaxError('syntax error at or near "CLOSE"')
        return Statement("close", text, args={"name": ident(m["name"])})
    if head == "COPY":
        return _parse_copy(body, text, parse_one)
    return None


_ALL = -1


def parse_direction(raw: str) -> tuple[str, int]:
    """FETCH direction as (kind, count): kind is forward, backward, absolute or relative;
    count -1 means ALL."""
    words = raw.upper().split()
    if not words:
        return "forward", 1
    w = words[0]
    rest = words[1:]

    def number(tokens: list[str], default: int) -> int:
        if not tokens:
            return default
        if tokens == ["ALL"]:
            return _ALL
        if len(tokens) == 1 and re.fullmatch(r"[+-]?\d+", tokens[0]):
            return int(tokens[0])
        raise SqlSyntaxError(f'syntax error at or near "{tokens[0]}"')

    if w == "NEXT" and not rest:
        return "forward", 1
    if w == "PRIOR" and not rest:
        return "backward", 1
    if w == "FIRST" and not rest:
        return "absolute", 1
    if w == "LAST" and not rest:
        return "absolute", -1
    if w == "ABSOLUTE":
        return "absolute", number(rest, 1)
    if w == "RELATIVE":
        return "relative", number(rest, 1)
    if w == "FORWARD":
        return "forward", number(rest, 1)
    if w == "BACKWARD":
        return "backward", number(rest, 1)
    n = number(words, 1)
    if n == _ALL:
        return "forward", _ALL
    return ("forward", n) if n >= 0 else ("backward", -n)


def _parse_copy(body: str, text: str, parse_one: Callable[[str], Statement]) -> Statement:
    m = _COPY.match(body)
    if not m:
        raise SqlSyntaxError('syntax error at or near "COPY"')
    if m["dir"].upper() == "FROM":
        if m["target"].upper() != "STDIN" or m["query"] is not None:
            raise FeatureNotSupported(
                "Not supported: COPY FROM a file or program",
                hint="Use COPY table FROM STDIN (psql: \\copy table from 'file').",
            )
        cols = [ident(c) for c in m["cols"].split(",")] if m["cols"] else None
        return Statement(
            "copy_in",
            text,
            args={"table": m["table"], "columns": cols, "options": copy_options(m["opts"])},
        )
    opts = copy_options(m["opts"])
    if opts["format"] == "binary":
        raise FeatureNotSupported("Not supported: COPY TO in binary format")
    if m["target"].upper() != "STDOUT":
        raise FeatureNotSupported(
            "Not supported: COPY TO a file",
            hint="Use COPY ... TO STDOUT (psql: \\copy) to export rows to the client.",
        )
    if m["query"] is not None:
        query = parse_one(m["query"])
        if query.kind != "select":
            raise SqlSyntaxError("COPY query must be a SELECT or VALUES")
    else:
        cols = "*"
        if m["cols"]:
            cols = ", ".join(c.strip() for c in m["cols"].split(","))
        query = parse_one(f"SELECT {cols} FROM {m['table']}")
    return Statement("copy", text, args={"query": query, "options": opts})


def copy_options(raw: str | None) -> dict[str, Any]:
    """COPY options, new style `WITH (FORMAT csv, HEADER, DELIMITER ';')` or old style
    `WITH CSV HEADER DELIMITER ';' NULL 'x'`, as a dict with format, header, delimiter,
    null, quote and escape."""
    opts: dict[str, Any] = {"format": "text", "header": False}
    s = (raw or "").strip()
    if s.upper().startswith("WITH"):
        s = s[4:].strip()
    items: list[tuple[str, str | None]] = []
    if s.startswith("("):
        if not s.endswith(")"):
            raise SqlSyntaxError("syntax error at end of input")
        for part in _split_top(s[1:-1]):
            bits = part.strip().split(None, 1)
            if bits:
                items.append((bits[0].lower(), bits[1].strip() if len(bits) > 1 else None))
    else:
        tokens = re.findall(r"'(?:[^']|'')*'|\S+", s)
        i = 0
        while i < len(tokens):
            key = tokens[i].lower()
            if key in ("csv", "binary", "header"):
                items.append(("format", key) if key != "header" else ("header", None))
                i += 1
            elif key in ("delimiter", "null", "quote", "escape") and i + 1 < len(tokens):
                val = tokens[i + 2] if tokens[i + 1].lower() == "as" else tokens[i + 1]
                items.append((key, val))
                i += 3 if tokens[i + 1].lower() == "as" else 2
            else:
                raise SqlSyntaxError(f'syntax error at or near "{tokens[i]}"')
    for key, value in items:
        v = _literal(value) if value is not None else None
        if key == "format":
            fmt = (v or "").lower()
            if fmt not in ("text", "csv", "binary"):
                raise SqlSyntaxError(f'COPY format "{v}" not recognized')
            opts["format"] = fmt
        elif key == "header":
            opts["header"] = v is None or v.lower() in ("true", "on", "1", "match")
        elif key in ("delimiter", "null", "quote", "escape"):
            if v is None:
                raise SqlSyntaxError(f'syntax error: COPY option "{key}" needs a value')
            opts[key] = v
        elif key == "encoding":
            continue
        else:
            raise SqlSyntaxError(f'option "{key}" not recognized')
    if opts["format"] == "binary":
        for key in ("delimiter", "null", "quote", "escape"):
            if key in opts:
                raise SqlSyntaxError(f"cannot specify {key.upper()} in BINARY mode")
    if "delimiter" in opts and len(opts["delimiter"]) != 1:
        raise SqlSyntaxError("COPY delimiter must be a single one-byte character")
    return opts


def _literal(v: str) -> str:
    v = v.strip()
    if len(v) >= 2 and v[0] == "'" and v[-1] == "'":
        return v[1:-1].replace("''", "'")
    if v.upper().startswith("E'") and v.endswith("'"):
        return v[2:-1].encode().decode("unicode_escape")
    return v


def _split_top(s: str) -> list[str]:
    out, cur, quoted = [], [], False
    for ch in s:
        if ch == "'":
            quoted = not quoted
        if ch == "," and not quoted:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out
