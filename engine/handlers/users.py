"""CREATE / ALTER / DROP USER (and ROLE): the catalog's login roles.

Every change runs under the runtime lock and forces a checkpoint before returning (like
every DDL), so a user exists durably once the client sees `CREATE ROLE`. Passwords are
hashed at once per the session's `password_encryption` ('scram-sha-256' by default, or
'md5'); the clear text is never stored, returned or logged.

Privileges follow PostgreSQL: superusers (and CREATEROLE users for non-superuser roles)
manage roles; anyone may change their own password.
"""

from __future__ import annotations

from typing import Any

from engine.api import Notice, QueryResult
from engine.catalog.users import User, make_verifier, verifies
from engine.errors import (
    DependentObjectsStillExist,
    InsufficientPrivilege,
    ObjectInUse,
    UndefinedObject,
)
from engine.sql.parser import Statement


def run(session: Any, st: Statement) -> QueryResult:
    args = st.args
    action = args["action"]
    rt = session.db.runtime
    with rt.lock:
        users = session.db.catalog.users
        me = users.find(session.user)
        if action == "create":
            result = _create(session, users, me, args)
        elif action == "alter":
            result = _alter(session, users, me, args)
        elif action == "rename":
            result = _rename(users, me, args)
        elif action == "set":
            users.get(args["name"])
            return QueryResult("ALTER ROLE")
        else:
            result = _drop(session, users, me, args)
        session.db.catalog.version += 1
        rt.barrier(force=True)  # persists the catalog with the users
    return result


def set_password_at_start(db: Any, name: str, password: str) -> bool:
    """Give `name` the password `password` (the server's SWELL_ROOT_PASSWORD), durably;
    False when it already had that password (nothing written)."""
    rt = db.runtime
    with rt.lock:
        user = db.catalog.users.get(name)
        if verifies(user.password, password, name):
            return False
        user.password = make_verifier(password, name)
        db.catalog.version += 1
        rt.barrier(force=True)
    return True


def password_superuser_exists(db: Any) -> bool:
    """True when some superuser can log in with a password (so `--auth password` does not
    lock everybody out)."""
    return any(u.superuser and u.login and u.password for u in db.catalog.users.list())


def _owned_by(cat: Any, oid: int) -> list[str]:
    """What role `oid` owns, as PostgreSQL's DETAIL lines ("owner of table t")."""
    out = [f"owner of {r.kind.value} {r.name}" for r in cat.ordered() if r.owner == oid]
    for objs in cat.objects.values():  # every database's
        out += [f"owner of secret {s.name}" for s in objs.secrets.values() if s.owner == oid]
        out += [
            f"owner of connection {n}"
            for n, c in sorted(objs.connections.items())
            if c.get("owner") == oid
        ]
        out += [f"owner of schema {n}" for n, o in sorted(objs.schema_owners.items()) if o == oid]
        out += [
            f"owner of function {f.signature}" for f in objs.functions.values() if f.owner == oid
        ]
    out += [f"owner of database {n}" for n, d in sorted(cat.databases.items()) if d.owner == oid]
    return out


def _forget_grants(cat: Any, oid: int) -> None:
    """A dropped role's privileges go with it (PostgreSQL's DROP OWNED semantics for
    grants; the role owns nothing by then)."""
    for r in cat.relations.values():
        if r.acl:
            r.acl = [e for e in r.acl if e[0] != oid and e[1] != oid]
    for objs in cat.objects.values():  # every database's
        for name, acl in objs.schema_acl.items():
            objs.schema_acl[name] = [e for e in acl if e[0] != oid and e[1] != oid]


def _can_manage(me: User | None, target_superuser: bool) -> bool:
    if me is None:
        return False
    if me.superuser:
        return True
    return me.createrole and not target_superuser


def _password_notices(opts: dict[str, Any]) -> list[Notice]:
    if opts.get("empty_password"):
        return [Notice("empty string is not a valid password, clearing password")]
    return []


def _create(session: Any, users: Any, me: User | None, args: dict[str, Any]) -> QueryResult:
    opts = dict(args["options"])
    if not _can_manage(me, bool(opts.get("superuser"))):
        if opts.get("superuser"):
            raise InsufficientPrivilege("must be superuser to create superusers")
        raise InsufficientPrivilege("permission denied to create role")
    notices = _password_notices(opts)
    password = opts.pop("password", None)
    opts.pop("empty_password", None)
    name = args["name"]
    verifier = None
    if password is not None:
        verifier = make_verifier(password, name, session.vars.get("password_encryption", ""))
    users.create(name, password=verifier, **opts)
    return QueryResult("CREATE ROLE", notices=notices)


def _alter(session: Any, users: Any, me: User | None, args: dict[str, Any]) -> QueryResult:
    target = users.get(args["name"])
    opts = dict(args["options"])
    only_password = set(opts) <= {"password", "empty_password"}
    own_password = me is not None and me.name == target.name and only_password
    if not own_password and not _can_manage(me, target.superuser or bool(opts.get("superuser"))):
        if target.superuser or "superuser" in opts:
            raise InsufficientPrivilege(
                "must be superuser to alter superuser roles or change superuser attribute"
            )
        raise InsufficientPrivilege("permission denied to alter role")
    notices = _password_notices(opts)
    if "password" in opts:
        pw = opts.pop("password")
        target.password = (
            None
            if pw is None
            else make_verifier(pw, target.name, session.vars.get("password_encryption", ""))
        )
    opts.pop("empty_password", None)
    for key, value in opts.items():
        setattr(target, key, value)
    return QueryResult("ALTER ROLE", notices=notices)


def _rename(users: Any, me: User | None, args: dict[str, Any]) -> QueryResult:
    target = users.get(args["name"])
    if me is not None and me.name == target.name:
        raise ObjectInUse("session user cannot be renamed")
    if not _can_manage(me, target.superuser):
        raise InsufficientPrivilege("permission denied to rename role")
    users.rename(target.name, args["new_name"])
    notices = []
    if target.auth_method == "md5":
        # the MD5 verifier salts with the user name, so it no longer matches
        target.password = None
        notices.append(Notice("MD5 password cleared because of role rename"))
    return QueryResult("ALTER ROLE", notices=notices)


def _drop(session: Any, users: Any, me: User | None, args: dict[str, Any]) -> QueryResult:
    notices = []
    for name in args["names"]:
        target = users.find(name)
        if target is None:
            if args["if_exists"]:
                notices.append(Notice(f'role "{name}" does not exist, skipping'))
                continue
            raise UndefinedObject(f'role "{name}" does not exist')
        if name == session.user:
            raise ObjectInUse("current user cannot be dropped")
        if target.builtin:
            raise InsufficientPrivilege(
                f"cannot drop role {name} because it is required by the database system"
            )
        if not _can_manage(me, target.superuser):
            raise InsufficientPrivilege("permission denied to drop role")
        owned = _owned_by(session.db.catalog, target.oid)
        if owned:
            raise DependentObjectsStillExist(
                f'role "{name}" cannot be dropped because some objects depend on it',
                detail="\n".join(owned[:20]),
                hint="Drop them or give them to another role with ALTER ... OWNER TO.",
            )
        _forget_grants(session.db.catalog, target.oid)
        users.drop(name)
    return QueryResult("DROP ROLE", notices=notices)
