"""CREATE SECRET / DROP SECRET (and the CREATE CONNECTION placeholder).

Secrets live in the catalog (`Catalog.secrets`, RisingWave's `backend = 'meta'`) and are
persisted with the next checkpoint, which these handlers force before returning, like
every DDL. A secret's value never leaves the catalog except to the code that uses it at
run time (webhook VALIDATE): results, notices and errors here name the secret only, and
the statement text (which holds the value) is not kept anywhere.

DROP SECRET refuses (2BP01) while a relation refers to the secret.
"""

from __future__ import annotations

from typing import Any

from engine.api import Notice, QueryResult
from engine.catalog.catalog import Secret
from engine.catalog.privileges import require_secret_owner, session_owner
from engine.errors import (
    DependentObjectsStillExist,
    DuplicateObject,
    UndefinedObject,
    not_supported,
)
from engine.sql.parser import Statement


def create_secret(session: Any, st: Statement) -> QueryResult:
    d = st.args["secret"]
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        if d.name in cat.secrets:
            if d.if_not_exists:
                return QueryResult(
                    "CREATE_SECRET", notices=[Notice(f'secret "{d.name}" already exists, skipping')]
                )
            raise DuplicateObject(f'secret "{d.name}" already exists')
        cat.add_secret(Secret(d.name, d.value, owner=session_owner(session)))
        rt.barrier(force=True)  # persists the catalog
    return QueryResult("CREATE_SECRET")


def drop_secret(session: Any, st: Statement) -> QueryResult:
    name = st.args["name"]
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        if name not in cat.secrets:
            if st.args.get("if_exists"):
                return QueryResult(
                    "DROP_SECRET", notices=[Notice(f'secret "{name}" does not exist, skipping')]
                )
            raise UndefinedObject(f'secret "{name}" does not exist')
        require_secret_owner(cat.secrets[name])
        users = cat.secret_users(name)
        if users:
            raise DependentObjectsStillExist(
                f"cannot drop secret {name} because other objects depend on it",
                detail="\n".join(
                    f"{r.kind.value} {r.name} depends on secret {name}" for r in users
                ),
                hint="Drop the dependent objects first.",
            )
        cat.remove_secret(name)
        rt.barrier(force=True)
    return QueryResult("DROP_SECRET")


def create_connection(session: Any, st: Statement) -> QueryResult:
    raise not_supported("CREATE CONNECTION is not supported yet")
