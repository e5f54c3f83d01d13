"""Subscriptions and subscription cursors (RisingWave's way to pull a relation's changes).

* `CREATE SUBSCRIPTION s FROM t WITH (retention = '1D')`: `t` is a table or materialized
  view; the subscription is a catalog relation of kind `subscription` depending on `t`
  and a sink-like job in the runtime whose writer keeps each committed epoch's changes
  for the retention (`engine.stream.subscription`). Existing rows are not logged: a
  cursor reads them with `FULL`.
* `DECLARE c SUBSCRIPTION CURSOR FOR s [SINCE ... | FULL]` (allowed outside transaction
  blocks and kept across COMMIT, as in RisingWave) positions a cursor: `FULL` first
  returns the rows of `t` as of the last committed epoch (op `Insert`, `rw_timestamp`
  NULL), then the changes of every later epoch; `SINCE now()` / `proctime()` (the
  default) the changes of epochs committed after the DECLARE; `SINCE begin()` every
  retained change; `SINCE <unix ms>` the changes whose `rw_timestamp` is at least that.
* `FETCH NEXT | n FROM c [WITH (timeout = '5s')]`: up to n rows: `t`'s visible columns,
  then `op` (`Insert`, `Delete`, `UpdateDelete`, `UpdateInsert`) and `rw_timestamp`
  (bigint, Unix ms of the epoch's commit). Without rows available it answers at once with
  none, or with a timeout waits until a new epoch commits (or the timeout passes).
  An exactly-once consumer stores the last `rw_timestamp` it processed with its results
  and, after a crash, declares its cursor `SINCE <that + 1>`: every epoch's rows carry
  the same `rw_timestamp`, so it consumes whole epochs (FETCH until the timestamp moves).
* `SHOW SUBSCRIPTIONS`, `rw_catalog.rw_subscriptions`, `ALTER SUBSCRIPTION s SET
  RETENTION TO '2D'`, `ALTER SUBSCRIPTION s RENAME TO s2`, `DROP SUBSCRIPTION [IF
  EXISTS] s`; `DROP TABLE t CASCADE` drops its subscriptions.

Cursors live in the session (`session.cursors`, beside SQL cursors) and read the log
without the runtime lock. Lifecycle: stateless functions called per statement.
"""

from __future__ import annotations

import fnmatch
import re
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from engine.api import Notice, QueryResult
from engine.catalog import Relation, RelationKind
from engine.catalog.privileges import check_read, require_owner, session_owner
from engine.errors import (
    DependentObjectsStillExist,
    FeatureNotSupported,
    InvalidParameterValue,
    ObjectNotInPrerequisiteState,
    UndefinedObject,
    WrongObjectType,
)
from engine.expr.temporal import parse_interval
from engine.numeric import py_values
from engine.sql.parser import Statement, parse_one
from engine.types import BIGINT, VARCHAR, Field

KINDS = frozenset(
    (
        "create_subscription",
        "drop_subscription",
        "alter_subscription",
        "rename_subscription",
        "show_subscriptions",
        "show_create_subscription",
        "declare_subscription_cursor",
    )
)
_OP_NAMES = np.array(["", "Insert", "Delete", "UpdateDelete", "UpdateInsert"], dtype=object)


def run(session: Any, st: Statement) -> QueryResult:
    handler: Any = globals()["_" + st.kind]
    result: QueryResult = handler(session, st.args, st)
    return result


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def retention_seconds(text: str | None) -> int:
    """Seconds of a retention interval ('1D', '12h', '30 minutes'); months count 30 days."""
    if text is None or not text.strip():
        raise InvalidParameterValue(
            "Subscription retention time not set.",
            hint="CREATE SUBSCRIPTION s FROM t WITH (retention = '1D')",
        )
    try:
        months, days, nanos = parse_interval(text)
    except Exception as e:
        raise InvalidParameterValue(f'invalid retention "{text}": {e}') from None
    seconds = (months * 30 + days) * 86400 + nanos // 1_000_000_000
    if seconds <= 0:
        raise InvalidParameterValue(f'retention must be positive, got "{text}"')
    return int(seconds)


