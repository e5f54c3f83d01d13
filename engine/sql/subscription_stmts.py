"""Parsers for RisingWave's subscription statements (sqlglot knows none of them).

* `CREATE SUBSCRIPTION [IF NOT EXISTS] s FROM t WITH (retention = '1D')`
* `DROP SUBSCRIPTION [IF EXISTS] s [, ...] [CASCADE | RESTRICT]`
* `ALTER SUBSCRIPTION s SET RETENTION { TO | = } '2D'` (also `SET (retention = '2D')`),
  `ALTER SUBSCRIPTION s RENAME TO s2`
* `SHOW SUBSCRIPTIONS [FROM schema] [LIKE 'pattern']`
* `DECLARE c SUBSCRIPTION CURSOR FOR s [SINCE { now() | proctime() | begin() | <unix ms> }
  | FULL]`

and `VERIFY MATERIALIZED VIEW v` (`engine.handlers.verify`).

Each becomes a `Statement` whose args the handlers in `engine.handlers.subscription` read.
FETCH ... WITH (timeout = '5s') is parsed with the other cursor statements
(`engine.sql.session_stmts`).
"""

from __future__ import annotations

import re
from typing import Any

from engine.errors import SqlSyntaxError
from engine.sql.identifiers import fold_ident as ident

_ID = r'(?:"(?:[^"]|"")+"|[A-Za-z_][\w$]*)'
_QNAME = rf"(?P<{{g}}>{_ID}(?:\s*\.\s*{_ID})?)"


def _q(group: str) -> str:
    return _QNAME.format(g=group)


_CREATE = re.compile(
    rf"^CREATE\s+SUBSCRIPTION\s+(?P<ine>IF\s+NOT\s+EXISTS\s+)?{_q('name')}\s+FROM\s+"
    rf"{_q('src')}\s*(?:WITH\s*\((?P<with>.*)\))?\s*$",
    re.I | re.S,
)
_DROP = re.compile(
    r"^DROP\s+SUBSCRIPTION\s+(?P<ie>IF\s+EXISTS\s+)?(?P<names>.+?)"
    r"(?:\s+(?P<mode>CASCADE|RESTRICT))?\s*$",
    re.I | re.S,
)
_ALTER = re.compile(
    rf"^ALTER\s+SUBSCRIPTION\s+{_q('name')}\s+SET\s+(?:RETENTION\s*(?:=|\bTO\b)\s*"
    r"'(?P<ret>[^']*)'|\(\s*RETENTION\s*=\s*'(?P<ret2>[^']*)'\s*\))\s*$",
    re.I | re.S,
)
_RENAME = re.compile(
    rf"^ALTER\s+SUBSCRIPTION\s+{_q('name')}\s+RENAME\s+TO\s+(?P<new>{_ID})\s*$", re.I | re.S
)
_SHOW = re.compile(
    r"^SHOW\s+SUBSCRIPTIONS(?:\s+(?:FROM|IN)\s+(?P<schema>\w+))?"
    r"(?:\s+LIKE\s+'(?P<like>[^']*)')?\s*$",
    re.I,
)
_SHOW_CREATE = re.compile(rf"^SHOW\s+CREATE\s+SUBSCRIPTION\s+{_q('name')}\s*$", re.I)
_DECLARE = re.compile(
    rf"^DECLARE\s+(?P<cur>{_ID})\s+SUBSCRIPTION\s+CURSOR\s+FOR\s+{_q('sub')}"
    r"(?:\s+(?:(?P<full>FULL)|SINCE\s+(?P<since>.+?)))?\s*$",
    re.I | re.S,
)
_OPTION = re.compile(r"\s*([A-Za-z_][\w.]*)\s*=\s*(?:'((?:[^']|'')*)'|([^,\s]+))\s*(?:,|$)")


def qualified(raw: str) -> tuple[str, str | None]:
    """(name, schema or None) of `a` or `s.a` (quoted parts as written)."""
    parts = [p for p in re.findall(rf"{_ID}", raw)]
    if len(parts) == 2:
        return ident(parts[1]), ident(parts[0])
    return ident(parts[0]), None


def with_options(raw: str | None) -> dict[str, str]:
    out: dict[str, str] = {}
    text = (raw or "").strip()
    pos = 0
    while pos < len(text):
        m = _OPTION.match(text, pos)
        if m is None:
            raise SqlSyntaxError(f'syntax error at or near "{text[pos:].split()[0]}"')
        value = m[2].replace("''", "'") if m[2] is not None else m[3]
        out[m[1].lower()] = value
        pos = m.end()
    return out


