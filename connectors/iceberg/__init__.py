"""The Iceberg connector: sinks into lakehouse tables, `ENGINE = iceberg` tables, sources.

Modules: `config` (options, validation, catalog loading), `storage_catalog` (our
Hadoop-style catalog on the warehouse path), `objstore` (put-if-absent on files and S3),
`schema` (type mapping and schema checks), `tables` (resolve/create/scan tables), `writer`
(exactly-once commits of a change stream).

Depends on `engine` (errors, types, chunks) and pyiceberg/pyarrow; the engine reaches it
only through `engine.connector_registry` (`sink_connector("iceberg")`).
"""

from __future__ import annotations

from connectors.iceberg.connector import IcebergConnector
from engine.connector_registry import register_sink, register_source

_CONNECTOR = IcebergConnector()
register_sink("iceberg", _CONNECTOR)
register_source("iceberg", _CONNECTOR)