# -- DDL ----------------------------------------------------------------------------------------
def _create_subscription(session: Any, a: dict[str, Any], st: Statement) -> QueryResult:
    from engine.handlers.query import planner_for
    from engine.plan.stream_lower import lower_stream_plan
    from engine.stream.job_plan import state_ids
    from engine.stream.sink import UPSERT
    from engine.stream.subscription import CONNECTOR

    unknown = sorted(set(a["options"]) - {"retention"})
    if unknown:
        raise InvalidParameterValue(f'unknown subscription option "{unknown[0]}"')
    seconds = retention_seconds(a["options"].get("retention"))
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        cat.check_schema(a["name"], a["schema"])
        if cat.find(a["name"], a["schema"]) is not None:
            if a["if_not_exists"]:
                return QueryResult(
                    "CREATE_SUBSCRIPTION",
                    notices=[Notice(f'relation "{a["name"]}" already exists, skipping')],
                )
            cat.check_free(a["name"], a["schema"])
        src = cat.get(a["from"], a["from_schema"])
        if src.kind not in (RelationKind.TABLE, RelationKind.MATERIALIZED_VIEW):
            raise WrongObjectType(
                f'"{src.name}" is not a table or materialized view',
                hint="A subscription reads the changes of a table or a materialized view.",
            )
        check_read(src)
        query_sql = f"SELECT * FROM {_quote(src.schema_name)}.{_quote(src.name)}"
        ast = parse_one(query_sql).ast
        assert ast is not None
        plan = planner_for(session, None, streaming=True).plan_query(ast)
        rel = Relation(
            id=cat.allocate_relation_id(),
            name=a["name"],
            kind=RelationKind.SUBSCRIPTION,
            fields=list(plan.schema),
            pk=[],
            definition=st.sql.strip().rstrip(";").strip(),
            owner=session_owner(session),
            schema_name=a["schema"] or "public",
            query=query_sql,
            depends_on=[src.id],
            options=dict(a["options"]),
            extra={
                "sink": {
                    "connector": CONNECTOR,
                    "sink_type": UPSERT,
                    "pk": [],
                    "snapshot": False,
                    "writer_options": {
                        "log_table": cat.allocate_state_table_id(),
                        "retention_seconds": seconds,
                    },
                },
                "subscription": {"created_at_ms": int(time.time() * 1000)},
            },
        )
        rt.create_sink(rel, lower_stream_plan(plan, state_ids(rel, cat), materialize=False), False)
    return QueryResult("CREATE_SUBSCRIPTION")


def _drop_subscription(session: Any, a: dict[str, Any], st: Statement) -> QueryResult:
    rt = session.db.runtime
    notices: list[Notice] = []
    with rt.lock:
        cat = session.db.catalog
        to_drop: list[Relation] = []
        for name, schema in a["names"]:
            rel = cat.find(name, schema)
            if rel is None:
                if a["if_exists"]:
                    notices.append(Notice(f'subscription "{name}" does not exist, skipping'))
                    continue
                raise UndefinedObject(f'subscription "{name}" does not exist')
            if rel.kind is not RelationKind.SUBSCRIPTION:
                raise WrongObjectType(
                    f'"{name}" is not a subscription',
                    hint=f"Use DROP {rel.kind.value.upper()} to remove a {rel.kind.value}.",
                )
            require_owner(rel)
            deps = cat.dependents(rel.id)
            if deps and not a["cascade"]:  # nothing depends on a subscription today
                raise DependentObjectsStillExist(
                    f"cannot drop subscription {name} because other objects depend on it"
                )
            to_drop.append(rel)
        if to_drop:
            rt.drop(to_drop)
    return QueryResult("DROP_SUBSCRIPTION", notices=notices)


def _alter_subscription(session: Any, a: dict[str, Any], st: Statement) -> QueryResult:
    seconds = retention_seconds(a["retention"])
    rt = session.db.runtime
    with rt.lock:
        rel = session.db.catalog.get_kind(a["name"], RelationKind.SUBSCRIPTION, a["schema"])
        require_owner(rel)
        rel.extra["sink"]["writer_options"]["retention_seconds"] = seconds
        rel.options["retention"] = a["retention"]
        quoted = "'" + a["retention"].replace("'", "''") + "'"
        rel.definition = re.sub(
            r"(\bretention\s*=\s*)'(?:[^']|'')*'", lambda m: m.group(1) + quoted,
            rel.definition, count=1, flags=re.I,
        )  # fmt: skip
        flow = rt.sinks.get(rel.id)
        if flow is not None:
            flow.spec.writer_options["retention_seconds"] = seconds
        rt.mark_catalog_dirty()
        rt.barrier(force=True)
    return QueryResult("ALTER_SUBSCRIPTION")


