"""Background backfill: new materialized views and sinks fill from existing data while
the dataflow keeps running (RisingWave's arrangement backfill).

Why: filling a new job from its upstreams' whole snapshot in one step holds the runtime
lock for as long as that takes, so every other session, view and barrier waits. Instead:

* `CREATE MATERIALIZED VIEW` / `CREATE SINK` adds the job as *creating*
  (`Relation.extra["creating"]`): its flow is in the runtime, its catalog entry exists
  (the name is taken, SELECT and new views cannot bind it yet, as in RisingWave) and a
  `BackfillJob` tracks it here.
* At every barrier the job's operators get its upstreams' deltas through the position
  rule (`BackfillJob.forward`): per upstream, rows whose key is at or before the
  backfill position pass, the others are dropped; a finished upstream passes everything,
  one not started yet nothing. Watermarks are withheld until the job is done, so
  watermark-driven operators (EMIT ON WINDOW CLOSE, interval-join expiry) never treat
  snapshot rows read later as late.
* Between barriers the backfill thread (`Backfiller`) takes the lock for one bounded slice
  per job (`SLICE_SECONDS` of work, sized from the job's measured rate and its
  `backfill_rate_limit`), reads the next key range of the current upstream with
  `engine.stream.backfill_cursor.SnapshotCursor` and steps the job with those rows as
  inserts, then releases the lock, so other sessions and barriers run in between.
  Upstreams are filled one after another (a join's sides each have their own position).
  A source (Kafka) upstream is read once, up to the reader's position at the start of
  the read, without the lock (`Backfiller._read_source`): the broker round trips never
  hold a barrier, and the deltas of the barriers during the read are held and stepped
  after its rows.
* The positions, rows done and the job's settings are a state table of the job
  (`backfill.progress` in `Relation.state_tables`), committed with the job's operator
  state in each checkpoint: after a crash the job is rebuilt as creating and resumes from
  the last committed positions.
* When every upstream is done, the job's `creating` mark is removed and a checkpoint
  commits it; the waiting CREATE (unless `background_ddl`) returns. `CANCEL JOBS` and a
  cancelled CREATE drop the creating job like DROP does: no catalog entry, no state.

Progress (`progress_rows`) is shown by `rw_catalog.rw_ddl_progress` and SHOW JOBS.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from engine import faults
from engine.chunk import StreamChunk
from engine.latency import bulk_thread
from engine.state.table import StateTable
from engine.stream.backfill_cursor import Key, SnapshotCursor, key_le

log = logging.getLogger("swell.backfill")

PROGRESS_TABLE = "backfill.progress"
"""The job's state table of positions (a name in `Relation.state_tables`)."""
SLICE_SECONDS = 0.1
"""Target lock hold of one backfill slice; slices are sized from the measured rate."""
RATE_WINDOW = 5.0
"""Seconds of progress the shown rate is computed over."""
MIN_SLICE_ROWS = 256
MAX_SLICE_ROWS = 1 << 18
STEP_ROWS = 1 << 16
"""A slice steps a job whose operators run in this process with at most this many rows at
a time: their bulk calls (dict updates, multi-gets, Arrow conversions) hold the
interpreter for the length of one call, so smaller steps let the sessions' threads in
between. Each step has a fixed cost per operator (about 10 ms for a GROUP BY; a join
rewrites the stored rows of every key the step touches), so steps are not smaller than
this: 16k-row steps cost Nexmark q4 a third and q7 a quarter of their rows per
CPU-second, 64k-row steps cost nothing measurable against whole slices. A job whose
operators run as actors in worker processes (engine.stream.parallel) takes a slice in
one step: its work is not on this interpreter, and each step is a round trip to every
worker."""

NOT_STARTED, RUNNING, DONE = 0, 1, 2


