"""Webhook tables: their DDL rules and the engine-side ingestion API the HTTP server calls.

A webhook table is an ordinary table (`CREATE TABLE t (data JSONB) WITH (connector =
'webhook') [VALIDATE [SECRET s] AS secure_compare(a, b)]`) whose rows also arrive over HTTP.
Its catalog entry carries `extra["webhook"]`: the VALIDATE text, the secret *name* (the
value is resolved per request, so it is never in SHOW CREATE, logs or errors), the name the
raw body has inside VALIDATE, `is_batched` and `wait_for_persistence`.

Request lifecycle (driven by `connectors.webhook.server`):
1. `WebhookIngest.resolve(db, schema, table)` -> a `WebhookTarget` (cached per catalog
   version, including its compiled VALIDATE expression), or `WebhookError` 404/403;
2. `target.decode_rows(body)` -> the rows (one, or one per non-empty NDJSON line when
   batched; all or nothing): canonical jsonb texts (`jsonb_many`, C-speed) for the
   single-jsonb-column form, else an Arrow batch of the visible columns; or `WebhookError`
   422 (batched: naming the first bad line); per request, off the event loop for large
   bodies (`decode` gives the Arrow batch either way); single-event bodies of the
   single-jsonb form are decoded per flush instead, after VALIDATE (`decode_events`);
3. `target.validate(requests)` evaluates VALIDATE once over many requests at once (one row
   per request: `headers` JSONB with lower-cased names, the raw body as bytea, the secret
   as varchar) -> per request None (ok), 401 (false) or 400 (NULL);
4. `target.write(decoded)` -> WAL sequence number: the accepted requests' rows, as one
   chunk with fresh hidden `_row_id`s, queued for the next barrier exactly like INSERT
   (WAL append + queue, never waiting for a barrier). The caller waits for `db.wal`
   durability before answering when `target.wait_for_persistence`.
"""

from __future__ import annotations

import io
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypeAlias

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import sqlglot
from sqlglot import exp

from engine import expr as ex
from engine.api import Notice
from engine.catalog import Relation, RelationKind
from engine.catalog.databases import database_exists, in_database
from engine.catalog.privileges import require_secret
from engine.chunk import StreamChunk
from engine.errors import (
    EngineError,
    InvalidParameterValue,
    SqlSyntaxError,
    UndefinedObject,
    UndefinedTable,
    not_supported,
)
from engine.expr.fn_crypto import crypto_hook
from engine.expr.jsonb import dumps_parsed, in_jsonb_order, jsonb_canonical, parse_json_text
from engine.expr.jsonb_many import canonical_parts, utf8_column
from engine.types import BYTEA, JSONB, VARCHAR, Field, TypeKind, arrow_schema

K = TypeKind

WEBHOOK_OPTIONS = ("connector", "is_batched", "webhook.wait_for_persistence")
VALIDATE_NOTICE = "VALIDATE clause is strongly recommended for safety or production usages"
_TRUE = ("true", "t", "on", "1", "yes")
_FALSE = ("false", "f", "off", "0", "no")


class WebhookError(Exception):
    """A request the server answers with `status` and `{"error": message}`."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# -- DDL -----------------------------------------------------------------------------------------
def _bool_option(options: dict[str, str], key: str, default: bool) -> bool:
    v = options.get(key)
    if v is None:
        return default
    low = v.lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise InvalidParameterValue(f'invalid value for boolean option "{key}": {v}')


def body_column_name(fields: list[Field]) -> str:
    """The name the raw body has in VALIDATE: the single JSONB column's, else `payload`."""
    visible = [f for f in fields if not f.hidden]
    if len(visible) == 1 and visible[0].type.kind is K.JSONB:
        return visible[0].name
    return "payload"


def validate_scope(fields: list[Field], secret: str | None) -> ex.Scope:
    cols = [
        ex.ColumnBinding("headers", JSONB, 0),
        ex.ColumnBinding(body_column_name(fields), BYTEA, 1),
    ]
    if secret is not None:
        cols.append(ex.ColumnBinding(secret, VARCHAR, 2))
    return ex.Scope(cols)


