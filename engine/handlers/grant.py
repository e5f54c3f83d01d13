"""GRANT, REVOKE and ALTER ... OWNER TO: changing who may do what (as PostgreSQL).

Rules (engine/catalog/privileges.py has the model):
* GRANT: the relation's (schema's) owner, a superuser, or a role holding each privilege
  WITH GRANT OPTION may grant it; the grantor recorded is the owner when the granting
  role is a superuser or the owner (as PostgreSQL), else the granting role. Granting to
  the owner changes nothing. `ALL` means every privilege of the object kind.
* REVOKE: the owner and superusers revoke any grant; a role revokes what it granted.
  `REVOKE GRANT OPTION FOR` keeps the privilege and removes the right to grant it.
* ON DATABASE: CONNECT, CREATE, TEMPORARY (engine/catalog/databases.py); the default
  ACL lets PUBLIC connect, so `REVOKE CONNECT ON DATABASE d FROM PUBLIC` closes it.
* ALTER ... OWNER TO: a superuser, or the current owner giving the object to itself (no
  role membership exists to give it to another role); the ACL entries the old owner
  held as owner move to the new one.

Every change runs under the runtime lock and forces a checkpoint (like every DDL), so
it is durable when the client sees GRANT / REVOKE / ALTER.
"""

from __future__ import annotations

from typing import Any

from engine.api import QueryResult
from engine.catalog import Relation, RelationKind
from engine.catalog import privileges as pv
from engine.catalog.databases import database_entry
from engine.errors import (
    DependentObjectsStillExist,
    InsufficientPrivilege,
    InvalidGrantOperation,
    InvalidSchemaName,
    UndefinedDatabase,
    UndefinedObject,
    UndefinedTable,
    WrongObjectType,
    not_supported,
)
from engine.sql.parser import Statement

_KINDS = {k.value: k for k in RelationKind}


def _grantee_oid(cat: Any, session: Any, name: str) -> int:
    if name == "PUBLIC":
        return pv.PUBLIC
    if name in ("CURRENT_USER", "SESSION_USER", "CURRENT_ROLE"):
        name = session.user
    u = cat.users.find(name)
    if u is None:
        raise UndefinedObject(f'role "{name}" does not exist')
    return int(u.oid)


def _relations(cat: Any, args: dict[str, Any]) -> list[Relation]:
    out: list[Relation] = []
    kind = _KINDS.get(args["kind"]) if args["kind"] else None
    if args["target"] == "all_in_schema":
        for _, schema in args["names"]:
            out += [
                r
                for r in cat.visible()
                if r.schema_name == schema
                and (
                    r.kind is kind or (kind is RelationKind.TABLE and r.kind is RelationKind.TABLE)
                )
                and not r.extra.get("hidden_for")
            ]
        return out
    for schema, name in args["names"]:
        rel = cat.find(name, schema)
        if rel is None:
            raise UndefinedTable(f'relation "{name}" does not exist')
        if rel.kind is RelationKind.SINK:
            raise WrongObjectType(f'"{name}" is a sink', hint="Sinks have no privileges.")
        if kind is not None and rel.kind is not kind and kind is not RelationKind.TABLE:
            raise WrongObjectType(f'"{name}" is not a {kind.value}')
        out.append(rel)
    return out


_TARGET_PRIVILEGES = {
    "relation": (pv.TABLE_PRIVILEGES, pv.TABLE_ALL),
    "schema": (pv.SCHEMA_PRIVILEGES, pv.SCHEMA_ALL),
    "database": (pv.DATABASE_PRIVILEGES, pv.DATABASE_ALL),
}


def _letters(privileges: list[str], target: str) -> str:
    table, every = _TARGET_PRIVILEGES[target]
    if privileges == ["ALL"]:
        return every
    out = ""
    for p in privileges:
        if p not in table:  # PostgreSQL: 0LP01
            raise InvalidGrantOperation(f"invalid privilege type {p} for {target}")
        out += table[p] if table[p] not in out else ""
    return out


