"""Parsers for CREATE / ALTER / DROP USER (and ROLE), which sqlglot does not cover.

Produces `Statement("user", text, args={...})` where `args["action"]` is `create`,
`alter`, `rename`, `set` (ALTER USER ... SET/RESET, accepted as a no-op) or `drop`; the
options map holds `superuser`, `createdb`, `createrole`, `login` (bools) and `password`
(str, or None for PASSWORD NULL). The password literal lives only in `args` and the
statement text: handlers hash it at once, and the session redacts such statements in logs.
"""

from __future__ import annotations

import re
from typing import Any

from engine.errors import SqlSyntaxError

_TOKEN = re.compile(
    r"""\s*(?:(?P<str>[Ee]?'(?:[^']|'')*')|(?P<qid>"(?:[^"]|"")*")|(?P<word>[A-Za-z_][\w$]*)
    |(?P<num>-?\d+)|(?P<other>\S))""",
    re.X,
)

_FLAGS = {
    "SUPERUSER": ("superuser", True),
    "NOSUPERUSER": ("superuser", False),
    "CREATEDB": ("createdb", True),
    "NOCREATEDB": ("createdb", False),
    "CREATEROLE": ("createrole", True),
    "NOCREATEROLE": ("createrole", False),
    "LOGIN": ("login", True),
    "NOLOGIN": ("login", False),
}
# accepted and ignored (Swell has no inheritance, replication or row-level security)
_IGNORED = {
    "INHERIT",
    "NOINHERIT",
    "REPLICATION",
    "NOREPLICATION",
    "BYPASSRLS",
    "NOBYPASSRLS",
}


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            break
        pos = m.end()
        kind = m.lastgroup
        assert kind is not None
        out.append((kind, m.group(kind)))
    return out


class _Cursor:
    def __init__(self, text: str) -> None:
        self.toks = _tokens(text)
        self.i = 0

    def peek(self) -> tuple[str, str] | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def word(self) -> str | None:
        t = self.peek()
        return t[1].upper() if t and t[0] == "word" else None

    def take(self) -> tuple[str, str]:
        t = self.peek()
        if t is None:
            raise SqlSyntaxError("syntax error at end of input")
        self.i += 1
        return t

    def expect_word(self, *words: str) -> str:
        w = self.word()
        if w not in words:
            t = self.peek()
            raise SqlSyntaxError(
                f'syntax error at or near "{t[1]}"' if t else "syntax error at end of input"
            )
        self.i += 1
        return w

    def name(self) -> str:
        kind, value = self.take()
        if kind == "qid":
            return value[1:-1].replace('""', '"')
        if kind == "word":
            return value.lower()
        if kind == "str":
            # PostgreSQL rejects string role names; so do we
            raise SqlSyntaxError(f'syntax error at or near "{value}"')
        raise SqlSyntaxError(f'syntax error at or near "{value}"')

    def string(self) -> str:
        kind, value = self.take()
        if kind != "str":
            raise SqlSyntaxError(f'syntax error at or near "{value}"')
        body = value[2:-1] if value[0] in "Ee" else value[1:-1]
        return body.replace("''", "'")

    def done(self) -> bool:
        return self.i >= len(self.toks)


def parse_user_statement(text: str) -> dict[str, Any]:
    """args for a CREATE/ALTER/DROP USER|ROLE statement (see the module docstring)."""
    c = _Cursor(text)
    verb = c.expect_word("CREATE", "ALTER", "DROP")
    role_word = c.expect_word("USER", "ROLE")
    if verb == "DROP":
        if_exists = False
        if c.word() == "IF":
            c.take()
            c.expect_word("EXISTS")
            if_exists = True
        names = [c.name()]
        while not c.done() and c.peek() == ("other", ","):
            c.take()
            names.append(c.name())
        _end(c)
        return {"action": "drop", "names": names, "if_exists": if_exists}
    name = c.name()
    if verb == "ALTER":
        w = c.word()
        if w == "RENAME":
            c.take()
            c.expect_word("TO")
            new = c.name()
            _end(c)
            return {"action": "rename", "name": name, "new_name": new}
        if w in ("SET", "RESET", "IN"):
            return {"action": "set", "name": name}
    if c.word() == "WITH":
        c.take()
    options = _options(c)
    if verb == "CREATE":
        options.setdefault("login", role_word == "USER")
    return {"action": verb.lower(), "name": name, "options": options}


def _options(c: _Cursor) -> dict[str, Any]:
    out: dict[str, Any] = {}
    while not c.done():
        w = c.word()
        if w is None:
            raise SqlSyntaxError(f'syntax error at or near "{c.take()[1]}"')
        c.take()
        if w in _FLAGS:
            key, value = _FLAGS[w]
            out[key] = value
        elif w in _IGNORED:
            continue
        elif w in ("ENCRYPTED", "UNENCRYPTED", "PASSWORD"):
            if w != "PASSWORD":
                c.expect_word("PASSWORD")
            if c.word() == "NULL":
                c.take()
                out["password"] = None
            else:
                pw = c.string()
                if pw == "":
                    # PostgreSQL: empty password is treated as NULL, with a notice
                    out["password"] = None
                    out["empty_password"] = True
                else:
                    out["password"] = pw
        elif w == "CONNECTION":
            c.expect_word("LIMIT")
            c.take()
        elif w == "VALID":
            c.expect_word("UNTIL")
            c.string()
        elif w in ("IN", "ROLE", "ADMIN", "USER", "SYSID"):
            if w == "IN":
                c.expect_word("ROLE", "GROUP")
            c.take()
            while c.peek() == ("other", ","):
                c.take()
                c.take()
        else:
            raise SqlSyntaxError(f'syntax error at or near "{w.lower()}"')
    return out


def _end(c: _Cursor) -> None:
    if not c.done():
        raise SqlSyntaxError(f'syntax error at or near "{c.take()[1]}"')
