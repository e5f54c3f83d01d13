"""Privileges as PostgreSQL: owners, ACLs, and the checks statements make.

Why: several users share one database. As in PostgreSQL, every relation has an owner
(`Relation.owner`, a role oid) who may do anything with it, drop it, grant and revoke;
everybody else needs a privilege granted with GRANT: SELECT (`r`), INSERT (`a`), UPDATE
(`w`), DELETE (`d`), TRUNCATE (`D`), REFERENCES (`x`), TRIGGER (`t`) on tables, views,
materialized views and sources; USAGE (`U`) and CREATE (`C`) on schemas. A privilege
granted WITH GRANT OPTION (`r*`) may be granted on. Superusers bypass every check. A
view reads its inputs with its owner's rights (the planner checks the relations a view
reads against the view's owner, not the querying user). Refusals are 42501
`permission denied for table t` / `must be owner of table t`.

The model (persisted with the catalog):
* `Relation.acl`: `[[grantee oid, grantor oid, privileges], ...]`, privileges as
  PostgreSQL's aclitem text (`r*w`); empty means the default (the owner has everything,
  nobody else anything). The first GRANT materialises the owner's entry, so `relacl`
  reads as PostgreSQL's (`{root=arwdDxt/root,alice=r/root}`). Grantee 0 is PUBLIC.
* `Catalog.schema_acl` / `Catalog.schema_owners`: the same per schema name (of the
  current database); `public` defaults to USAGE and CREATE for PUBLIC (PostgreSQL 14's
  default, so new users can create tables there as in RisingWave), other schemas to
  their owner only.
* `DatabaseEntry.acl` (engine/catalog/databases.py): CREATE (`C`), TEMPORARY (`T`) and
  CONNECT (`c`) per database; the default gives PUBLIC CONNECT and TEMPORARY, so every
  user may connect to a new database until `REVOKE CONNECT ... FROM PUBLIC`. A session
  opens only with CONNECT (`require_connect`, at login), superusers and owners always.

Lifecycle: the session runs every statement inside `acting_as(session)`, which sets the
role the checks use (a context variable, per worker thread); code outside a session
(recovery re-planning views) runs without one and is not checked. Handlers call
`require(...)`/`require_owner(...)`; the planner calls `check_read` for every relation in
FROM and `reading_as_owner(view)` while it expands a view.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from engine.catalog.credentials import redact_validate
from engine.catalog.databases import database_entry
from engine.catalog.users import ROOT_OID
from engine.errors import InsufficientPrivilege

PUBLIC = 0
NO_ROLE = -1  # the oid of a role that no longer exists (dropped while connected)
TABLE_PRIVILEGES = {
    "SELECT": "r",
    "INSERT": "a",
    "UPDATE": "w",
    "DELETE": "d",
    "TRUNCATE": "D",
    "REFERENCES": "x",
    "TRIGGER": "t",
}
TABLE_ALL = "arwdDxt"
SCHEMA_PRIVILEGES = {"USAGE": "U", "CREATE": "C"}
SCHEMA_ALL = "UC"
DATABASE_PRIVILEGES = {"CREATE": "C", "TEMPORARY": "T", "TEMP": "T", "CONNECT": "c"}
DATABASE_ALL = "CTc"
PRIVILEGE_NAMES = {
    **{v: k for k, v in TABLE_PRIVILEGES.items()},
    **{v: k for k, v in SCHEMA_PRIVILEGES.items()},
    "T": "TEMPORARY",
    "c": "CONNECT",
}
DEFAULT_PUBLIC_SCHEMA_ACL = [[ROOT_OID, ROOT_OID, "U*C*"], [PUBLIC, ROOT_OID, "UC"]]


# -- roles ------------------------------------------------------------------------------------
def user_oid(catalog: Any, name: str) -> int:
    """The oid of role `name` (`NO_ROLE` when it does not exist)."""
    u = catalog.users.find(name)
    return u.oid if u is not None else NO_ROLE


def session_owner(session: Any) -> int:
    """The oid that owns what `session` creates (root's for a session without a role)."""
    oid = user_oid(session.db.catalog, session.user)
    return oid if oid != NO_ROLE else ROOT_OID


def is_superuser(catalog: Any, name: str) -> bool:
    u = catalog.users.find(name)
    return u is not None and u.superuser


def _oid_is_superuser(catalog: Any, oid: int) -> bool:
    u = catalog.users.by_oid(oid)
    return u is not None and u.superuser


def role_name(catalog: Any, oid: int) -> str:
    if oid == PUBLIC:
        return ""
    u = catalog.users.by_oid(oid)
    return u.name if u is not None else str(oid)


def owns(catalog: Any, name: str, rel: Any) -> bool:
    """True when role `name` owns `rel` or is a superuser."""
    return is_superuser(catalog, name) or user_oid(catalog, name) == rel.owner


# -- ACLs -------------------------------------------------------------------------------------
def _held(acl: list[list[Any]], oid: int) -> dict[str, bool]:
    """{privilege letter: with grant option} that `oid` holds through `acl` (its own
    entries and PUBLIC's)."""
    out: dict[str, bool] = {}
    for grantee, _grantor, privs in acl:
        if grantee not in (oid, PUBLIC):
            continue
        for i, ch in enumerate(privs):
            if ch == "*":
                continue
            star = i + 1 < len(privs) and privs[i + 1] == "*"
            out[ch] = out.get(ch, False) or (star and grantee == oid)
    return out


def relation_acl(rel: Any) -> list[list[Any]]:
    """`rel`'s ACL with the owner's default entry when nothing was granted yet."""
    acl: list[list[Any]] = [list(e) for e in rel.acl]
    return acl or [[rel.owner, rel.owner, TABLE_ALL]]


def schema_acl(catalog: Any, schema: str) -> list[list[Any]]:
    acl: list[list[Any]] | None = catalog.schema_acl.get(schema)
    if acl is not None:
        return acl
    if schema == "public":
        return [list(e) for e in DEFAULT_PUBLIC_SCHEMA_ACL]
    owner = catalog.schema_owners.get(schema, ROOT_OID)
    return [[owner, owner, SCHEMA_ALL]]


def schema_owner(catalog: Any, schema: str) -> int:
    return int(catalog.schema_owners.get(schema, ROOT_OID))


def database_acl(entry: Any) -> list[list[Any]]:
    """A database's ACL with PostgreSQL's default when nothing was granted yet."""
    acl: list[list[Any]] = [list(e) for e in entry.acl]
    return acl or [[PUBLIC, entry.owner, "Tc"], [entry.owner, entry.owner, DATABASE_ALL]]


def has_database_privilege(catalog: Any, oid: int, entry: Any, letter: str) -> bool:
    if oid == entry.owner or _oid_is_superuser(catalog, oid):
        return True
    return letter in _held(database_acl(entry), oid)


def require_connect(catalog: Any, user: str, database: str) -> None:
    """42501 unless `user` may open a session in `database` (PostgreSQL's CONNECT check:
    superusers, the owner, and roles holding CONNECT directly or through PUBLIC)."""
    entry = database_entry(catalog, database)
    if entry is None:
        return
    if not has_database_privilege(catalog, user_oid(catalog, user), entry, "c"):
        raise InsufficientPrivilege(
            f'permission denied for database "{database}"',
            detail="User does not have CONNECT privilege.",
        )


def has_privilege(catalog: Any, oid: int, rel: Any, letter: str, grant: bool = False) -> bool:
    """True when role `oid` holds privilege `letter` on `rel` (with grant option if
    `grant`): superusers and the owner always do."""
    if oid == rel.owner or _oid_is_superuser(catalog, oid):
        return True
    held = _held(rel.acl, oid)
    return letter in held and (held[letter] or not grant)


def has_schema_privilege(catalog: Any, oid: int, schema: str, letter: str) -> bool:
    if oid == schema_owner(catalog, schema) or _oid_is_superuser(catalog, oid):
        return True
    return letter in _held(schema_acl(catalog, schema), oid)


def acl_text(catalog: Any, acl: list[list[Any]]) -> list[str]:
    """aclitem texts as PostgreSQL prints them: `alice=r*w/root`, `=r/root` for PUBLIC."""
    return [f"{role_name(catalog, g)}={p}/{role_name(catalog, gr)}" for g, gr, p in acl if p]


def grant(acl: list[list[Any]], grantee: int, grantor: int, letters: str, option: bool) -> None:
    """Add `letters` (with grant option if `option`) to `grantee`'s entry from `grantor`."""
    for entry in acl:
        if entry[0] == grantee and entry[1] == grantor:
            entry[2] = _merge(entry[2], letters, option)
            return
    acl.append([grantee, grantor, _merge("", letters, option)])


def revoke(acl: list[list[Any]], grantee: int, letters: str, option_only: bool) -> None:
    """Remove `letters` (or only their grant option) from every entry of `grantee`."""
    for entry in acl:
        if entry[0] != grantee:
            continue
        parsed = _parse(entry[2])
        for ch in letters:
            if ch in parsed:
                if option_only:
                    parsed[ch] = False
                else:
                    del parsed[ch]
        entry[2] = _format(parsed)
    acl[:] = [e for e in acl if e[2]]


def _parse(privs: str) -> dict[str, bool]:
    out: dict[str, bool] = {}
    for i, ch in enumerate(privs):
        if ch != "*":
            out[ch] = i + 1 < len(privs) and privs[i + 1] == "*"
    return out


def _format(parsed: dict[str, bool]) -> str:
    order = TABLE_ALL + SCHEMA_ALL + "Tc"  # PostgreSQL's aclitem order
    return "".join(ch + ("*" if parsed[ch] else "") for ch in order if ch in parsed)


def _merge(privs: str, letters: str, option: bool) -> str:
    parsed = _parse(privs)
    for ch in letters:
        parsed[ch] = parsed.get(ch, False) or option
    return _format(parsed)


# -- the acting role --------------------------------------------------------------------------
@dataclass(frozen=True)
class Acting:
    """Whose rights the checks of the running statement use."""

    catalog: Any
    oid: int


_acting: ContextVar[Acting | None] = ContextVar("swell_acting_role", default=None)


@contextlib.contextmanager
def acting_as(session: Any) -> Iterator[None]:
    """Check everything the statement does against `session`'s role."""
    catalog = session.db.catalog
    token = _acting.set(Acting(catalog, user_oid(catalog, session.user)))
    try:
        yield
    finally:
        _acting.reset(token)


@contextlib.contextmanager
def reading_as_owner(rel: Any) -> Iterator[None]:
    """While a view is expanded, its inputs are checked against the view's owner."""
    current = _acting.get()
    if current is None:
        yield
        return
    token = _acting.set(Acting(current.catalog, rel.owner))
    try:
        yield
    finally:
        _acting.reset(token)


def acting_oid() -> int | None:
    a = _acting.get()
    return a.oid if a is not None else None


def _kind_word(rel: Any) -> str:
    kind = str(getattr(rel.kind, "value", rel.kind))
    return "table" if kind == "table" else kind


def check_read(rel: Any) -> None:
    """42501 unless the acting role may SELECT from `rel` (and use its schema)."""
    require(rel, "r")


def require(rel: Any, letter: str) -> None:
    """42501 unless the acting role holds `letter` on `rel` and USAGE on its schema."""
    a = _acting.get()
    if a is None:
        return
    cat = a.catalog
    if not has_schema_privilege(cat, a.oid, rel.schema_name, "U"):
        raise InsufficientPrivilege(f"permission denied for schema {rel.schema_name}")
    if not has_privilege(cat, a.oid, rel, letter):
        raise InsufficientPrivilege(f"permission denied for {_kind_word(rel)} {rel.name}")


def require_owner(rel: Any) -> None:
    """42501 `must be owner of ...` unless the acting role owns `rel` (or is superuser)."""
    a = _acting.get()
    if a is None or a.oid == rel.owner or _oid_is_superuser(a.catalog, a.oid):
        return
    raise InsufficientPrivilege(f"must be owner of {_kind_word(rel)} {rel.name}")


def require_create_in(schema: str | None) -> None:
    """42501 unless the acting role may create objects in `schema`."""
    a = _acting.get()
    if a is None:
        return
    name = schema or "public"
    if not has_schema_privilege(a.catalog, a.oid, name, "C"):
        raise InsufficientPrivilege(f"permission denied for schema {name}")


def require_language(language: str) -> None:
    """42501 unless the acting role may create functions in `language`: Python functions
    run inside the server with its rights (PostgreSQL's untrusted languages), so only
    superusers may, or roles a superuser granted `USAGE ON LANGUAGE python`
    (`Catalog.language_acl`: language -> grantee oids)."""
    a = _acting.get()
    if a is None or _oid_is_superuser(a.catalog, a.oid):
        return
    holders = (getattr(a.catalog, "language_acl", {}) or {}).get(language, [])
    if a.oid in holders or PUBLIC in holders:
        return
    raise InsufficientPrivilege(
        f"permission denied for language {language}",
        detail="A Python function runs inside the server process with the server's rights.",
        hint="Only superusers may create one, or roles granted USAGE ON LANGUAGE "
        f"{language} by a superuser.",
    )


def require_secret(secret: Any) -> None:
    """42501 unless the acting role owns `secret` (or is a superuser): using a secret in a
    connector would hand its value to whoever controls that connector's endpoint."""
    a = _acting.get()
    if a is None or a.oid == secret.owner or _oid_is_superuser(a.catalog, a.oid):
        return
    raise InsufficientPrivilege(f"permission denied for secret {secret.name}")


def require_secret_owner(secret: Any) -> None:
    a = _acting.get()
    if a is None or a.oid == secret.owner or _oid_is_superuser(a.catalog, a.oid):
        return
    raise InsufficientPrivilege(f"must be owner of secret {secret.name}")


def require_connection(name: str, owner: int, drop: bool = False) -> None:
    """42501 unless the acting role owns connection `name` (or is a superuser)."""
    a = _acting.get()
    if a is None or a.oid == owner or _oid_is_superuser(a.catalog, a.oid):
        return
    if drop:
        raise InsufficientPrivilege(f"must be owner of connection {name}")
    raise InsufficientPrivilege(f"permission denied for connection {name}")


def shown_definition(catalog: Any, viewer: str | None, rel: Any) -> str:
    """`rel.definition` as `viewer` may see it: whole for its owner and superusers, with
    the VALIDATE literals redacted for everybody else."""
    if viewer is not None and not owns(catalog, viewer, rel):
        return redact_validate(str(rel.definition))
    return str(rel.definition)