def run(session: Any, st: Statement) -> QueryResult:
    args = st.args
    if args["target"] == "language":
        return _language(session, args)
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        me = pv.user_oid(cat, session.user)
        superuser = pv.is_superuser(cat, session.user)
        grantees = [_grantee_oid(cat, session, g) for g in args["grantees"]]
        kind = "relation" if args["target"] == "all_in_schema" else args["target"]
        letters = _letters(args["privileges"], kind)
        targets: list[Any]
        if kind == "schema":
            targets = [_schema_target(cat, name) for _, name in args["names"]]
        elif kind == "database":
            targets = [_database_target(cat, name) for _, name in args["names"]]
        else:
            targets = [_RelTarget(r) for r in _relations(cat, args)]
        for t in targets:
            owner = t.owner(cat)
            acl = t.acl(cat)
            if args["action"] == "grant":
                if not (superuser or me == owner):
                    for ch in letters:
                        if not _holds_option(acl, me, ch):
                            raise InsufficientPrivilege(t.denied())
                grantor = owner if superuser or me == owner else me
                for g in grantees:
                    if g == owner:
                        continue
                    pv.grant(acl, g, grantor, letters, args["grant_option"])
            else:
                if not (superuser or me == owner or any(e[1] == me for e in acl)):
                    raise InsufficientPrivilege(t.denied())
                for g in grantees:
                    if g == owner:
                        continue
                    _revoke_cascading(acl, g, letters, args, t)
            t.store(cat, acl)
        cat.version += 1
        rt.barrier(force=True)
    return QueryResult("GRANT" if args["action"] == "grant" else "REVOKE")


def _revoke_cascading(
    acl: list[list[Any]], grantee: int, letters: str, args: dict[str, Any], t: Any
) -> None:
    """Revoke `letters` from `grantee`; what it granted on from them goes too with
    CASCADE, else 2BP01 `dependent privileges exist` (as PostgreSQL)."""
    granted_on = [e for e in acl if e[1] == grantee and e[0] != grantee]
    dependent = "".join(ch for ch in letters if any(ch in e[2] for e in granted_on))
    if dependent:
        if not args["cascade"]:
            raise DependentObjectsStillExist(
                "dependent privileges exist", hint="Use CASCADE to revoke them too."
            )
        for e in granted_on:
            _revoke_cascading(acl, e[0], dependent, args, t)
    pv.revoke(acl, grantee, letters, args["option_only"])


def _holds_option(acl: list[list[Any]], oid: int, letter: str) -> bool:
    return any(grantee == oid and f"{letter}*" in privs for grantee, _grantor, privs in acl)


class _RelTarget:
    def __init__(self, rel: Relation) -> None:
        self.rel = rel

    def owner(self, cat: Any) -> int:
        return self.rel.owner

    def acl(self, cat: Any) -> list[list[Any]]:
        return [list(e) for e in pv.relation_acl(self.rel)]

    def store(self, cat: Any, acl: list[list[Any]]) -> None:
        self.rel.acl = acl

    def denied(self) -> str:
        return f"permission denied for {self.rel.kind.value} {self.rel.name}"


class _SchemaTarget:
    def __init__(self, name: str) -> None:
        self.name = name

    def owner(self, cat: Any) -> int:
        return pv.schema_owner(cat, self.name)

    def acl(self, cat: Any) -> list[list[Any]]:
        return [list(e) for e in pv.schema_acl(cat, self.name)]

    def store(self, cat: Any, acl: list[list[Any]]) -> None:
        cat.schema_acl[self.name] = acl

    def denied(self) -> str:
        return f"permission denied for schema {self.name}"


class _DatabaseTarget:
    def __init__(self, name: str, entry: Any) -> None:
        self.name = name
        self.entry = entry

    def owner(self, cat: Any) -> int:
        return int(self.entry.owner)

    def acl(self, cat: Any) -> list[list[Any]]:
        return pv.database_acl(self.entry)

    def store(self, cat: Any, acl: list[list[Any]]) -> None:
        self.entry.acl = acl

    def denied(self) -> str:
        return f"permission denied for database {self.name}"


