"""User registry, password verifiers and the CREATE/ALTER/DROP USER parser.

The verifier values were produced by PostgreSQL 15 (`CREATE ROLE vv PASSWORD 'abc'`, then
with `password_encryption = 'md5'`) and read back from pg_authid: ours must be identical
for the same salt, so PostgreSQL-format verifiers (e.g. from pg_dumpall) work unchanged.
"""

from __future__ import annotations

import pytest

from engine.catalog.catalog import Catalog
from engine.catalog.users import (
    Users,
    make_verifier,
    md5_verifier,
    parse_scram_verifier,
    scram_verifier,
)
from engine.errors import DuplicateObject, SqlSyntaxError, UndefinedObject
from engine.sql.parser import parse_one

PG_SCRAM = (
    "SCRAM-SHA-256$4096:e7gttuBKWiFaSDU4J8hxrg==$dhXVumzKKL0KhtzdF5qareQPySN9prqwlPdomVGAYjU="
    ":gI8PBo12SG+/WJzuIZC0UYRo2ZGxuY1G4j9XhIAITh0="
)


def test_verifiers_match_postgresql() -> None:
    iterations, salt, _, _ = parse_scram_verifier(PG_SCRAM)
    assert scram_verifier("abc", salt=salt, iterations=iterations) == PG_SCRAM
    assert md5_verifier("abc", "vv") == "md524689ac33ff110cdbb221976291fec19"


def test_make_verifier_hashes_or_keeps_prehashed() -> None:
    assert make_verifier("abc", "vv", "md5") == "md524689ac33ff110cdbb221976291fec19"
    assert make_verifier("abc", "vv").startswith("SCRAM-SHA-256$4096:")
    assert make_verifier(PG_SCRAM, "anyone") == PG_SCRAM
    assert make_verifier("md524689ac33ff110cdbb221976291fec19", "vv", "scram-sha-256") == (
        "md524689ac33ff110cdbb221976291fec19"
    )


def test_registry_and_catalog_persistence() -> None:
    cat = Catalog()
    assert [u.name for u in cat.users.list()] == ["root", "postgres"]
    u = cat.users.create("alice", password=md5_verifier("x", "alice"), createdb=True)
    assert u.oid >= 16384 and u.auth_method == "md5"
    with pytest.raises(DuplicateObject):
        cat.users.create("alice")
    cat.users.rename("alice", "bob")
    with pytest.raises(UndefinedObject, match='role "alice" does not exist'):
        cat.users.get("alice")
    back = Catalog.from_bytes(cat.to_bytes())
    bob = back.users.get("bob")
    assert (bob.oid, bob.createdb, bob.password) == (u.oid, True, u.password)
    assert "md5" not in repr(bob)
    assert back.users.create("carol").oid == u.oid + 1
    # a catalog written before users existed still gets the built-in users
    assert [x.name for x in Users.from_json(None).list()] == ["root", "postgres"]


@pytest.mark.parametrize(
    ("sql", "args"),
    [
        (
            "CREATE USER alice WITH PASSWORD 'it''s' SUPERUSER",
            {
                "action": "create",
                "name": "alice",
                "options": {"password": "it's", "superuser": True, "login": True},
            },
        ),
        (
            'create role "Mixed" nologin createdb',
            {"action": "create", "name": "Mixed", "options": {"login": False, "createdb": True}},
        ),
        ("CREATE ROLE r", {"action": "create", "name": "r", "options": {"login": False}}),
        (
            "ALTER USER a ENCRYPTED PASSWORD 'p' NOSUPERUSER",
            {"action": "alter", "name": "a", "options": {"password": "p", "superuser": False}},
        ),
        (
            "ALTER USER a PASSWORD NULL",
            {"action": "alter", "name": "a", "options": {"password": None}},
        ),
        ("ALTER USER a RENAME TO b", {"action": "rename", "name": "a", "new_name": "b"}),
        ("ALTER ROLE a SET search_path = x", {"action": "set", "name": "a"}),
        ("DROP USER IF EXISTS a, b", {"action": "drop", "names": ["a", "b"], "if_exists": True}),
    ],
)
def test_parse_user_statements(sql: str, args: dict) -> None:
    st = parse_one(sql)
    assert st.kind == "user"
    assert st.args == args


def test_parse_user_errors() -> None:
    with pytest.raises(SqlSyntaxError):
        parse_one("CREATE USER a PASSWORD")
    with pytest.raises(SqlSyntaxError):
        parse_one("CREATE USER a BOGUS")
    with pytest.raises(SqlSyntaxError):
        parse_one("DROP USER a b")
