"""The object registered as the `iceberg` connector: a sink-writer factory plus table services.

The engine reaches Iceberg only through `engine.connector_registry.sink_connector("iceberg")`
(it never imports `connectors`). Besides being the sink framework's factory
(`connector(spec) -> IcebergSinkWriter`), the object offers what `ENGINE = iceberg` tables,
CREATE CONNECTION and `CREATE SOURCE ... connector = 'iceberg'` need:

* `check_connection(options)`: validate a connection's options (no network);
* `ensure_table(options, fields, pk)`: find or create the Iceberg table behind an engine
  table (CREATE TABLE ... ENGINE = iceberg), checking the schema;
* `source_fields(options)`: the columns of an external table (CREATE SOURCE);
* `read(options, fields, needed, predicates, snapshot_id, as_of)`: a committed snapshot as
  an Arrow table in Swell's storage types, with column projection and the simple
  predicates (`col op literal`, AND-ed) pushed into the Iceberg scan;
* `drop_table(options)`: DROP TABLE of an engine table drops the Iceberg table too.
"""

from __future__ import annotations

import contextlib
from datetime import datetime
from typing import Any

import pyarrow as pa

from connectors.iceberg.config import IcebergConfig, load_catalog
from connectors.iceberg.schema import from_arrow_to_sql, sql_fields
from connectors.iceberg.tables import resolve_table, scan


class _NoStream:
    def take(self) -> tuple[list[Any], dict[str, Any]]:
        return [], {}

    def has_data(self) -> bool:
        return False

    def close(self) -> None:
        return None


class IcebergConnector:
    def __call__(self, spec: Any) -> Any:
        from connectors.iceberg.sink import IcebergSinkWriter

        return IcebergSinkWriter(spec)

    # -- the source side (engine.stream.source.SourceConnector) -----------------------------
    def check(self, rel: Any) -> None:
        return None

    def open_reader(self, rel: Any, position: Any, status: Any = None) -> Any:
        return _NoStream()  # views over Iceberg sources are refused at CREATE

    def read_now(self, rel: Any, upto: Any, bounds: Any) -> pa.Table:
        opts = rel.extra["iceberg_source"]["options"]
        return self.read(opts, rel.fields, None, [])

    def check_connection(self, options: dict[str, str]) -> None:
        IcebergConfig.parse(options, need_table=False)

    def ensure_table(self, options: dict[str, str], fields: list[Any], pk: list[int]) -> bool:
        """Create the table if missing (or check the existing one); True if it holds no
        snapshot yet (no rows written by anyone)."""
        cfg = IcebergConfig.parse(options)
        table = resolve_table(
            cfg,
            fields,
            pk,
            create_if_not_exists=True,
            partition_by=options.get("partition_by"),
        )
        return table.current_snapshot() is None

    def source_fields(self, options: dict[str, str]) -> list[Any]:
        cfg = IcebergConfig.parse(options)
        table = resolve_table(cfg, [], [], check_schema=False)
        return sql_fields(table.schema())

    def drop_table(self, options: dict[str, str]) -> None:
        cfg = IcebergConfig.parse(options)
        cat = load_catalog(cfg)
        # already gone, or the catalog refuses: the Swell table goes all the same
        with contextlib.suppress(Exception):
            cat.drop_table(cfg.identifier)

    def read(
        self,
        options: dict[str, str],
        fields: list[Any],
        needed: set[int] | None,
        predicates: list[tuple[str, str, Any]],
        snapshot_id: int | None = None,
        as_of: datetime | None = None,
    ) -> pa.Table:
        from pyiceberg.expressions import (
            And,
            EqualTo,
            GreaterThan,
            GreaterThanOrEqual,
            LessThan,
            LessThanOrEqual,
            NotEqualTo,
        )

        cfg = IcebergConfig.parse(options)
        table = resolve_table(cfg, [], [], check_schema=False)
        present = {f.name for f in table.schema().fields}
        ops = {
            "=": EqualTo,
            "<>": NotEqualTo,
            "<": LessThan,
            "<=": LessThanOrEqual,
            ">": GreaterThan,
            ">=": GreaterThanOrEqual,
        }
        expr: Any = None
        for col, op, value in predicates:
            if col in present and op in ops and value is not None:
                term = ops[op](col, value)
                expr = term if expr is None else And(expr, term)
        want = [
            f.name
            for i, f in enumerate(fields)
            if (needed is None or i in needed) and f.name in present
        ]
        first = table.schema().fields[0].name
        t = scan(table, want or [first], expr, snapshot_id, as_of)
        n = t.num_rows
        cols = []
        for i, f in enumerate(fields):
            if f.name in t.column_names and (needed is None or i in needed):
                cols.append(from_arrow_to_sql(t.select([f.name]), [f]).column(0))
            else:
                cols.append(pa.nulls(n, f.type.arrow))
        return pa.Table.from_arrays(cols, names=[f.name for f in fields])
