"""CREATE / DROP / SHOW CONNECTIONS, and `connection = name` in WITH options.

A connection is a named set of options (RisingWave: `CREATE CONNECTION c WITH (type =
'iceberg', catalog.type = ..., warehouse.path = ..., s3.* ...)`). It is kept in the catalog
(`Catalog.connections`, persisted with the next checkpoint, which the handlers force) and
used two ways:

* `WITH (connection = 'c', ...)` in CREATE SINK / SOURCE / TABLE: `expand_connection`
  merges the connection's options underneath the statement's own (the statement wins);
* `SET iceberg_engine_connection = 'public.c'` then `CREATE TABLE ... ENGINE = iceberg`
  (`engine.handlers.iceberg_table`).

Iceberg connections are checked when created (option names and the seed's pitfalls, no
network); the catalog itself is reached when a table or sink uses it. DROP CONNECTION
refuses (2BP01) while a relation uses the connection.
"""

from __future__ import annotations

import re
from typing import Any

from engine.api import Notice, QueryResult
from engine.catalog import Catalog
from engine.catalog.credentials import REDACTED, is_credential
from engine.catalog.privileges import require_connection, session_owner
from engine.catalog.users import ROOT_OID
from engine.errors import (
    DependentObjectsStillExist,
    DuplicateObject,
    InvalidParameterValue,
    SqlSyntaxError,
    UndefinedObject,
    not_supported,
)
from engine.sql.statement import Statement
from engine.types import VARCHAR, Field

_NAME = r'(?:"[^"]+"|[A-Za-z_][\w$]*)'
_CREATE = re.compile(
    rf"^\s*CREATE\s+CONNECTION\s+(?P<ine>IF\s+NOT\s+EXISTS\s+)?(?:(?P<schema>{_NAME})\s*\.\s*)?"
    rf"(?P<name>{_NAME})",
    re.I,
)


def _ident(raw: str | None) -> str | None:
    if raw is None:
        return None
    return raw[1:-1] if raw.startswith('"') else raw.lower()


def lookup(catalog: Catalog, ref: str) -> dict[str, Any]:
    """The connection named `ref` (`name` or `schema.name`), or UndefinedObject."""
    ref = ref.strip()
    name = ref.split(".")[-1].strip().strip('"')
    conn = catalog.connections.get(name) or catalog.connections.get(name.lower())
    if conn is None:
        raise UndefinedObject(
            f'connection "{ref}" does not exist',
            hint="Create it with CREATE CONNECTION name WITH (type = 'iceberg', ...).",
        )
    # its credentials go to whoever uses it: only its owner and superusers may
    require_connection(name, int(conn.get("owner", ROOT_OID)))
    return conn


def expand_connection(catalog: Catalog, options: dict[str, str]) -> dict[str, str]:
    """`options` with a `connection = name` option replaced by that connection's options."""
    ref = options.get("connection")
    if not ref:
        return options
    conn = lookup(catalog, ref)
    merged = {k: v for k, v in conn["options"].items() if k != "type"}
    merged.update({k: v for k, v in options.items() if k != "connection"})
    merged["connection"] = ref
    return merged


def create_connection(session: Any, st: Statement) -> QueryResult:
    clauses = st.args["clauses"]
    m = _CREATE.match(clauses.stripped)
    if not m:
        raise SqlSyntaxError('syntax error at or near "CONNECTION"')
    name = _ident(m["name"])
    assert name is not None
    if clauses.secret_refs:
        raise not_supported("secrets in CONNECTION options", hint="Write the value inline.")
    options = {k.lower(): v for k, v in clauses.options.items()}
    ctype = (options.get("type") or "").lower()
    if not ctype:
        raise InvalidParameterValue(
            "connection type is required", hint="Add type = 'iceberg' to the WITH options."
        )
    if ctype == "iceberg":
        from engine.connector_registry import sink_connector

        factory = sink_connector("iceberg")
        check = getattr(factory, "check_connection", None)
        if check is not None:
            check(options)
    elif ctype not in ("kafka", "schema_registry"):
        raise not_supported(
            f"connection type '{ctype}'", hint="Use type = 'iceberg', 'kafka' or 'schema_registry'."
        )
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        if name in cat.connections:
            if m["ine"]:
                return QueryResult(
                    "CREATE_CONNECTION",
                    notices=[Notice(f'connection "{name}" already exists, skipping')],
                )
            raise DuplicateObject(f'connection "{name}" already exists')
        cat.connections[name] = {
            "schema": _ident(m["schema"]) or "public",
            "options": options,
            "owner": session_owner(session),
        }
        cat.version += 1
        rt.barrier(force=True)  # persists the catalog
    return QueryResult("CREATE_CONNECTION")


def connection_users(catalog: Catalog, name: str) -> list[Any]:
    out = []
    for r in catalog.visible():
        ref = (r.options.get("connection") or "").split(".")[-1].strip().strip('"')
        if ref == name or r.extra.get("iceberg", {}).get("connection") == name:
            out.append(r)
    return out


def drop_connection(session: Any, st: Statement) -> QueryResult:
    name = st.args["name"]
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        if name not in cat.connections:
            if st.args.get("if_exists"):
                return QueryResult(
                    "DROP_CONNECTION",
                    notices=[Notice(f'connection "{name}" does not exist, skipping')],
                )
            raise UndefinedObject(f'connection "{name}" does not exist')
        require_connection(name, int(cat.connections[name].get("owner", ROOT_OID)), drop=True)
        users = connection_users(cat, name)
        if users:
            raise DependentObjectsStillExist(
                f"cannot drop connection {name} because other objects depend on it",
                detail="\n".join(
                    f"{r.kind.value} {r.name} depends on connection {name}" for r in users
                ),
                hint="Drop the dependent objects first.",
            )
        del cat.connections[name]
        cat.version += 1
        rt.barrier(force=True)
    return QueryResult("DROP_CONNECTION")


def show_connections(session: Any, st: Statement) -> QueryResult:
    cat = session.db.catalog
    rows = []
    for name in sorted(cat.connections):
        c = cat.connections[name]
        opts = c["options"]
        props = ", ".join(
            f"{k}: {REDACTED if is_credential(k) else v}"
            for k, v in sorted(opts.items())
            if k != "type"
        )
        rows.append((name, opts.get("type", ""), "{" + props + "}"))
    fields = [Field("Name", VARCHAR), Field("Type", VARCHAR), Field("Properties", VARCHAR)]
    return QueryResult(f"SHOW {len(rows)}", fields, rows)
