"""Normalise PostgreSQL spellings sqlglot misreads, before parsing.

Catalog queries from clients use forms sqlglot's parser does not read as PostgreSQL does:

- `pg_catalog.string_agg(...)`, `pg_catalog.array_agg(...)`: a schema-qualified built-in
  function is parsed as an unknown function, so aggregates and typed functions lose their
  meaning. The qualifier `pg_catalog.` in front of a function call is blanked out (same
  length, so error positions stay right).
- `$1::oid[]`, `x::regtype[]`: an array of a type sqlglot does not know fails to parse;
  written `pg_catalog.oid[]` it parses.

Works on the token stream, so string literals and quoted identifiers are never touched.
"""

from __future__ import annotations

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
