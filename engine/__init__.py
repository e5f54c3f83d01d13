"""Swell's engine: SQL in, incrementally maintained relations out.

Owns: the catalog, SQL parsing and binding (`engine.sql`, `engine.expr`), planning
(`engine.plan`), the streaming dataflow and its operators (`engine.stream`), state and
checkpoints (`engine.state`), and the session API that frontends call (`engine.api`).

Upstream: nothing (it imports no frontend). Downstream: `pgwire` (the PostgreSQL wire
protocol) calls `engine.api`; `connectors` register sources and sinks with the engine.
"""

from engine import recursion as _recursion

_recursion.configure()  # deep statements: before any engine thread starts (engine/recursion.py)
