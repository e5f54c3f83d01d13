"""A client session: session variables, statement dispatch, prepared statements.

Implements `engine.api.Session`. pgwire calls it from a worker thread per connection.
Each statement kind has a handler in `engine.handlers`; this module owns what is per
session: variables (SET/SHOW/RESET), the transaction-block state that clients expect
(BEGIN/COMMIT are accepted; Swell statements are individually atomic), and prepared
statements whose parameter types are inferred at Parse time.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine import cancel as cancellation
from engine.api import Notice, QueryResult, StatementDescription
from engine.batch.memory import SETTING as MEMORY_SETTING
from engine.catalog.credentials import option_credentials, scrub
from engine.catalog.databases import in_database
from engine.catalog.privileges import acting_as
from engine.errors import (
    EngineError,
    FeatureNotSupported,
    InvalidParameterName,
    SqlSyntaxError,
    date_out_of_range,
)
from engine.expr import EvalContext, ParamContext
from engine.latency import STATEMENT_KINDS, STATEMENTS
from engine.recursion import too_complex

# the settings every session starts from (engine.session_vars), also read by SHOW-like
# catalogs and functions without a session
from engine.session_vars import DEFAULT_VARS as DEFAULT_VARS
from engine.session_vars import DISPLAY as DISPLAY
from engine.session_vars import REPORTED as REPORTED
from engine.setting_units import (
    TIME_SETTINGS,
    parse_bytes,
    parse_time_ms,
    show_bytes,
    show_time_ms,
)
from engine.sql.parser import Statement, parse_one, parse_statements
from engine.sql.redact import redact
from engine.stream.event_log import flush_warning, readable_jobs
from engine.types import SqlType

log = logging.getLogger("swell.session")

# command tags of schema changes: each one is logged at INFO once it succeeded
_DDL_TAGS = ("CREATE", "DROP", "ALTER")


def _log_ddl(tag: str, user: str, sql: str, seconds: float) -> None:
    """`ddl tag=CREATE_TABLE user=root ms=3 statement="CREATE TABLE t (...)"` (literals of
    statements that may hold credentials masked, see engine.sql.redact)."""
    text = " ".join(redact(sql.strip(), limit=300).split()).replace('"', '\\"')
    tag = tag.replace(" ", "_")
    log.info('ddl tag=%s user=%s ms=%d statement="%s"', tag, user, seconds * 1000, text)


@dataclass
class PreparedStmt:
    sql: str
    statement: Statement
    description: StatementDescription
    param_types: list[SqlType] = field(default_factory=list)


class SwellSession:
    def __init__(
        self, db: Any, user: str, database: str, pid: int, options: dict[str, str]
    ) -> None:
        self.db = db
        self.user = user
        self.database = database
        self.pid = pid
        self.vars = dict(DEFAULT_VARS)
        for k, v in _startup_settings(options).items():
            if k in (
                "application_name",
                "timezone",
                "datestyle",
                "client_encoding",
                "extra_float_digits",
                "search_path",
            ):
                self.vars[k] = v
            elif k in TIME_SETTINGS:  # `options=-c statement_timeout=5s` or a startup key
                self.vars[k] = show_time_ms(parse_time_ms(k, v))
            elif k == MEMORY_SETTING:
                self.vars[k] = show_bytes(parse_bytes(k, v))
        user_entry = db.catalog.users.find(user)
        if user_entry is not None and not user_entry.superuser:
            self.vars["is_superuser"] = "off"
        self.session_defaults = dict(self.vars)  # what RESET ALL returns to
        self.in_transaction = False
        self.savepoints: list[str] = []  # engine/handlers/txn.py
        self.cursors: dict[str, Any] = {}
        self.pending_copy: Any = None  # COPY FROM STDIN waiting for its rows (copy_in.py)
        # the running statement's stop signal (engine/cancel.py); None between statements
        self._token: cancellation.CancelToken | None = None
        # what pg_stat_activity shows: the running statement's text and start (None: idle)
        self.active_query: str | None = None
        self.query_start: float | None = None
        # the token of a COPY FROM STDIN whose rows are still arriving (pgwire's data phase)
        self._copy_token: cancellation.CancelToken | None = None
        # pgwire sets it: a large SELECT answers with its first rows and streams the rest
        # (QueryResult.more); in-process callers get whole results
        self.stream_results = False
        self._stream_this = False
        # the token of a SELECT whose rows are still streaming (result_stream.py)
        self._stream_token: cancellation.CancelToken | None = None
        self.closed = False
        # sends a NOTICE to the client while a statement runs (set by pgwire; None: the
        # notices go with the statement's result), e.g. a waiting CREATE's progress
        self.notify: Callable[[Notice], bool] | None = None
        # streaming data errors already reported to this session (its last FLUSH warns
        # about the ones after it; engine.stream.event_log)
        self._errors_seen = self._errors_total()

    # -- engine.api.Session --------------------------------------------------------------
    @property
    def timezone(self) -> str:
        return self.vars["timezone"]

    def parameter_status(self) -> dict[str, str]:
        out = {}
        for k in REPORTED:
            if k == "in_hot_standby":
                out[k] = "off"
            elif k == "session_authorization":
                out[k] = self.user
            else:
                out[DISPLAY.get(k, k)] = self.vars[k]
        return out

    def eval_ctx(self) -> EvalContext:
        return EvalContext(timezone=self.timezone, session=self)

    def execute_simple(self, sql: str) -> list[QueryResult]:
        results: list[QueryResult] = []
        try:
            try:
                statements = parse_statements(sql)
            except RecursionError:
                raise too_complex() from None
        except EngineError as e:
            e.partial_results = []  # type: ignore[attr-defined]
            raise
        for i, st in enumerate(statements):
            # only the last statement of a query string may stream: the ones before it
            # finish (and fail) before the next one runs
            self._stream_this = self.stream_results and i == len(statements) - 1
            try:
                try:
                    results.append(self._run(st, None))
                except RecursionError:
                    raise too_complex() from None
                except OverflowError as e:
                    raise _overflow(e) from e
            except EngineError as e:
                if e.position is not None and st.offset:
                    e.position += st.offset
                e.partial_results = results  # type: ignore[attr-defined]
                raise
            except Exception as e:
                log.exception("internal error running %r", redact(st.sql))
                err = EngineError("internal error")
                err.partial_results = results  # type: ignore[attr-defined]
                raise err from e
        return results

    def prepare(self, sql: str, param_types: list[SqlType | None]) -> PreparedStmt:
        try:
            with in_database(self.database):
                return self._prepare(sql, param_types)
        except RecursionError:
            raise too_complex() from None

    def _prepare(self, sql: str, param_types: list[SqlType | None]) -> PreparedStmt:
        stmts = parse_statements(sql)
        if len(stmts) > 1:
            raise SqlSyntaxError("cannot insert multiple commands into a prepared statement")
        st = stmts[0]
        params = ParamContext(list(param_types), None)
        columns = None
        # DECLARE/COPY wrap a query: infer its parameters; they return no row set
        inner = st.args["query"] if st.kind in ("declare", "copy") else st
        if inner.kind in ("select", "insert", "update", "delete"):
            from engine.handlers.dml import describe_statement

            columns = describe_statement(self, inner, params)
        if inner is not st:
            columns = None
        if st.kind == "fetch":
            from engine.handlers.txn import fetch_columns

            columns = fetch_columns(self, st)
        types = params.finalize()
        desc = StatementDescription(types, columns if st.kind != "empty" else None)
        if st.kind in (
            "show",
            "show_objects",
            "describe",
            "show_create",
            "show_special",
            "explain",
            "show_connections",
        ):
            desc.columns = self._run(st, None).columns
        return PreparedStmt(sql, st, desc, types)

    def execute(self, stmt: PreparedStmt, params: list[Any]) -> QueryResult:  # type: ignore[override]
        self._stream_this = self.stream_results
        try:
            res = self._run(stmt.statement, ParamContext(list(stmt.param_types), list(params)))
            _check_result_shape(stmt, res)
            return res
        except RecursionError:
            raise too_complex() from None
        except OverflowError as e:
            raise _overflow(e) from e
        except EngineError:
            raise
        except Exception as e:
            log.exception("internal error running %r", redact(stmt.sql))
            raise EngineError("internal error") from e

    def describe_portal(self, stmt: PreparedStmt, params: list[Any]) -> Any:
        return stmt.description.columns

    def copy_in_decode(
        self, data: bytes, opts: dict[str, Any], types: list[Any], utc: bool
    ) -> list[Any] | None:
        """The pending COPY FROM STDIN's data decoded by the parallel workers, when the
        server runs some and the data suits (`engine.stream.parallel.decode`); None:
        pgwire decodes it itself."""
        from engine.stream.parallel.decode import decode_in_workers

        return decode_in_workers(self.db.runtime.pool, data, opts, types, utc)

    def copy_in_columns(self, columns: list[Any]) -> QueryResult:
        """The columns of the pending COPY FROM STDIN (parsed by pgwire): insert them."""
        from engine.handlers.copy_in import insert_columns

        token, self._copy_token = self._copy_token, None
        token = token or cancellation.CancelToken()
        token.check()  # cancelled or timed out while the rows arrived
        self._token = token
        try:
            with in_database(self.database), cancellation.running(token):
                return insert_columns(self, columns)
        finally:
            self._token = None
            self.active_query = None

    def copy_in_abort(self) -> None:
        self.pending_copy = None
        self._copy_token = None
        self.active_query = None

    def describe_cursor(self, name: str) -> tuple[list[Any], bool]:
        """Columns and binary flag of SQL cursor `name` (Describe P of a DECLAREd cursor)."""
        from engine.handlers.txn import cursor

        c = cursor(self, name)
        return c.columns, c.binary

    def cancel(self, reason: str = cancellation.USER) -> None:
        """Stop the running statement (from any thread). As in PostgreSQL, a cancel with no
        statement running does nothing."""
        token = self._token or self._copy_token or self._stream_token
        if token is not None:
            token.cancel(reason)

    @property
    def cancel_token(self) -> cancellation.CancelToken:
        """The running statement's token (`engine.cancel.NEVER` between statements); during
        the data phase of a COPY FROM STDIN, the COPY's."""
        return self._token or self._copy_token or cancellation.NEVER

    def check_cancel(self) -> None:
        """Raise 57014 when the running statement was cancelled or timed out."""
        token = self._token
        if token is not None:
            token.check()

    def close(self) -> None:
        self.closed = True
        self.db.sessions.pop(self.pid, None)

    # -- dispatch ----------------------------------------------------------------------------
    def _run(self, st: Statement, params: ParamContext | None) -> QueryResult:
        start = time.monotonic()
        outer = self._token
        # one token per statement (statement_timeout counts per statement, as PostgreSQL
        # 13+ does for a multi-statement query string); a nested statement shares it
        token = outer or cancellation.CancelToken.with_timeout(self.statement_timeout_ms())
        self._token = token
        if outer is None:
            self.active_query, self.query_start = redact(st.sql.strip(), limit=1024), time.time()
        streaming = False
        try:
            with in_database(self.database), acting_as(self), cancellation.running(token):
                res = self._dispatch(st, params)
            if res.copy is not None and res.copy.get("direction") == "in":
                self._copy_token = token  # the rows follow: the statement goes on
            streaming = res.more is not None  # the statement goes on while its rows stream
            if st.args.get("notices"):  # identifiers truncated to 63 bytes (engine/sql)
                res.notices[:0] = [Notice(m, sqlstate="42622") for m in st.args["notices"]]
        except EngineError as e:
            _scrub_error(e, st, self.db.catalog)
            raise
        finally:
            self._token = outer
            self._stream_this = False
            if outer is None and self._copy_token is None and not streaming:
                self.active_query = None
        took = time.monotonic() - start
        ddl = res.tag.startswith(_DDL_TAGS)
        if ddl:
            _log_ddl(res.tag, self.user, st.sql, took)
        kind = "ddl" if ddl else STATEMENT_KINDS.get(st.kind, "other")
        STATEMENTS.observe(kind, took)
        return res

    def _dispatch(self, st: Statement, params: ParamContext | None) -> QueryResult:
        from engine.handlers import ddl, dml, query, show, subscription, txn

        k = st.kind
        if k == "empty":
            return QueryResult("", empty=True)
        if k == "select":
            stream, self._stream_this = self._stream_this, False
            return query.run_select(self, st, params, stream=stream)
        if k == "insert":
            return self._after_dml(dml.run_insert(self, st, params))
        if k == "update":
            return self._after_dml(dml.run_update(self, st, params))
        if k == "delete":
            return self._after_dml(dml.run_delete(self, st, params))
        if k == "create_table":
            return ddl.create_table(self, st)
        if k == "create_source":
            from engine.handlers.source_ddl import create_source

            return create_source(self, st)
        if k == "create_mv":
            return ddl.create_materialized_view(self, st)
        if k == "create_view":
            return ddl.create_view(self, st)
        if k == "drop":
            return ddl.drop(self, st)
        if k == "create_index":
            return ddl.create_index(self, st)
        if k in ("drop_index", "show_indexes"):
            from engine.handlers import index

            return index.drop_index(self, st) if k == "drop_index" else index.show_indexes(self, st)
        if k == "create_sink":
            from engine.handlers.sink import create_sink

            return create_sink(self, st)
        if k in ("create_connection", "drop_connection", "show_connections"):
            from engine.handlers import connection

            return getattr(connection, k)(self, st)
        if k in ("create_function", "create_aggregate", "drop_function", "show_functions"):
            from engine.handlers import function_ddl

            name = "create_function" if k == "create_aggregate" else k
            return getattr(function_ddl, name)(self, st)  # type: ignore[no-any-return]
        if k in ("alter_relation", "comment"):
            from engine.handlers import alter

            return (
                alter.run_alter(self, st) if k == "alter_relation" else alter.run_comment(self, st)
            )
        if k in ("create_database", "drop_database", "rename_database"):
            from engine.handlers import database_ddl

            return getattr(database_ddl, k)(self, st)  # type: ignore[no-any-return]
        if k in ("create_schema", "drop_schema"):
            from engine.handlers import schema

            return getattr(schema, k)(self, st)
        if k in ("create_secret", "drop_secret"):
            from engine.handlers import secret

            return getattr(secret, k)(self, st)
        if k == "user":
            from engine.handlers import users

            return users.run(self, st)
        if k in ("grant", "alter_owner"):
            from engine.handlers import grant

            return grant.run(self, st) if k == "grant" else grant.alter_owner(self, st)
        if k == "flush":
            epoch = self.db.runtime.barrier(force=True)
            uploader = getattr(self.db, "uploader", None)
            if uploader is not None:  # --state-store: FLUSH returns once its epoch is on S3
                uploader.wait_uploaded(epoch, check=cancellation.check)  # cancel, timeout
            return self._flushed()
        if k in ("cancel_jobs", "wait"):
            from engine.handlers import jobs

            if k == "wait":
                return jobs.wait_all(self)
            return jobs.cancel_jobs(self, st.args["ids"])
        if k == "explain":
            from engine.handlers.explain_stream import explain

            return explain(self, st)
        if k in ("show_objects", "describe", "show_create", "show_special"):
            return show.run(self, st)
        if k == "show":
            return self._show(st.args["name"])
        if k == "set":
            return self._set(st.args["name"], st.args["value"])
        if k == "reset":
            name = st.args["name"]
            if name == "all":
                return QueryResult("RESET", status=self.reset_all())
            return self._set(name, None, tag="RESET")
        if k in txn.KINDS:
            return txn.run(self, st, params)
        if k == "verify":
            from engine.handlers.verify import verify

            return verify(self, st)
        if k in subscription.KINDS:
            return subscription.run(self, st)
        if k == "noop":
            return QueryResult(st.args.get("tag", "SET"))
        raise SqlSyntaxError(f"unsupported statement {k}")

    def _errors_total(self) -> int:
        events = getattr(getattr(self.db, "runtime", None), "events", None)
        return events.total if events is not None else 0

    def _flushed(self) -> QueryResult:
        """FLUSH's answer: a WARNING when streaming expressions failed since this session's
        last FLUSH (the rows flowed on with NULLs; the event log has the details)."""
        self._errors_seen, warning = flush_warning(
            self.db.runtime.events, self._errors_seen, readable_jobs(self.db, self)
        )
        if warning is None:
            return QueryResult("FLUSH")
        msg, detail = warning
        return QueryResult("FLUSH", notices=[Notice(msg, "WARNING", "01000", detail=detail)])

    def reset_all(self) -> dict[str, str]:
        """RESET ALL / DISCARD ALL: every variable back to its session default (the
        startup packet's values included); returns the changed reported parameters."""
        old, self.vars = self.vars, dict(self.session_defaults)
        return {DISPLAY.get(k, k): v for k, v in self.vars.items() if k in REPORTED and old[k] != v}

    def _after_dml(self, res: tuple[QueryResult, int | None]) -> QueryResult:
        result, seq = res
        if seq is not None:
            self.db.wal.wait_durable(seq)
            if self.vars["rw_implicit_flush"] in ("true", "on") or self.vars["implicit_flush"] in (
                "true",
                "on",
            ):
                self.db.runtime.barrier(force=True)
        return result

    # -- variables ---------------------------------------------------------------------------
    def statement_timeout_ms(self) -> int:
        return parse_time_ms("statement_timeout", self.vars["statement_timeout"])

    def query_memory_limit(self) -> int:
        """Bytes an ad-hoc query may hold (0: unlimited), from `query_memory_limit`."""
        return parse_bytes(MEMORY_SETTING, self.vars[MEMORY_SETTING])

    def _set(self, name: str, value: str | None, tag: str = "SET") -> QueryResult:
        name = name.lower()
        if name == "time zone":
            name = "timezone"
        if name not in self.vars and not name.startswith(("rw_", "streaming_", "batch_")):
            raise InvalidParameterName(f'unrecognized configuration parameter "{name}"')
        if value is None:
            value = DEFAULT_VARS.get(name, "")
        if name == "timezone":
            value = _check_timezone(value)
        if name == "client_encoding":
            value = _check_client_encoding(value)
        if name in TIME_SETTINGS:
            value = show_time_ms(parse_time_ms(name, value))
        if name == MEMORY_SETTING:
            value = show_bytes(parse_bytes(name, value))
        if name == "backfill_rate_limit":
            from engine.handlers.jobs import parse_rate_limit

            value = parse_rate_limit(value)
        if name in ("rw_implicit_flush", "implicit_flush", "background_ddl"):
            low = value.lower()
            if low not in ("true", "false", "on", "off", "1", "0", "t", "f"):
                from engine.errors import InvalidParameterValue

                raise InvalidParameterValue(f'parameter "{name}" requires a Boolean value')
            value = "true" if low in ("true", "on", "1", "t") else "false"
        self.vars[name] = value
        res = QueryResult(tag)
        if name in REPORTED:
            res.status = {DISPLAY.get(name, name): value}
        if name == "iceberg_engine_connection" and value:
            res.notices.append(
                Notice(f"iceberg_engine_connection set to {value}", severity="NOTICE")
            )
            res.notices.clear()
        return res

    def _show(self, name: str) -> QueryResult:
        from engine.types import VARCHAR, Field

        if name == "all":
            rows = [(DISPLAY.get(k, k), v, "") for k, v in sorted(self.vars.items())]
            return QueryResult(
                f"SHOW {len(rows)}",
                [Field("Name", VARCHAR), Field("Setting", VARCHAR), Field("Description", VARCHAR)],
                rows,
            )
        key = name.lower()
        if key == "transaction isolation level":
            key = "transaction_isolation"
        if key not in self.vars:
            raise InvalidParameterName(f'unrecognized configuration parameter "{name}"')
        return QueryResult("SHOW", [Field(key, VARCHAR)], [(self.vars[key],)])


