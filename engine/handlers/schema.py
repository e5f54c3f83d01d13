"""CREATE SCHEMA / DROP SCHEMA.

Relations already carry a schema name (`CREATE TABLE payments.daily_summary ...` works and
the schema shows in pg_namespace), so a schema exists when it is built in (public and the
system schemas), was created with CREATE SCHEMA (`Catalog.schemas`, persisted with the next
checkpoint, which the handlers force) or holds a relation. These statements let scripts
written for PostgreSQL/RisingWave (`CREATE SCHEMA IF NOT EXISTS payments`) run as written.

Lifecycle: the parser hands `CREATE|DROP SCHEMA ...` to `engine.sql.object_stmts`; the
session dispatches to `create_schema` / `drop_schema`, which change the catalog under the
runtime lock and force a barrier.
"""

from __future__ import annotations

from typing import Any

from engine.api import Notice, QueryResult
from engine.catalog.databases import database_entry
from engine.catalog.privileges import (
    has_database_privilege,
    is_superuser,
    schema_owner,
    session_owner,
    user_oid,
)
from engine.catalog.system import SYSTEM_SCHEMAS
from engine.errors import (
    DependentObjectsStillExist,
    DuplicateSchema,
    InsufficientPrivilege,
    InvalidSchemaName,
    not_supported,
)
from engine.sql.statement import Statement

BUILTIN = ("public", *SYSTEM_SCHEMAS)


def schema_exists(catalog: Any, name: str) -> bool:
    """Built in, made by CREATE SCHEMA in the current database, or holding one of its
    relations."""
    return (
        name in BUILTIN
        or name in catalog.schemas
        or any(r.schema_name == name for r in catalog.visible())
    )


def create_schema(session: Any, st: Statement) -> QueryResult:
    name = st.args["name"]
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        if schema_exists(cat, name):
            if st.args["if_not_exists"]:
                return QueryResult(
                    "CREATE_SCHEMA", notices=[Notice(f'schema "{name}" already exists, skipping')]
                )
            raise DuplicateSchema(f'schema "{name}" already exists')
        me = cat.users.find(session.user)
        entry = database_entry(cat, session.database)
        if (
            me is not None
            and not (me.superuser or me.createdb)
            and not (entry is not None and has_database_privilege(cat, me.oid, entry, "C"))
        ):
            raise InsufficientPrivilege(f"permission denied for database {session.database}")
        cat.schemas.add(name)
        cat.schema_owners[name] = session_owner(session)
        cat.version += 1
        rt.barrier(force=True)  # persists the catalog
    return QueryResult("CREATE_SCHEMA")


def drop_schema(session: Any, st: Statement) -> QueryResult:
    rt = session.db.runtime
    notices: list[Notice] = []
    with rt.lock:
        cat = session.db.catalog
        for name in st.args["names"]:
            if name in BUILTIN:
                raise not_supported(f'dropping schema "{name}"', hint="It is built in.")
            if not schema_exists(cat, name):
                if st.args["if_exists"]:
                    notices.append(Notice(f'schema "{name}" does not exist, skipping'))
                    continue
                raise InvalidSchemaName(f'schema "{name}" does not exist')
            owner = schema_owner(cat, name)
            oid = user_oid(cat, session.user)
            if oid != owner and not is_superuser(cat, session.user):
                raise InsufficientPrivilege(f"must be owner of schema {name}")
            members = [r for r in cat.visible() if r.schema_name == name]
            if members and st.args["cascade"]:
                raise not_supported(
                    "DROP SCHEMA ... CASCADE of a schema that holds relations",
                    hint="Drop the schema's relations first.",
                )
            if members:
                raise DependentObjectsStillExist(
                    f"cannot drop schema {name} because other objects depend on it",
                    detail="\n".join(
                        f"{r.kind.value} {name}.{r.name} depends on schema {name}" for r in members
                    ),
                    hint="Use DROP ... CASCADE to drop the dependent objects too.",
                )
        for name in st.args["names"]:
            cat.schemas.discard(name)
            cat.schema_owners.pop(name, None)
            cat.schema_acl.pop(name, None)
        cat.version += 1
        rt.barrier(force=True)
    return QueryResult("DROP_SCHEMA", notices=notices)