def bind_validate(text: str, fields: list[Field], secret: str | None) -> ex.Expr:
    """Parse and bind a VALIDATE expression (must be a secure_compare(...) call)."""
    try:
        node = sqlglot.parse_one(text, read="risingwave")
    except sqlglot.errors.ParseError as e:
        raise SqlSyntaxError("syntax error in VALIDATE expression") from e
    if not (isinstance(node, exp.Anonymous) and str(node.this).lower() == "secure_compare"):
        raise SqlSyntaxError("The signature verification function must be SECURE_COMPARE()")
    binder = ex.ExprBinder(validate_scope(fields, secret))
    binder.hook = crypto_hook(binder)
    return binder.bind(node)


def webhook_table_spec(
    catalog: Any,
    fields: list[Field],
    options: dict[str, str],
    clauses: Any,
    not_null: list[str],
) -> tuple[dict[str, Any], list[Notice]]:
    """Check a `connector = 'webhook'` CREATE TABLE; returns (extra["webhook"], notices)."""
    for k in options:
        if k not in WEBHOOK_OPTIONS:
            raise not_supported(
                f"option \"{k}\" for connector 'webhook'",
                hint="Supported options: " + ", ".join(WEBHOOK_OPTIONS) + ".",
            )
    if clauses is not None and (clauses.secret_refs or clauses.format or clauses.include):
        raise not_supported(
            "FORMAT, INCLUDE or secret options on a webhook table",
            hint="A webhook table takes the JSON body as is.",
        )
    if not_null:
        raise not_supported("NOT NULL columns in a webhook table")
    batched = _bool_option(options, "is_batched", False)
    wait = _bool_option(options, "webhook.wait_for_persistence", True)
    for f in fields:
        if not f.hidden and f.type.kind is K.UNKNOWN:
            raise not_supported(f'column "{f.name}" type in a webhook table')
    spec: dict[str, Any] = {
        "batched": batched,
        "wait_for_persistence": wait,
        "body_column": body_column_name(fields),
        "validate": None,
        "secret": None,
    }
    notices: list[Notice] = []
    validate = clauses.validate if clauses is not None else None
    if validate is None:
        notices.append(Notice(VALIDATE_NOTICE))
    else:
        secret = clauses.validate_secret
        if secret is not None and secret not in catalog.secrets:
            raise UndefinedObject(f'secret "{secret}" does not exist')
        if secret is not None:
            require_secret(catalog.secrets[secret])
        e = bind_validate(validate, fields, secret)
        if e.type.kind is not K.BOOLEAN:
            raise SqlSyntaxError("The signature verification function must be SECURE_COMPARE()")
        spec["validate"] = validate
        spec["secret"] = secret
    return spec, notices


MAX_CACHED_VERDICTS = 4096
ARROW_JSON_MIN_ROWS = 512
"""Bodies of this many rows or more go through Arrow's JSON reader: it costs about 200 us
per call, then 0.7 us per row (the per-object path: 1.3 us per row)."""
# column kinds the Arrow JSON reader decodes exactly as the per-object path does
_JSON_READER: dict[TypeKind, pa.DataType] = {
    K.BOOLEAN: pa.bool_(),
    K.SMALLINT: pa.int64(),
    K.INT: pa.int64(),
    K.BIGINT: pa.int64(),
    K.REAL: pa.float64(),
    K.DOUBLE: pa.float64(),
    K.VARCHAR: pa.string(),
}
_HEADER_ACCESS = ("jsonb_access_text", "jsonb_access")


def header_keys(validator: ex.Expr) -> tuple[str, ...] | None:
    """The header names a VALIDATE expression reads, when that is all it reads of the
    request: every use of `headers` is `headers->'name'` / `headers->>'name'` with a
    constant name, the body is not used, nothing is volatile. Then its verdict is a
    function of those header values (and the secret), so it can be cached."""
    keys: list[str] = []

    def walk(e: ex.Expr) -> bool:
        if isinstance(e, ex.Func):
            if e.volatile or e.uses_now:
                return False
            if (
                e.name in _HEADER_ACCESS
                and len(e.args) == 2
                and isinstance(e.args[0], ex.InputRef)
                and e.args[0].index == 0
                and isinstance(e.args[1], ex.Literal)
                and isinstance(e.args[1].value, str)
            ):
                keys.append(e.args[1].value)
                return True
        if isinstance(e, ex.InputRef) and e.index != 2:
            return False  # the whole headers object, or the body
        if not isinstance(e, (ex.Func, ex.Literal, ex.InputRef)):
            return False  # CASE and other nodes: not analysed, not cached
        return all(walk(c) for c in e.children())

    return tuple(dict.fromkeys(keys)) if walk(validator) else None


