"""Databases: `dev` and those made by CREATE DATABASE, and which one a statement is in.

A Swell process serves several databases, as RisingWave does: each relation belongs to
one (`Relation.database`), and a session connected to database `d` sees, creates and
drops only `d`'s relations. Everything that runs below the catalog (state tables, WAL,
checkpoints, stream plans) addresses relations by id, which is unique across databases,
so no state key names a database and jobs of all databases run in one runtime.

Lookup by name goes through the statement's database: every entry point of a session
(`engine.session.SwellSession`) and the webhook ingest run inside `in_database(name)`,
and `Catalog.find` / `Catalog.visible` / `Catalog.add` read `current_database()`. Code
that runs outside any statement (the barrier loop, recovery) never looks relations up by
name; when it must plan SQL again it enters the job's own database first.

The databases other than `dev` are `Catalog.databases` (name -> `DatabaseEntry`),
persisted with the catalog. `dev` always exists and cannot be dropped (scripts, the
webhook URLs and the default connection name it).

Lifecycle: CREATE DATABASE (`engine.handlers.database_ddl`) adds an entry under the
runtime lock and forces a checkpoint; DROP DATABASE refuses while the database holds
relations or sessions (RisingWave asks for its schemas to be dropped first) and removes
the entry.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

DEFAULT_DATABASE = "dev"
# pg_database's oid of `dev` (below user OIDs; PostgreSQL's template DBs are 1, 4, 5)
DEFAULT_DATABASE_OID = 16384 - 1


@dataclass
class DatabaseEntry:
    """A database made by CREATE DATABASE."""

    oid: int
    owner: int

    def to_json(self) -> dict[str, Any]:
        return {"oid": self.oid, "owner": self.owner}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> DatabaseEntry:
        return cls(int(d["oid"]), int(d["owner"]))


_current: ContextVar[str] = ContextVar("swell_database", default=DEFAULT_DATABASE)


def current_database() -> str:
    """The database the running statement is in (`dev` outside any statement)."""
    return _current.get()


@contextlib.contextmanager
def in_database(name: str) -> Iterator[None]:
    """Run the block with `name` as the current database."""
    token = _current.set(name)
    try:
        yield
    finally:
        _current.reset(token)


def database_exists(catalog: Any, name: str) -> bool:
    return name == DEFAULT_DATABASE or name in catalog.databases


def database_oid(catalog: Any, name: str) -> int:
    entry = catalog.databases.get(name)
    return entry.oid if entry is not None else DEFAULT_DATABASE_OID


def database_names(catalog: Any) -> list[str]:
    return sorted({DEFAULT_DATABASE, *catalog.databases})


__all__ = [
    "DEFAULT_DATABASE",
    "DEFAULT_DATABASE_OID",
    "DatabaseEntry",
    "current_database",
    "database_exists",
    "database_names",
    "database_oid",
    "in_database",
]
