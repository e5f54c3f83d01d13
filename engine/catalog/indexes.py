"""Which catalog entries are indexes, and the indexes of a relation.

An index's catalog entry is a materialized-view entry (it is a streaming job like one)
marked `extra["index"]`: `{"on": indexed relation id, "columns": key column names,
"desc": per key column, "include": the other stored columns, "distributed_by": names}`
(written by engine.handlers.index). The planner, the catalogs and DROP read it here.
"""

from __future__ import annotations

from typing import Any

from engine.catalog.catalog import Relation

INDEX_KEY = "index"


def index_info(rel: Relation) -> dict[str, Any] | None:
    """The index description of an index's catalog entry, None for other relations."""
    info = rel.extra.get(INDEX_KEY)
    return info if isinstance(info, dict) else None


def indexes_on(catalog: Any, rel_id: int) -> list[Relation]:
    """The indexes of one table or materialized view, in creation order."""
    return [
        r for r in catalog.ordered() if (i := index_info(r)) is not None and i.get("on") == rel_id
    ]


def is_index_of(rel: Relation, base: Relation) -> bool:
    i = index_info(rel)
    return i is not None and i.get("on") == base.id
