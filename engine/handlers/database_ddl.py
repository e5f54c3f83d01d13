"""CREATE DATABASE / DROP DATABASE (RisingWave's several databases in one process).

What a database is and how statements find their database: `engine.catalog.databases`.
A new database starts empty with the schema `public`; connect to it by name (`psql -d
name`, `dbname=name`), and POST to its webhook tables at `/webhook/{name}/{schema}/{table}`.

Rules (PostgreSQL's where RisingWave has none of its own):
* CREATE DATABASE needs a superuser or a role with CREATEDB (42501); `OWNER role` makes
  another role the owner (superusers only); a taken name is 42P04; other options
  (TEMPLATE, ENCODING, ...) are refused (0A000).
* DROP DATABASE needs the owner or a superuser (42501); refused for the database the
  session is connected to and while other sessions are connected to it (55006), while it
  holds relations (2BP01: as RisingWave, drop its contents first), and for `dev` (0A000).

Lifecycle: the parser hands `CREATE|DROP DATABASE ...` to
`engine.sql.database_stmts.parse_database_statement`; the
session dispatches to `create_database` / `drop_database`, which change the catalog under
the runtime lock and force a checkpoint (the change is durable when they return).
"""

from __future__ import annotations

from typing import Any

from engine.api import Notice, QueryResult
from engine.catalog.databases import DEFAULT_DATABASE, DatabaseEntry, database_exists
from engine.catalog.privileges import is_superuser, user_oid
from engine.catalog.system import FIRST_USER_OID
from engine.errors import (
    DependentObjectsStillExist,
    DuplicateDatabase,
    InsufficientPrivilege,
    ObjectInUse,
    UndefinedDatabase,
    UndefinedObject,
    not_supported,
)
from engine.sql.parser import Statement


def create_database(session: Any, st: Statement) -> QueryResult:
    name, owner_name = st.args["name"], st.args["owner"]
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        if database_exists(cat, name):
            if st.args["if_not_exists"]:
                return QueryResult(
                    "CREATE_DATABASE",
                    notices=[Notice(f'database "{name}" already exists, skipping')],
                )
            raise DuplicateDatabase(f'database "{name}" already exists')
        me = cat.users.find(session.user)
        if me is not None and not (me.superuser or me.createdb):
            raise InsufficientPrivilege("permission denied to create database")
        owner = user_oid(cat, session.user)
        if owner_name is not None:
            target = cat.users.find(owner_name)
            if target is None:
                raise UndefinedObject(f'role "{owner_name}" does not exist')
            if target.oid != owner and not is_superuser(cat, session.user):
                raise InsufficientPrivilege(f'must be able to SET ROLE "{owner_name}"')
            owner = target.oid
        oid = FIRST_USER_OID + cat.allocate_relation_id()  # never a relation's oid
        cat.databases = {**cat.databases, name: DatabaseEntry(oid, owner)}
        cat.version += 1
        rt.mark_catalog_dirty()
        rt.barrier(force=True)  # persists the catalog
    return QueryResult("CREATE_DATABASE")


def drop_database(session: Any, st: Statement) -> QueryResult:
    name = st.args["name"]
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        if not database_exists(cat, name):
            if st.args["if_exists"]:
                return QueryResult(
                    "DROP_DATABASE", notices=[Notice(f'database "{name}" does not exist, skipping')]
                )
            raise UndefinedDatabase(f'database "{name}" does not exist')
        if name == session.database:
            raise ObjectInUse("cannot drop the currently open database")
        if name == DEFAULT_DATABASE:
            raise not_supported(
                f'dropping database "{name}"',
                hint="It is the default database; drop its relations instead.",
            )
        entry = cat.databases[name]
        if entry.owner != user_oid(cat, session.user) and not is_superuser(cat, session.user):
            raise InsufficientPrivilege(f"must be owner of database {name}")
        others = [s for s in list(session.db.sessions.values()) if s.database == name]
        if others:
            raise ObjectInUse(
                f'database "{name}" is being accessed by other users',
                detail=f"There {_are(len(others))} using the database.",
            )
        members = [r for r in cat.ordered() if r.database == name]
        if members:
            shown = [f"{r.kind.value} {r.schema_name}.{r.name}" for r in members[:10]]
            raise DependentObjectsStillExist(
                f'database "{name}" is not empty',
                detail="It holds " + ", ".join(shown) + (", ..." if len(members) > 10 else ""),
                hint=f"Connect to database {name} and drop its relations first.",
            )
        cat.databases = {k: v for k, v in cat.databases.items() if k != name}
        cat.version += 1
        rt.mark_catalog_dirty()
        rt.barrier(force=True)
    return QueryResult("DROP_DATABASE")


def _are(n: int) -> str:
    return "is 1 other session" if n == 1 else f"are {n} other sessions"