def _startup_settings(options: dict[str, str]) -> dict[str, str]:
    """Settings of the startup packet: its own keys, and `-c name=value` / `--name=value`
    in `options` (libpq's `options`, PGOPTIONS), as PostgreSQL reads them; `\\ ` escapes a
    space inside a value."""
    out: dict[str, str] = {}
    for k, v in options.items():
        if k.lower() != "options":
            out[k.lower()] = v
            continue
        words = re.split(r"(?<!\\)\s+", v.strip())
        words = [w.replace("\\ ", " ") for w in words if w]
        i = 0
        while i < len(words):
            w = words[i]
            if w == "-c" and i + 1 < len(words):
                w, i = words[i + 1], i + 1
            elif w.startswith("-c") or w.startswith("--"):
                w = w[2:]
            if "=" in w:
                name, _, value = w.partition("=")
                out[name.strip().lower().replace("-", "_")] = value
            i += 1
    return out


def _check_result_shape(stmt: PreparedStmt, res: QueryResult) -> None:
    """A prepared statement's rows must keep the columns its Describe announced: after the
    relation it reads was dropped and re-created with other columns, PostgreSQL refuses
    ("cached plan must not change result type") rather than send rows the client would
    decode with the old row description."""
    before = stmt.description.columns
    if before is None or res.columns is None or stmt.statement.kind != "select":
        return
    if [f.type.oid for f in before] != [f.type.oid for f in res.columns]:
        raise FeatureNotSupported("cached plan must not change result type")


