"""CREATE SOURCE, and the connector part of CREATE TABLE ... WITH (connector = 'kafka').

A source's catalog entry is a `Relation` of kind SOURCE whose fields are the declared
columns, then the INCLUDE columns, then the connector's hidden columns (`_rw_kafka_partition`,
`_rw_kafka_offset`, `_rw_kafka_timestamp` for Kafka); its stream key is the connector's
message id (partition, offset). `extra["source"]` records the connector name, FORMAT /
ENCODE and the INCLUDE list; the runtime (`engine.stream.source`) reads it to start readers.
A TABLE with a connector gets the same layout, keyed by its PRIMARY KEY if it has one
(required for FORMAT UPSERT) and by the message id otherwise.

`FORMAT ... ENCODE ...` may be left out: `FORMAT PLAIN ENCODE JSON` is assumed (the user's
seed script writes CREATE SOURCE without it).
"""

from __future__ import annotations

from typing import Any

from sqlglot import exp

from engine.api import Notice, QueryResult
from engine.catalog import Relation, RelationKind
from engine.catalog.privileges import session_owner
from engine.errors import (
    DuplicateColumn,
    InvalidColumnReference,
    SqlSyntaxError,
    UndefinedObject,
    not_supported,
)
from engine.handlers.column_defs import column_field, key_names
from engine.sql.parser import Statement
from engine.stream.source import SOURCE_EXTRA
from engine.types import Field


def connector_layout(
    kind: RelationKind,
    fields: list[Field],
    has_pk: bool,
    options: dict[str, str],
    clauses: Any,
) -> tuple[list[Field], list[int], dict[str, Any]]:
    """Fields, default key (message id) and `extra["source"]` of a connector-fed relation."""
    from engine.connector_registry import source_connector

    name = options["connector"].lower()
    conn = source_connector(name)
    fmt = ((clauses.format if clauses is not None else None) or "PLAIN").upper()
    enc = ((clauses.encode if clauses is not None else None) or "JSON").upper()
    includes = list(clauses.include) if clauses is not None else []
    inc_fields, hidden, key_names = conn.columns(includes, fmt, enc)
    fields = list(fields)
    inc_meta = []
    for clause, f in zip(includes, inc_fields):
        if any(x.name == f.name for x in fields):
            raise DuplicateColumn(f'column "{f.name}" specified more than once')
        inc_meta.append(
            {"what": clause.what, "inner": clause.inner, "column": f.name, "type": f.type.kind.name}
        )
        fields.append(f)
    names = {f.name for f in fields}
    for h in hidden:
        if h.name in names:  # an INCLUDE with the default name shows the hidden column
            continue
        fields.append(h)
    if kind is RelationKind.SOURCE:
        if has_pk and fmt != "UPSERT":
            raise not_supported(
                "PRIMARY KEY on a source",
                hint="Use CREATE TABLE ... FORMAT UPSERT to key rows by the message key.",
            )
        if fmt == "UPSERT":
            raise not_supported(
                "FORMAT UPSERT on a source", hint="Use CREATE TABLE for FORMAT UPSERT."
            )
    if not has_pk and fmt == "UPSERT":
        raise InvalidColumnReference(
            "primary key must be specified for FORMAT UPSERT",
            hint="Add INCLUDE KEY AS k and PRIMARY KEY (k).",
        )
    pk = [next(i for i, f in enumerate(fields) if f.name == k) for k in key_names]
    meta = {"connector": name, "format": fmt, "encode": enc, "include": inc_meta}
    return fields, pk, meta


def shared_source_options(
    session: Any, source: str, table: str | None, own: dict[str, str]
) -> dict[str, str]:
    """`CREATE TABLE t (...) FROM src TABLE 'schema.table'`: the table's connector options,
    copied from the shared source `src` (a postgres-cdc source) plus `table.name`."""
    from engine.connector_registry import source_connector

    src = session.db.catalog.find(source, None)
    if src is None or src.kind is not RelationKind.SOURCE:
        raise UndefinedObject(f'source "{source}" does not exist')
    conn = src.options.get("connector", "")
    if not getattr(source_connector(conn), "shared_source", False):
        raise not_supported(
            f"CREATE TABLE ... FROM a {conn} source",
            hint="FROM src TABLE '...' reads a table of a CDC source (connector = 'postgres-cdc').",
        )
    return {**src.options, **own, "table.name": table or ""}


