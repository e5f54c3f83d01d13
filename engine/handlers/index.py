"""CREATE INDEX, DROP INDEX, SHOW INDEXES (RisingWave's indexes).

An index is a streaming job like a materialized view: its stored stream plan reads the
indexed table or materialized view and materializes the index columns, then the
INCLUDE columns (all columns when INCLUDE is omitted, as RisingWave does), then the
upstream's stream key (hidden), so it is built by a background backfill, maintained at
every barrier, checkpointed and recovered exactly like a view. Its catalog entry is a
materialized-view entry marked `extra["index"]` (what it indexes, key columns and their
direction, included columns, distribution key); the catalogs show it as an index
(pg_class relkind 'i', pg_index, `\\di`, SHOW INDEXES), never as a view, and a query
cannot name it in FROM (PostgreSQL's `"idx" is an index`).

Reads: the batch planner's `engine.plan.index_scan.use_indexes` replaces a scan whose
filter constrains an index's leading columns by an `IndexScan`, answered from the index's
committed rows by `engine.batch.index_lookup` (sorted per immutable segment, binary
search per lookup; a non-covering index's found keys then read the relation's rows).

Privileges follow the indexed object: only its owner (or a superuser) may create or
drop an index on it, the index belongs to the object's owner, and reading through it
needs SELECT on the object (the planner checks the object, not the index).
DROP TABLE / DROP MATERIALIZED VIEW drop the object's indexes with it (PostgreSQL and
RisingWave); other dependents still need CASCADE.
"""

from __future__ import annotations

from typing import Any

from engine.api import Notice, QueryResult
from engine.catalog import Relation, RelationKind
from engine.catalog.indexes import index_info, indexes_on
from engine.catalog.privileges import require_owner
from engine.errors import (
    DuplicateColumn,
    InvalidParameterValue,
    UndefinedColumn,
    UndefinedTable,
    WrongObjectType,
)
from engine.sql.parser import Statement, parse_one
from engine.types import VARCHAR, Field


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def index_job(session: Any, st: Statement) -> QueryResult | tuple[Statement, dict[str, Any], int]:
    """Check a CREATE INDEX; the materialized view statement that builds it, its
    `extra["index"]` and its owner (`engine.handlers.ddl.create_index` runs it), or the
    result of an IF NOT EXISTS that finds the name taken."""
    a = st.args
    cat = session.db.catalog
    if cat.find(a["name"], a["name_schema"] or a["on_schema"]) is not None and a["if_not_exists"]:
        return QueryResult(
            "CREATE_INDEX", notices=[Notice(f'relation "{a["name"]}" already exists, skipping')]
        )
    base = cat.find(a["on"], a["on_schema"])
    if base is None or base.extra.get("creating"):
        shown = f"{a['on_schema']}.{a['on']}" if a["on_schema"] else a["on"]
        raise UndefinedTable(f'relation "{shown}" does not exist')
    if index_info(base) is not None or base.kind not in (
        RelationKind.TABLE,
        RelationKind.MATERIALIZED_VIEW,
    ):
        raise WrongObjectType(
            f'"{base.name}" is not a table or materialized view',
            hint="Indexes are created on tables and materialized views.",
        )
    require_owner(base)  # 42501: the index belongs to the object's owner
    visible = [f.name for f in base.fields if not f.hidden]
    keys = [c for c, _ in a["columns"]]
    for c in keys + (a["include"] or []) + (a["distributed_by"] or []):
        if c not in visible:
            raise UndefinedColumn(f'column "{c}" does not exist')
    if len(set(keys)) != len(keys):
        raise DuplicateColumn("column appears more than once in the index key")
    dist = a["distributed_by"] or []
    if dist and keys[: len(dist)] != dist:
        raise InvalidParameterValue(
            "the distribution key must be a prefix of the index columns",
            detail=f"Index columns: {', '.join(keys)}; DISTRIBUTED BY: {', '.join(dist)}.",
        )
    include = visible if a["include"] is None else a["include"]
    cols = keys + [c for c in dict.fromkeys(include) if c not in keys]
    stored = cols + [  # the upstream's visible key columns, so lookups can return them
        f.name
        for i, f in enumerate(base.fields)
        if i in base.pk and not f.hidden and f.name not in cols
    ]
    schema = a["name_schema"] or base.schema_name
    text = (
        f"CREATE MATERIALIZED VIEW {_quote(schema)}.{_quote(a['name'])} AS SELECT "
        + ", ".join(_quote(c) for c in stored)
        + f" FROM {_quote(base.schema_name)}.{_quote(base.name)}"
    )
    mv = parse_one(text)
    mv.sql = st.sql  # the user's statement: SHOW JOBS, the catalog's definition
    info = {
        "on": base.id,
        "columns": keys,
        "desc": [d for _, d in a["columns"]],
        "include": [c for c in cols if c not in keys],
        "distributed_by": dist or keys,
    }
    return mv, info, base.owner


def drop_index(session: Any, st: Statement) -> QueryResult:
    rt = session.db.runtime
    notices: list[Notice] = []
    with rt.lock:
        cat = session.db.catalog
        to_drop: list[Relation] = []
        for name, schema in st.args["names"]:
            rel = cat.find(name, schema)
            if rel is None:
                if st.args["if_exists"]:
                    notices.append(Notice(f'index "{name}" does not exist, skipping'))
                    continue
                raise UndefinedTable(f'index "{name}" does not exist')
            if index_info(rel) is None:
                raise WrongObjectType(
                    f'"{name}" is not an index',
                    hint=f"Use DROP {rel.kind.value.upper()} to remove a {rel.kind.value}.",
                )
            base = cat.relations.get(index_info(rel)["on"])  # type: ignore[index]
            require_owner(base if base is not None else rel)
            if rel not in to_drop:
                to_drop.append(rel)
        if to_drop:
            rt.drop(to_drop)
    return QueryResult("DROP_INDEX", notices=notices)


def show_indexes(session: Any, st: Statement) -> QueryResult:
    """RisingWave's SHOW INDEXES FROM t: Name, On, Key, Include, Distributed By."""
    cat = session.db.catalog
    base = cat.get(st.args["on"], st.args["on_schema"])
    rows = []
    for r in indexes_on(cat, base.id):
        i = index_info(r)
        assert i is not None
        key = ", ".join(
            c + (" DESC" if d else "") for c, d in zip(i["columns"], i["desc"], strict=True)
        )
        rows.append(
            (
                r.name,
                base.name,
                key,
                ", ".join(i["include"]),
                ", ".join(i["distributed_by"]),
            )
        )
    fields = [Field(n, VARCHAR) for n in ("Name", "On", "Key", "Include", "Distributed By")]
    return QueryResult(f"SHOW {len(rows)}", fields, rows)
