"""`catalog.type = 'storage'`: a Hadoop-style Iceberg catalog kept on the warehouse path itself.

pyiceberg has no such catalog, so this one is ours, built on pyiceberg's metadata classes.
Layout (the same as Iceberg's Java HadoopCatalog, so other engines can read it):

    <warehouse>/<namespace>/                      a namespace is a directory (S3: a marker)
    <warehouse>/<namespace>/<table>/data/...      data files (written by pyiceberg)
    <warehouse>/<namespace>/<table>/metadata/v<N>.metadata.json
    <warehouse>/<namespace>/<table>/metadata/version-hint.text   "N", a hint only

Commit protocol: load the current version N (hint, then probe N+1, N+2, ... because the
hint is written after the commit and may lag), apply the requirements and updates with
pyiceberg's `update_table_metadata`, and create `v<N+1>.metadata.json` with the store's
put-if-absent (conditional write on S3, hard link locally). Losing that race raises
`CommitFailedException`, which pyiceberg callers treat as "reload and retry". A crash after
the create and before the hint is harmless: readers probe past the hint.

Lifecycle: constructed by `connectors.iceberg.catalogs.load_catalog`; stateless apart from
its object store and FileIO, so one instance may serve many tables and threads.
"""

from __future__ import annotations

import contextlib
from typing import Any

from pyiceberg.catalog import MetastoreCatalog, PropertiesUpdateSummary
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NamespaceNotEmptyError,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.io import load_file_io
from pyiceberg.partitioning import UNPARTITIONED_PARTITION_SPEC, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import CommitTableResponse, Table
from pyiceberg.table.metadata import TableMetadata, TableMetadataUtil, new_table_metadata
from pyiceberg.table.sorting import UNSORTED_SORT_ORDER, SortOrder
from pyiceberg.table.update import TableRequirement, TableUpdate, update_table_metadata
from pyiceberg.typedef import EMPTY_DICT, Identifier, Properties

from connectors.iceberg.objstore import store_for

HINT = "version-hint.text"


