"""`FOR SYSTEM_VERSION AS OF n` / `FOR SYSTEM_TIME AS OF '...'` after a table name in FROM.

sqlglot's risingwave dialect cannot parse these, so `engine.sql.parser` takes them out of
the text first (blanked to the same length so error positions still match) and records
them per table name in `Statement.args["time_travel"]`: name -> ("VERSION" | "TIME", value).
`FOR SYSTEM_TIME AS OF PROCTIME()` (temporal joins) is left alone. The reader is
`engine.handlers.iceberg_table.iceberg_snapshots`.
"""

from __future__ import annotations

import re

_TT = re.compile(
    r"(?P<name>[A-Za-z_][\w$]*|\"[^\"]+\")\s+FOR\s+SYSTEM_(?P<kind>VERSION|TIME)\s+AS\s+OF\s+"
    r"(?P<val>-?\d+|(?:TIMESTAMPTZ\s+|TIMESTAMP\s+)?'[^']*')",
    re.I,
)


def strip_time_travel(sql: str) -> tuple[str, dict[str, tuple[str, str]]]:
    """Blank out `FOR SYSTEM_VERSION|SYSTEM_TIME AS OF <literal>` (same length)."""
    found: dict[str, tuple[str, str]] = {}

    def repl(m: re.Match[str]) -> str:
        name = m["name"]
        name = name[1:-1] if name.startswith('"') else name.lower()
        val = m["val"]
        if "'" in val:
            val = val[val.index("'") + 1 : -1]
        found[name] = (m["kind"].upper(), val)
        tail = m.group(0)[len(m["name"]) :]
        return m["name"] + re.sub(r"[^\n]", " ", tail)

    out = _TT.sub(repl, sql)
    return out, found
