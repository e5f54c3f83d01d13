"""The engine's public face: what pgwire (and tests, and the webhook server) call.

pgwire depends on this module and on `engine.errors` / `engine.types` only. Everything a
session does is synchronous and thread-safe: pgwire runs each call in a worker thread so
one slow statement (FLUSH waits for a checkpoint) never blocks other connections.

Lifecycle: `Database.open(config)` recovers the catalog and state from the data
directory and starts the barrier loop; `db.connect(user, database)` gives a `Session`
per client connection; `db.close()` stops the loop after a final checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from engine.types import Field, SqlType


@dataclass(slots=True)
class Notice:
    """A NoticeResponse to send before the statement's completion."""

    message: str
    severity: str = "NOTICE"
    sqlstate: str = "00000"
    detail: str | None = None
    hint: str | None = None


@dataclass(slots=True)
class QueryResult:
    """One statement's outcome.

    `columns` is None for statements that return no rows (pgwire sends no RowDescription,
    and answers Describe with NoData). `rows` holds Python values in the representation
    documented in `engine.types`. `tag` is the PostgreSQL command tag (`SELECT 3`,
    `INSERT 0 3`, `CREATE_MATERIALIZED_VIEW`...); `tag == ""` with `empty=True` means the
    query string was empty (EmptyQueryResponse).
    """

    tag: str
    columns: list[Field] | None = None
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    notices: list[Notice] = field(default_factory=list)
    empty: bool = False
    # ParameterStatus messages to send after this statement (e.g. after SET TimeZone)
    status: dict[str, str] = field(default_factory=dict)
    # rows in binary format even in the simple protocol (FETCH from a BINARY cursor)
    binary: bool = False
    # COPY ... TO STDOUT: the rows go out as CopyData with these options (format 'text' or
    # 'csv', header, delimiter, null, quote, escape) instead of RowDescription/DataRow;
    # with direction 'in' (COPY FROM STDIN) pgwire collects rows for `columns` instead
    copy: dict[str, Any] | None = None
    # a large SELECT served to a streaming client (`Session.stream_results`): `rows` holds
    # the first rows; `more.next()` gives each further chunk (None at the end, when `tag`
    # is final) and `more.close()` ends the statement (engine/handlers/result_stream.py)
    more: Any = None


@dataclass(slots=True)
class StatementDescription:
    """What Describe(S) answers: parameter types (inferred where the client sent 0) and
    result columns (None: NoData)."""

    param_types: list[SqlType]
    columns: list[Field] | None


class PreparedStatement(Protocol):
    """A parsed (and, where possible, bound) single statement; reusable across executions."""

    sql: str
    description: StatementDescription


class Session(Protocol):
    """One client connection's view of the database: session variables and statements."""

    # set by the frontend: sends a NOTICE at once while a statement runs (a waiting
    # CREATE's progress); returns False if it could not
    notify: Callable[[Notice], bool] | None

    def execute_simple(self, sql: str) -> list[QueryResult]:
        """Run every statement in `sql` (simple query protocol).

        Returns one result per statement. If a statement fails, the `EngineError` raised
        carries `.partial_results` (results of the statements before it) so pgwire can
        send them first. An empty or comment-only string gives `[QueryResult("", empty=True)]`.
        """
        ...

    def prepare(self, sql: str, param_types: list[SqlType | None]) -> PreparedStatement:
        """Parse one statement (extended protocol Parse). `param_types[i]` is None where the
        client sent OID 0: the type is inferred from context (VARCHAR if nothing tells)."""
        ...

    def execute(self, stmt: PreparedStatement, params: list[Any]) -> QueryResult:
        """Run a prepared statement with parameter values already decoded to Python values
        of `stmt.description.param_types` (None is NULL)."""
        ...

    def describe_portal(self, stmt: PreparedStatement, params: list[Any]) -> list[Field] | None:
        """Result columns of the statement bound to these parameters (Describe P)."""
        ...

    def parameter_status(self) -> dict[str, str]:
        """The ParameterStatus set sent after authentication."""
        ...

    @property
    def timezone(self) -> str:
        """The session's TimeZone setting (for timestamptz text output)."""
        ...

    def cancel(self, reason: str = "user") -> None:
        """Ask the running statement to stop (CancelRequest: "user"; a closed connection:
        "disconnect"); it raises QueryCanceled (57014) at its next check (engine/cancel.py)."""
        ...

    @property
    def cancel_token(self) -> Any:
        """The running statement's `engine.cancel.CancelToken` (`NEVER` when idle); during
        a COPY FROM STDIN's data phase the COPY's, so pgwire can stop reading its rows."""
        ...

    def copy_in_decode(
        self, data: bytes, opts: dict[str, Any], types: list[Any], utc: bool
    ) -> list[Any] | None:
        """The COPY FROM STDIN's text or CSV `data` as Arrow arrays of the column `types`,
        decoded off the server process by its parallel workers; None when it has none or
        they do not vouch for the data (pgwire then parses it). `utc`: the session's time
        zone is UTC."""
        ...

    def copy_in_columns(self, columns: list[Any]) -> QueryResult:
        """Insert the rows of the COPY FROM STDIN whose statement returned a result with
        `copy["direction"] == "in"`: one Arrow array per result column, already of the
        columns' Arrow types (parsed by pgwire, a whole COPY at a time)."""
        ...

    def copy_in_abort(self) -> None:
        """Forget a pending COPY FROM STDIN (CopyFail or bad data)."""
        ...

    def close(self) -> None: ...


class Database(Protocol):
    def connect(self, user: str, database: str, options: dict[str, str] | None = None) -> Session:
        """Open a session. Raises InvalidCatalogName for an unknown database."""
        ...

    def password_verifier(self, user: str) -> str | None:
        """The user's password verifier (`SCRAM-SHA-256$...` or `md5...`), None for trust;
        raises InvalidAuthorization (28000) for an unknown user."""
        ...

    def close(self) -> None: ...
