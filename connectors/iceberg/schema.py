"""Swell columns <-> Iceberg schemas, and the checks that name columns when they disagree.

* `iceberg_schema(fields, pk)` builds the schema of a table Swell creates (sink with
  `create_table_if_not_exists`, `ENGINE = iceberg`): field ids 1..n in column order, primary
  key columns required and listed as identifier fields.
* `check_compatible(fields, schema, table)` is run at CREATE SINK against an existing
  table: every sink column must exist in the table (by name, like RisingWave since #25868)
  with a type it can be written as, and every required table column must be fed. The error
  lists all the offending columns at once.
* `to_arrow(batch, schema)` turns a chunk's Arrow data into the table's Arrow schema
  (column order, int16 -> int32, nullability of required columns) with Arrow kernels.
* `sql_fields(schema)` is the reverse mapping, for reading external tables.
"""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.schema import Schema
from pyiceberg.types import (
    BinaryType,
    BooleanType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IcebergType,
    IntegerType,
    ListType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
    TimestamptzType,
    TimeType,
)

from engine.errors import DatatypeMismatch, not_supported
from engine.types import (
    BIGINT,
    BOOLEAN,
    BYTEA,
    DATE,
    DOUBLE,
    INT,
    NUMERIC,
    REAL,
    TIME,
    TIMESTAMP,
    TIMESTAMPTZ,
    VARCHAR,
    Field,
    SqlType,
    TypeKind,
    list_of,
)


def iceberg_type(t: SqlType, next_id: list[int]) -> IcebergType:
    k = t.kind
    simple: dict[TypeKind, IcebergType] = {
        TypeKind.BOOLEAN: BooleanType(),
        TypeKind.SMALLINT: IntegerType(),
        TypeKind.INT: IntegerType(),
        TypeKind.BIGINT: LongType(),
        TypeKind.REAL: FloatType(),
        TypeKind.DOUBLE: DoubleType(),
        TypeKind.NUMERIC: DecimalType(38, 10),
        TypeKind.VARCHAR: StringType(),
        TypeKind.JSONB: StringType(),
        TypeKind.BYTEA: BinaryType(),
        TypeKind.DATE: DateType(),
        TypeKind.TIME: TimeType(),
        TypeKind.TIMESTAMP: TimestampType(),
        TypeKind.TIMESTAMPTZ: TimestamptzType(),
    }
    if k in simple:
        return simple[k]
    if k is TypeKind.LIST:
        assert t.elem is not None
        eid = next_id[0]
        next_id[0] += 1
        return ListType(element_id=eid, element_type=iceberg_type(t.elem, next_id))
    raise not_supported(
        f"column type {t.display} in an Iceberg table",
        hint="Cast the column to a supported type (e.g. varchar) in the sink's query.",
    )


def iceberg_schema(fields: list[Field], pk: list[int]) -> Schema:
    n = len(fields)
    next_id = [n + 1]
    cols = []
    for i, f in enumerate(fields):
        cols.append(NestedField(i + 1, f.name, iceberg_type(f.type, next_id), required=i in pk))
    return Schema(*cols, identifier_field_ids=[i + 1 for i in pk])


def _compatible(src: SqlType, dst: IcebergType) -> bool:
    k = src.kind
    if isinstance(dst, StringType):
        return k in (TypeKind.VARCHAR, TypeKind.JSONB)
    if isinstance(dst, LongType):
        return k in (TypeKind.SMALLINT, TypeKind.INT, TypeKind.BIGINT)
    if isinstance(dst, IntegerType):
        return k in (TypeKind.SMALLINT, TypeKind.INT)
    if isinstance(dst, DoubleType):
        return k in (TypeKind.REAL, TypeKind.DOUBLE)
    if isinstance(dst, FloatType):
        return k is TypeKind.REAL
    if isinstance(dst, DecimalType):
        return k is TypeKind.NUMERIC
    if isinstance(dst, ListType):
        return (
            k is TypeKind.LIST and src.elem is not None and _compatible(src.elem, dst.element_type)
        )
    mapping = {
        BooleanType: TypeKind.BOOLEAN,
        BinaryType: TypeKind.BYTEA,
        DateType: TypeKind.DATE,
        TimeType: TypeKind.TIME,
        TimestampType: TypeKind.TIMESTAMP,
        TimestamptzType: TypeKind.TIMESTAMPTZ,
    }
    return mapping.get(type(dst)) is k


