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

Every database is an entry of `Catalog.databases` (name -> `DatabaseEntry`: oid, owner,
ACL), persisted with the catalog; its schemas, secrets, connections and functions are
`Catalog.objects[name]` (`engine.catalog.catalog.DatabaseObjects`). `dev` always exists
and cannot be dropped or renamed (scripts, the webhook URLs and the default connection
name it). Users are the cluster's, shared by every database, as in PostgreSQL.

Lifecycle: CREATE DATABASE (`engine.handlers.database_ddl`) adds an entry under the
runtime lock and forces a checkpoint; a session opens only in a database whose CONNECT
privilege its user holds (`engine.catalog.privileges.require_connect`); DROP DATABASE
refuses while sessions are in it, then drops its relations, their jobs and state, and
its objects; ALTER DATABASE ... RENAME TO moves all of them to the new name.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from engine.catalog.users import ROOT_OID

DEFAULT_DATABASE = "dev"
# pg_database's oid of `dev` (below user OIDs; PostgreSQL's template DBs are 1, 4, 5)
DEFAULT_DATABASE_OID = 16384 - 1


@dataclass
class DatabaseEntry:
    """One database: `dev` or one made by CREATE DATABASE. `acl` is PostgreSQL's datacl
    (`[[grantee oid, grantor oid, "CTc"], ...]`, engine/catalog/privileges.py); empty
    means the default: the owner has CREATE, TEMPORARY and CONNECT, PUBLIC TEMPORARY and
    CONNECT."""

    oid: int
    owner: int
    acl: list[list[Any]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"oid": self.oid, "owner": self.owner, **({"acl": self.acl} if self.acl else {})}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> DatabaseEntry:
        return cls(int(d["oid"]), int(d["owner"]), [list(e) for e in d.get("acl") or []])


def default_entry() -> DatabaseEntry:
    """`dev`'s entry in a new catalog (owned by root, the first superuser)."""
    return DatabaseEntry(DEFAULT_DATABASE_OID, ROOT_OID)


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


def database_entry(catalog: Any, name: str) -> DatabaseEntry | None:
    """`name`'s entry (None when there is no such database)."""
    entry: DatabaseEntry | None = catalog.databases.get(name)
    return entry


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
    "database_entry",
    "database_exists",
    "default_entry",
    "database_names",
    "database_oid",
    "in_database",
]