@dataclass
class UpstreamState:
    """One upstream's backfill: position rule and snapshot cursor."""

    rel_id: int
    key_cols: list[int] | None  # None: read once (a source, or a key Arrow cannot order)
    status: int = NOT_STARTED
    pos: Key | None = None
    rows_done: int = 0
    cursor: SnapshotCursor | None = None
    # a source's one-shot read is under way (without the lock): the deltas of the
    # barriers meanwhile are held here and stepped right after the read's rows
    preparing: bool = False
    held: list[StreamChunk] = field(default_factory=list)

    def forward(self, chunk: StreamChunk | None) -> StreamChunk | None:
        """The part of an upstream delta the job takes now (the position rule)."""
        if chunk is None or len(chunk) == 0 or self.status == DONE:
            return chunk
        if self.preparing:
            self.held.append(chunk)
            return None
        if self.status == NOT_STARTED or self.key_cols is None:
            return None
        assert self.pos is not None
        keep = key_le(chunk.data, self.key_cols, self.pos)
        if keep.all():
            return chunk
        if not keep.any():
            return None
        m = pa.array(keep)
        return StreamChunk(chunk.ops.filter(m), chunk.data.filter(m))


@dataclass
class BackfillJob:
    """A creating materialized view or sink and its upstreams' backfill state."""

    rel: Any  # engine.catalog.Relation
    upstreams: dict[int, UpstreamState]
    table: StateTable
    step: Callable[[dict[int, StreamChunk | None]], None]  # steps the job's operators
    statement: str = ""
    background: bool = False
    rate_limit: int | None = None  # rows/s; 0 pauses; None: unlimited
    actors: bool = False  # its operators run in worker processes: a slice is one step
    initialized_at: float = field(default_factory=time.time)
    slice_rows: int = MIN_SLICE_ROWS  # grows with the measured rate
    rate: float = 0.0  # rows/s of the slices' own work (sizes the next slice)
    marks: deque[tuple[float, int]] = field(default_factory=deque)  # (time, rows done)
    _allowance: float = 0.0
    _last: float = field(default_factory=time.monotonic)
    dirty: bool = False  # progress not yet committed
    finishing: bool = False

    # -- persistence ---------------------------------------------------------------------
    def save(self) -> None:
        self.table.put(
            ("job",),
            (self.initialized_at, self.rate_limit, self.background, self.statement),
        )
        for u in self.upstreams.values():
            self.table.put(("up", u.rel_id), (u.status, u.rows_done, u.pos))
        self.dirty = True

    def load(self) -> None:
        job = self.table.get(("job",))
        if job is not None:
            self.initialized_at, self.rate_limit, self.background, self.statement = job
        for u in self.upstreams.values():
            v = self.table.get(("up", u.rel_id))
            if v is not None:
                u.status, u.rows_done, pos = v
                u.pos = tuple(pos) if pos is not None else None

    # -- barrier side --------------------------------------------------------------------
    def forward(self, deltas: dict[int, StreamChunk | None]) -> dict[int, StreamChunk | None]:
        out = dict(deltas)
        for rid, u in self.upstreams.items():
            if rid in out:
                out[rid] = u.forward(out[rid])
        return out

    @property
    def done(self) -> bool:
        return all(u.status == DONE for u in self.upstreams.values())

    def rows_done(self) -> int:
        return sum(u.rows_done for u in self.upstreams.values())

    def wall_rate(self) -> float:
        """Rows per second over the last `RATE_WINDOW` seconds (what the user sees)."""
        if len(self.marks) < 2:
            return 0.0
        (t0, r0), (t1, r1) = self.marks[0], self.marks[-1]
        return (r1 - r0) / (t1 - t0) if t1 > t0 else 0.0

    # -- slices --------------------------------------------------------------------------
    def budget(self, now: float) -> int:
        """Rows the next slice may read (0: wait)."""
        n = self.slice_rows
        if self.rate_limit is not None:
            elapsed = now - self._last
            self._allowance = min(
                self._allowance + elapsed * self.rate_limit, max(self.rate_limit, 1)
            )
            self._last = now
            n = min(n, int(self._allowance))
        return max(n, 0)

    def took(self, rows: int, seconds: float) -> None:
        """Size the next slice from this one's rate."""
        if self.rate_limit is not None:
            self._allowance = max(0.0, self._allowance - rows)
        now = time.monotonic()
        self.marks.append((now, self.rows_done()))
        while len(self.marks) > 2 and self.marks[0][0] < now - RATE_WINDOW:
            self.marks.popleft()
        if rows and seconds > 0:
            r = rows / seconds
            self.rate = r if self.rate == 0 else 0.7 * self.rate + 0.3 * r
            self.slice_rows = int(
                np.clip(self.rate * SLICE_SECONDS, MIN_SLICE_ROWS, MAX_SLICE_ROWS)
            )


