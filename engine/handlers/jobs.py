"""Creating jobs: waiting for a backfill, SHOW JOBS, CANCEL JOBS, WAIT.

Why here: `engine.stream.backfill` fills a new materialized view or sink in the
background; what a session sees of that lives in this module:

* `job_options(session)`: the session's `background_ddl` and `backfill_rate_limit`
  (RisingWave's: -1 no limit, 0 paused, N rows per second), handed to the runtime at
  CREATE and stored with the job, so a resumed job keeps them;
* `wait_for_job`: a foreground CREATE waits here, without the runtime lock, until the job
  is created; every `NOTICE_SECONDS` it tells the client the progress (a NOTICE sent at
  once when the connection supports it, `Session.notify`). A cancel request (or the
  statement timeout) while waiting drops the half-built job and fails the statement with
  57014; `background_ddl = true` returns at once, the job stays *creating*;
* `show_jobs` (SHOW JOBS: Id, Statement, Create Type, Progress) and `cancel_jobs`
  (CANCEL JOBS id[, ...], answering the cancelled ids as RisingWave does).
"""

from __future__ import annotations

import time
from typing import Any

from engine.api import Notice, QueryResult
from engine.catalog.system import relation_oid
from engine.errors import EngineError, InvalidParameterValue, QueryCanceled
from engine.types import BIGINT, VARCHAR, Field

NOTICE_SECONDS = 3.0
"""How often a waiting CREATE is told the progress."""
POLL_SECONDS = 0.2


def parse_rate_limit(value: str) -> str:
    """Validate `SET backfill_rate_limit` (an integer >= -1; DEFAULT is -1)."""
    v = value.strip().lower()
    if v == "default":
        return "-1"
    try:
        n = int(v)
    except ValueError:
        raise InvalidParameterValue(
            f'invalid value for parameter "backfill_rate_limit": "{value}"'
        ) from None
    if n < -1:
        raise InvalidParameterValue(f'invalid value for parameter "backfill_rate_limit": "{value}"')
    return str(n)


def job_options(session: Any, statement: str) -> dict[str, Any]:
    """The runtime's job settings from the session's variables."""
    rate = int(session.vars.get("backfill_rate_limit", "-1") or -1)
    return {
        "statement": statement,
        "background": session.vars.get("background_ddl") == "true",
        "rate_limit": None if rate < 0 else rate,
    }


def _cancelled(session: Any) -> EngineError | None:
    """The statement's cancellation (a cancel request or its timeout), if any."""
    try:
        session.check_cancel()
    except QueryCanceled as e:
        return e
    return None


def _progress(rt: Any, rel_id: int) -> str | None:
    for row in rt.backfill.progress_rows():
        if row[0].rel.id == rel_id:
            return str(row[3])
    return None


def wait_for_job(session: Any, job: Any, tag: str) -> QueryResult:
    """Wait until a foreground job is created (see the module docstring)."""
    if job is None or job.background:
        return QueryResult(tag)
    rt = session.db.runtime
    rel = job.rel
    next_notice = time.monotonic() + NOTICE_SECONDS
    notices: list[Notice] = []
    too_late = False
    while True:
        # checked before each wait: a cancel sent while the job runs stops it however
        # soon the job would have finished
        err = None if too_late else _cancelled(session)
        if err is not None:
            if rt.cancel_job(rel.id):
                raise err
            # the job is already committing its last checkpoint: like PostgreSQL, a
            # cancel that arrives after the work is done has no effect
            too_late = True
        if rt.backfill.wait(rel.id, POLL_SECONDS):
            now = rt.catalog.relations.get(rel.id)
            if now is None or not now.extra.get("creating"):
                break  # created, or dropped (cancelled, failed)
            continue  # rebuilt after a rolled-back epoch: still creating
        if time.monotonic() >= next_notice:
            next_notice = time.monotonic() + NOTICE_SECONDS
            text = _progress(rt, rel.id)
            if text is not None:
                n = Notice(f'backfill of "{rel.name}": {text}')
                notify = getattr(session, "notify", None)
                if notify is None or not notify(n):
                    notices.append(n)
    if rt.catalog.relations.get(rel.id) is None:
        why = rt.backfill.failed.pop(rel.id, None)
        if isinstance(why, EngineError):
            raise why
        if why is not None:
            raise EngineError("internal error")
        raise QueryCanceled(f"streaming job {relation_oid(rel)} is cancelled")
    return QueryResult(tag, notices=notices)


def show_jobs(session: Any) -> QueryResult:
    """SHOW JOBS: the creating jobs (RisingWave's columns)."""
    progress = session.db.runtime.backfill.progress_rows()
    rows = [(relation_oid(r[0].rel), r[1], r[2], r[3]) for r in progress]
    fields = [
        Field("Id", BIGINT),
        Field("Statement", VARCHAR),
        Field("Create Type", VARCHAR),
        Field("Progress", VARCHAR),
    ]
    return QueryResult(f"SHOW {len(rows)}", fields, rows)


def cancel_jobs(session: Any, ids: list[int]) -> QueryResult:
    """CANCEL JOBS id, ...: drop those creating jobs; answers the ids cancelled."""
    from engine.catalog.privileges import require_owner

    rt = session.db.runtime
    done: list[tuple[Any, ...]] = []
    for oid in ids:
        job = next((j for j in list(rt.backfill.jobs.values()) if relation_oid(j.rel) == oid), None)
        if job is None:
            continue
        require_owner(job.rel)
        if rt.cancel_job(job.rel.id):
            done.append((str(oid),))
    return QueryResult(f"CANCEL_COMMAND {len(done)}", [Field("Id", VARCHAR)], done)


def wait_all(session: Any) -> QueryResult:
    """WAIT: until every creating job is created (or gone)."""
    rt = session.db.runtime
    while rt.backfill.busy:
        err = _cancelled(session)
        if err is not None:
            raise err
        for rid in [*rt.backfill.jobs, *rt.backfill.finishing_ids()]:
            rt.backfill.wait(rid, POLL_SECONDS)
    return QueryResult("WAIT")
