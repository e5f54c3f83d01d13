"""Catalog entries and their JSON persistence.

Relation ids are allocated from one counter and never reused. State-table ids come from
a separate counter and are recorded per relation under a stable name (`op3.groups`), so
re-planning a view after restart finds the same state.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from engine.catalog.users import Users
from engine.errors import DuplicateTable, InsufficientPrivilege, UndefinedTable, WrongObjectType
from engine.types import Field, SqlType, TypeKind, list_of

# State-table ids start high enough that relation ids and state ids never look alike in
# logs; they must stay below the store's reserved 0xFFFF.... key prefixes.
FIRST_STATE_TABLE_ID = 1000
FIRST_RELATION_ID = 100


class RelationKind(StrEnum):
    TABLE = "table"
    MATERIALIZED_VIEW = "materialized view"
    VIEW = "view"
    SOURCE = "source"
    SINK = "sink"

    @property
    def tag_name(self) -> str:
        """The object name in command tags: CREATE_MATERIALIZED_VIEW."""
        return self.value.upper().replace(" ", "_")


@dataclass
class Relation:
    """One named object. `fields` include hidden columns; `pk` indexes into `fields`."""

    id: int
    name: str
    kind: RelationKind
    fields: list[Field]
    pk: list[int]
    definition: str  # the CREATE statement as the user wrote it
    schema_name: str = "public"
    query: str = ""  # for views and materialized views: the SELECT text
    append_only: bool = False
    depends_on: list[int] = field(default_factory=list)
    state_tables: dict[str, int] = field(default_factory=dict)
    options: dict[str, str] = field(default_factory=dict)
    row_id_index: int | None = None  # hidden `_row_id` column of a table without a primary key
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def visible_fields(self) -> list[Field]:
        return [f for f in self.fields if not f.hidden]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "kind": self.kind.value,
            "fields": [[f.name, _type_to_json(f.type), f.hidden] for f in self.fields],
            "pk": self.pk,
            "definition": self.definition,
            "schema_name": self.schema_name,
            "query": self.query,
            "append_only": self.append_only,
            "depends_on": self.depends_on,
            "state_tables": self.state_tables,
            "options": self.options,
            "row_id_index": self.row_id_index,
            "extra": self.extra,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Relation:
        return cls(
            id=d["id"],
            name=d["name"],
            kind=RelationKind(d["kind"]),
            fields=[Field(n, _type_from_json(t), h) for n, t, h in d["fields"]],
            pk=list(d["pk"]),
            definition=d["definition"],
            schema_name=d.get("schema_name", "public"),
            query=d.get("query", ""),
            append_only=d.get("append_only", False),
            depends_on=list(d.get("depends_on", [])),
            state_tables=dict(d.get("state_tables", {})),
            options=dict(d.get("options", {})),
            row_id_index=d.get("row_id_index"),
            extra=dict(d.get("extra", {})),
        )


def _type_to_json(t: SqlType) -> Any:
    if t.kind is TypeKind.LIST:
        assert t.elem is not None
        return ["list", _type_to_json(t.elem)]
    if t.mod is not None:  # varchar(n), numeric(p, s)
        return {"kind": t.kind.name, "mod": list(t.mod)}
    return t.kind.name


def _type_from_json(v: Any) -> SqlType:
    if isinstance(v, list):
        return list_of(_type_from_json(v[1]))
    if isinstance(v, dict):
        return SqlType(TypeKind[v["kind"]], mod=tuple(v["mod"]))
    return SqlType(TypeKind[v])


@dataclass
class Secret:
    """A named secret (`CREATE SECRET s WITH (backend = 'meta') AS 'v'`).

    The value is kept only here (persisted with the catalog, like RisingWave's meta
    backend) and resolved when used; SHOW CREATE, logs and errors name the secret only.
    """

    name: str
    value: str
    schema_name: str = "public"

    def __repr__(self) -> str:  # never print the value
        return f"Secret({self.schema_name}.{self.name})"


class Catalog:
    """All relations of the single database `dev`, schema `public` by default.

    Mutated only under the runtime lock, by DDL; persisted with each checkpoint.
    """

    def __init__(self) -> None:
        self.relations: dict[int, Relation] = {}
        self.next_relation_id = FIRST_RELATION_ID
        self.next_state_table_id = FIRST_STATE_TABLE_ID
        self.version = 0
        self.secrets: dict[str, Secret] = {}  # by name (schema public)
        self.users = Users()  # login roles (engine/catalog/users.py)
        # CREATE CONNECTION: name -> {"schema": ..., "options": {...}} (engine.handlers.connection)
        self.connections: dict[str, dict[str, Any]] = {}
        # CREATE SCHEMA names (engine.handlers.schema); a relation's schema also exists
        self.schemas: set[str] = set()

    # -- lookup --------------------------------------------------------------------------
    def find(self, name: str, schema: str | None = None) -> Relation | None:
        schema = schema or "public"
        for r in self.relations.values():
            if r.name == name and r.schema_name == schema:
                return r
        return None

    def get(self, name: str, schema: str | None = None, *, position: int | None = None) -> Relation:
        r = self.find(name, schema)
        if r is None:
            shown = f"{schema}.{name}" if schema else name
            raise UndefinedTable(f'relation "{shown}" does not exist', position=position)
        return r

    def get_kind(self, name: str, kind: RelationKind, schema: str | None = None) -> Relation:
        r = self.get(name, schema)
        if r.kind is not kind:
            raise WrongObjectType(f'"{name}" is not a {kind.value}')
        return r

    def by_id(self, rid: int) -> Relation:
        return self.relations[rid]

    def dependents(self, rid: int) -> list[Relation]:
        return [r for r in self.relations.values() if rid in r.depends_on]

    def ordered(self) -> list[Relation]:
        """Relations in creation order (a valid dependency order)."""
        return [self.relations[k] for k in sorted(self.relations)]

    # -- mutation ------------------------------------------------------------------------
    def check_schema(self, name: str, schema: str | None) -> None:
        """Refuse creating a relation inside a system schema (as PostgreSQL: 42501); their
        contents come from the system catalog registry, not from the user."""
        if schema in ("pg_catalog", "information_schema", "rw_catalog"):
            raise InsufficientPrivilege(
                f'permission denied to create "{schema}.{name}"',
                detail="System catalog schemas hold built-in relations only.",
            )

    def check_free(self, name: str, schema: str | None = None) -> None:
        existing = self.find(name, schema)
        if existing is not None:
            raise DuplicateTable(f'relation "{name}" already exists')

    def allocate_relation_id(self) -> int:
        rid = self.next_relation_id
        self.next_relation_id += 1
        return rid

    def allocate_state_table_id(self) -> int:
        sid = self.next_state_table_id
        self.next_state_table_id += 1
        return sid

    def add(self, rel: Relation) -> None:
        self.relations[rel.id] = rel
        self.version += 1

    def remove(self, rid: int) -> Relation:
        self.version += 1
        return self.relations.pop(rid)

    # -- persistence ---------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        return json.dumps(
            {
                "next_relation_id": self.next_relation_id,
                "next_state_table_id": self.next_state_table_id,
                "relations": [r.to_json() for r in self.ordered()],
                "secrets": [[s.name, s.schema_name, s.value] for s in self.secrets.values()],
                "users": self.users.to_json(),
                "connections": self.connections,
                "schemas": sorted(self.schemas),
            }
        ).encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> Catalog:
        d = json.loads(data)
        cat = cls()
        cat.next_relation_id = d["next_relation_id"]
        cat.next_state_table_id = d["next_state_table_id"]
        for rj in d["relations"]:
            rel = Relation.from_json(rj)
            cat.relations[rel.id] = rel
        for name, schema, value in d.get("secrets", []):
            cat.secrets[name] = Secret(name, value, schema)
        cat.users = Users.from_json(d.get("users"))
        cat.connections = dict(d.get("connections", {}))
        cat.schemas = set(d.get("schemas", []))
        return cat

    def replace_with(self, other: Catalog) -> None:
        """Take over `other`'s contents in place: a rollback to the last checkpoint restores
        the catalog for everyone holding this object. The version still moves forward, so
        caches keyed by it are rebuilt."""
        version = self.version + 1
        self.__dict__.update(other.__dict__)
        self.version = max(version, other.version + 1)

    # -- secrets -------------------------------------------------------------------------
    def add_secret(self, secret: Secret) -> None:
        self.secrets[secret.name] = secret
        self.version += 1

    def remove_secret(self, name: str) -> Secret:
        self.version += 1
        return self.secrets.pop(name)

    def secret_users(self, name: str) -> list[Relation]:
        """Relations whose definition refers to secret `name` (VALIDATE SECRET, `= secret s`)."""
        return [
            r
            for r in self.ordered()
            if name in r.extra.get("secret_refs", [])
            or r.extra.get("webhook", {}).get("secret") == name
        ]
