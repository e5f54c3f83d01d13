"""The webhook source: RisingWave-compatible HTTP ingestion into webhook tables.

Owns the HTTP side: `http.py` (a small HTTP/1.1 server on asyncio's Protocol API),
`server.py` (the request path: status codes, request coalescing, durable acknowledgements,
graceful shutdown), and the optional acceptor
processes: `acceptor.py` (a process that listens on the shared port with SO_REUSEPORT,
parses, validates and decodes requests into Arrow batches) and `pool.py` (the server side:
starts them, writes their batches to the WAL and queues, acknowledges after the fsync).
The table side (DDL rules, VALIDATE, JSON decoding, writing rows) lives in
`engine.handlers.webhook`.

Entry point used by `pgwire.cli`: `await start_webhook_server(db, host, port, workers=N)`
returns an object whose `await close()` stops it (`WebhookServer` for N = 0, else
`AcceptorPool`).
"""

from __future__ import annotations

from typing import Any

from connectors.webhook.pool import AcceptorPool
from connectors.webhook.server import DEFAULT_MAX_BODY_BYTES, WebhookServer


async def start_webhook_server(
    db: Any,
    host: str,
    port: int,
    *,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    workers: int = 0,
) -> WebhookServer | AcceptorPool:
    """Start the webhook listener on host:port (0 picks a free port); `await s.close()`.

    `workers` > 0 starts that many acceptor processes sharing the port instead of
    listening in this process."""
    if workers > 0:
        pool = AcceptorPool(db, host, port, workers=workers, max_body_bytes=max_body_bytes)
        await pool.start()
        return pool
    server = WebhookServer(db, host, port, max_body_bytes=max_body_bytes)
    await server.start()
    return server


__all__ = ["AcceptorPool", "WebhookServer", "start_webhook_server"]