def _rename_subscription(session: Any, a: dict[str, Any], st: Statement) -> QueryResult:
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        rel = cat.get_kind(a["name"], RelationKind.SUBSCRIPTION, a["schema"])
        require_owner(rel)
        cat.check_free(a["new"], rel.schema_name)
        new = a["new"]
        shown = new if re.fullmatch(r"[a-z_][a-z0-9_$]*", new) else _quote(new)
        rel.definition = re.sub(
            r"^(\s*CREATE\s+SUBSCRIPTION\s+(?:IF\s+NOT\s+EXISTS\s+)?)"
            r'(?:(?:"(?:[^"]|"")+"|[A-Za-z_][\w$]*)\s*\.\s*)?(?:"(?:[^"]|"")+"|[A-Za-z_][\w$]*)',
            lambda m: m.group(1) + shown, rel.definition, count=1, flags=re.I,
        )  # fmt: skip
        rel.name = new
        flow = rt.sinks.get(rel.id)
        if flow is not None:
            flow.spec.name = new
        rt.mark_catalog_dirty()
        rt.barrier(force=True)
    return QueryResult("ALTER_SUBSCRIPTION")


def _show_subscriptions(session: Any, a: dict[str, Any], st: Statement) -> QueryResult:
    schema = a.get("schema") or "public"
    names = sorted(
        r.name
        for r in session.db.catalog.visible()
        if r.kind is RelationKind.SUBSCRIPTION and r.schema_name == schema
    )
    if a.get("like") is not None:
        pat = a["like"].replace("%", "*").replace("_", "?")
        names = [n for n in names if fnmatch.fnmatchcase(n, pat)]
    return QueryResult(f"SHOW {len(names)}", [Field("Name", VARCHAR)], [(n,) for n in names])


def _show_create_subscription(session: Any, a: dict[str, Any], st: Statement) -> QueryResult:
    cat = session.db.catalog
    rel = cat.find(a["name"], a["schema"])
    if rel is None or rel.kind is not RelationKind.SUBSCRIPTION:
        raise UndefinedObject(f'subscription "{a["name"]}" does not exist')
    return QueryResult(
        "SHOW_CREATE",
        [Field("Name", VARCHAR), Field("Create Sql", VARCHAR)],
        [(f"{rel.schema_name}.{rel.name}", rel.definition)],
    )


def retention_of(rel: Relation) -> int:
    return int(rel.extra.get("sink", {}).get("writer_options", {}).get("retention_seconds", 0))


# -- cursors ------------------------------------------------------------------------------------
@dataclass
class SubscriptionCursor:
    """A session's position in one subscription's log (see the module docstring)."""

    name: str
    sub_id: int
    sub_name: str
    columns: list[Field]  # the upstream's visible columns, op, rw_timestamp
    ts: int  # the next rw_timestamp to read (inclusive)
    after_epoch: int  # entries of this epoch and earlier are not for this cursor
    offset: int = 0  # rows of the entry at `ts` already returned
    snapshot: pa.Table | None = None  # FULL: the rows at DECLARE, returned first
    snap_pos: int = 0
    hold: bool = True  # kept across COMMIT (RisingWave's subscription cursors are)
    binary: bool = False
    scroll: bool = False
    fetched: int = field(default=0)


def _declare_subscription_cursor(session: Any, a: dict[str, Any], st: Statement) -> QueryResult:
    from engine.errors import DuplicateCursor
    from engine.stream.subscription import OP_FIELD, subscription_log

    if a["name"] in session.cursors:
        raise DuplicateCursor(f'cursor "{a["name"]}" already exists')
    rt = session.db.runtime
    cat = session.db.catalog
    rel = cat.find(a["subscription"], a["schema"])
    if rel is None or rel.kind is not RelationKind.SUBSCRIPTION:
        raise UndefinedObject(f'subscription "{a["subscription"]}" does not exist')
    src = cat.by_id(rel.depends_on[0])
    check_read(src)
    visible = [f for f in rel.fields if not f.hidden]
    columns = [*visible, Field("op", VARCHAR), Field("rw_timestamp", BIGINT)]
    log = subscription_log(rt, rel.id)
    if log is None:
        raise ObjectNotInPrerequisiteState(f'subscription "{rel.name}" is not running')
    kind, value = a["since"]
    now = int(time.time() * 1000)
    retention_ms = retention_of(rel) * 1000
    cur = SubscriptionCursor(a["name"], rel.id, rel.name, columns, ts=0, after_epoch=0)
    if kind in ("full", "now"):
        snap = rt.committed()
        cur.after_epoch = snap.epoch
        if kind == "full":
            t = snap.table(src.id)
            names = [f.name for f in visible]
            src_names = [f.name for f in src.fields]
            cur.snapshot = t.select([src_names.index(n) for n in names])
    elif kind == "begin":
        cur.ts = max(log.trimmed_ts + 1, now - retention_ms)
    else:
        assert value is not None
        entries = log.entries
        newest = max(now, entries[-1].ts + 1 if entries else 0)
        if value > newest:
            raise InvalidParameterValue(
                "rw_timestamp is too large, need to be less than the current unix_millis"
            )
        if value < now - retention_ms:
            raise InvalidParameterValue(
                "rw_timestamp is too small, need to be large than the current unix_millis - "
                "subscription's retention time"
            )
        cur.ts = value
    _ = OP_FIELD
    session.cursors[a["name"]] = cur
    return QueryResult("DECLARE CURSOR")


