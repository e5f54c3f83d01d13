"""The webhook source: RisingWave-compatible HTTP ingestion into webhook tables.

Owns the HTTP side (`server.py`: aiohttp app, status codes, request coalescing, durable
acknowledgements, graceful shutdown) and the durability notifier (`durable.py`). The table
side (DDL rules, VALIDATE, JSON decoding, writing rows) lives in `engine.handlers.webhook`.

Entry point used by `pgwire.cli`: `await start_webhook_server(db, host, port)` returns a
`WebhookServer` whose `await close()` stops it.
"""

from __future__ import annotations

from connectors.webhook.server import WebhookServer, start_webhook_server

__all__ = ["WebhookServer", "start_webhook_server"]