def check_compatible(fields: list[Field], schema: Schema, table: str) -> None:
    """Raise DatatypeMismatch naming every column the sink cannot write into `table`."""
    by_name = {f.name: f for f in schema.fields}
    missing = [f.name for f in fields if f.name not in by_name]
    wrong = [
        f"{f.name} ({f.type.display} -> {by_name[f.name].field_type})"
        for f in fields
        if f.name in by_name and not _compatible(f.type, by_name[f.name].field_type)
    ]
    names = {f.name for f in fields}
    unfed = [f.name for f in schema.fields if f.required and f.name not in names]
    if not (missing or wrong or unfed):
        return
    parts = []
    if missing:
        parts.append(f"columns not in the Iceberg table: {', '.join(missing)}")
    if wrong:
        parts.append(f"columns with incompatible types: {', '.join(wrong)}")
    if unfed:
        parts.append(f"required Iceberg columns the sink does not provide: {', '.join(unfed)}")
    table_cols = ", ".join(f"{f.name} {f.field_type}" for f in schema.fields)
    raise DatatypeMismatch(
        f"the sink's columns do not match Iceberg table {table}: " + "; ".join(parts),
        detail=f"Iceberg table columns: {table_cols}",
        hint="Select the table's column names (matched by name) with compatible types, "
        "e.g. with AS aliases and casts in the sink's query.",
    )


def to_arrow(data: pa.RecordBatch | pa.Table, schema: Schema) -> pa.Table:
    """The rows as an Arrow table in `schema`'s shape (missing optional columns are NULL)."""
    target = schema.as_arrow()
    t = data if isinstance(data, pa.Table) else pa.Table.from_batches([data])
    cols = []
    for fld in target:
        if fld.name in t.column_names:
            col = t.column(fld.name)
            if col.type != fld.type:
                col = col.cast(fld.type)
        else:
            col = pa.nulls(t.num_rows, fld.type)
        cols.append(col)
    return pa.Table.from_arrays(cols, schema=target)


def sql_type(t: IcebergType) -> SqlType:
    if isinstance(t, ListType):
        return list_of(sql_type(t.element_type))
    table: list[tuple[type, SqlType]] = [
        (BooleanType, BOOLEAN),
        (IntegerType, INT),
        (LongType, BIGINT),
        (FloatType, REAL),
        (DoubleType, DOUBLE),
        (DecimalType, NUMERIC),
        (StringType, VARCHAR),
        (BinaryType, BYTEA),
        (DateType, DATE),
        (TimeType, TIME),
        (TimestampType, TIMESTAMP),
        (TimestamptzType, TIMESTAMPTZ),
    ]
    for cls, st in table:
        if isinstance(t, cls):
            return st
    return VARCHAR  # uuid, fixed, structs, maps: read as text


def sql_fields(schema: Schema) -> list[Field]:
    return [Field(f.name, sql_type(f.field_type)) for f in schema.fields]


def from_arrow_to_sql(t: pa.Table, fields: list[Field]) -> pa.Table:
    """Cast a scan result to Swell's Arrow storage types for `fields` (by name)."""
    cols = []
    for f in fields:
        col = t.column(f.name)
        want = f.type.arrow
        if f.type.kind is TypeKind.VARCHAR and not pa.types.is_string(col.type):
            col = (
                col.cast(pa.string())
                if pa.types.is_large_string(col.type)
                else col.cast(pa.string())
            )
        elif col.type != want:
            col = col.cast(want)
        cols.append(col)
    return pa.Table.from_arrays(cols, names=[f.name for f in fields])
