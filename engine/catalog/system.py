"""System relations: read-only tables computed from the live database at query time.

`pg_catalog`, `information_schema` and `rw_catalog` relations (and the status tables that
connectors add) are registered here once, at import time, as
`register_system_relation(schema, name, fields, provider)`. A provider receives a
`SystemContext` (the database, its catalog and the asking session) and returns the rows as
a `pyarrow.Table` or a list of tuples in `fields` order.

Lifecycle of one read: the planner resolves a FROM name (`resolve_system`, following
PostgreSQL's search path: `pg_catalog` implicitly first, then the session's schemas, then
`rw_catalog`; `information_schema` only when named) into a `SystemScan` plan node; the
query handler calls `SystemScan.load()` without any lock (providers read the catalog,
whose relation map is copy-on-write, and the runtime's status as they are: a query never
waits for a barrier or a DDL), next to the tables' committed-epoch snapshots; the batch
executor then scans the loaded table like any other. Materialized views cannot read
system relations (their rows do not change through the dataflow): the planner refuses
with 0A000.

Relation OIDs are stable: PostgreSQL's own OID where it has one (`pg_class` is 1259), else
a fixed hash of the qualified name in PostgreSQL's system OID range.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from engine.types import Field, arrow_schema

PG_CATALOG = "pg_catalog"
INFORMATION_SCHEMA = "information_schema"
RW_CATALOG = "rw_catalog"
SYSTEM_SCHEMAS = (PG_CATALOG, INFORMATION_SCHEMA, RW_CATALOG)

# namespace OIDs (PostgreSQL's for pg_catalog and public; fixed ones for the others)
NAMESPACE_OIDS = {
    PG_CATALOG: 11,
    "public": 2200,
    INFORMATION_SCHEMA: 13181,
    RW_CATALOG: 13500,
}

# OIDs of user relations start where PostgreSQL's do
FIRST_USER_OID = 16384

# PostgreSQL's OIDs for the catalogs that clients refer to by OID ('pg_class'::regclass)
_KNOWN_OIDS = {
    (PG_CATALOG, "pg_type"): 1247,
    (PG_CATALOG, "pg_attribute"): 1249,
    (PG_CATALOG, "pg_proc"): 1255,
    (PG_CATALOG, "pg_class"): 1259,
    (PG_CATALOG, "pg_attrdef"): 2604,
    (PG_CATALOG, "pg_constraint"): 2606,
    (PG_CATALOG, "pg_inherits"): 2611,
    (PG_CATALOG, "pg_index"): 2610,
    (PG_CATALOG, "pg_namespace"): 2615,
    (PG_CATALOG, "pg_description"): 2609,
    (PG_CATALOG, "pg_database"): 1262,
    (PG_CATALOG, "pg_authid"): 1260,
    (PG_CATALOG, "pg_am"): 2601,
    (PG_CATALOG, "pg_depend"): 2608,
    (PG_CATALOG, "pg_tablespace"): 1213,
    (PG_CATALOG, "pg_shdescription"): 2396,
    (PG_CATALOG, "pg_collation"): 3456,
    (PG_CATALOG, "pg_enum"): 3501,
    (PG_CATALOG, "pg_range"): 3541,
    (PG_CATALOG, "pg_extension"): 3079,
    (PG_CATALOG, "pg_sequence"): 2224,
    (PG_CATALOG, "pg_trigger"): 2620,
    (PG_CATALOG, "pg_policy"): 3256,
    (PG_CATALOG, "pg_auth_members"): 1261,
}


@dataclass
class SystemContext:
    """What a provider may read: the database (catalog, runtime, sessions) and the session
    running the query (user, variables, pid); `session` is None outside a session."""

    db: Any
    session: Any = None
    cache: dict[str, Any] = field(default_factory=dict)  # per-query memo for providers

    @property
    def catalog(self) -> Any:
        return self.db.catalog


Provider = Callable[[SystemContext], "pa.Table | Sequence[Sequence[Any]]"]


@dataclass(eq=False)
class SystemRelation:
    """One registered system relation (see module docstring)."""

    schema: str
    name: str
    fields: list[Field]
    provider: Provider
    oid: int
    kind: str = "v"  # pg_class.relkind: PostgreSQL's catalogs are tables (r), views (v)
    description: str = ""

    def load(self, ctx: SystemContext) -> pa.Table:
        out = self.provider(ctx)
        schema = arrow_schema(self.fields)
        if isinstance(out, pa.Table):
            if out.schema != schema:
                out = pa.Table.from_arrays(list(out.columns), schema=schema)
            return out
        rows = list(out)
        cols = list(zip(*rows, strict=True)) if rows else [() for _ in self.fields]
        if rows and len(rows[0]) != len(self.fields):
            raise ValueError(
                f"{self.schema}.{self.name}: provider rows have {len(rows[0])} values, "
                f"expected {len(self.fields)}"
            )
        return pa.Table.from_arrays(
            [pa.array(list(c), type=f.type) for c, f in zip(cols, schema, strict=True)],
            schema=schema,
        )


@dataclass
class _Registry:
    by_name: dict[tuple[str, str], SystemRelation] = field(default_factory=dict)
    by_oid: dict[int, SystemRelation] = field(default_factory=dict)


REGISTRY = _Registry()


def _stable_oid(schema: str, name: str) -> int:
    known = _KNOWN_OIDS.get((schema, name))
    if known is not None:
        return known
    # 12000..15999: PostgreSQL's range for objects created at initdb, below user OIDs
    h = zlib.crc32(f"{schema}.{name}".encode()) % 4000 + 12000
    while h in REGISTRY.by_oid or h in NAMESPACE_OIDS.values():
        h = 12000 + (h - 12000 + 1) % 4000
    return h


def register_system_relation(
    schema: str,
    name: str,
    fields: list[Field],
    provider: Provider,
    *,
    kind: str = "v",
    description: str = "",
) -> SystemRelation:
    """Register (or replace) `schema.name`; returns the relation. Call at import time."""
    key = (schema, name)
    old = REGISTRY.by_name.get(key)
    oid = old.oid if old is not None else _stable_oid(schema, name)
    rel = SystemRelation(schema, name, list(fields), provider, oid, kind, description)
    REGISTRY.by_name[key] = rel
    REGISTRY.by_oid[oid] = rel
    return rel


def system_relation(schema: str, name: str) -> SystemRelation | None:
    _ensure_loaded()
    return REGISTRY.by_name.get((schema, name))


def system_relations() -> list[SystemRelation]:
    _ensure_loaded()
    return sorted(REGISTRY.by_name.values(), key=lambda r: (r.schema, r.name))


def resolve_system(name: str, schema: str | None, before_user: bool) -> SystemRelation | None:
    """The system relation an unqualified or qualified FROM name denotes, if any.

    Unqualified names are looked up in `pg_catalog` before the user's schemas
    (`before_user=True`) and in `rw_catalog` after them (`before_user=False`).
    """
    if schema is not None:
        return system_relation(schema, name) if schema in SYSTEM_SCHEMAS else None
    if before_user:
        return system_relation(PG_CATALOG, name)
    return system_relation(RW_CATALOG, name)


_loaded = False
_loading = threading.RLock()


def _ensure_loaded() -> None:
    """Import the modules that register the built-in system relations (once). Sessions
    read catalogs concurrently: a second thread waits until the first has registered
    everything (the flag is set last) instead of seeing a partial registry."""
    global _loaded
    if _loaded:
        return
    with _loading:  # reentrant: the imported modules look relations up while loading
        if _loaded:
            return
        import importlib

        for mod in (
            "engine.catalog.pg_catalog",
            "engine.catalog.pg_catalog_objects",
            "engine.catalog.information_schema",
            "engine.catalog.rw_catalog",
            "engine.catalog.iceberg_status",
        ):
            try:
                importlib.import_module(mod)
            except ModuleNotFoundError as e:
                if e.name != mod:
                    raise
        _loaded = True


def relation_oid(rel: Any) -> int:
    """pg_class.oid of a user relation (stable: derived from its catalog id)."""
    return FIRST_USER_OID + int(rel.id)
