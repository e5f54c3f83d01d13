"""How deeply nested a statement may be, and the error past that depth.

The parser (sqlglot), the planner, the expression binder and the evaluator all walk SQL
trees recursively, about 5-20 Python frames per level of nesting. Python's default limit of
1,000 frames would stop a statement at about 50 nested parentheses or a few hundred `+`
terms, while PostgreSQL 15 accepts thousands and generated SQL (ORMs, BI tools, long
`a OR b OR ...` filters, 200-branch UNION ALLs) needs them.

`configure()` runs when the engine package is imported, before the engine starts any
thread: it raises the interpreter's recursion limit to `RECURSION_LIMIT` and gives every
thread started afterwards a `STACK_BYTES` stack (virtual memory; only the pages a deep
statement touches are committed). Python 3.11 runs Python-to-Python calls without
growing the C stack, so the recursion limit, not the thread stack, is what a deep
statement reaches first, and it reaches it as a `RecursionError`.

`too_complex()` is what a session answers instead of that RecursionError: PostgreSQL's
54001 "stack depth limit exceeded", an ordinary error the connection survives.
"""

from __future__ import annotations

import sys
import threading

from engine.errors import StatementTooComplex

RECURSION_LIMIT = 150_000
STACK_BYTES = 256 * 1024 * 1024

_configured = False


def configure() -> None:
    """Raise the recursion limit and the default thread stack size (idempotent)."""
    global _configured
    if _configured:
        return
    _configured = True
    if sys.getrecursionlimit() < RECURSION_LIMIT:
        sys.setrecursionlimit(RECURSION_LIMIT)
    try:
        if threading.stack_size() < STACK_BYTES:
            threading.stack_size(STACK_BYTES)
    except (ValueError, RuntimeError):  # a platform without settable thread stacks
        pass


def too_complex() -> StatementTooComplex:
    """The 54001 error for a statement nested beyond what the engine can follow."""
    return StatementTooComplex(
        "stack depth limit exceeded",
        hint="Simplify the statement: it nests expressions, CASEs or subqueries too deeply.",
    )