_DECLARE_HEAD = re.compile(rf"^DECLARE\s+{_ID}\s+SUBSCRIPTION\s+CURSOR\b", re.I)


def is_subscription_statement(head: str, words: list[str], body: str) -> bool:
    if head in ("CREATE", "DROP", "ALTER") and words[1:2] == ["SUBSCRIPTION"]:
        return True
    if head == "SHOW" and words[1:2] == ["SUBSCRIPTIONS"]:
        return True
    if head == "SHOW" and words[1:3] == ["CREATE", "SUBSCRIPTION"]:
        return True
    return head == "DECLARE" and _DECLARE_HEAD.match(body) is not None


def parse_subscription_statement(head: str, body: str) -> tuple[str, dict[str, Any]]:
    """(statement kind, args) of one of the statements above."""
    if head == "CREATE":
        m = _CREATE.match(body)
        if m is None:
            raise SqlSyntaxError(
                'syntax error at or near "SUBSCRIPTION"',
                hint="CREATE SUBSCRIPTION s FROM table_or_mv WITH (retention = '1D')",
            )
        name, schema = qualified(m["name"])
        src, src_schema = qualified(m["src"])
        return "create_subscription", {
            "name": name,
            "schema": schema,
            "from": src,
            "from_schema": src_schema,
            "if_not_exists": bool(m["ine"]),
            "options": with_options(m["with"]),
        }
    if head == "DROP":
        m = _DROP.match(body)
        if m is None:
            raise SqlSyntaxError('syntax error at or near "SUBSCRIPTION"')
        names = [qualified(n) for n in m["names"].split(",") if n.strip()]
        return "drop_subscription", {
            "names": names,
            "if_exists": bool(m["ie"]),
            "cascade": (m["mode"] or "").upper() == "CASCADE",
        }
    if head == "ALTER" and _RENAME.match(body):
        m = _RENAME.match(body)
        assert m is not None
        name, schema = qualified(m["name"])
        return "rename_subscription", {"name": name, "schema": schema, "new": ident(m["new"])}
    if head == "ALTER":
        m = _ALTER.match(body)
        if m is None:
            raise SqlSyntaxError(
                'syntax error at or near "SUBSCRIPTION"',
                hint="ALTER SUBSCRIPTION s SET RETENTION TO '2D' | RENAME TO s2",
            )
        name, schema = qualified(m["name"])
        ret = m["ret"] if m["ret"] is not None else m["ret2"]
        return "alter_subscription", {"name": name, "schema": schema, "retention": ret}
    if head == "SHOW" and re.match(r"^SHOW\s+CREATE\b", body, re.I):
        m = _SHOW_CREATE.match(body)
        if m is None:
            raise SqlSyntaxError('syntax error at or near "SUBSCRIPTION"')
        name, schema = qualified(m["name"])
        return "show_create_subscription", {"name": name, "schema": schema}
    if head == "SHOW":
        m = _SHOW.match(body)
        if m is None:
            raise SqlSyntaxError('syntax error at or near "SUBSCRIPTIONS"')
        return "show_subscriptions", {"schema": m["schema"], "like": m["like"]}
    m = _DECLARE.match(body)
    if m is None:
        raise SqlSyntaxError(
            'syntax error at or near "SUBSCRIPTION"',
            hint="DECLARE c SUBSCRIPTION CURSOR FOR s [SINCE now() | begin() | <unix ms> | FULL]",
        )
    sub, sub_schema = qualified(m["sub"])
    since: tuple[str, int | None]
    if m["full"]:
        since = ("full", None)
    elif m["since"] is None:
        since = ("now", None)
    else:
        raw = " ".join(m["since"].split()).lower()
        if raw in ("now()", "proctime()"):
            since = ("now", None)
        elif raw == "begin()":
            since = ("begin", None)
        elif re.fullmatch(r"\d+", raw):
            since = ("ts", int(raw))
        else:
            raise SqlSyntaxError(
                f'syntax error at or near "{m["since"].split()[0]}"',
                hint="SINCE takes now(), proctime(), begin() or a Unix time in milliseconds.",
            )
    return "declare_subscription_cursor", {
        "name": ident(m["cur"]),
        "subscription": sub,
        "schema": sub_schema,
        "since": since,
    }


_VERIFY = re.compile(rf"^VERIFY\s+MATERIALIZED\s+VIEW\s+{_q('name')}\s*$", re.I | re.S)


def parse_verify(body: str) -> dict[str, Any]:
    m = _VERIFY.match(body)
    if m is None:
        raise SqlSyntaxError('syntax error at or near "VERIFY"', hint="VERIFY MATERIALIZED VIEW v")
    name, schema = qualified(m["name"])
    return {"name": name, "schema": schema}