def _columns(schema: exp.Schema) -> tuple[list[Field], list[str], list[exp.Expression]]:
    fields: list[Field] = []
    pk_names: list[str] = []
    watermarks: list[exp.Expression] = []
    for item in schema.expressions:
        if isinstance(item, exp.ColumnDef):
            field = column_field(item, fields)
            fields.append(field)
            for c in item.constraints:
                if isinstance(c.args.get("kind"), exp.PrimaryKeyColumnConstraint):
                    pk_names.append(field.name)
        elif isinstance(item, exp.PrimaryKey):
            pk_names.extend(key_names(item))
        elif isinstance(item, exp.WatermarkColumnConstraint):
            watermarks.append(item)
        else:
            raise not_supported(f"source element {item.sql(dialect='postgres')}")
    return fields, pk_names, watermarks


def create_source(session: Any, st: Statement) -> QueryResult:
    ast = st.ast
    assert isinstance(ast, exp.Create)
    clauses = st.args.get("clauses")
    options: dict[str, str] = dict(clauses.options) if clauses is not None else {}
    target = ast.this
    if isinstance(target, exp.Schema):
        fields, pk_names, watermarks = _columns(target)
        target = target.this
    else:
        fields, pk_names, watermarks = [], [], []
    assert isinstance(target, exp.Table)
    name = target.name if target.this.args.get("quoted") else target.name.lower()
    sch = target.db or None
    if not options.get("connector"):
        raise SqlSyntaxError("missing required option: connector")
    if options["connector"].lower() == "iceberg" and not fields:
        from engine.handlers.iceberg_table import create_iceberg_source

        return create_iceberg_source(session, st, name, sch)  # columns from the table
    if options["connector"].lower() == "webhook":
        raise not_supported(
            "webhook sources", hint="Use CREATE TABLE ... WITH (connector = 'webhook')."
        )
    from engine.connector_registry import source_connector

    conn = source_connector(options["connector"])
    shared = getattr(conn, "shared_source", False)
    if not fields and hasattr(conn, "default_columns"):  # a generator knows its columns
        fields = conn.default_columns(options)
    if not fields and not shared:
        raise not_supported(
            "a source without columns", hint="Declare the columns: CREATE SOURCE s (a INT, ...)."
        )
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        cat.check_schema(name, sch)
        if cat.find(name, sch) is not None:
            if ast.args.get("exists"):
                return QueryResult(
                    "CREATE_SOURCE", notices=[Notice(f'relation "{name}" already exists, skipping')]
                )
            cat.check_free(name, sch)
        fields, pk, meta = connector_layout(
            RelationKind.SOURCE, fields, bool(pk_names), options, clauses
        )
        rel = Relation(
            id=cat.allocate_relation_id(),
            name=name,
            kind=RelationKind.SOURCE,
            fields=fields,
            pk=pk,
            definition=st.sql.strip(),
            owner=session_owner(session),
            schema_name=sch or "public",
            append_only=True,
            options=options,
            extra={SOURCE_EXTRA: meta},
        )
        from engine.stream.operators.watermark import define_watermark

        watermark = define_watermark(watermarks, fields)
        if st.args.get("watermark_ttl"):
            raise not_supported(
                "WATERMARK ... WITH TTL on a source",
                hint="A source keeps no rows to clean up: remove WITH TTL, or use a table.",
            )
        if watermark is not None:  # advanced from each epoch's messages (Runtime.barrier)
            rel.extra["watermark"] = watermark
        if clauses is not None:  # `properties.sasl.password = SECRET s`
            cat.bind_secret_options(rel, clauses.secret_refs)
        from engine.stream.source import connector_for

        connector_for(rel).check(rel)
        rt.create_source(rel)
    return QueryResult("CREATE_SOURCE")
