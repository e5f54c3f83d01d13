"""Who owns a relation and who may see what it was created with.

Why: a relation's owner (`Relation.owner`, a role oid) decides, as in PostgreSQL, who may
drop or alter it and who sees the parts of its definition that are credentials by nature
(the inline literals of a webhook table's `VALIDATE AS secure_compare(..., 'token')`).
Superusers see and may do everything.

Lifecycle: stateless helpers; handlers call `session_owner(session)` when they create a
relation, and the catalog views call `shown_definition` per row.
"""

from __future__ import annotations

from typing import Any

from engine.catalog.credentials import redact_validate
from engine.catalog.users import ROOT_OID

NO_ROLE = -1  # the oid of a role that no longer exists (dropped while connected)


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


def owns(catalog: Any, name: str, rel: Any) -> bool:
    """True when role `name` owns `rel` or is a superuser."""
    return is_superuser(catalog, name) or user_oid(catalog, name) == rel.owner


def shown_definition(catalog: Any, viewer: str | None, rel: Any) -> str:
    """`rel.definition` as `viewer` may see it: whole for its owner and superusers, with
    the VALIDATE literals redacted for everybody else."""
    if viewer is not None and not owns(catalog, viewer, rel):
        return redact_validate(str(rel.definition))
    return str(rel.definition)
