"""The catalog: every named relation (table, view, source, sink) and its metadata.

Owns `Catalog` and `Relation`. The catalog is persisted as one JSON blob inside each
checkpoint (so it is always consistent with the state it describes) and rebuilt on
recovery; materialized views are re-planned from their SQL definition, and their
operators find their state again through the persisted state-table id map.

Upstream: `engine.types`. Downstream: the planner (name resolution), the runtime (which
relations exist and what they depend on), sessions (DDL).
"""

from engine.catalog.catalog import Catalog, Relation, RelationKind

__all__ = ["Catalog", "Relation", "RelationKind"]