# -- ingestion -----------------------------------------------------------------------------------
Decoded: TypeAlias = "pa.RecordBatch | list[bytes]"
"""A request's rows: a batch, or canonical jsonb texts (UTF-8) for the single-jsonb form."""


def decoded_rows(d: Decoded) -> int:
    return d.num_rows if isinstance(d, pa.RecordBatch) else len(d)


@dataclass
class IncomingRequest:
    """One HTTP request as the validator sees it."""

    headers: dict[str, str]  # lower-cased names
    body: bytes


@dataclass
class WebhookTarget:
    """A resolved webhook table at one catalog version (immutable; rebuilt after DDL)."""

    db: Any
    rel: Relation
    batched: bool
    wait_for_persistence: bool
    validator: ex.Expr | None
    secret: str | None
    columns: list[Field] = field(default_factory=list)  # visible columns, table order
    jsonb_body: bool = False  # the single-JSONB-column form
    has_jsonb: bool = False  # some column is jsonb (parse numbers exactly)
    schema: pa.Schema = field(init=False)  # of `columns`
    full_schema: pa.Schema = field(init=False)  # of every table column (hidden too)

    # VALIDATE verdicts by the header values it reads (None: it reads more, no cache)
    header_keys: tuple[str, ...] | None = field(init=False)
    _verdicts: dict[tuple[Any, ...], int | None] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        self.schema = arrow_schema(self.columns)
        self.full_schema = arrow_schema(self.rel.fields)
        self.header_keys = None if self.validator is None else header_keys(self.validator)
        self._json_opts: pj.ParseOptions | None = None
        if self.columns and all(f.type.kind in _JSON_READER for f in self.columns):
            self._json_opts = pj.ParseOptions(
                explicit_schema=pa.schema(
                    [(f.name, _JSON_READER[f.type.kind]) for f in self.columns]
                ),
                unexpected_field_behavior="ignore",
            )

    @property
    def name(self) -> str:
        return self.rel.name

    # -- validation --------------------------------------------------------------------------
    def validate(self, requests: list[IncomingRequest]) -> list[int | None]:
        """Per request: None (accepted), 401 (VALIDATE false) or 400 (VALIDATE NULL).

        Raises WebhookError(404) if the secret disappeared.
        """
        if self.validator is None:
            return [None] * len(requests)
        if self.header_keys is None:
            return self._evaluate(requests)
        # the verdict depends only on these header values (and the secret): evaluate each
        # distinct combination once; a flush of single-event requests is usually one
        secret = self._secret_value()
        keys = [(secret, *map(r.headers.get, self.header_keys)) for r in requests]
        cache = self._verdicts
        todo = {k: r for k, r in zip(keys, requests, strict=True) if k not in cache}
        if todo:
            if len(cache) + len(todo) > MAX_CACHED_VERDICTS:
                cache.clear()
            for k, v in zip(todo, self._evaluate(list(todo.values())), strict=True):
                cache[k] = v
        return [cache[k] for k in keys]

    def _secret_value(self) -> str | None:
        if self.secret is None:
            return None
        s = self.db.catalog.objects_of(self.rel.database).secrets.get(self.secret)
        if s is None:
            raise WebhookError(404, f"Secret `{self.secret}` not found")
        return str(s.value)

    def _evaluate(self, requests: list[IncomingRequest]) -> list[int | None]:
        assert self.validator is not None
        cols: list[pa.Array] = [
            pa.array(
                [dumps_parsed(in_jsonb_order(dict(r.headers))) for r in requests], pa.string()
            ),
            pa.array([r.body for r in requests], pa.binary()),
        ]
        if self.secret is not None:
            s = self.db.catalog.objects_of(self.rel.database).secrets.get(self.secret)
            if s is None:
                raise WebhookError(404, f"Secret `{self.secret}` not found")
            cols.append(pa.array([s.value] * len(requests), pa.string()))
        batch = pa.RecordBatch.from_arrays(cols, names=[f"c{i}" for i in range(len(cols))])
        try:
            res = self.validator.eval(batch, ex.EvalContext()).to_pylist()
        except EngineError:
            if len(requests) == 1:
                return [400]
            # one bad request must not fail the others: evaluate them one by one
            return [self._evaluate([r])[0] for r in requests]
        return [None if v is True else (401 if v is False else 400) for v in res]

    # -- decoding ----------------------------------------------------------------------------
    def decode(self, body: bytes) -> pa.RecordBatch:
        """The rows of one request body as a batch of the visible columns (all or nothing)."""
        return self.as_batch(self.decode_rows(body))

    def as_batch(self, rows: Decoded) -> pa.RecordBatch:
        if isinstance(rows, pa.RecordBatch):
            return rows
        return pa.RecordBatch.from_arrays([utf8_column(rows)], schema=self.schema)

    def decode_rows(self, body: bytes) -> Decoded:
        """`decode`, except that the single-jsonb-column form stays canonical UTF-8 texts, so
        `write` builds one column for all the requests of a flush (not one per request)."""
        try:
            text = body.decode()
        except UnicodeDecodeError as e:
            raise WebhookError(422, "failed to parse request body: invalid UTF-8") from e
        if self.batched:
            items = list(filter(str.strip, text.split("\n")))  # non-blank lines, in C
        else:
            items = [text]
        if self._json_opts is not None and len(items) >= ARROW_JSON_MIN_ROWS:
            fast = self._read_json(body, len(items))
            if fast is not None:
                return fast
        if self.jsonb_body:
            try:
                return canonical_parts(items)
            except EngineError as e:
                raise WebhookError(422, _parse_error(text, self.batched)) from e
        # jsonb columns keep number digits as written (2.50): the exact parser when needed
        loads = parse_json_text if self.has_jsonb else orjson.loads
        try:
            objs = [loads(t) for t in items]
        except (orjson.JSONDecodeError, EngineError) as e:
            raise WebhookError(422, _parse_error(text, self.batched)) from e
        if not all(type(o) is dict for o in objs):
            raise WebhookError(422, "failed to decode webhook JSON payload: expected a JSON object")
        arrays = [_column([o.get(f.name) for o in objs], f) for f in self.columns]
        for i in self.rel.pk:
            f = self.rel.fields[i]
            if not f.hidden and arrays[self.columns.index(f)].null_count:
                raise WebhookError(
                    422,
                    "failed to decode webhook JSON payload: "
                    f'primary key "{f.name}" is missing or null',
                )
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    def decode_events(self, bodies: list[bytes]) -> list[Decoded | WebhookError]:
        """`decode_rows` of each of many single-event bodies of the single-jsonb form.

        Why: a flush of single-event requests is one list of texts for `canonical_parts`,
        whose shape tier decodes similar events in C with no Python per event (a request
        alone would take its per-text path). If any body fails, each is decoded alone,
        so a bad one gets its own 422 and the others are unaffected."""
        try:
            return [[p] for p in canonical_parts([b.decode() for b in bodies])]
        except (UnicodeDecodeError, EngineError):
            pass
        out: list[Decoded | WebhookError] = []
        for b in bodies:
            try:
                out.append(self.decode_rows(b))
            except WebhookError as e:
                out.append(e)
        return out

    def _read_json(self, body: bytes, n: int) -> pa.RecordBatch | None:
        """Typed columns of simple kinds: the whole body by Arrow's JSON reader (C++, one
        call per request), or None when the per-object path must decide (any reader
        error: not JSON, wrong or mixed value types, duplicate keys, overflow, a line with
        two objects; also NaN/Infinity, which the reader takes and JSON does not). That
        path then gives the same rows or the exact 422 message."""
        if not n:
            return None
        try:
            t = pj.read_json(
                io.BytesIO(body),
                parse_options=self._json_opts,
                read_options=pj.ReadOptions(use_threads=False, block_size=len(body) + 1),
            )
            if t.num_rows != n:
                return None
            arrays: list[pa.Array] = []
            for f, col in zip(self.columns, t.columns, strict=True):
                a = col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)
                if (
                    pa.types.is_floating(a.type)
                    and pc.all(pc.is_finite(a)).as_py() is False  # NaN / Infinity
                ):
                    return None
                if a.type != f.type.arrow:
                    a = a.cast(f.type.arrow)  # safe: an overflow raises
                arrays.append(a)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            return None
        for i in self.rel.pk:
            fld = self.rel.fields[i]
            if not fld.hidden and arrays[self.columns.index(fld)].null_count:
                return None  # the per-object path names the column
        return pa.RecordBatch.from_arrays(arrays, schema=self.schema)

    # -- writing -----------------------------------------------------------------------------
    def write(self, decoded: list[Decoded], *, blocking: bool = True) -> int | None:
        """Queue the rows for the next barrier and the WAL; returns the WAL sequence number.

        Never waits for a barrier: the rows go to the WAL and the table's queue under the
        runtime's short queue lock (`Runtime.write`). Into a table with a primary key the
        write also takes the table's DML lock (an UPDATE computing from the rows, or the
        barrier storing that table's queued rows, holds it); with `blocking=False` it
        returns None instead of waiting for that lock, so an event loop can retry from a
        worker thread.
        """
        texts = [d for d in decoded if not isinstance(d, pa.RecordBatch) and d]
        batches = [b for b in decoded if isinstance(b, pa.RecordBatch) and b.num_rows]
        if texts:
            batches.append(self.as_batch([t for d in texts for t in d]))
        if not batches:
            return None
        ncols = len(self.columns)
        if len(batches) == 1:
            cols = list(batches[0].columns)
        else:
            cols = [pa.concat_arrays([b.column(j) for b in batches]) for j in range(ncols)]
        n = len(cols[0]) if cols else sum(b.num_rows for b in batches)
        rt = self.db.runtime
        lock = rt.dml_lock(self.rel.id) if self.rel.row_id_index is None else None
        if lock is not None and not lock.acquire(blocking=blocking):
            return None
        try:
            if self.rel.id not in rt.tables:
                raise WebhookError(404, f"Table `{self.rel.name}` not found")
            full: list[pa.Array] = []
            it = iter(cols)
            for i, f in enumerate(self.rel.fields):
                if i == self.rel.row_id_index:
                    full.append(pa.array(rt.row_ids.take(n), pa.int64()))
                elif f.hidden:
                    full.append(pa.nulls(n, f.type.arrow))
                else:
                    full.append(next(it))
            batch = pa.RecordBatch.from_arrays(full, schema=self.full_schema)
            try:
                seq: int = rt.write(self.rel.id, StreamChunk.inserts(batch))
            except UndefinedTable:
                raise WebhookError(404, f"Table `{self.rel.name}` not found") from None
            return seq
        finally:
            if lock is not None:
                lock.release()


