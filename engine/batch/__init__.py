"""Ad-hoc queries: run a logical plan once over committed snapshots.

Owns `execute_plan`. Scans read Arrow snapshots taken under the runtime's epoch lock, so a
query sees one consistent checkpoint across every relation it reads. Filters, projections
and aggregations reuse the streaming expression compiler and operators (aggregation is a
single `HashAggOp` step over the snapshot), so an ad-hoc query and a materialized view of
the same SQL compute the same thing; joins, sorts and limits use Arrow kernels.
"""

from engine.batch.executor import execute_plan, stream_plan

__all__ = ["execute_plan", "stream_plan"]
