"""Planning: bound, typed logical plans for queries.

Owns the logical plan nodes (`logical.py`) and the planner (`planner.py`), which binds a
sqlglot SELECT against the catalog (scalar expressions through `engine.expr`). The same plan
tree is run once over snapshots by `engine.batch` (ad-hoc SELECT) and lowered to a stream
plan (`stream_plan.py` nodes with their state tables, `stream_lower.py`, stored as JSON by
`stream_codec.py`) that `engine.stream.build` turns into dataflow operators (materialized
views, sinks), with `streaming=True` keeping stream keys alive and refusing what the
dataflow cannot maintain.

Upstream: `engine.catalog`, `engine.expr`, `engine.sql`. Downstream: `engine.batch`,
`engine.stream`, `engine.handlers`.
"""