def _parse_error(text: str, batched: bool) -> str:
    """The 422 message for a body that is not JSON; batched bodies name the first bad line."""
    if batched:
        for no, ln in enumerate(text.split("\n"), 1):
            if ln.strip():
                try:
                    parse_json_text(ln)
                except EngineError:
                    return f"failed to parse request body: line {no} is not valid JSON"
    return "failed to parse request body"


def _column(values: list[Any], f: Field) -> pa.Array:
    """One typed column from top-level JSON values (missing -> NULL); 422 on a mismatch."""
    t = f.type
    k = t.kind
    try:
        if k is K.JSONB:
            return pa.array(
                [None if v is None else jsonb_canonical(v) for v in values], pa.string()
            )
        if k is K.VARCHAR:
            if all(v is None or type(v) is str for v in values):
                return pa.array(values, pa.string())
            raise _mismatch(f, values, (str,))
        if k is K.BOOLEAN:
            if all(v is None or type(v) is bool for v in values):
                return pa.array(values, pa.bool_())
            raise _mismatch(f, values, (bool,))
        if k in (K.SMALLINT, K.INT, K.BIGINT, K.REAL, K.DOUBLE, K.NUMERIC):
            ok: tuple[type, ...] = (
                (int,) if k in (K.SMALLINT, K.INT, K.BIGINT) else (int, float, Decimal)
            )
            if any(type(v) is str for v in values):
                return _from_text(values, f, ok)
            if all(v is None or type(v) in ok for v in values):
                if k is K.NUMERIC:
                    values = [
                        None if v is None else Decimal(repr(v)) if type(v) is float else Decimal(v)
                        for v in values
                    ]
                elif k in (K.REAL, K.DOUBLE):
                    values = [float(v) if type(v) is Decimal else v for v in values]
                return pa.array(values, t.arrow)
            raise _mismatch(f, values, ok)
        if k is K.LIST:
            return pa.array(values, t.arrow)
        return _from_text(values, f, ())
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError) as e:
        raise WebhookError(
            422,
            f'failed to decode webhook JSON payload: column "{f.name}" '
            f"cannot hold the given value as {t.display}",
        ) from e


