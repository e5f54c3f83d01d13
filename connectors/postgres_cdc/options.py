"""Options of a `postgres-cdc` source and the checks a CREATE runs against the upstream.

Option names and defaults follow RisingWave: `hostname`, `port` (5432), `username`,
`password`, `database.name`, `schema.name` ('public'), `slot.name`, `publication.name`
('rw_publication'), `publication.create.enable` ('true'). A table created with
`CREATE TABLE t (...) FROM src TABLE 'schema.table'` copies its source's options and adds
`table.name`. Each such table has its own replication slot, named `<slot.name>_<table id>`
(`swell_slot_<id>` without `slot.name`), so its snapshot and stream start at one
consistent point of its own.

Checks (raise engine errors with the cause, at CREATE): the server is reachable and
accepts the credentials; `wal_level` is `logical`; the publication exists (or may be
created); the upstream table exists, has a primary key equal to the Swell table's, and
has every column the Swell table declares.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg2
import psycopg2.extras

from engine.errors import ConnectorError, InvalidParameterValue

_REQUIRED = ("hostname", "username", "database.name")


@dataclass
class CdcOptions:
    host: str
    port: int
    user: str
    password: str
    database: str
    schema: str
    slot: str
    publication: str
    create_publication: bool
    table: str | None = None  # "schema.table" of a CDC table

    @classmethod
    def parse(cls, o: dict[str, str]) -> CdcOptions:
        for k in _REQUIRED:
            if not o.get(k):
                raise InvalidParameterValue(f"postgres-cdc: missing required option: {k}")
        try:
            port = int(o.get("port", "5432"))
        except ValueError as e:
            raise InvalidParameterValue(f"postgres-cdc: invalid port: {o['port']}") from e
        create = o.get("publication.create.enable", "true").lower()
        if create not in ("true", "false"):
            raise InvalidParameterValue("publication.create.enable must be true or false")
        return cls(
            host=o["hostname"],
            port=port,
            user=o["username"],
            password=o.get("password", ""),
            database=o["database.name"],
            schema=o.get("schema.name", "public"),
            slot=o.get("slot.name", "swell_slot"),
            publication=o.get("publication.name", "rw_publication"),
            create_publication=create == "true",
            table=o.get("table.name"),
        )

    def dsn(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "dbname": self.database,
            "connect_timeout": 10,
            "options": "-c TimeZone=UTC -c DateStyle=ISO -c extra_float_digits=3",
        }

    def connect(self, replication: bool = False) -> Any:
        """A connection (a logical replication one if asked); errors as ConnectorError."""
        kw = self.dsn()
        if replication:
            kw["connection_factory"] = psycopg2.extras.LogicalReplicationConnection
        try:
            conn = psycopg2.connect(**kw)
        except psycopg2.Error as e:
            raise ConnectorError(
                f"postgres-cdc: cannot connect to {self.host}:{self.port}"
                f" database {self.database} as {self.user}",
                detail=str(e).strip(),
            ) from e
        if not replication:
            conn.autocommit = True
        return conn

    def table_parts(self) -> tuple[str, str]:
        assert self.table is not None
        if "." in self.table:
            s, t = self.table.split(".", 1)
            return s, t
        return self.schema, self.table


def slot_name(opts: CdcOptions, rel_id: int) -> str:
    return f"{opts.slot}_{rel_id}".lower()


def check_server(opts: CdcOptions) -> None:
    """CREATE SOURCE: reachable, credentials, wal_level, replication right, publication."""
    conn = opts.connect()
    try:
        cur = conn.cursor()
        cur.execute("SHOW wal_level")
        level = cur.fetchone()[0]
        if level != "logical":
            raise ConnectorError(
                f'postgres-cdc: the upstream database has wal_level = "{level}";'
                " logical replication needs wal_level = logical",
                hint="Run ALTER SYSTEM SET wal_level = logical on the upstream and restart it.",
            )
        cur.execute("SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user")
        row = cur.fetchone()
        if not row or not row[0]:
            raise ConnectorError(
                f'postgres-cdc: user "{opts.user}" may not start replication',
                hint=f"ALTER ROLE {opts.user} REPLICATION on the upstream.",
            )
        cur.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (opts.publication,))
        if cur.fetchone() is None and not opts.create_publication:
            raise ConnectorError(
                f'postgres-cdc: publication "{opts.publication}" does not exist',
                hint="Create it upstream (CREATE PUBLICATION ... FOR TABLE ...) or set"
                " publication.create.enable = 'true'.",
            )
    finally:
        conn.close()


def check_table(opts: CdcOptions, columns: list[str], pk: list[str]) -> list[str]:
    """CREATE TABLE ... FROM src TABLE: the upstream table and its publication; returns the
    upstream primary key column names."""
    check_server(opts)
    sch, tab = opts.table_parts()
    conn = opts.connect()
    try:
        cur = conn.cursor()
        cur.execute(
            "SELECT c.oid FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p')",
            (sch, tab),
        )
        row = cur.fetchone()
        if row is None:
            raise ConnectorError(f'postgres-cdc: upstream table "{sch}.{tab}" does not exist')
        oid = row[0]
        cur.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s AND attnum > 0"
            " AND NOT attisdropped",
            (oid,),
        )
        have = {r[0] for r in cur.fetchall()}
        missing = [c for c in columns if c not in have]
        if missing:
            raise ConnectorError(
                f'postgres-cdc: column "{missing[0]}" does not exist in upstream table'
                f' "{sch}.{tab}"'
            )
        cur.execute(
            "SELECT a.attname FROM pg_index i JOIN LATERAL unnest(i.indkey)"
            " WITH ORDINALITY k(attnum, ord) ON true JOIN pg_attribute a"
            " ON a.attrelid = i.indrelid AND a.attnum = k.attnum"
            " WHERE i.indrelid = %s AND i.indisprimary ORDER BY k.ord",
            (oid,),
        )
        upk = [r[0] for r in cur.fetchall()]
        if not upk:
            raise ConnectorError(
                f'postgres-cdc: upstream table "{sch}.{tab}" has no primary key',
                hint="Changes are applied by primary key: add one upstream.",
            )
        if upk != pk:
            raise InvalidParameterValue(
                f"postgres-cdc: the primary key ({', '.join(pk)}) differs from the upstream"
                f" table's ({', '.join(upk)})",
            )
        _ensure_publication(cur, opts, sch, tab)
        return upk
    finally:
        conn.close()


def _ensure_publication(cur: Any, opts: CdcOptions, sch: str, tab: str) -> None:
    pub = opts.publication
    cur.execute("SELECT puballtables FROM pg_publication WHERE pubname = %s", (pub,))
    row = cur.fetchone()
    ident = f'"{sch}"."{tab}"'
    if row is None:
        if not opts.create_publication:
            raise ConnectorError(f'postgres-cdc: publication "{pub}" does not exist')
        _run(cur, f'CREATE PUBLICATION "{pub}" FOR TABLE {ident}')
        return
    if row[0]:
        return
    cur.execute(
        "SELECT 1 FROM pg_publication_tables WHERE pubname = %s AND schemaname = %s"
        " AND tablename = %s",
        (pub, sch, tab),
    )
    if cur.fetchone() is not None:
        return
    if not opts.create_publication:
        raise ConnectorError(
            f'postgres-cdc: publication "{pub}" does not include table "{sch}.{tab}"',
            hint=f'ALTER PUBLICATION "{pub}" ADD TABLE {ident} upstream.',
        )
    _run(cur, f'ALTER PUBLICATION "{pub}" ADD TABLE {ident}')


def _run(cur: Any, sql: str) -> None:
    try:
        cur.execute(sql)
    except psycopg2.Error as e:
        raise ConnectorError(f"postgres-cdc: {sql} failed", detail=str(e).strip()) from e
