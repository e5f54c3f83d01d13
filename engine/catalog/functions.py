"""User-defined functions in the catalog: `CREATE FUNCTION` / `CREATE AGGREGATE` entries.

Why a catalog entry and not a relation: a function has a signature (name and argument
types: several functions may share a name), no columns of its own and no state. What is
stored is what the user wrote (the body and the declared types), never compiled code:
the Python body is compiled again, by `engine.expr.udf`, the first time the function is
called after a restart, so a data directory holds no pickled objects.

Lifecycle: the DDL handler (`engine.handlers.function_ddl`) adds and removes entries
under the runtime lock and forces a checkpoint; the planner (`engine.plan.plan_udf`)
looks them up by name and argument types; `pg_proc` and `SHOW FUNCTIONS` list them.
Oids come from the relation id counter, so a function's oid never collides with a
relation's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.catalog.users import ROOT_OID
from engine.types import Field, SqlType


@dataclass
class UserFunction:
    """One user-defined function. `kind`: scalar, table (`RETURNS TABLE (...)`, a Python
    generator) or aggregate; `language`: python or sql."""

    oid: int
    name: str
    kind: str
    language: str
    arg_names: list[str]
    arg_types: list[SqlType]
    return_type: SqlType  # a table function's first column type
    body: str
    definition: str  # the CREATE statement as written
    schema_name: str = "public"
    return_columns: list[Field] = field(default_factory=list)  # table functions
    batch: bool = False  # WITH (batch = true): called once per chunk with Arrow arrays
    strict: bool = False  # RETURNS NULL ON NULL INPUT / STRICT
    owner: int = ROOT_OID
    # the compiled body (engine.expr.udf.PythonRoutine), made on first use; never stored
    compiled: Any = field(default=None, repr=False, compare=False)

    @property
    def signature(self) -> str:
        """`f(integer, character varying)`: how PostgreSQL names one overload."""
        return f"{self.name}({', '.join(t.display for t in self.arg_types)})"

    @property
    def is_aggregate(self) -> bool:
        return self.kind == "aggregate"

    def to_json(self, type_to_json: Callable[[SqlType], Any]) -> dict[str, Any]:
        return {
            "oid": self.oid,
            "name": self.name,
            "kind": self.kind,
            "language": self.language,
            "arg_names": self.arg_names,
            "arg_types": [type_to_json(t) for t in self.arg_types],
            "return_type": type_to_json(self.return_type),
            "return_columns": [[f.name, type_to_json(f.type)] for f in self.return_columns],
            "body": self.body,
            "definition": self.definition,
            "schema_name": self.schema_name,
            "batch": self.batch,
            "strict": self.strict,
            "owner": self.owner,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any], type_from_json: Callable[[Any], SqlType]) -> UserFunction:
        return cls(
            oid=int(d["oid"]),
            name=d["name"],
            kind=d["kind"],
            language=d["language"],
            arg_names=list(d["arg_names"]),
            arg_types=[type_from_json(t) for t in d["arg_types"]],
            return_type=type_from_json(d["return_type"]),
            return_columns=[Field(n, type_from_json(t)) for n, t in d.get("return_columns", [])],
            body=d["body"],
            definition=d["definition"],
            schema_name=d.get("schema_name", "public"),
            batch=bool(d.get("batch", False)),
            strict=bool(d.get("strict", False)),
            owner=int(d.get("owner", ROOT_OID)),
        )


def functions_named(
    functions: dict[int, UserFunction], name: str, schema: str | None = None
) -> list[UserFunction]:
    """The overloads of `name` (in `schema`, or in any schema on the search path: public)."""
    want = schema or "public"
    return [f for f in functions.values() if f.name == name and f.schema_name == want]
