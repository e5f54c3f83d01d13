"""Finding, creating and reading Iceberg tables, with the CREATE-time errors users need.

`resolve_table` is what CREATE SINK / CREATE SOURCE / ENGINE = iceberg call: it loads the
catalog (a URI that does not answer fails here), checks the namespace and table exist
(or creates them with `create_table_if_not_exists`), and checks the schema by column name.
`scan` reads the latest committed snapshot (or one picked by id or time) with column
projection and a pushed-down row filter.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

import pyarrow as pa
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

from connectors.iceberg.config import IcebergConfig, load_catalog
from connectors.iceberg.schema import check_compatible, iceberg_schema
from engine.errors import (
    ConnectorError,
    EngineError,
    InvalidParameterValue,
    UndefinedObject,
    UndefinedTable,
)


def _catalog_call(cfg: IcebergConfig, what: str, fn: Any) -> Any:
    try:
        return fn()
    except (NoSuchNamespaceError, NoSuchTableError, EngineError):
        raise
    except Exception as e:
        raise ConnectorError(
            f"Iceberg catalog ({cfg.catalog_type}) failed to {what}: {type(e).__name__}: "
            f"{str(e).splitlines()[0][:300] if str(e) else ''}",
        ) from e


def resolve_table(
    cfg: IcebergConfig,
    fields: list[Any],
    pk: list[int],
    *,
    create_if_not_exists: bool = False,
    partition_by: str | None = None,
    check_schema: bool = True,
) -> Any:
    cat = load_catalog(cfg)
    ident = cfg.identifier
    ns = ident[:-1]
    shown = ".".join(ident)
    if not _catalog_call(cfg, "check the namespace", lambda: cat.namespace_exists(ns)):
        if not create_if_not_exists:
            raise UndefinedObject(
                f'Iceberg namespace "{".".join(ns)}" does not exist (database.name)',
                hint="Create the namespace in the catalog, fix database.name, or set "
                "create_table_if_not_exists = 'true' to create it.",
            )
        _catalog_call(cfg, f"create namespace {'.'.join(ns)}", lambda: cat.create_namespace(ns))
    try:
        table = _catalog_call(cfg, f"load table {shown}", lambda: cat.load_table(ident))
    except NoSuchTableError:
        if not create_if_not_exists:
            raise UndefinedTable(
                f'Iceberg table "{shown}" does not exist (database.name, table.name)',
                hint="Create the table in the catalog first (e.g. CREATE TABLE in Trino), fix "
                "table.name, or set create_table_if_not_exists = 'true'.",
            ) from None
        schema = iceberg_schema(fields, pk)
        spec = partition_spec(partition_by, schema)
        kw = {"partition_spec": spec} if spec is not None else {}
        table = _catalog_call(
            cfg, f"create table {shown}", lambda: cat.create_table(ident, schema, **kw)
        )
    if check_schema:
        check_compatible(fields, table.schema(), shown)
    return table


_PART = re.compile(r"^\s*(\w+)\s*(?:\(\s*([^)]*)\s*\))?\s*$")


def partition_spec(text: str | None, schema: Any) -> Any:
    """`partition_by = 'bucket(5, v1), day(ts), c'` -> a PartitionSpec (None if empty)."""
    if not text or not text.strip():
        return None
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import (
        BucketTransform,
        DayTransform,
        HourTransform,
        IdentityTransform,
        MonthTransform,
        TruncateTransform,
        YearTransform,
    )

    parts: list[str] = []
    depth, cur = 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    out = []
    for i, p in enumerate(parts):
        m = _PART.match(p)
        if not m:
            raise InvalidParameterValue(f"invalid partition_by item '{p.strip()}'")
        fn, args = m[1].lower(), [a.strip() for a in (m[2] or "").split(",") if a.strip()]
        if m[2] is None:
            col, transform, tname = fn, IdentityTransform(), fn
        else:
            col = args[-1]
            simple = {
                "year": YearTransform,
                "month": MonthTransform,
                "day": DayTransform,
                "hour": HourTransform,
                "identity": IdentityTransform,
            }
            if fn in simple and len(args) == 1:
                transform, tname = simple[fn](), f"{col}_{fn}"
            elif fn in ("bucket", "truncate") and len(args) == 2:
                n = int(args[0])
                transform = BucketTransform(n) if fn == "bucket" else TruncateTransform(n)
                tname = f"{col}_{fn}"
            else:
                raise InvalidParameterValue(
                    f"invalid partition_by item '{p.strip()}'",
                    hint="Use col, bucket(n, col), truncate(w, col), year/month/day/hour(col).",
                )
        try:
            src = schema.find_field(col).field_id
        except ValueError as e:
            raise InvalidParameterValue(f'partition_by column "{col}" does not exist') from e
        out.append(PartitionField(src, 1000 + i, transform, tname))
    return PartitionSpec(*out)


def scan(
    table: Any,
    columns: list[str] | None = None,
    row_filter: Any | None = None,
    snapshot_id: int | None = None,
    as_of: datetime | None = None,
) -> pa.Table:
    """Rows of the committed snapshot (or the one given) with projection and filter."""
    table.refresh()
    if as_of is not None:
        snapshot_id = snapshot_at(table, as_of)
        if snapshot_id is None:
            return table.schema().as_arrow().empty_table().select(columns or [])
    if snapshot_id is not None and table.snapshot_by_id(snapshot_id) is None:
        raise InvalidParameterValue(
            f"snapshot {snapshot_id} does not exist",
            hint="Known snapshots: "
            + ", ".join(str(s.snapshot_id) for s in table.snapshots()[-10:]),
        )
    kw: dict[str, Any] = {}
    if columns is not None:
        kw["selected_fields"] = tuple(columns) if columns else ("*",)
    if row_filter is not None:
        kw["row_filter"] = row_filter
    if snapshot_id is not None:
        kw["snapshot_id"] = snapshot_id
    return table.scan(**kw).to_arrow()


def snapshot_at(table: Any, as_of: datetime) -> int | None:
    ms = int(as_of.timestamp() * 1000)
    best = None
    for entry in table.metadata.snapshot_log:
        if entry.timestamp_ms <= ms:
            best = entry.snapshot_id
    return best
