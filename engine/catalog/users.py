"""Database users (roles that can log in) and their password verifiers.

Why: clients connect as a user; `CREATE USER ... PASSWORD` turns on password
authentication for that user (MD5 or SCRAM-SHA-256, as PostgreSQL), while users without a
password (the built-in superusers `root` and `postgres` included) keep the playground's
trust authentication. pg_roles / pg_user read `Users.list()`.

Lifecycle: one `Users` per `Catalog` (`catalog.users`), created with the built-in users,
mutated by the CREATE/ALTER/DROP USER handlers under the runtime lock and persisted with
every checkpoint inside the catalog blob (`to_json` / `from_json`). Passwords are never
stored in clear: `password` holds a PostgreSQL-format verifier, either
`SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>` or `md5<md5(password || name)>`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from dataclasses import dataclass, field
from typing import Any

from engine.errors import DuplicateObject, UndefinedObject

SCRAM_ITERATIONS = 4096
SCRAM_PREFIX = "SCRAM-SHA-256$"
FIRST_USER_OID = 16384
# PostgreSQL's bootstrap superuser has oid 10; RisingWave has `root` and `postgres`.
BUILTIN_USERS = (("root", 10), ("postgres", 11))
ROOT_OID = 10  # owns the relations created before ownership was recorded


@dataclass
class User:
    """One role. `oid` is stable (pg_roles.oid / pg_class.relowner for objects it owns)."""

    name: str
    oid: int
    superuser: bool = False
    createdb: bool = False
    createrole: bool = False
    login: bool = True
    password: str | None = None  # verifier (see the module docstring), None: trust
    builtin: bool = False
    options: dict[str, Any] = field(default_factory=dict)

    @property
    def auth_method(self) -> str:
        """'scram-sha-256', 'md5' or 'trust' (no password)."""
        if self.password is None:
            return "trust"
        return "scram-sha-256" if self.password.startswith(SCRAM_PREFIX) else "md5"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "oid": self.oid,
            "superuser": self.superuser,
            "createdb": self.createdb,
            "createrole": self.createrole,
            "login": self.login,
            "password": self.password,
            "builtin": self.builtin,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> User:
        return cls(
            name=d["name"],
            oid=d["oid"],
            superuser=d.get("superuser", False),
            createdb=d.get("createdb", False),
            createrole=d.get("createrole", False),
            login=d.get("login", True),
            password=d.get("password"),
            builtin=d.get("builtin", False),
        )

    def __repr__(self) -> str:  # never print the verifier
        return f"User({self.name}, oid={self.oid}, superuser={self.superuser})"


class Users:
    """The user registry: lookup by name, creation with fresh oids, JSON persistence."""

    def __init__(self) -> None:
        self._by_name: dict[str, User] = {}
        self.next_oid = FIRST_USER_OID
        for name, oid in BUILTIN_USERS:
            self._by_name[name] = User(
                name, oid, superuser=True, createdb=True, createrole=True, builtin=True
            )

    def list(self) -> list[User]:
        """Every user, ordered by oid."""
        return sorted(self._by_name.values(), key=lambda u: u.oid)

    def find(self, name: str) -> User | None:
        return self._by_name.get(name)

    def get(self, name: str) -> User:
        u = self._by_name.get(name)
        if u is None:
            raise UndefinedObject(f'role "{name}" does not exist')
        return u

    def by_oid(self, oid: int) -> User | None:
        for u in self._by_name.values():
            if u.oid == oid:
                return u
        return None

    def create(self, name: str, **attrs: Any) -> User:
        if name in self._by_name:
            raise DuplicateObject(f'role "{name}" already exists')
        user = User(name, self.next_oid, **attrs)
        self.next_oid += 1
        self._by_name[name] = user
        return user

    def rename(self, old: str, new: str) -> User:
        user = self.get(old)
        if new in self._by_name:
            raise DuplicateObject(f'role "{new}" already exists')
        del self._by_name[old]
        user.name = new
        self._by_name[new] = user
        return user

    def drop(self, name: str) -> User:
        user = self.get(name)
        del self._by_name[name]
        return user

    # -- persistence -----------------------------------------------------------------------
    def to_json(self) -> dict[str, Any]:
        return {"next_oid": self.next_oid, "users": [u.to_json() for u in self.list()]}

    @classmethod
    def from_json(cls, d: dict[str, Any] | None) -> Users:
        users = cls()
        if not d:
            return users
        users._by_name = {}
        users.next_oid = d.get("next_oid", FIRST_USER_OID)
        for uj in d.get("users", []):
            u = User.from_json(uj)
            users._by_name[u.name] = u
        return users


# -- password verifiers --------------------------------------------------------------------------
def md5_verifier(password: str, user: str) -> str:
    return "md5" + hashlib.md5((password + user).encode()).hexdigest()


def scram_verifier(password: str, *, salt: bytes | None = None, iterations: int = 0) -> str:
    """A PostgreSQL-format SCRAM-SHA-256 verifier (RFC 5802 / 7677)."""
    salt = salt if salt is not None else os.urandom(16)
    iterations = iterations or SCRAM_ITERATIONS
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", "sha256")
    b64 = base64.b64encode
    return (
        f"{SCRAM_PREFIX}{iterations}:{b64(salt).decode()}"
        f"${b64(stored_key).decode()}:{b64(server_key).decode()}"
    )


def make_verifier(password: str, user: str, encryption: str = "scram-sha-256") -> str:
    """The verifier to store for `password`: pre-hashed values (as pg_dump writes them) are
    kept as given; otherwise hashed per `password_encryption` ('scram-sha-256' or 'md5')."""
    if password.startswith(SCRAM_PREFIX) or (password.startswith("md5") and len(password) == 35):
        return password
    if encryption.lower() == "md5":
        return md5_verifier(password, user)
    return scram_verifier(password)


def verifies(verifier: str | None, password: str, user: str) -> bool:
    """True when `password` is the one `verifier` was made from (for `user`, as MD5
    verifiers are salted with the name)."""
    if verifier is None:
        return False
    if verifier.startswith(SCRAM_PREFIX):
        iterations, salt, stored_key, _ = parse_scram_verifier(verifier)
        salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
        client_key = hmac.digest(salted, b"Client Key", "sha256")
        return hmac.compare_digest(hashlib.sha256(client_key).digest(), stored_key)
    return hmac.compare_digest(verifier, md5_verifier(password, user))


def parse_scram_verifier(verifier: str) -> tuple[int, bytes, bytes, bytes]:
    """(iterations, salt, StoredKey, ServerKey) of a SCRAM verifier."""
    head, keys = verifier[len(SCRAM_PREFIX) :].split("$", 1)
    iterations, salt = head.split(":", 1)
    stored, server = keys.split(":", 1)
    d = base64.b64decode
    return int(iterations), d(salt), d(stored), d(server)
