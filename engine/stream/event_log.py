"""The runtime's event log: data errors of streaming jobs (and other notable events), shown
in `rw_catalog.rw_event_logs`, logged rate-limited, and summarised by FLUSH.

Why: in streaming jobs an expression that fails on a row yields NULL and the row flows on
(`engine.expr.nonstrict`), so the failure must be visible somewhere else. RisingWave
keeps events in `rw_event_logs (unique_id, timestamp, event_type, info jsonb)`; Swell keeps
those columns and adds flat ones for the common question "which job fails how often":

* `event_type = 'EXPRESSION_ERROR'`: one row per (job, expression, SQLSTATE), updated
  in place as the same failure repeats: `job_id` (the relation's OID, as in
  rw_relations), `job_name`, `expression` (as EXPLAIN shows it), `error`, `count` (rows
  that failed), `timestamp` (last seen); `info` also has the SQLSTATE, a sample of the
  failing row's argument values and the first/last time seen.
* other event types (`record_event`) keep only `info`; the flat columns are NULL.

A role sees the failures only of the jobs it may SELECT from (their messages and samples
carry row values); FLUSH's warning counts every failure but names only those.

Logging: the first failure of each kind is logged at WARNING at once; later ones at most
every `LOG_INTERVAL_S` seconds per kind, with the count since the last line.

Lifecycle: one `EventLog` per runtime, process-local (not persisted: after a restart the
log starts empty; a replayed epoch records its errors again). Each streaming job's
evaluation context reports to a `JobErrors` bound to its relation (`for_job`). Reporters
run on the barrier thread; providers and FLUSH read under `EventLog.lock`.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.catalog import privileges as pv
from engine.catalog.system import (
    RW_CATALOG,
    SystemContext,
    register_system_relation,
    relation_oid,
)
from engine.errors import EngineError
from engine.expr import jsonb_canonical
from engine.types import BIGINT, INT, JSONB, TIMESTAMPTZ, VARCHAR, Field

log = logging.getLogger("swell.stream.errors")

EXPRESSION_ERROR = "EXPRESSION_ERROR"
MAX_KINDS = 1000  # distinct (job, expression, error) rows kept; the oldest go first
MAX_EVENTS = 1000  # other events kept
LOG_INTERVAL_S = 10.0


@dataclass
class ErrorKind:
    """One (job, expression, SQLSTATE) and how often it happened; `error` and `sample` are
    the latest occurrence's (messages may name the value: `invalid input syntax ... "x"`)."""

    unique_id: str
    job_id: int
    job_name: str
    expression: str
    error: str
    sqlstate: str
    sample: str
    first_seen: float
    last_seen: float
    count: int = 0
    seq: int = 0  # EventLog.total after this kind's latest report
    logged_at: float = 0.0
    unlogged: int = 0  # failures since the last log line


@dataclass
class EventLog:
    kinds: collections.OrderedDict[tuple[int, str, str], ErrorKind] = field(
        default_factory=collections.OrderedDict
    )
    events: collections.deque[tuple[str, float, str, dict[str, Any]]] = field(
        default_factory=lambda: collections.deque(maxlen=MAX_EVENTS)
    )
    total: int = 0  # failed rows ever reported (monotonic; FLUSH compares it)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def for_job(self, job_id: int, job_name: str) -> JobErrors:
        return JobErrors(self, job_id, job_name)

    def record_error(
        self,
        job_id: int,
        job_name: str,
        expression: str,
        error: EngineError,
        count: int,
        sample: str,
    ) -> None:
        now = time.time()
        message = str(error)
        key = (job_id, expression, error.sqlstate)
        with self.lock:
            self.total += count
            kind = self.kinds.get(key)
            if kind is None:
                kind = ErrorKind(
                    uuid.uuid4().hex,
                    job_id,
                    job_name,
                    expression,
                    message,
                    error.sqlstate,
                    sample,
                    now,
                    now,
                )
                self.kinds[key] = kind
                while len(self.kinds) > MAX_KINDS:
                    self.kinds.popitem(last=False)
            else:
                self.kinds.move_to_end(key)
                kind.error, kind.sample = message, sample
            kind.count += count
            kind.last_seen = now
            kind.seq = self.total
            kind.unlogged += count
            if now - kind.logged_at < LOG_INTERVAL_S:
                return
            kind.logged_at, n = now, kind.unlogged
            kind.unlogged = 0
        log.warning(
            "streaming job %s: %d row(s) failed in expression %s: %s (sample input: %s); the "
            "values became NULL; see rw_catalog.rw_event_logs (logged at most every %gs)",
            job_name,
            n,
            expression,
            message,
            sample,
            LOG_INTERVAL_S,
        )

    def record_event(self, event_type: str, info: dict[str, Any]) -> None:
        """Any other event (`event_type` in RisingWave's upper-case style)."""
        with self.lock:
            self.events.append((uuid.uuid4().hex, time.time(), event_type, dict(info)))

    def since(self, seq: int) -> tuple[int, list[ErrorKind]]:
        """`total` now and the kinds reported after `total` was `seq`."""
        with self.lock:
            return self.total, [k for k in self.kinds.values() if k.seq > seq]


