"""Names and definitions as PostgreSQL prints them: `quote_ident`'s rule and the text of
`pg_get_indexdef` / `pg_indexes.indexdef`.

In the catalog layer because the system catalogs (`engine.catalog.pg_catalog`) print
them; the SQL functions of the same names (`engine.expr.fn_catalog`) call these.
"""

from __future__ import annotations

from typing import Any

_KEYWORDS = {
    "all", "and", "any", "array", "as", "asc", "between", "both", "case", "cast", "check",
    "collate", "column", "constraint", "create", "cross", "current_date", "current_user",
    "default", "desc", "distinct", "do", "else", "end", "except", "false", "for", "foreign",
    "from", "full", "grant", "group", "having", "in", "inner", "intersect", "into", "is",
    "join", "leading", "left", "like", "limit", "natural", "not", "null", "offset", "on",
    "only", "or", "order", "outer", "primary", "references", "right", "select", "session_user",
    "some", "table", "then", "to", "trailing", "true", "union", "unique", "user", "using",
    "when", "where", "window", "with",
}  # fmt: skip


def quote_ident(name: str) -> str:
    if (
        name
        and (name[0].isalpha() and name[0].islower() or name[0] == "_")
        and all(c.islower() or c.isdigit() or c == "_" for c in name)
    ) and name not in _KEYWORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def index_definition(r: Any) -> str:
    t = r.index_of
    desc = ((getattr(r.rel, "extra", None) or {}).get("index") or {}).get("desc") or []
    cols = ", ".join(
        quote_ident(a.name) + (" DESC" if i < len(desc) and desc[i] else "")
        for i, a in enumerate(r.attrs)
    )
    unique = "UNIQUE " if getattr(r, "index_keys", None) is None else ""  # CREATE INDEX: not
    return (
        f"CREATE {unique}INDEX {quote_ident(r.name)} ON {quote_ident(t.schema)}."
        f"{quote_ident(t.name)} USING btree ({cols})"
    )
