"""The ACL model (aclitem letters, grant options, revoke) and catalogs written before
owners existed opening with root as the owner of everything."""

from __future__ import annotations

import json

from engine.catalog import Catalog, Relation, RelationKind
from engine.catalog import privileges as pv
from engine.catalog.users import ROOT_OID


def _rel(cat: Catalog, name: str = "t", owner: int = ROOT_OID) -> Relation:
    rel = Relation(
        id=cat.allocate_relation_id(),
        name=name,
        kind=RelationKind.TABLE,
        fields=[],
        pk=[],
        definition=f"CREATE TABLE {name} ()",
        owner=owner,
    )
    cat.add(rel)
    return rel


def test_grant_merges_and_prints_like_postgres() -> None:
    cat = Catalog()
    alice = cat.users.create("alice")
    bob = cat.users.create("bob")
    rel = _rel(cat)
    acl = pv.relation_acl(rel)
    pv.grant(acl, alice.oid, ROOT_OID, "r", True)
    pv.grant(acl, alice.oid, ROOT_OID, "a", False)
    pv.grant(acl, bob.oid, ROOT_OID, "wr", False)
    pv.grant(acl, pv.PUBLIC, ROOT_OID, "r", False)
    rel.acl = acl
    assert pv.acl_text(cat, acl) == [
        "root=arwdDxt/root",
        "alice=ar*/root",
        "bob=rw/root",
        "=r/root",
    ]
    assert pv.has_privilege(cat, alice.oid, rel, "r", grant=True)
    assert not pv.has_privilege(cat, alice.oid, rel, "a", grant=True)
    assert pv.has_privilege(cat, bob.oid, rel, "r")  # bob's own and PUBLIC's
    assert not pv.has_privilege(cat, bob.oid, rel, "d")
    pv.revoke(acl, alice.oid, "r", option_only=True)
    assert "alice=ar/root" in pv.acl_text(cat, acl)
    pv.revoke(acl, alice.oid, "ar", option_only=False)
    assert all(not t.startswith("alice=") for t in pv.acl_text(cat, acl))


def test_owner_and_superuser_hold_everything() -> None:
    cat = Catalog()
    alice = cat.users.create("alice")
    boss = cat.users.create("boss", superuser=True)
    rel = _rel(cat, owner=alice.oid)
    assert pv.has_privilege(cat, alice.oid, rel, "d", grant=True)
    assert pv.has_privilege(cat, boss.oid, rel, "r")
    assert pv.has_privilege(cat, 11, rel, "r")  # postgres is a superuser
    assert not pv.has_privilege(cat, 99999, rel, "r")
    assert pv.has_schema_privilege(cat, alice.oid, "public", "C")  # PUBLIC may create


def test_catalog_from_before_owners_opens_with_root_owning_all() -> None:
    cat = Catalog()
    _rel(cat)
    d = json.loads(cat.to_bytes())
    for rj in d["relations"]:
        del rj["owner"], rj["acl"]
    d.pop("schema_owners"), d.pop("schema_acl")
    d["secrets"] = [["s", "public", "v"]]
    old = Catalog.from_bytes(json.dumps(d).encode())
    (rel,) = old.relations.values()
    assert rel.owner == ROOT_OID and rel.acl == []
    assert old.secrets["s"].owner == ROOT_OID
    assert pv.schema_owner(old, "public") == ROOT_OID
