"""Statement text safe to log: string literals of sensitive statements are masked.

Why: the session logs the start of a statement that failed internally, and statements
such as `CREATE SECRET s AS 'value'`, `CREATE USER u PASSWORD 'pw'` or a source's
`properties.sasl.password = '...'` carry credentials in string literals. Any statement
mentioning a credential-like word has all its string literals (plain, E'', dollar-quoted)
replaced by `'***'`; other statements are logged as written.
"""

from __future__ import annotations

import re

_SENSITIVE = re.compile(
    r"secret|password|passwd|pwd|token|credential|private|access[._ ]?key|sasl|auth"
    r"|\b(?:user|role)\b",
    re.I,
)
_LITERAL = re.compile(
    r"""[Ee]'(?:[^'\\]|\\.|'')*'|'(?:[^']|'')*'|(\$[A-Za-z_0-9]*\$).*?\1""",
    re.S,
)


def redact(sql: str, limit: int = 200) -> str:
    """`sql` (first `limit` characters) with literals masked if it looks sensitive."""
    if _SENSITIVE.search(sql):
        sql = _LITERAL.sub("'***'", sql)
    return sql[:limit]
