"""`PostgresCdcConnector`: postgres-cdc as an `engine.stream.source.SourceConnector`.

- a SOURCE (`CREATE SOURCE pg WITH (connector = 'postgres-cdc', ...)`) has no columns
  and no reader of its own: it holds the connection options its tables copy; `check`
  verifies the server (credentials, wal_level, publication);
- a TABLE (`CREATE TABLE t (...) PRIMARY KEY (...) FROM pg TABLE 'public.t'`) reads the
  upstream table: `check` verifies the table (exists, primary key, columns, publication),
  `open_reader` starts a `PgCdcReader` (snapshot, then the replication stream);
- `read_now` is never needed for rows (a CDC table stores them): it returns no rows.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from connectors.postgres_cdc.options import CdcOptions, check_server, check_table
from connectors.postgres_cdc.pgoutput import UNSUPPORTED
from connectors.postgres_cdc.reader import PgCdcReader, drop_slot
from engine.catalog import Relation, RelationKind
from engine.errors import InvalidColumnReference, not_supported
from engine.stream.source import SeekBounds
from engine.stream.source_status import SourceStatus
from engine.types import Field, arrow_schema


class PostgresCdcConnector:
    name = "postgres-cdc"
    shared_source = True  # CREATE SOURCE holds the options; tables say FROM src TABLE '...'

    def columns(
        self, includes: list[Any], fmt: str, enc: str
    ) -> tuple[list[Field], list[Field], list[str]]:
        if includes:
            raise not_supported("INCLUDE for postgres-cdc")
        return [], [], []

    def check(self, rel: Relation) -> None:
        opts = CdcOptions.parse(rel.options)
        if rel.kind is RelationKind.SOURCE:
            if rel.fields:
                raise not_supported(
                    "columns on a postgres-cdc source",
                    hint="Declare the columns on the table: CREATE TABLE t (...) FROM src"
                    " TABLE 'schema.table'.",
                )
            check_server(opts)
            return
        if opts.table is None:
            raise not_supported(
                "CREATE TABLE ... WITH (connector = 'postgres-cdc')",
                hint="CREATE SOURCE src WITH (connector = 'postgres-cdc', ...), then"
                " CREATE TABLE t (...) FROM src TABLE 'schema.table'.",
            )
        if rel.row_id_index is not None:
            raise InvalidColumnReference(
                "a table from a postgres-cdc source needs a PRIMARY KEY",
                hint="Declare the upstream table's primary key: PRIMARY KEY (id).",
            )
        bad = next((f for f in rel.fields if f.type.kind in UNSUPPORTED), None)
        if bad is not None:
            raise not_supported(f"postgres-cdc: column type {bad.type.kind.value} ({bad.name})")
        check_table(opts, [f.name for f in rel.fields], [rel.fields[i].name for i in rel.pk])

    def open_reader(
        self, rel: Relation, position: dict[str, Any] | None, status: SourceStatus
    ) -> PgCdcReader:
        return PgCdcReader(rel, position, status)

    def release(self, rel: Relation) -> None:
        """DROP TABLE: the table's replication slot goes, so it holds no WAL upstream."""
        if rel.kind is RelationKind.TABLE:
            drop_slot(CdcOptions.parse(rel.options), rel.id)

    def read_now(
        self, rel: Relation, upto: dict[str, Any] | None, bounds: SeekBounds | None
    ) -> pa.Table:
        return arrow_schema(rel.fields).empty_table()
