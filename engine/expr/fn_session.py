"""Session-level functions that pooling drivers call and Swell answers as no-ops.

asyncpg's pool release runs `SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *;
RESET ALL;`. Swell has no advisory locks (no session ever holds one), so
pg_advisory_unlock_all() has nothing to release: it returns void, rendered as an empty
string like PostgreSQL's void output. Registered in the function table at import.
"""

from __future__ import annotations

import pyarrow as pa

from engine.expr.core import Expr
from engine.expr.registry import register, simple
from engine.types import VARCHAR


@register("pg_advisory_unlock_all")
def _advisory_unlock_all(args: list[Expr]) -> Expr:
    return simple(
        "pg_advisory_unlock_all", args, [], VARCHAR, lambda x, n, c: pa.scalar("", pa.string())
    )
