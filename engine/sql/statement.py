"""`Statement`: one parsed statement, what the session dispatches on.

Its own module so the statement parsers (`engine.sql.*_stmts`, `create_function`) build
statements without importing the parser that calls them (`engine.sql.parser`, which
re-exports it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlglot import exp


@dataclass
class Statement:
    kind: str  # 'select', 'insert', 'update', 'delete', 'create_table', 'create_mv', 'create_view',
    # 'drop', 'flush', 'show', 'set', 'reset', 'begin', 'commit', 'rollback', 'describe',
    # 'explain', 'show_create', 'discard', 'empty', 'noop', 'user' (engine/sql/user_stmts.py),
    # 'grant', 'alter_owner' (engine/sql/grant_stmts.py),
    # 'create_function', 'create_aggregate', 'drop_function', 'show_functions'
    # (engine/sql/create_function.py), 'alter_relation', 'comment' (engine/sql/alter_stmts.py),
    # 'savepoint', 'release', 'rollback_to', 'declare', 'fetch', 'close', 'copy'
    # (engine/sql/session_stmts.py)
    sql: str
    ast: exp.Expression | None = None
    args: dict[str, Any] = field(default_factory=dict)
    offset: int = 0  # where this statement starts in the query string (for error positions)
