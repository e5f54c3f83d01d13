"""CREATE DATABASE / DROP DATABASE (RisingWave's several databases in one process).

What a database is and how statements find their database: `engine.catalog.databases`.
A new database starts empty with the schema `public`; connect to it by name (`psql -d
name`, `dbname=name`), and POST to its webhook tables at `/webhook/{name}/{schema}/{table}`.

Rules (PostgreSQL's where RisingWave has none of its own):
* CREATE DATABASE needs a superuser or a role with CREATEDB (42501); `OWNER role` makes
  another role the owner (superusers only); a taken name is 42P04; other options
  (TEMPLATE, ENCODING, ...) are refused (0A000).
* DROP DATABASE needs the owner or a superuser (42501); refused for the database the
  session is connected to and while other sessions are connected to it (55006), and for
  `dev` (0A000). It drops everything the database holds, as PostgreSQL and RisingWave:
  its relations (jobs and their state), schemas, functions, secrets and connections.

* ALTER DATABASE ... RENAME TO: the owner with CREATEDB or a superuser, not the
  session's database (0A000) nor one in use (55006); OWNER TO is
  `engine.handlers.grant.alter_owner`'s.

Lifecycle: the parser hands `CREATE|DROP DATABASE ...` and `ALTER DATABASE ... RENAME` to
`engine.sql.database_stmts.parse_database_statement`; the
session dispatches to `create_database` / `drop_database`, which change the catalog under
the runtime lock and force a checkpoint (the change is durable when they return).
"""

from __future__ import annotations

import time
from typing import Any

from engine.api import Notice, QueryResult
from engine.catalog.catalog import RelationKind
from engine.catalog.databases import DEFAULT_DATABASE, DatabaseEntry, database_exists
from engine.catalog.privileges import is_superuser, user_oid
from engine.catalog.system import FIRST_USER_OID
from engine.errors import (
    DuplicateDatabase,
    FeatureNotSupported,
    InsufficientPrivilege,
    ObjectInUse,
    UndefinedDatabase,
    UndefinedObject,
    not_supported,
)
from engine.handlers.iceberg_table import drop_engine_table
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
    if name != session.database:
        _wait_for_sessions(session, name)
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
        for r in members:
            if r.kind is RelationKind.SINK:  # a sink retrying a broken downstream gives up
                rt.interrupt_sink(r.id)
        if members:  # dependents first: reverse creation order is a valid one
            rt.drop(list(reversed(members)))
        cat.databases = {k: v for k, v in cat.databases.items() if k != name}
        cat.forget_database(name)
        rt.mark_catalog_dirty()
        rt.barrier(force=True)
    for r in members:
        if r.extra.get("iceberg"):  # an ENGINE = iceberg table's data, as DROP TABLE
            drop_engine_table(r)
    return QueryResult("DROP_DATABASE")


def rename_database(session: Any, st: Statement) -> QueryResult:
    """ALTER DATABASE name RENAME TO new_name (RisingWave's and PostgreSQL's rules): the
    owner (with CREATEDB) or a superuser; not the session's database, nor one other
    sessions are in. Its relations, objects and webhook URLs move to the new name."""
    name, new = st.args["name"], st.args["new_name"]
    if name != session.database:
        _wait_for_sessions(session, name)
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        if not database_exists(cat, name):
            raise UndefinedDatabase(f'database "{name}" does not exist')
        if name == DEFAULT_DATABASE:
            raise FeatureNotSupported(
                f'cannot rename database "{name}"', hint="It is the default database."
            )
        me = cat.users.find(session.user)
        entry = cat.databases[name]
        if not is_superuser(cat, session.user) and (
            me is None or me.oid != entry.owner or not me.createdb
        ):
            raise InsufficientPrivilege(
                f"must be owner of database {name}"
                if me is None or me.oid != entry.owner
                else "permission denied to rename database"
            )
        if database_exists(cat, new):
            raise DuplicateDatabase(f'database "{new}" already exists')
        if name == session.database:  # PostgreSQL's words
            raise FeatureNotSupported(
                "current database cannot be renamed",
                hint="Connect to another database to rename this one.",
            )
        others = [s for s in list(session.db.sessions.values()) if s.database == name]
        if others:
            raise ObjectInUse(
                f'database "{name}" is being accessed by other users',
                detail=f"There {_are(len(others))} using the database.",
            )
        for r in cat.ordered():
            if r.database == name:
                r.database = new
        cat.databases = {(new if k == name else k): v for k, v in cat.databases.items()}
        cat.objects = {(new if k == name else k): v for k, v in cat.objects.items()}
        cat.version += 1
        rt.mark_catalog_dirty()
        rt.barrier(force=True)
    return QueryResult("ALTER_DATABASE")


def _wait_for_sessions(session: Any, name: str, timeout_s: float = 5.0) -> None:
    """Give sessions of `name` that are closing a moment to go, as PostgreSQL's DROP
    DATABASE waits up to 5 s for other backends to exit (a client that just closed its
    connection is not yet gone when its next statement arrives on another one). Called
    before taking the runtime lock; the caller checks again under it."""
    deadline = time.monotonic() + timeout_s
    while any(s.database == name for s in list(session.db.sessions.values())):
        if time.monotonic() >= deadline:
            return
        time.sleep(0.02)


def _are(n: int) -> str:
    return "is 1 other session" if n == 1 else f"are {n} other sessions"
