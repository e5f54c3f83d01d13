"""PostgreSQL CDC connector (`connector = 'postgres-cdc'`): tables fed by logical replication.

Importing this package registers `PostgresCdcConnector` under `postgres-cdc` (the engine
imports `connectors.postgres_cdc` lazily on the first `WITH (connector = 'postgres-cdc')`).
Modules: options (RisingWave's option names, connections, checks at CREATE), pgoutput
(decoding the pgoutput protocol and PostgreSQL text values into Arrow batches), reader
(initial snapshot, then the replication stream, with its own thread).

Client library: psycopg2's `LogicalReplicationConnection`. psycopg 3 (used elsewhere for
plain SQL) has no replication protocol support; psycopg2 speaks the streaming replication
sub-protocol (START_REPLICATION, CopyBoth, standby status updates and keepalive replies)
in C and is the most used and tested Python implementation of it, which is safer than
speaking the CopyBoth protocol ourselves.
"""

from __future__ import annotations

from connectors.postgres_cdc.source import PostgresCdcConnector
from engine.connector_registry import register_source

register_source("postgres-cdc", PostgresCdcConnector())

__all__ = ["PostgresCdcConnector"]
