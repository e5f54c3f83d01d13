"""Parse CREATE FUNCTION / CREATE AGGREGATE / DROP FUNCTION / DROP AGGREGATE / SHOW FUNCTIONS.

sqlglot has no model of a function definition (its body is another language), so these
are read by a small scanner here. Accepted (RisingWave's and PostgreSQL's forms):

    CREATE [OR REPLACE] FUNCTION [IF NOT EXISTS] [schema.]name ([arg_name] type [, ...])
        [RETURNS type | RETURNS TABLE (column type [, ...])]
        LANGUAGE { python | sql }
        AS { $$ body $$ | $tag$ body $tag$ | 'body' } | RETURN expression
        [IMMUTABLE | STABLE | VOLATILE] [STRICT | RETURNS NULL ON NULL INPUT |
         CALLED ON NULL INPUT] [WITH (batch = true)]
    CREATE AGGREGATE [IF NOT EXISTS] name ([arg_name] type [, ...]) RETURNS type
        LANGUAGE python AS $$ body $$
    DROP { FUNCTION | AGGREGATE } [IF EXISTS] name [(type [, ...])] [, ...] [CASCADE | RESTRICT]

The clauses after the signature may come in any order, as in PostgreSQL. The result is a
`Statement` whose `args` the handler (`engine.handlers.function_ddl`) reads.
"""

from __future__ import annotations

import re
from typing import Any

from sqlglot import exp
from sqlglot.errors import ParseError

from engine.errors import EngineError, SqlSyntaxError
from engine.expr.coerce import parse_data_type
from engine.sql.identifiers import fold_ident as ident
from engine.sql.statement import Statement
from engine.types import Field, SqlType

_IDENT = r'(?:"(?:[^"]|"")+"|[A-Za-z_][\w$]*)'
_HEAD = re.compile(
    rf"^CREATE\s+(?P<replace>OR\s+REPLACE\s+)?(?P<what>FUNCTION|AGGREGATE)\s+"
    rf"(?P<ine>IF\s+NOT\s+EXISTS\s+)?(?P<name>{_IDENT}(?:\s*\.\s*{_IDENT})?)\s*\(",
    re.I | re.S,
)
_DROP = re.compile(
    r"^DROP\s+(?P<what>FUNCTION|AGGREGATE)\s+(?P<ie>IF\s+EXISTS\s+)?(?P<rest>.+?)"
    r"(?:\s+(?P<mode>CASCADE|RESTRICT))?\s*;?\s*$",
    re.I | re.S,
)
_DOLLAR = re.compile(r"\$([A-Za-z_]\w*)?\$")


def qualified(raw: str) -> tuple[str, str | None]:
    parts = [p for p in re.findall(_IDENT, raw)]
    if len(parts) == 2:
        return ident(parts[1]), ident(parts[0])
    return ident(parts[0]), None


def parse_type(text: str) -> SqlType:
    try:
        return parse_data_type(exp.DataType.build(text.strip(), dialect="risingwave"))
    except (ParseError, ValueError) as e:
        raise SqlSyntaxError(f'type "{text.strip()}" does not exist') from e


def _split_top(text: str) -> list[str]:
    """Split on commas outside parentheses and quotes."""
    out, depth, cur, q = [], 0, [], ""
    for ch in text:
        if q:
            cur.append(ch)
            if ch == q:
                q = ""
            continue
        if ch in "'\"":
            q = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append("".join(cur))
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur))
    return out


def _close_paren(text: str, start: int) -> int:
    """Index of the `)` closing the `(` just before `start`."""
    depth = 1
    q = ""
    for i in range(start, len(text)):
        ch = text[i]
        if q:
            if ch == q:
                q = ""
            continue
        if ch in "'\"":
            q = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i
    raise SqlSyntaxError("syntax error at end of input", detail="Unbalanced parentheses.")


def parse_args(text: str) -> tuple[list[str], list[SqlType]]:
    """`a int, varchar, b numeric(10, 2)` -> (names, types); unnamed arguments get ''."""
    names: list[str] = []
    types: list[SqlType] = []
    for part in _split_top(text):
        p = part.strip()
        if not p:
            continue
        m = re.match(r"^(?:IN\s+)?(.*)$", p, re.I | re.S)
        p = m.group(1) if m else p
        try:
            t = parse_type(p)
            names.append("")
        except EngineError:
            words = p.split(None, 1)
            if len(words) != 2:
                raise
            t = parse_type(words[1])
            names.append(ident(words[0]))
        types.append(t)
    return names, types


def _body_at(text: str, i: int) -> tuple[str, int]:
    """The string literal starting at `text[i]` (dollar- or single-quoted) and its end."""
    m = _DOLLAR.match(text, i)
    if m:
        tag = m.group(0)
        end = text.find(tag, m.end())
        if end < 0:
            raise SqlSyntaxError(f"unterminated dollar-quoted string at or near {tag!r}")
        return text[m.end() : end], end + len(tag)
    if text.startswith("'", i):
        j = i + 1
        out = []
        while j < len(text):
            if text[j] == "'":
                if text.startswith("''", j):
                    out.append("'")
                    j += 2
                    continue
                return "".join(out), j + 1
            out.append(text[j])
            j += 1
        raise SqlSyntaxError("unterminated quoted string")
    raise SqlSyntaxError(
        'syntax error at or near "AS"',
        detail="The function body is a string: AS $$ ... $$ or AS '...'.",
    )


