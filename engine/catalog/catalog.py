"""Catalog entries and their JSON persistence.

Relation ids are allocated from one counter and never reused. State-table ids come from
a separate counter and are recorded per relation under a stable name (`n3.groups`); a
view's or sink's stored stream plan (`extra["stream_plan"]`) names the same ids.

Credentials (engine/catalog/credentials.py, engine/catalog/secret_box.py): in memory,
`Relation.options`, connection options and `Secret.value` hold the values connectors
use; a relation's `definition` never does (`add` stores it with credential values
replaced by `'[REDACTED]'`). On disk (`to_bytes`) every credential-named string under a
relation's options/extra and a connection's options, and every secret value, is sealed
with the catalog's `box`; options taken from secrets (`k = SECRET s`,
`extra["secret_options"]`) are stored as the reference only and resolved again at load.
`from_bytes(data, box)` opens them (refusing a box whose key check differs) and redacts
definitions written by older versions, so old data directories open unchanged and are
rewritten sealed at the next checkpoint.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from engine.catalog.credentials import is_credential, redact_definition
from engine.catalog.databases import (
    DEFAULT_DATABASE,
    DatabaseEntry,
    current_database,
    default_entry,
)
from engine.catalog.functions import UserFunction
from engine.catalog.privileges import require_create_in, require_secret
from engine.catalog.secret_box import SecretBox, is_sealed, mismatch
from engine.catalog.users import ROOT_OID, Users
from engine.errors import (
    DuplicateTable,
    InsufficientPrivilege,
    UndefinedObject,
    UndefinedTable,
    WrongObjectType,
)
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
    SUBSCRIPTION = "subscription"  # a sink-like job keeping its upstream's changes

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
    # the owning role's oid (engine/catalog/privileges.py); relations from before owners
    # existed belong to root
    owner: int = ROOT_OID
    # [[grantee oid, grantor oid, "r*w"], ...] (engine/catalog/privileges.py); [] = default
    acl: list[list[Any]] = field(default_factory=list)
    # the database it belongs to (engine/catalog/databases.py); set by `Catalog.add`
    database: str = DEFAULT_DATABASE

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
            "owner": self.owner,
            "acl": self.acl,
            **({"database": self.database} if self.database != DEFAULT_DATABASE else {}),
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
            owner=d.get("owner", ROOT_OID),
            acl=[list(e) for e in d.get("acl", [])],
            database=d.get("database", DEFAULT_DATABASE),
        )


def _type_to_json(t: SqlType) -> Any:
    if t.kind is TypeKind.LIST:
        assert t.elem is not None
        return ["list", _type_to_json(t.elem)]
    if t.mod is not None:  # varchar(n), numeric(p, s)
        return {"kind": t.kind.name, "mod": list(t.mod)}
    return t.kind.name


def type_to_json(t: SqlType) -> Any:
    """A type as the catalog stores it (also in stored scan tombstones)."""
    return _type_to_json(t)


def type_from_json(v: Any) -> SqlType:
    return _type_from_json(v)


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
    owner: int = ROOT_OID  # only its owner (and superusers) may use or drop it

    def __repr__(self) -> str:  # never print the value
        return f"Secret({self.schema_name}.{self.name})"


@dataclass
class DatabaseObjects:
    """What one database holds besides its relations, as in PostgreSQL and RisingWave:
    schemas, secrets, connections and functions belong to one database (the same name may
    exist in two), while users are the cluster's. `Catalog.secrets` and its siblings are
    the current database's (`engine.catalog.databases.current_database`), so a statement
    sees its own database's only; DROP DATABASE drops the whole entry."""

    # CREATE SCHEMA names (engine.handlers.schema); a relation's schema also exists
    schemas: set[str] = field(default_factory=set)
    # schema name -> owner oid / ACL (engine/catalog/privileges.py; missing: defaults)
    schema_owners: dict[str, int] = field(default_factory=dict)
    schema_acl: dict[str, list[list[Any]]] = field(default_factory=dict)
    secrets: dict[str, Secret] = field(default_factory=dict)  # by name (schema public)
    # CREATE CONNECTION: name -> {"schema": ..., "options": {...}} (engine.handlers.connection)
    connections: dict[str, dict[str, Any]] = field(default_factory=dict)
    # CREATE FUNCTION / CREATE AGGREGATE entries by oid (engine/catalog/functions.py)
    functions: dict[int, UserFunction] = field(default_factory=dict)
    # GRANT USAGE ON LANGUAGE python TO role: language -> grantee oids
    language_acl: dict[str, list[int]] = field(default_factory=dict)

    def to_json(self, seal: Any) -> dict[str, Any]:
        secrets = [
            [s.name, s.schema_name, seal(s.value) if seal is not None else s.value, s.owner]
            for s in self.secrets.values()
        ]
        return {
            "secrets": secrets,
            "connections": _sealed(self.connections, seal) if seal else self.connections,
            "schemas": sorted(self.schemas),
            "schema_owners": self.schema_owners,
            "schema_acl": self.schema_acl,
            "language_acl": self.language_acl,
            "functions": [f.to_json(_type_to_json) for _, f in sorted(self.functions.items())],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any], opened: Any) -> DatabaseObjects:
        o = cls()
        for name, schema, value, *rest in d.get("secrets", []):
            owner = int(rest[0]) if rest else ROOT_OID  # older catalogs: root's
            o.secrets[name] = Secret(name, opened(value), schema, owner)
        o.connections = _opened(dict(d.get("connections", {})), opened)
        o.schemas = set(d.get("schemas", []))
        o.schema_owners = {k: int(v) for k, v in (d.get("schema_owners") or {}).items()}
        o.schema_acl = {k: [list(e) for e in v] for k, v in (d.get("schema_acl") or {}).items()}
        o.language_acl = {k: [int(x) for x in v] for k, v in (d.get("language_acl") or {}).items()}
        for fj in d.get("functions", []):
            fn = UserFunction.from_json(fj, _type_from_json)
            o.functions[fn.oid] = fn
        return o