def _overflow(e: OverflowError) -> Exception:
    """Python's datetime ends at year 9999: a value beyond is 22008, not an internal
    error; other overflows stay internal."""
    msg = str(e).lower()
    if "date" in msg or "year" in msg:
        return date_out_of_range()
    return e


def _check_client_encoding(value: str) -> str:
    """Text goes out as UTF-8 only: another client encoding would need conversion of every
    string both ways, so (as RisingWave) anything but UTF8 is refused instead of ignored."""
    if value.strip().upper().replace("-", "").replace("_", "") in ("UTF8", "UNICODE"):
        return "UTF8"
    from engine.errors import InvalidParameterValue

    raise InvalidParameterValue(
        f'invalid value for parameter "client_encoding": "{value}"',
        detail="Only UTF8 is supported.",
    )


def _check_timezone(value: str) -> str:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    v = value.strip()
    if v.upper() in ("UTC", "GMT", "Z", "ZULU"):
        return "UTC"
    if v.lower() == "local":
        return "UTC"
    try:
        ZoneInfo(v)
    except (ZoneInfoNotFoundError, ValueError) as e:
        from engine.errors import InvalidParameterValue

        raise InvalidParameterValue(f'invalid value for parameter "TimeZone": "{value}"') from e
    return v


_ = parse_one


def _scrub_error(e: EngineError, st: Statement, catalog: Any) -> None:
    """Remove from `e` any credential the statement carried and any secret's value: an
    error may quote an option (engine/catalog/credentials.py)."""
    values: list[str] = [s.value for s in catalog.secrets.values()]
    clauses = st.args.get("clauses")
    if clauses is None and st.args.get("sink") is not None:
        clauses = getattr(st.args["sink"], "clauses", None)
    if clauses is not None:
        values += option_credentials(getattr(clauses, "options", {}))
        values += option_credentials(getattr(clauses, "format_options", {}))
    secret = st.args.get("secret")
    if secret is not None and isinstance(getattr(secret, "value", None), str):
        values.append(secret.value)
    opts = st.args.get("options")
    if isinstance(opts, dict) and isinstance(opts.get("password"), str):
        values.append(opts["password"])
    if not values:
        return
    e.message = scrub(e.message, values) or e.message
    e.detail = scrub(e.detail, values)
    e.hint = scrub(e.hint, values)
    e.args = (e.message,)