def _step_inserts(job: BackfillJob, rel_id: int, rows: pa.Table) -> None:
    """Step the job with `rows` as inserts of upstream `rel_id`, `STEP_ROWS` at a time
    unless its operators run as actors."""
    n = rows.num_rows if job.actors else STEP_ROWS
    for start in range(0, rows.num_rows, n):
        job.step({rel_id: StreamChunk.inserts(rows.slice(start, n))})


class Backfiller:
    """The runtime's creating jobs and the thread that backfills them (see the module
    docstring). Every method that touches jobs runs under the runtime lock, except
    the cursors' sorting, which reads immutable pins."""

    def __init__(self, runtime: Any) -> None:
        self.rt = runtime
        self.jobs: dict[int, BackfillJob] = {}
        self.changed = threading.Condition()  # notified when a job finishes or goes away
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.failed: dict[int, Exception] = {}  # job relation id -> why it was dropped
        self._finishing: set[int] = set()

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="swell-backfill", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
            self._thread = None

    def add(self, job: BackfillJob) -> None:
        self.jobs[job.rel.id] = job
        self._wake.set()

    @contextmanager
    def finishing(self, rel_id: int) -> Iterator[None]:
        """The job leaves `jobs` (the barrier steps it as a created job) while its
        waiters keep waiting until the block (the commit) is over."""
        self._finishing.add(rel_id)
        self.jobs.pop(rel_id, None)
        try:
            yield
        finally:
            self._finishing.discard(rel_id)
            self._notify()

    def finishing_ids(self) -> list[int]:
        return list(self._finishing)

    def forget(self, rel_id: int) -> None:
        if self.jobs.pop(rel_id, None) is not None:
            self._notify()

    def clear(self) -> None:
        """All jobs go (a rollback rebuilds them from the checkpoint; waiters keep
        waiting, so they are not told)."""
        self.jobs = {}

    def _notify(self) -> None:
        with self.changed:
            self.changed.notify_all()

    @property
    def busy(self) -> bool:
        """Some job is creating or committing its last checkpoint."""
        return bool(self.jobs or self._finishing)

    @property
    def dirty(self) -> bool:
        return any(j.dirty for j in self.jobs.values())

    def committed(self) -> None:
        """The checkpoint holds every job's progress (called after each commit)."""
        for j in self.jobs.values():
            j.dirty = False
        self._notify()

    # -- the thread ----------------------------------------------------------------------
    def _loop(self) -> None:
        bulk_thread()  # clients' answers run first after a wake-up (`engine.latency`)
        while not self._stop.is_set():
            if not self.jobs:
                self._wake.wait(1.0)
                self._wake.clear()
                continue
            try:
                waited = self._round()
            except Exception:  # keep the thread alive; the barrier's rollback rebuilds jobs
                log.exception("backfill slice failed")
                waited = 0.5
            # let other threads take the lock between slices
            self._stop.wait(max(waited, 0.002))

    def _round(self) -> float:
        """One slice of every job that can proceed; returns how long to pause after."""
        pause = 0.2
        for job in list(self.jobs.values()):
            u = next((u for u in job.upstreams.values() if u.status != DONE), None)
            if u is None:
                self._finish(job)
                continue
            if u.key_cols is not None and (u.cursor is None or not u.cursor.prepared):
                self._prepare(job, u)
                pause = 0.0
                continue
            if u.key_cols is None and self.rt.is_source_upstream(u.rel_id):
                if job.budget(time.monotonic()) > 0:
                    self._read_source(job, u)
                    pause = 0.0
                continue
            n = job.budget(time.monotonic())
            if n <= 0:
                continue
            self._slice(job, u, n)
            pause = 0.0
        return pause

    def _prepare(self, job: BackfillJob, u: UpstreamState) -> None:
        """Pin the upstream under the lock, sort outside it."""
        with self.rt.lock:
            if self.jobs.get(job.rel.id) is not job:
                return
            pin = self.rt.upstream_pin(u.rel_id)
            cursor = SnapshotCursor(u.key_cols or [], u.pos if u.status == RUNNING else None)
        cursor.prepare(pin)
        with self.rt.lock:
            if self.jobs.get(job.rel.id) is job:
                u.cursor = cursor

    def _slice(self, job: BackfillJob, u: UpstreamState, n: int) -> None:
        with self.rt.lock:
            if self.jobs.get(job.rel.id) is not job:
                return
            t0 = time.perf_counter()
            if u.key_cols is None:  # a source: everything up to the reader's position
                rows, final = self.rt.upstream_pin(u.rel_id).table(), True
            else:
                assert u.cursor is not None
                rows, final = u.cursor.next_slice(self.rt.upstream_pin(u.rel_id), n)
            got = rows.num_rows if rows.num_columns else 0
            if got:
                try:
                    _step_inserts(job, u.rel_id, rows)
                except Exception as e:  # the half-stepped job cannot go on: drop it
                    self._fail(job, e)
                    return
            u.rows_done += got
            if final:
                u.status, u.pos, u.cursor = DONE, None, None
            else:
                assert u.cursor is not None
                u.status, u.pos = RUNNING, u.cursor.pos
            job.save()
            job.took(got, time.perf_counter() - t0)
            faults.hit("backfill_sliced", job.rel.name)
            if job.done:
                self._finish(job)

    def _read_source(self, job: BackfillJob, u: UpstreamState) -> None:
        """A source upstream, read once up to the reader's position: the position is taken
        under the lock, the broker is read without it (barriers go on; their deltas of
        this upstream are held), then the read's rows and the held deltas are stepped,
        in that order, under the lock. Until then the progress table says not started,
        so a crash re-reads up to the recovered position, which covers the held rows."""
        with self.rt.lock:
            if self.jobs.get(job.rel.id) is not job:
                return
            src = self.rt.sources[u.rel_id]
            point = src.backfill_point()
            u.preparing, u.held = True, []
        t0 = time.perf_counter()
        try:
            rows = src.read_upto(point)
            faults.hit("source_backfill_read", job.rel.name)
        except BaseException:
            with self.rt.lock:
                u.preparing, u.held = False, []  # the next try reads up to a later position
            raise
        with self.rt.lock:
            if self.jobs.get(job.rel.id) is not job:  # cancelled, or a rollback rebuilt it
                return
            held, u.preparing, u.held = u.held, False, []
            got = rows.num_rows if rows.num_columns else 0
            try:
                if got:
                    _step_inserts(job, u.rel_id, rows)
                if held:
                    job.step({u.rel_id: StreamChunk.concat(held)})
            except Exception as e:  # the half-stepped job cannot go on: drop it
                self._fail(job, e)
                return
            u.rows_done += got + sum(len(c) for c in held)
            u.status, u.pos, u.cursor = DONE, None, None
            job.save()
            job.took(got, time.perf_counter() - t0)
            faults.hit("backfill_sliced", job.rel.name)
            if job.done:
                self._finish(job)

    def _fail(self, job: BackfillJob, e: Exception) -> None:
        log.error("backfill of %s failed; the job is dropped", job.rel.name, exc_info=e)
        self.failed[job.rel.id] = e
        self.rt.cancel_job(job.rel.id)

    def _finish(self, job: BackfillJob) -> None:
        with self.rt.lock:
            if self.jobs.get(job.rel.id) is not job:
                return
            self.rt.finish_backfill(job)

    # -- waiting -------------------------------------------------------------------------
    def wait(self, rel_id: int, timeout: float) -> bool:
        """Wait until the job is gone (finished, cancelled or failed); False on timeout."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while rel_id in self.jobs or rel_id in self._finishing:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.changed.wait(min(left, 0.5))
        return True

    # -- progress ------------------------------------------------------------------------
    def progress_rows(self) -> list[tuple[Any, ...]]:
        """(job, statement, create type, progress, initialized_at, rows done, rows total,
        rows/s) per creating job, in RisingWave's progress format."""
        out = []
        for job in list(self.jobs.values()):
            done = job.rows_done()
            total = done
            for u in job.upstreams.values():
                if u.status == DONE:
                    continue
                # the last committed epoch's count: no lock (catalog reads never wait)
                upstream = self.rt.row_count(u.rel_id) or 0  # a source: None
                left = u.cursor.remaining() if u.cursor is not None else upstream
                total += left if u.cursor is not None else max(upstream - u.rows_done, 0)
            if total == 0:
                text = "99.99%"
            else:
                frac = min(done / total, 0.9999)
                text = f"{frac * 100:.2f}% ({done}/{total})"
            out.append((
                job, job.statement, "BACKGROUND" if job.background else "FOREGROUND", text,
                job.initialized_at, done, total, job.wall_rate(),
            ))  # fmt: skip
        return out