class Catalog:
    """All relations of every database (`Relation.database`), schema `public` by default.

    Mutated only under the runtime lock, by DDL; persisted with each checkpoint. Read
    without any lock (planning, system catalogs): the relation map is copy-on-write, so a
    reader iterating `relations` keeps the map it started with while a DDL publishes a new
    one (`add`, `remove`, `discard` replace the dict, never change it in place).
    """

    def __init__(self) -> None:
        self.relations: dict[int, Relation] = {}
        self.next_relation_id = FIRST_RELATION_ID
        self.next_state_table_id = FIRST_STATE_TABLE_ID
        self.version = 0
        self.users = Users()  # login roles, shared by every database (engine/catalog/users.py)
        # each database's schemas, secrets, connections, functions (`DatabaseObjects`);
        # the attributes below of the same names are the current database's
        self.objects: dict[str, DatabaseObjects] = {DEFAULT_DATABASE: DatabaseObjects()}
        # every database's entry (oid, owner, ACL), `dev`'s too (engine/catalog/databases.py)
        self.databases: dict[str, DatabaseEntry] = {DEFAULT_DATABASE: default_entry()}
        # seals credentials in `to_bytes` (set by the database at open; None in unit tests,
        # which then persist them in clear)
        self.box: SecretBox | None = None

    def objects_of(self, database: str) -> DatabaseObjects:
        """Database `database`'s schemas, secrets, connections and functions (an empty
        entry for a database that has none yet)."""
        o = self.objects.get(database)
        if o is None:
            o = self.objects[database] = DatabaseObjects()
        return o

    def forget_database(self, database: str) -> None:
        """Drop everything but the relations of `database` (DROP DATABASE)."""
        self.objects = {k: v for k, v in self.objects.items() if k != database}
        self.version += 1

    # -- the current database's objects (`DatabaseObjects`) ---------------------------------
    @property
    def schemas(self) -> set[str]:
        return self.objects_of(current_database()).schemas

    @schemas.setter
    def schemas(self, value: set[str]) -> None:
        self.objects_of(current_database()).schemas = value

    @property
    def schema_owners(self) -> dict[str, int]:
        return self.objects_of(current_database()).schema_owners

    @schema_owners.setter
    def schema_owners(self, value: dict[str, int]) -> None:
        self.objects_of(current_database()).schema_owners = value

    @property
    def schema_acl(self) -> dict[str, list[list[Any]]]:
        return self.objects_of(current_database()).schema_acl

    @schema_acl.setter
    def schema_acl(self, value: dict[str, list[list[Any]]]) -> None:
        self.objects_of(current_database()).schema_acl = value

    @property
    def secrets(self) -> dict[str, Secret]:
        return self.objects_of(current_database()).secrets

    @secrets.setter
    def secrets(self, value: dict[str, Secret]) -> None:
        self.objects_of(current_database()).secrets = value

    @property
    def connections(self) -> dict[str, dict[str, Any]]:
        return self.objects_of(current_database()).connections

    @connections.setter
    def connections(self, value: dict[str, dict[str, Any]]) -> None:
        self.objects_of(current_database()).connections = value

    @property
    def functions(self) -> dict[int, UserFunction]:
        return self.objects_of(current_database()).functions

    @functions.setter
    def functions(self, value: dict[int, UserFunction]) -> None:
        self.objects_of(current_database()).functions = value

    @property
    def language_acl(self) -> dict[str, list[int]]:
        return self.objects_of(current_database()).language_acl

    @language_acl.setter
    def language_acl(self, value: dict[str, list[int]]) -> None:
        self.objects_of(current_database()).language_acl = value

    # -- lookup --------------------------------------------------------------------------
    def find(self, name: str, schema: str | None = None) -> Relation | None:
        schema = schema or "public"
        db = current_database()
        for r in self.relations.values():
            if r.name == name and r.schema_name == schema and r.database == db:
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
        """Relations of every database in creation order (a valid dependency order)."""
        return [self.relations[k] for k in sorted(self.relations)]

    def visible(self) -> list[Relation]:
        """The current database's relations in creation order (what system catalogs,
        SHOW and schema-wide statements list)."""
        db = current_database()
        return [r for r in self.ordered() if r.database == db]

    # -- mutation ------------------------------------------------------------------------
    def check_schema(self, name: str, schema: str | None) -> None:
        """Refuse creating a relation inside a system schema (as PostgreSQL: 42501); their
        contents come from the system catalog registry, not from the user."""
        if schema in ("pg_catalog", "information_schema", "rw_catalog"):
            raise InsufficientPrivilege(
                f'permission denied to create "{schema}.{name}"',
                detail="System catalog schemas hold built-in relations only.",
            )
        require_create_in(schema)  # CREATE on the schema (engine/catalog/privileges.py)

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
        rel.definition = redact_definition(rel.definition)
        if rel.database == DEFAULT_DATABASE:
            rel.database = current_database()
        self.relations = {**self.relations, rel.id: rel}
        self.version += 1

    def remove(self, rid: int) -> Relation:
        rel = self.relations[rid]
        self.discard(rid)
        return rel

    def discard(self, rid: int) -> None:
        """Remove a relation if present (a failed CREATE undoing its `add`)."""
        if rid in self.relations:
            self.relations = {k: v for k, v in self.relations.items() if k != rid}
            self.version += 1

    # -- persistence ---------------------------------------------------------------------
    def to_bytes(self) -> bytes:
        box = self.box
        seal = box.seal if box is not None else None
        relations = []
        for r in self.ordered():
            rj = r.to_json()
            refs = r.extra.get("secret_options") or {}
            rj["options"] = {k: v for k, v in r.options.items() if k not in refs}
            if seal is not None:
                rj["options"] = _sealed(rj["options"], seal)
                rj["extra"] = _sealed(rj["extra"], seal)
            relations.append(rj)
        # `dev`'s objects at the top level (as before databases had their own), the other
        # databases' under "database_objects"
        dev = self.objects_of(DEFAULT_DATABASE)
        doc: dict[str, Any] = {
            "next_relation_id": self.next_relation_id,
            "next_state_table_id": self.next_state_table_id,
            "relations": relations,
            "users": self.users.to_json(),
            **dev.to_json(seal),
            "databases": {k: v.to_json() for k, v in sorted(self.databases.items())},
            "database_objects": {
                k: o.to_json(seal)
                for k, o in sorted(self.objects.items())
                if k != DEFAULT_DATABASE and k in self.databases
            },
        }
        if box is not None:
            doc["secret_store"] = {"key_check": box.key_check}
        return json.dumps(doc).encode()

    @classmethod
    def from_bytes(cls, data: bytes, box: SecretBox | None = None) -> Catalog:
        """The catalog persisted by `to_bytes`; `box` opens sealed credentials (a catalog
        sealed with another key, or sealed while no box is given, raises SecretKeyError)."""
        d = json.loads(data)
        check = (d.get("secret_store") or {}).get("key_check")
        if check is not None and (box is None or box.key_check != check):
            raise mismatch(box.source if box is not None else "no key given")
        opened = box.open if box is not None else _refuse_sealed
        cat = cls()
        cat.box = box
        cat.next_relation_id = d["next_relation_id"]
        cat.next_state_table_id = d["next_state_table_id"]
        for rj in d["relations"]:
            rel = Relation.from_json(_opened(rj, opened))
            rel.definition = redact_definition(rel.definition)  # older versions kept values
            cat.relations[rel.id] = rel
        cat.users = Users.from_json(d.get("users"))
        cat.databases = {
            k: DatabaseEntry.from_json(v) for k, v in (d.get("databases") or {}).items()
        }
        cat.databases.setdefault(DEFAULT_DATABASE, default_entry())  # older catalogs
        cat.objects = {DEFAULT_DATABASE: DatabaseObjects.from_json(d, opened)}
        for k, od in (d.get("database_objects") or {}).items():
            cat.objects[k] = DatabaseObjects.from_json(od, opened)
        for rel in cat.relations.values():
            cat._resolve_secret_options(rel)
        return cat

    def replace_with(self, other: Catalog) -> None:
        """Take over `other`'s contents in place: a rollback to the last checkpoint restores
        the catalog for everyone holding this object. The version still moves forward, so
        caches keyed by it are rebuilt. The secret store key (`box`) belongs to the
        database, not to the contents: it stays."""
        version = self.version + 1
        box = self.box
        self.__dict__.update(other.__dict__)
        self.box = box
        self.version = max(version, other.version + 1)

    @staticmethod
    def is_sealed_blob(data: bytes) -> bool:
        """True when a persisted catalog was written with a secret store key."""
        return bool((json.loads(data).get("secret_store") or {}).get("key_check"))

    # -- WITH options taken from secrets (`k = SECRET s`) ------------------------------------
    def bind_secret_options(self, rel: Relation, refs: dict[str, str]) -> None:
        """Record `refs` ({option key: secret name}) on `rel` and put the secrets' values
        into its options for the connector; 42704 for an unknown secret."""
        if not refs:
            return
        for name in refs.values():
            if name not in self.secrets:
                raise UndefinedObject(f'secret "{name}" does not exist')
            require_secret(self.secrets[name])
        rel.extra["secret_options"] = dict(refs)
        names = set(refs.values()) | set(rel.extra.get("secret_refs", []))
        rel.extra["secret_refs"] = sorted(names)
        self._resolve_secret_options(rel)

    def _resolve_secret_options(self, rel: Relation) -> None:
        secrets = self.objects_of(rel.database).secrets
        for key, name in (rel.extra.get("secret_options") or {}).items():
            secret = secrets.get(name)
            if secret is not None:
                rel.options[key] = secret.value

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
            for r in self.visible()
            if name in r.extra.get("secret_refs", [])
            or r.extra.get("webhook", {}).get("secret") == name
        ]


# -- sealing credentials in the persisted JSON --------------------------------------------------
def _sealed(obj: Any, seal: Any) -> Any:
    """A copy of `obj` (JSON data) with every string under a credential-named key sealed."""
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if isinstance(v, str) and v and is_credential(str(k)):
                out[k] = seal(v)
            elif isinstance(v, (dict, list)):
                out[k] = _sealed(v, seal)
            else:
                out[k] = v
        return out
    if isinstance(obj, list):
        return [_sealed(v, seal) if isinstance(v, (dict, list)) else v for v in obj]
    return obj


def _opened(obj: Any, opened: Any) -> Any:
    """A copy of `obj` with every sealed string opened."""
    if isinstance(obj, dict):
        return {k: _opened(v, opened) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_opened(v, opened) for v in obj]
    if is_sealed(obj):
        return opened(obj)
    return obj


def _refuse_sealed(value: str) -> str:
    if is_sealed(value):
        raise mismatch("no key given")
    return value