def parse_create_function(text: str) -> Statement:
    body_text = text.strip().rstrip(";")
    m = _HEAD.match(body_text)
    if not m:
        raise SqlSyntaxError('syntax error at or near "FUNCTION"')
    name, schema = qualified(m["name"])
    close = _close_paren(body_text, m.end())
    arg_names, arg_types = parse_args(body_text[m.end() : close])
    args: dict[str, Any] = {
        "aggregate": m["what"].upper() == "AGGREGATE",
        "or_replace": bool(m["replace"]),
        "if_not_exists": bool(m["ine"]),
        "name": name,
        "schema": schema,
        "arg_names": arg_names,
        "arg_types": arg_types,
        "return_type": None,
        "return_columns": [],
        "language": None,
        "body": None,
        "options": {},
        "strict": False,
    }
    rest = body_text[close + 1 :]
    i = 0
    while True:
        while i < len(rest) and rest[i].isspace():
            i += 1
        if i >= len(rest):
            break
        tail = rest[i:]
        mm = re.match(r"RETURNS\s+TABLE\s*\(", tail, re.I)
        if mm:
            end = _close_paren(tail, mm.end())
            cols: list[Field] = []
            for part in _split_top(tail[mm.end() : end]):
                words = part.strip().split(None, 1)
                if len(words) != 2:
                    raise SqlSyntaxError(f'syntax error at or near "{part.strip()}"')
                cols.append(Field(ident(words[0]), parse_type(words[1])))
            args["return_columns"] = cols
            i += end + 1
            continue
        mm = re.match(r"RETURNS\s+NULL\s+ON\s+NULL\s+INPUT\b|STRICT\b", tail, re.I)
        if mm:
            args["strict"] = True
            i += mm.end()
            continue
        mm = re.match(
            r"CALLED\s+ON\s+NULL\s+INPUT\b|IMMUTABLE\b|STABLE\b|VOLATILE\b"
            r"|(?:NOT\s+)?LEAKPROOF\b|PARALLEL\s+\w+",
            tail,
            re.I,
        )
        if mm:
            i += mm.end()
            continue
        mm = re.match(r"RETURNS\s+", tail, re.I)
        if mm:
            stop = re.search(
                r"\s(?:LANGUAGE|AS|RETURN|WITH|IMMUTABLE|STABLE|VOLATILE|STRICT"
                r"|CALLED|RETURNS)\b|\s*\$",
                tail[mm.end() :],
                re.I,
            )
            end = mm.end() + (stop.start() if stop else len(tail) - mm.end())
            args["return_type"] = parse_type(tail[mm.end() : end])
            i += end
            continue
        mm = re.match(r"LANGUAGE\s+('?)(\w+)\1", tail, re.I)
        if mm:
            args["language"] = mm.group(2).lower()
            i += mm.end()
            continue
        mm = re.match(r"AS\s+", tail, re.I)
        if mm:
            body, end = _body_at(tail, mm.end())
            args["body"] = body
            i += end
            continue
        mm = re.match(r"RETURN\s+", tail, re.I)
        if mm:
            stop = re.search(
                r"\s(?:LANGUAGE|WITH|IMMUTABLE|STABLE|VOLATILE|STRICT)\b", tail[mm.end() :], re.I
            )
            end = mm.end() + (stop.start() if stop else len(tail) - mm.end())
            args["body"] = "RETURN " + tail[mm.end() : end].strip()
            args["language"] = args["language"] or "sql"
            i += end
            continue
        mm = re.match(r"WITH\s*\(", tail, re.I)
        if mm:
            end = _close_paren(tail, mm.end())
            for part in _split_top(tail[mm.end() : end]):
                k, eq, v = part.partition("=")
                if not eq:
                    raise SqlSyntaxError(f'syntax error at or near "{part.strip()}"')
                args["options"][k.strip().lower()] = v.strip().strip("'").lower()
            i += end + 1
            continue
        word = tail.split(None, 1)[0]
        raise SqlSyntaxError(f'syntax error at or near "{word}"')
    if args["return_type"] is None and args["return_columns"]:
        args["return_type"] = args["return_columns"][0].type
    if args["return_type"] is None:
        raise SqlSyntaxError(
            "function result type must be specified",
            hint="Add RETURNS type or RETURNS TABLE (column type, ...).",
        )
    if args["language"] is None:
        raise SqlSyntaxError("no language specified", hint="Add LANGUAGE python or LANGUAGE sql.")
    if args["body"] is None:
        raise SqlSyntaxError("no function body specified", hint="Add AS $$ ... $$.")
    kind = "create_aggregate" if args["aggregate"] else "create_function"
    return Statement(kind, text, args=args)


def parse_drop_function(text: str) -> Statement:
    m = _DROP.match(text.strip())
    if not m:
        raise SqlSyntaxError('syntax error at or near "FUNCTION"')
    targets: list[dict[str, Any]] = []
    for part in _split_top(m["rest"]):
        p = part.strip()
        paren = p.find("(")
        types: list[SqlType] | None = None
        raw = p
        if paren >= 0:
            raw = p[:paren]
            inner = p[paren + 1 : p.rindex(")")]
            types = parse_args(inner)[1]
        name, schema = qualified(raw)
        targets.append({"name": name, "schema": schema, "types": types})
    args = {
        "aggregate": m["what"].upper() == "AGGREGATE",
        "if_exists": bool(m["ie"]),
        "cascade": (m["mode"] or "").upper() == "CASCADE",
        "targets": targets,
    }
    return Statement("drop_function", text, args=args)
