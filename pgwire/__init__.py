"""pgwire: Swell's PostgreSQL wire-protocol (v3) frontend and the `swell` command.

Owns: the asyncio listener and per-connection protocol state machine (`server`,
`connection`, `extended`, `txstate`), message framing (`messages`), value codecs for the
text and binary formats (`codecs`, `temporal`), the exception-to-ErrorResponse mapping
(`errors`), the log line format (`logfmt`) and the CLI (`cli`, console script `swell`).

Upstream: `engine.api` (Database/Session/QueryResult), `engine.errors`, `engine.types`;
the CLI also opens `engine.database` and, if installed, `connectors.webhook`.
Downstream: clients (psql, psycopg, asyncpg, JDBC...) over TCP; tests start `serve()`
in-process.
"""
