"""Connectors: the ways rows get into and out of Swell besides SQL.

Owns the source and sink implementations that talk to the outside world, each in its own
subpackage. Today: `webhook/` (RisingWave-compatible HTTP ingestion: `POST
/webhook/{database}/{schema}/{table}`, served by aiohttp in the server's event loop).
Later: kafka, file, datagen, print, iceberg.

Depends on (upstream): `engine` only (`engine.handlers.webhook` for the table-level
ingestion API, `engine.state.wal` durability through the database object). Depended on by
(downstream): `pgwire.cli`, which starts the listeners next to pgwire.
"""