def _from_text(values: list[Any], f: Field, native: tuple[type, ...]) -> pa.Array:
    """Strings (and native numbers, as text) through the engine's text -> type cast."""
    texts: list[str | None] = []
    for v in values:
        if v is None:
            texts.append(None)
        elif type(v) is str:
            texts.append(v)
        elif type(v) in native:
            texts.append(str(v))
        else:
            raise _mismatch(f, values, (str, *native))
    batch = pa.RecordBatch.from_arrays([pa.array(texts, pa.string())], names=["v"])
    try:
        return ex.cast(ex.InputRef(0, VARCHAR, "v"), f.type).eval(batch, ex.EvalContext())
    except EngineError as e:
        raise WebhookError(
            422,
            f'failed to decode webhook JSON payload: column "{f.name}": '
            f"{e.message if hasattr(e, 'message') else e}",
        ) from e


def _mismatch(f: Field, values: list[Any], ok: tuple[type, ...]) -> WebhookError:
    bad = next(v for v in values if v is not None and type(v) not in ok)
    return WebhookError(
        422,
        f'failed to decode webhook JSON payload: column "{f.name}" '
        f"expects {f.type.display}, got JSON {_json_kind(bad)}",
    )


def _json_kind(v: Any) -> str:
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, dict):
        return "object"
    return "array" if isinstance(v, list) else "null"