def _database_target(cat: Any, name: str) -> _DatabaseTarget:
    entry = database_entry(cat, name)
    if entry is None:
        raise UndefinedDatabase(f'database "{name}" does not exist')
    return _DatabaseTarget(name, entry)


def _schema_target(cat: Any, name: str) -> _SchemaTarget:
    from engine.handlers.schema import schema_exists

    if name in ("pg_catalog", "information_schema", "rw_catalog"):
        raise not_supported(f"GRANT on the system schema {name}")
    if not schema_exists(cat, name):
        raise InvalidSchemaName(f'schema "{name}" does not exist')
    return _SchemaTarget(name)


def alter_owner(session: Any, st: Statement) -> QueryResult:
    args = st.args
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        new = _grantee_oid(cat, session, args["owner"])
        if new == pv.PUBLIC:
            raise UndefinedObject('role "public" does not exist')
        me = pv.user_oid(cat, session.user)
        superuser = pv.is_superuser(cat, session.user)
        if args["kind"] == "schema":
            target: Any = _schema_target(cat, args["name"])
            tag = "ALTER SCHEMA"
            what = f"schema {args['name']}"
        elif args["kind"] == "database":
            target = _database_target(cat, args["name"])
            tag = "ALTER_DATABASE"
            what = f"database {args['name']}"
        else:
            rel = cat.find(args["name"], args["schema"])
            if rel is None:
                raise UndefinedTable(f'relation "{args["name"]}" does not exist')
            kind = _KINDS[args["kind"]]
            if rel.kind is not kind:
                raise WrongObjectType(f'"{rel.name}" is not a {kind.value}')
            target = _RelTarget(rel)
            tag = "ALTER " + kind.value.upper()
            what = f"{rel.kind.value} {rel.name}"
        old = target.owner(cat)
        if not superuser:
            if me != old:
                raise InsufficientPrivilege(f"must be owner of {what}")
            if new != me:
                raise InsufficientPrivilege(
                    f'must be able to SET ROLE "{args["owner"]}"',
                    hint="Only a superuser can give an object to another role.",
                )
        if old != new:
            acl = target.acl(cat)
            for e in acl:
                if e[0] == old:
                    e[0] = new
                if e[1] == old:
                    e[1] = new
            if not isinstance(target, _DatabaseTarget) or target.entry.acl:
                target.store(cat, acl)  # a database's default ACL stays the default
            if isinstance(target, _RelTarget):
                target.rel.owner = new
            elif isinstance(target, _DatabaseTarget):
                target.entry.owner = new
                rt.mark_catalog_dirty()
            else:
                cat.schema_owners[target.name] = new
            cat.version += 1
            rt.barrier(force=True)
    return QueryResult(tag)


def _language(session: Any, args: dict[str, Any]) -> QueryResult:
    """GRANT / REVOKE USAGE ON LANGUAGE python: lets a role create Python functions, which
    run inside the server with its rights; so only superusers grant it (PostgreSQL allows
    no grant on untrusted languages at all; this is the one way to delegate it)."""
    name = args["names"][0][1]
    if name != "python":
        raise UndefinedObject(f'language "{name}" does not exist')
    if args["privileges"] not in (["USAGE"], ["ALL"]):
        raise InvalidGrantOperation(f"invalid privilege type {args['privileges'][0]} for language")
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        if not pv.is_superuser(cat, session.user):
            raise InsufficientPrivilege(
                "permission denied for language python",
                hint="Only superusers grant USAGE on LANGUAGE python.",
            )
        holders = list(cat.language_acl.get(name, []))
        for g in (_grantee_oid(cat, session, g) for g in args["grantees"]):
            if args["action"] == "grant" and g not in holders:
                holders.append(g)
            elif args["action"] == "revoke" and g in holders:
                holders.remove(g)
        cat.language_acl[name] = holders
        cat.version += 1
        rt.barrier(force=True)
    return QueryResult("GRANT" if args["action"] == "grant" else "REVOKE")
