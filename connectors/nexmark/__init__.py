"""Nexmark connector: the Nexmark benchmark's event generator as a source
(`CREATE SOURCE bid WITH (connector = 'nexmark', nexmark.table.type = 'Bid', ...)`).

Importing this package registers `NexmarkSourceConnector` under the name `nexmark` in
`engine.connector_registry` (the engine imports it lazily on the first
`WITH (connector = 'nexmark')`). Modules: model (the event model, generated per chunk with
numpy/Arrow as a pure function of the event number), source (options, the connector and its
per-barrier reader).
"""

from __future__ import annotations

from connectors.nexmark.source import NexmarkSourceConnector
from engine.connector_registry import register_source

register_source("nexmark", NexmarkSourceConnector())

__all__ = ["NexmarkSourceConnector"]