class WebhookIngest:
    """Resolves `(database, schema, table)` to cached `WebhookTarget`s (any database of
    the process; `database` is kept for callers that name the default one).

    Targets (and their compiled VALIDATE expressions) are rebuilt when the catalog version
    changes, i.e. after any DDL. Thread-safe enough for one event loop plus worker threads:
    a stale target fails its write with 404 if its table was dropped meanwhile.
    """

    def __init__(self, db: Any, database: str = "dev") -> None:
        self.db = db
        self.database = database
        self._version = -1
        self._cache: dict[tuple[str, str, str], WebhookTarget] = {}

    def resolve(self, database: str, schema: str, table: str) -> WebhookTarget:
        cat = self.db.catalog
        if not database_exists(cat, database):
            raise WebhookError(404, f"Database `{database}` not found")
        if cat.version != self._version:
            self._cache = {}
            self._version = cat.version
        key = (database, schema, table)
        t = self._cache.get(key)
        if t is not None:
            return t
        with in_database(database):
            t = self._target(cat, schema, table)
        self._cache[key] = t
        return t

    def _target(self, cat: Any, schema: str, table: str) -> WebhookTarget:
        rel = cat.find(table, schema)
        if rel is None:
            raise WebhookError(404, f"Table `{table}` not found")
        if rel.kind is not RelationKind.TABLE or rel.options.get("connector") != "webhook":
            raise WebhookError(403, f"Table `{table}` is not backed by a webhook source")
        return build_target(self.db, rel)


def build_target(db: Any, rel: Relation) -> WebhookTarget:
    """The target of webhook table `rel`; `db` provides `catalog.secrets` (for VALIDATE
    SECRET) and `runtime` (for `write`; an acceptor process's targets never write)."""
    spec = rel.extra.get("webhook", {})
    validator = None
    if spec.get("validate"):
        validator = bind_validate(spec["validate"], rel.fields, spec.get("secret"))
    columns = [f for f in rel.fields if not f.hidden]
    return WebhookTarget(
        db=db,
        rel=rel,
        batched=bool(spec.get("batched", False)),
        wait_for_persistence=bool(spec.get("wait_for_persistence", True)),
        validator=validator,
        secret=spec.get("secret"),
        columns=columns,
        jsonb_body=len(columns) == 1 and columns[0].type.kind is K.JSONB,
        has_jsonb=any(f.type.kind is K.JSONB for f in columns),
    )