class StorageCatalog(MetastoreCatalog):
    def __init__(self, name: str, **properties: str) -> None:
        super().__init__(name, **properties)
        wh = properties.get("warehouse")
        if not wh:
            raise ValueError("the storage catalog needs a warehouse path")
        self.warehouse = wh.rstrip("/")
        self.store = store_for(self.warehouse, dict(properties))

    # -- paths ------------------------------------------------------------------------------
    def _ns(self, namespace: str | Identifier) -> str:
        parts = self.identifier_to_tuple(namespace)
        if not parts:
            raise NoSuchNamespaceError("empty namespace")
        return "/".join(parts)

    def _table_dir(self, identifier: str | Identifier) -> tuple[Identifier, str]:
        ident = self.identifier_to_tuple(identifier)
        if len(ident) < 2:
            raise NoSuchTableError(f"table identifier needs a namespace: {identifier}")
        return ident, f"{self.warehouse}/{'/'.join(ident)}"

    @staticmethod
    def _meta(table_dir: str, version: int) -> str:
        return f"{table_dir}/metadata/v{version}.metadata.json"

    def _current_version(self, table_dir: str) -> int:
        """Latest committed version, 0 if the table does not exist."""
        raw = self.store.get(f"{table_dir}/metadata/{HINT}")
        v = 0
        if raw:
            try:
                v = int(raw.decode().strip())
            except ValueError:
                v = 0
        if v and self.store.get(self._meta(table_dir, v)) is None:
            v = 0  # hint points nowhere (table dropped and recreated): probe from 1
        while self.store.get(self._meta(table_dir, v + 1)) is not None:
            v += 1
        return v

    def _read(self, ident: Identifier, table_dir: str, version: int) -> Table:
        loc = self._meta(table_dir, version)
        raw = self.store.get(loc)
        if raw is None:
            raise NoSuchTableError(f"Table does not exist: {'.'.join(ident)}")
        metadata = TableMetadataUtil.parse_raw(raw.decode())
        io = load_file_io({**self.properties, **metadata.properties}, loc)
        return Table(ident, metadata, loc, io, self)

    def _write_version(self, table_dir: str, version: int, metadata: TableMetadata) -> str:
        loc = self._meta(table_dir, version)
        if not self.store.put_if_absent(loc, metadata.model_dump_json().encode()):
            raise CommitFailedException(
                f"version {version} of {table_dir} was committed concurrently; reload and retry"
            )
        # the hint is an optimisation; readers probe past it
        with contextlib.suppress(Exception):
            self.store.put(f"{table_dir}/metadata/{HINT}", str(version).encode())
        return loc

    # -- tables -----------------------------------------------------------------------------
    def load_table(self, identifier: str | Identifier) -> Table:
        ident, table_dir = self._table_dir(identifier)
        v = self._current_version(table_dir)
        if v == 0:
            raise NoSuchTableError(f"Table does not exist: {'.'.join(ident)}")
        return self._read(ident, table_dir, v)

    def create_table(
        self,
        identifier: str | Identifier,
        schema: Schema | Any,
        location: str | None = None,
        partition_spec: PartitionSpec = UNPARTITIONED_PARTITION_SPEC,
        sort_order: SortOrder = UNSORTED_SORT_ORDER,
        properties: Properties = EMPTY_DICT,
    ) -> Table:
        ident, table_dir = self._table_dir(identifier)
        if location and location.rstrip("/") != table_dir:
            raise ValueError("the storage catalog keeps each table at <warehouse>/<ns>/<table>")
        if not self.namespace_exists(ident[:-1]):
            raise NoSuchNamespaceError(f"Namespace does not exist: {'.'.join(ident[:-1])}")
        if self._current_version(table_dir):
            raise TableAlreadyExistsError(f"Table already exists: {'.'.join(ident)}")
        iceberg_schema: Schema = self._convert_schema_if_needed(schema)  # type: ignore[arg-type]
        metadata = new_table_metadata(
            location=table_dir,
            schema=iceberg_schema,
            partition_spec=partition_spec,
            sort_order=sort_order,
            properties=properties,
        )
        try:
            self._write_version(table_dir, 1, metadata)
        except CommitFailedException as e:
            raise TableAlreadyExistsError(f"Table already exists: {'.'.join(ident)}") from e
        return self._read(ident, table_dir, 1)

    def commit_table(
        self,
        table: Table,
        requirements: tuple[TableRequirement, ...],
        updates: tuple[TableUpdate, ...],
    ) -> CommitTableResponse:
        ident, table_dir = self._table_dir(table.name())
        v = self._current_version(table_dir)
        current = self._read(ident, table_dir, v) if v else None
        for req in requirements:
            req.validate(current.metadata if current else None)
        base = current.metadata if current else self._empty_table_metadata()
        new_meta = update_table_metadata(
            base_metadata=base,
            updates=updates,
            enforce_validation=current is None,
            metadata_location=current.metadata_location if current else None,
        )
        if current is not None and new_meta == current.metadata:
            return CommitTableResponse(
                metadata=current.metadata, metadata_location=current.metadata_location
            )
        loc = self._write_version(table_dir, v + 1, new_meta)
        return CommitTableResponse(metadata=new_meta, metadata_location=loc)

    def register_table(
        self, identifier: str | Identifier, metadata_location: str, overwrite: bool = False
    ) -> Table:
        raise NotImplementedError("the storage catalog registers tables by their location")

    def drop_table(self, identifier: str | Identifier) -> None:
        ident, table_dir = self._table_dir(identifier)
        if not self._current_version(table_dir):
            raise NoSuchTableError(f"Table does not exist: {'.'.join(ident)}")
        self.store.delete_prefix(f"{table_dir}/metadata")

    def purge_table(self, identifier: str | Identifier) -> None:
        ident, table_dir = self._table_dir(identifier)
        if not self._current_version(table_dir):
            raise NoSuchTableError(f"Table does not exist: {'.'.join(ident)}")
        self.store.delete_prefix(table_dir)

    def rename_table(
        self, from_identifier: str | Identifier, to_identifier: str | Identifier
    ) -> Table:
        raise NotImplementedError("the storage catalog cannot rename tables (paths are names)")

    def list_tables(self, namespace: str | Identifier) -> list[Identifier]:
        ns = self.identifier_to_tuple(namespace)
        base = f"{self.warehouse}/{self._ns(ns)}"
        out = []
        for child in self.store.list_children(base):
            if self._current_version(f"{base}/{child}"):
                out.append((*ns, child))
        return out

    # -- namespaces -------------------------------------------------------------------------
    def create_namespace(
        self, namespace: str | Identifier, properties: Properties = EMPTY_DICT
    ) -> None:
        if self.namespace_exists(namespace):
            raise NamespaceAlreadyExistsError(f"Namespace already exists: {namespace}")
        self.store.make_dir(f"{self.warehouse}/{self._ns(namespace)}")

    def namespace_exists(self, namespace: str | Identifier) -> bool:
        return self.store.exists_prefix(f"{self.warehouse}/{self._ns(namespace)}")

    def drop_namespace(self, namespace: str | Identifier) -> None:
        if not self.namespace_exists(namespace):
            raise NoSuchNamespaceError(f"Namespace does not exist: {namespace}")
        if self.list_tables(namespace):
            raise NamespaceNotEmptyError(f"Namespace is not empty: {namespace}")
        self.store.delete_prefix(f"{self.warehouse}/{self._ns(namespace)}")

    def list_namespaces(self, namespace: str | Identifier = ()) -> list[Identifier]:
        ns = self.identifier_to_tuple(namespace) if namespace else ()
        base = f"{self.warehouse}/{'/'.join(ns)}" if ns else self.warehouse
        children = self.store.list_children(base)
        return [(*ns, c) for c in children if not self._current_version(f"{base}/{c}")]

    def load_namespace_properties(self, namespace: str | Identifier) -> Properties:
        if not self.namespace_exists(namespace):
            raise NoSuchNamespaceError(f"Namespace does not exist: {namespace}")
        return {"location": f"{self.warehouse}/{self._ns(namespace)}"}

    def update_namespace_properties(
        self,
        namespace: str | Identifier,
        removals: set[str] | None = None,
        updates: Properties = EMPTY_DICT,
    ) -> PropertiesUpdateSummary:
        raise NotImplementedError("the storage catalog keeps no namespace properties")

    # -- views (not kept by a storage catalog) -----------------------------------------------
    def list_views(self, namespace: str | Identifier) -> list[Identifier]:
        return []

    def view_exists(self, identifier: str | Identifier) -> bool:
        return False

    def drop_view(self, identifier: str | Identifier) -> None:
        raise NotImplementedError("the storage catalog keeps no views")

    def load_view(self, identifier: str | Identifier) -> Any:
        raise NotImplementedError("the storage catalog keeps no views")

    def register_view(self, identifier: str | Identifier, metadata_location: str) -> Any:
        raise NotImplementedError("the storage catalog keeps no views")