def fetch_timeout(options: dict[str, str]) -> float | None:
    unknown = sorted(set(options) - {"timeout"})
    if unknown:
        raise InvalidParameterValue(f'unknown FETCH option "{unknown[0]}"')
    if "timeout" not in options:
        return None
    months, days, nanos = parse_interval(options["timeout"])
    return float((months * 30 + days) * 86400) + nanos / 1e9


def fetch(session: Any, cur: SubscriptionCursor, st: Statement) -> QueryResult:
    """FETCH from a subscription cursor (forward only)."""
    from engine.stream.subscription import subscription_log

    a = st.args
    if a["move"] or a["direction"] != "forward" or a["count"] == 0:
        raise FeatureNotSupported(
            "subscription cursors only FETCH NEXT or FETCH n",
            hint="FETCH NEXT FROM c, or FETCH 100 FROM c WITH (timeout = '5s').",
        )
    count = a["count"] if a["count"] > 0 else 1 << 62  # ALL
    timeout = fetch_timeout(a.get("options") or {})
    rt = session.db.runtime
    parts: list[tuple[pa.RecordBatch | pa.Table, int | None]] = []
    n = 0
    if cur.snapshot is not None:
        part = cur.snapshot.slice(cur.snap_pos, count)
        cur.snap_pos += part.num_rows
        if cur.snap_pos >= cur.snapshot.num_rows:
            cur.snapshot = None
        if part.num_rows:
            parts.append((part, None))
            n += part.num_rows
    deadline = time.monotonic() + (timeout or 0.0)
    while n < count:
        log = subscription_log(rt, cur.sub_id)
        if log is None:
            if session.db.catalog.relations.get(cur.sub_id) is None:
                raise UndefinedObject(f'subscription "{cur.sub_name}" does not exist')
            log_wait = None
        else:
            if log.trimmed_ts >= cur.ts and log.trimmed_epoch > cur.after_epoch:
                raise ObjectNotInPrerequisiteState(
                    f"No data found for rw_timestamp {cur.ts}, data may have been recycled, "
                    "please recreate cursor"
                )
            entries = log.entries
            i = log.first_index(cur.ts, cur.after_epoch)
            while i < len(entries) and n < count:
                e = entries[i]
                start = cur.offset if e.ts == cur.ts else 0
                rows = e.rows.slice(start, count - n)
                if rows.num_rows:
                    parts.append((rows, e.ts))
                    n += rows.num_rows
                if start + rows.num_rows >= e.rows.num_rows:
                    cur.ts, cur.offset = e.ts + 1, 0
                    i += 1
                else:
                    cur.ts, cur.offset = e.ts, start + rows.num_rows
            log_wait = log
        if n > 0 or timeout is None:
            break
        left = deadline - time.monotonic()
        if left <= 0:
            break
        if log_wait is not None:
            log_wait.wait(min(left, 0.25))
        else:
            time.sleep(min(left, 0.25))
        session.check_cancel()
    rows_out: list[tuple[Any, ...]] = []
    for part, ts in parts:
        rows_out.extend(_rows(part, ts))
    cur.fetched += len(rows_out)
    return QueryResult(f"FETCH {len(rows_out)}", cur.columns, rows_out, binary=cur.binary)


def _rows(part: pa.RecordBatch | pa.Table, ts: int | None) -> list[tuple[Any, ...]]:
    """One log slice (visible columns + `__op`) or snapshot slice as result rows."""
    k = part.num_rows
    if ts is None:  # the FULL snapshot: inserts without a timestamp
        cols = [py_values(c) for c in part.columns]
        ops: list[Any] = ["Insert"] * k
        stamps: list[Any] = [None] * k
    else:
        cols = [py_values(c) for c in part.columns[:-1]]
        op = part.column(part.num_columns - 1).to_numpy(zero_copy_only=False)
        ops = _OP_NAMES[op.astype(np.int64)].tolist()
        stamps = [ts] * k
    return list(zip(*cols, ops, stamps, strict=True))
