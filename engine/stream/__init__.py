"""The streaming dataflow: operators, graphs, and the runtime that steps them per epoch.

Owns the operator protocol (`operator.py`), the operators (`operators/`), the builder of
operators from stream plans (`build.py`), each job's stored stream plan (`job_plan.py`),
table and view flows plus WAL record encoding (`graph.py`), and the runtime (`runtime.py`):
the epoch lock, the barrier loop, DDL/DML entry points, recovery.

Upstream: `engine.chunk`, `engine.state`, `engine.plan`, `engine.expr`. Downstream:
`engine.handlers` and `engine.database`; connectors feed tables through `Runtime.write`.
"""
