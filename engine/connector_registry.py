"""Connector registry: how the engine finds source and sink connectors without importing them.

Layering is `pgwire -> engine <- connectors`: connector packages import the engine, never
the other way round at module import. So the engine defines this registry and connector
packages register into it when they are imported:

    # connectors/kafka/__init__.py
    from engine.connector_registry import register_source
    register_source("kafka", KafkaSourceConnector())

Lookup (`source_connector("kafka")`, `sink_connector("kafka")`) imports the built-in plugin
module `connectors.<name>` (dashes read as underscores: `postgres-cdc` is
`connectors.postgres_cdc`) on first use if nothing is registered under that name yet, so a
`WITH (connector = 'kafka')` statement works without anyone importing the connector first.
Connectors living elsewhere register explicitly before use.

What a registered object must provide is defined by the caller that uses it:
`engine.stream.source.SourceConnector` for sources (and tables with a connector); the sink
framework defines the sink side. The registry itself only maps names to objects.

Lifecycle: registrations are process-wide and last for the process; registering a name
twice replaces the earlier object (tests may swap in their own).
"""

from __future__ import annotations

import importlib
import re
import threading
from typing import Any

from engine.errors import not_supported

_SOURCES: dict[str, Any] = {}
_SINKS: dict[str, Any] = {}
_LOCK = threading.Lock()
_PLUGIN_PACKAGE = "connectors"
_NAME = re.compile(r"^[a-z][a-z0-9_-]*$")


def register_source(name: str, connector: Any) -> None:
    """Make `connector` the source connector for `WITH (connector = '<name>')`."""
    with _LOCK:
        _SOURCES[name.lower()] = connector


def register_sink(name: str, connector: Any) -> None:
    """Make `connector` the sink connector for `CREATE SINK ... WITH (connector = '<name>')`."""
    with _LOCK:
        _SINKS[name.lower()] = connector


def source_connector(name: str) -> Any:
    """The source connector registered as `name` (loading `connectors.<name>` if needed)."""
    return _lookup(_SOURCES, name, "source")


def sink_connector(name: str) -> Any:
    """The sink connector registered as `name` (loading `connectors.<name>` if needed)."""
    return _lookup(_SINKS, name, "sink")


def _lookup(table: dict[str, Any], name: str, what: str) -> Any:
    key = name.lower()
    found = table.get(key)
    if found is not None:
        return found
    if _NAME.match(key):
        module = key.replace("-", "_")  # `postgres-cdc` lives in connectors.postgres_cdc
        try:
            importlib.import_module(f"{_PLUGIN_PACKAGE}.{module}")
        except ModuleNotFoundError as e:
            if e.name not in (f"{_PLUGIN_PACKAGE}.{module}", _PLUGIN_PACKAGE):
                raise  # the connector exists but one of its own imports is missing
        found = table.get(key)
    if found is None:
        raise not_supported(
            f"{what} connector '{name}'",
            hint=f"Known {what} connectors: {', '.join(sorted(table)) or 'none'}.",
        )
    return found