@dataclass
class JobErrors:
    """The `ErrorSink` (engine.expr.nonstrict) of one streaming job."""

    events: EventLog
    job_id: int
    job_name: str

    def report(self, expression: str, error: EngineError, count: int, sample: str) -> None:
        self.events.record_error(self.job_id, self.job_name, expression, error, count, sample)


def flush_warning(
    events: EventLog, seq: int, readable: Callable[[int], bool] = lambda job_id: True
) -> tuple[int, tuple[str, str] | None]:
    """`total` now, and (message, detail) of FLUSH's WARNING when rows failed since `total`
    was `seq` (None when none did); the detail names only the `readable` jobs' failures."""
    total, kinds = events.since(seq)
    kinds = [k for k in kinds if readable(k.job_id)]
    n = total - seq
    if n <= 0:
        return total, None
    lines = [
        f"{k.job_name}: {k.expression}: {k.error} ({k.count} row(s) so far)" for k in kinds[-5:]
    ]
    if len(kinds) > 5:
        lines.insert(0, f"... and {len(kinds) - 5} more kinds")
    msg = (
        f"{n} row(s) failed in streaming expressions since the last FLUSH; their values "
        "became NULL. See rw_catalog.rw_event_logs"
    )
    return total, (msg, "\n".join(lines))


FIELDS = [
    Field("unique_id", VARCHAR),
    Field("timestamp", TIMESTAMPTZ),
    Field("event_type", VARCHAR),
    Field("info", JSONB),
    Field("job_id", INT),
    Field("job_name", VARCHAR),
    Field("expression", VARCHAR),
    Field("error", VARCHAR),
    Field("count", BIGINT),
]


def _ts(t: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(t, dt.UTC)


def readable_jobs(db: Any, session: Any) -> Callable[[int], bool]:
    """Whether `session`'s role may see a job's failures (job id = its relation OID): the
    messages and samples carry row values, so only roles that may SELECT from the job
    (owners, superusers, grantees) see them. Without a session (internal use) all."""
    if session is None:
        return lambda job_id: True
    catalog = db.catalog
    oid = pv.session_owner(session)
    rels = {relation_oid(r): r for r in catalog.ordered()}
    superuser = pv.is_superuser(catalog, session.user)

    def readable(job_id: int) -> bool:  # a dropped job's failures: superusers only
        rel = rels.get(job_id)
        return superuser or (rel is not None and pv.has_privilege(catalog, oid, rel, "r"))

    return readable


def _rows(ctx: SystemContext) -> list[tuple[Any, ...]]:
    events: EventLog | None = getattr(ctx.db.runtime, "events", None)
    if events is None:
        return []
    with events.lock:
        kinds = list(events.kinds.values())
        others = list(events.events)
    readable = readable_jobs(ctx.db, ctx.session)
    out: list[tuple[Any, ...]] = []
    for k in kinds:
        if not readable(k.job_id):
            continue
        info = {
            "job_id": k.job_id,
            "job_name": k.job_name,
            "expression": k.expression,
            "error": k.error,
            "sqlstate": k.sqlstate,
            "count": k.count,
            "sample": k.sample,
            "first_seen": _ts(k.first_seen).isoformat(),
            "last_seen": _ts(k.last_seen).isoformat(),
        }
        out.append(
            (
                k.unique_id,
                _ts(k.last_seen),
                EXPRESSION_ERROR,
                _json(info),
                k.job_id,
                k.job_name,
                k.expression,
                k.error,
                k.count,
            )
        )
    for uid, at, etype, info in others:
        out.append((uid, _ts(at), etype, _json(info), None, None, None, None, None))
    out.sort(key=lambda r: r[1])
    return out


def _json(info: dict[str, Any]) -> str:
    return jsonb_canonical(json.loads(json.dumps(info, default=str)))


register_system_relation(
    RW_CATALOG,
    "rw_event_logs",
    FIELDS,
    _rows,
    description="events of the dataflow: data errors of streaming jobs (count per job, "
    "expression and error) and other events",
)
