"""Normalise PostgreSQL spellings sqlglot misreads, before parsing.

Catalog queries from clients use forms sqlglot's parser does not read as PostgreSQL does:

- `pg_catalog.string_agg(...)`, `pg_catalog.array_agg(...)`: a schema-qualified built-in
  function is parsed as an unknown function, so aggregates and typed functions lose their
  meaning. The qualifier `pg_catalog.` in front of a function call is blanked out (same
  length, so error positions stay right).
- `$1::oid[]`, `x::regtype[]`: an array of a type sqlglot does not know fails to parse;
  written `pg_catalog.oid[]` it parses.
- `VALUES ($1,$2)`: parameters written without a space between them (psycopg's `%s,%s`,
  JDBC's `?,?`) make sqlglot's tokenizer read `$1,$` as the start of a dollar-quoted
  string and fail. `space_parameters` puts a space after each such parameter; the
  parser uses it only when the text does not tokenize as written.

Works on the token stream, so string literals and quoted identifiers are never touched.
"""

from __future__ import annotations

import re

import sqlglot
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

_CATALOG_TYPES = {
    "oid",
    "regclass",
    "regtype",
    "regproc",
    "regprocedure",
    "regnamespace",
    "regrole",
    "name",
    "xid",
    "aclitem",
    "int2vector",
    "oidvector",
}

# `CREATE TABLE pg_catalog.t (a int)` names a relation, it is no function call
_RELATION_WORDS = {"TABLE", "VIEW", "SOURCE", "SINK", "INTO", "EXISTS"}


def normalize_pg_syntax(sql: str, dialect: str) -> str:
    low = sql.lower()
    if "pg_catalog" not in low and "[]" not in sql:
        return sql
    try:
        toks = sqlglot.tokenize(sql, read=dialect)
    except TokenError:
        return sql
    edits: list[tuple[int, int, str]] = []  # (start, end, replacement)
    for i, t in enumerate(toks):
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        nxt2 = toks[i + 2] if i + 2 < len(toks) else None
        nxt3 = toks[i + 3] if i + 3 < len(toks) else None
        if (
            t.text.lower() == "pg_catalog"
            and t.token_type is TokenType.VAR
            and nxt is not None
            and nxt.token_type is TokenType.DOT
            and nxt2 is not None
            and nxt3 is not None
            and nxt3.token_type is TokenType.L_PAREN
            and (i == 0 or toks[i - 1].token_type is not TokenType.DCOLON)
            and (i == 0 or toks[i - 1].text.upper() not in _RELATION_WORDS)
        ):
            edits.append((t.start, nxt.end + 1, " " * (nxt.end + 1 - t.start)))
        if (
            t.token_type is TokenType.DCOLON
            and nxt is not None
            and nxt.text.lower() in _CATALOG_TYPES
            and nxt2 is not None
            and nxt2.token_type is TokenType.L_BRACKET
            and nxt3 is not None
            and nxt3.token_type is TokenType.R_BRACKET
        ):
            edits.append((nxt.start, nxt.start, "pg_catalog."))
    if not edits:
        return sql
    out = sql
    for start, end, rep in sorted(edits, reverse=True):
        out = out[:start] + rep + out[end:]
    return out


_DOLLAR_TAG = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")
_PARAM = re.compile(r"\$\d+")


def space_parameters(sql: str) -> str:
    """`sql` with a space after every `$n` parameter that a non-space character follows,
    outside string literals, quoted identifiers, comments and dollar-quoted strings (so
    `($1,$2)` reads as two parameters). Returns `sql` itself when nothing changes."""
    out: list[str] = []
    i, n, last = 0, len(sql), 0
    while i < n:
        c = sql[i]
        if c == "'" or c == '"':
            j = i + 1
            while j < n:
                if sql[j] == c:
                    if j + 1 < n and sql[j + 1] == c:  # '' or "" inside
                        j += 2
                        continue
                    break
                if c == "'" and sql[j] == "\\" and i > 0 and sql[i - 1] in "eE":
                    j += 1  # E'..\'..'
                j += 1
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j + 1
        elif sql.startswith("/*", i):
            j = sql.find("*/", i + 2)
            i = n if j < 0 else j + 2
        elif c == "$":
            m = _PARAM.match(sql, i)
            if m is not None:
                i = m.end()
                if i < n and not sql[i].isspace():
                    out.append(sql[last:i])
                    out.append(" ")
                    last = i
                continue
            t = _DOLLAR_TAG.match(sql, i)
            if t is not None and (i == 0 or not (sql[i - 1].isalnum() or sql[i - 1] == "_")):
                j = sql.find(t.group(0), t.end())
                i = n if j < 0 else j + len(t.group(0))
            else:
                i += 1
        else:
            i += 1
    if not out:
        return sql
    out.append(sql[last:])
    return "".join(out)
