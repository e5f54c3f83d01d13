"""A small in-test engine behind a real pgwire server, for driving it with real clients.

Imported by the pgwire tests as `unit.pgwire.fake_engine` (tests/ is on sys.path).

`FakeDatabase`/`FakeSession` implement `engine.api` with a handful of fixed statements
(matched on the lower-cased SQL) so protocol tests do not depend on the SQL engine:

- `select 1`; `series N` (N rows of int `n`); `all types` (one row of every type, then a
  NULL row); `echo $1::int, $2, ...` (one row of the parameters, typed by the declared
  OIDs, the `::type` casts, or varchar); `insert` (`INSERT 0 1`); `notice`;
  `begin`/`commit`/`rollback`; `set timezone to 'X'`; `sleep` (blocks until cancelled);
  `fail` (syntax error with position); `crash` (a non-engine exception); `bad value` (a
row the codec cannot encode); `` (empty).

`RunningServer(db)` runs the pgwire server on its own event-loop thread on 127.0.0.1 and
an ephemeral port (`.port`, `.db`, `.dsn`, `.stop()`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import threading
from decimal import Decimal
from typing import Any

import pyarrow as pa

from engine.api import Notice, QueryResult, StatementDescription
from engine.cancel import NEVER, CancelToken
from engine.errors import EngineError, InvalidCatalogName, QueryCanceled, SqlSyntaxError
from engine.types import (
    BIGINT,
    BOOLEAN,
    BYTEA,
    DATE,
    DOUBLE,
    INT,
    INTERVAL,
    JSONB,
    NUMERIC,
    REAL,
    SMALLINT,
    TIME,
    TIMESTAMP,
    TIMESTAMPTZ,
    TYPE_NAMES,
    VARCHAR,
    Field,
    SqlType,
    list_of,
)
from pgwire.server import PgServer, serve

UTC = dt.UTC

ALL_TYPES: list[tuple[str, SqlType, Any]] = [
    ("b", BOOLEAN, True),
    ("i2", SMALLINT, -32768),
    ("i4", INT, 2147483647),
    ("i8", BIGINT, -9223372036854775808),
    ("f4", REAL, 1.5),
    ("f8", DOUBLE, 0.1),
    ("n", NUMERIC, Decimal("-12345.6780000000")),
    ("s", VARCHAR, 'héllo, "world"'),
    ("by", BYTEA, b"\x00\xff\x10"),
    ("d", DATE, dt.date(1999, 12, 31)),
    ("t", TIME, dt.time(23, 59, 59, 123000)),
    ("ts", TIMESTAMP, dt.datetime(2024, 1, 2, 3, 4, 5, 600000)),
    ("tz", TIMESTAMPTZ, dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ("iv", INTERVAL, pa.MonthDayNano([14, 3, 14_706_000_000_000])),
    ("j", JSONB, '{"a": [1, 2]}'),
    ("ai", list_of(INT), [1, None, 3]),
    ("at", list_of(VARCHAR), ["a b", "c", None, ""]),
]


class FakePrepared:
    def __init__(self, sql: str, description: StatementDescription) -> None:
        self.sql = sql
        self.description = description


def _n_params(sql: str) -> int:
    found = [int(m) for m in re.findall(r"\$(\d+)", sql)]
    return max(found, default=0)


class FakeSession:
    def __init__(self, user: str, database: str, options: dict[str, str]) -> None:
        self.user = user
        self.options = options
        self.tz = options.get("TimeZone", "UTC")
        self.cancelled = threading.Event()
        self.sleeping = threading.Event()  # set while `sleep` runs (cancel tests wait for it)
        self.closed = False
        self.statements: list[str] = []

    # -- engine.api.Session ----------------------------------------------------------------
    def execute_simple(self, sql: str) -> list[QueryResult]:
        sql = re.sub(r"--[^\n]*", "", sql)
        parts = [p for p in sql.split(";") if p.strip()]
        if not parts:
            return [QueryResult("", empty=True)]
        done: list[QueryResult] = []
        for part in parts:
            try:
                done.append(self._run(part, []))
            except EngineError as exc:
                exc.partial_results = done  # type: ignore[attr-defined]
                raise
        return done

    def prepare(self, sql: str, param_types: list[SqlType | None]) -> FakePrepared:
        n = max(_n_params(sql), len(param_types))
        types: list[SqlType] = []
        for i in range(n):
            given = param_types[i] if i < len(param_types) else None
            m = re.search(rf"\${i + 1}::([a-z0-9_]+(?:\[\])?)", sql.lower())
            if given is not None:
                types.append(given)
            elif m:
                name = m.group(1)
                types.append(
                    list_of(TYPE_NAMES[name[:-2]]) if name.endswith("[]") else TYPE_NAMES[name]
                )
            else:
                types.append(VARCHAR)
        cols = self._columns(sql, types)
        return FakePrepared(sql, StatementDescription(types, cols))

    def execute(self, stmt: FakePrepared, params: list[Any]) -> QueryResult:
        self.statements.append(stmt.sql)
        return self._run(stmt.sql, params, stmt.description.param_types)

    def describe_portal(self, stmt: FakePrepared, params: list[Any]) -> list[Field] | None:
        return stmt.description.columns

    def parameter_status(self) -> dict[str, str]:
        return {"TimeZone": self.tz, "server_version": "13.14.0"}

    @property
    def timezone(self) -> str:
        return self.tz

    def cancel(self, reason: str = "user") -> None:
        self.cancelled.set()

    @property
    def cancel_token(self) -> CancelToken:
        return NEVER

    def close(self) -> None:
        self.closed = True

    # -- the fixed statements ---------------------------------------------------------------
    def _columns(self, sql: str, types: list[SqlType]) -> list[Field] | None:
        s = sql.strip().lower()
        if s.startswith("echo"):
            return [Field(f"p{i + 1}", t) for i, t in enumerate(types)]
        if s == "select 1":
            return [Field("?column?", INT)]
        if s.startswith("series"):
            return [Field("n", INT)]
        if s == "all types":
            return [Field(name, t) for name, t, _ in ALL_TYPES]
        if s == "fail":
            raise SqlSyntaxError('syntax error at or near "fail"', position=1)
        return None

    def _run(self, sql: str, params: list[Any], types: list[SqlType] | None = None) -> QueryResult:
        s = sql.strip().lower()
        self.cancelled.clear()
        if s == "select 1":
            return QueryResult("SELECT 1", [Field("?column?", INT)], [(1,)])
        if s.startswith("series"):
            n = int(s.split()[1])
            return QueryResult(f"SELECT {n}", [Field("n", INT)], [(i,) for i in range(n)])
        if s == "all types":
            cols = [Field(name, t) for name, t, _ in ALL_TYPES]
            rows = [tuple(v for _, _, v in ALL_TYPES), tuple(None for _ in ALL_TYPES)]
            return QueryResult("SELECT 2", cols, rows)
        if s.startswith("echo"):
            cols = [Field(f"p{i + 1}", t) for i, t in enumerate(types or [])]
            return QueryResult("SELECT 1", cols, [tuple(params)])
        if s in ("begin", "start transaction", "commit", "rollback"):
            return QueryResult(s.upper() if s != "start transaction" else "BEGIN")
        if s == "insert":
            return QueryResult("INSERT 0 1")
        if s == "notice":
            return QueryResult("DO", notices=[Notice("hello from the engine")])
        m = re.fullmatch(r"set timezone to '([^']+)'", s)
        if m:
            self.tz = sql.strip().split("'")[1]
            return QueryResult("SET", status={"TimeZone": self.tz})
        if s == "sleep":
            self.sleeping.set()
            if self.cancelled.wait(10):
                raise QueryCanceled("canceling statement due to user request")
            return QueryResult("SELECT 0", [Field("n", INT)], [])
        if s == "fail":
            raise SqlSyntaxError('syntax error at or near "fail"', position=1, hint="Try again.")
        if s == "bad value":  # a value the int4 codec cannot encode: an engine bug
            return QueryResult("SELECT 2", [Field("x", INT)], [(1,), ("abc",)])
        if s == "crash":
            raise RuntimeError("secret internals")
        raise SqlSyntaxError(f'unknown statement "{sql.strip()}"')


class _FakeBudget:
    """What the CLI logs of the state memory budget at start."""

    def describe(self) -> str:
        return "fake"


class FakeDatabase:
    def __init__(self) -> None:
        self.budget = _FakeBudget()
        self.sessions: list[FakeSession] = []
        self.closed = False
        # user -> password verifier (engine.catalog.users format); absent: trust
        self.verifiers: dict[str, str] = {}

    def password_verifier(self, user: str) -> str | None:
        return self.verifiers.get(user)

    def connect(
        self, user: str, database: str, options: dict[str, str] | None = None
    ) -> FakeSession:
        if database != "dev":
            raise InvalidCatalogName(f'database "{database}" does not exist')
        session = FakeSession(user, database, options or {})
        self.sessions.append(session)
        return session

    def close(self) -> None:
        self.closed = True


class RunningServer:
    """A pgwire server on its own event-loop thread (so sync clients can block freely)."""

    def __init__(self, db: FakeDatabase) -> None:
        self.db = db
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        fut = asyncio.run_coroutine_threadsafe(serve(db, "127.0.0.1", 0), self.loop)
        self.server: PgServer = fut.result(10)
        self.port = self.server.port
        self.dsn = f"host=127.0.0.1 port={self.port} user=root dbname=dev"

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.stop(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
