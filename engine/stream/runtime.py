"""The runtime: owns every flow, steps them at each barrier, and commits checkpoints.

Threading: three kinds of locks, always taken in this order (never the other way):

* `lock` (the epoch lock, an RLock) guards the flows and the stepping of the dataflow:
  the barrier thread takes it for one whole step + commit, DDL for the catalog change
  (ending with a checkpoint), recovery for the rebuild, and the backfill of a new
  materialized view or sink one bounded slice at a time between barriers
  (`engine.stream.backfill`; its CREATE waits without it). Nothing a client reads or
  writes takes it:
* `dml_lock(table_id)` serialises the DML of one table: a statement holds it while it
  evaluates against the table's latest rows (`live_rows`: stored rows plus the chunks
  queued or being drained) and queues its chunk, so two concurrent `UPDATE t SET v = v +
  1` never lose an increment. The barrier holds it only while it pushes that table's
  chunks through its MaterializeOp (and for a TTL cleanup), the only changes of a
  table's stored rows. Inserts into a table keyed by the hidden row id commute with
  every other statement and skip it (webhook rows, COPY, INSERT);
* `queue_lock` (short: a WAL append and a list append) makes WAL order equal queue order:
  `write` (`engine.stream.runtime_writes`) appends the WAL record and queues the chunk
  under it (a big chunk's parts are written to the WAL before, without it; the commit
  record is the one appended under it), and the barrier takes the epoch's WAL cut and
  swaps every table's queue out (`TableFlow.begin_drain`) under it, so the records <= the
  cut are exactly the chunks the epoch drains. Recovery holds it while it rebuilds the
  queues from the WAL.

Ad-hoc reads take none of them: `committed()` is the pinned rows of every table and
view as of the last committed epoch, published at each commit
(`engine.stream.read_snapshot`); writers wait for the WAL fsync, never for a barrier.

Barrier (every `barrier_interval_ms`, or at once for FLUSH and DDL):
1. drain each table's pending chunks through its MaterializeOp, in statement order;
2. step every view in creation order (a topological order) with the upstream deltas;
   then every sink (`engine.stream.sink`), whose output goes to its writer;
3. each sink's pre-commit (flush/stage downstream; its returned state joins the checkpoint);
4. commit: every state table's dirty keys, dropped tables, the catalog, row-id counters
   and the WAL position all go into one RocksDB WriteBatch written with sync
   (`engine.state.checkpoint`), so a crash leaves either the whole epoch or none of it;
5. each sink's post-commit.
Recovery (`recover`: the last checkpoint's catalog, `restore_relation` per catalog entry,
then `replay_wal`) rebuilds the flows from the catalog, loads their state and re-queues the
WAL records written after the checkpoint. The database runs it at startup.

Every epoch is atomic. If anything raises inside a barrier (a bug, an I/O error, a data
error an operator did not turn into NULL), the epoch is rolled back everywhere by running
the same `recover` in process: every flow is thrown away and rebuilt from the last
checkpoint, sources re-seek to their checkpointed offsets, sinks are closed and reopened
from their staged state, and the WAL records after the checkpoint are queued again. No
table keeps rows that a view has not seen. The caller (FLUSH, DDL) gets `EpochFailed`
(the details go to the log with the traceback). Timer barriers then wait with backoff
(`RETRY_START` doubling to `RETRY_MAX` seconds) before trying the epoch again; FLUSH and
DDL try at once. A failure that repeats (a deterministic bug) thus leaves the server up,
reading the last committed epoch and accepting durable writes, until the cause is gone
(e.g. the failing view is dropped: DROP runs its barrier without it). Named fault points
(`engine.faults`) let tests crash or raise at each step.
"""

from __future__ import annotations

import collections
import gc
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from engine import faults
from engine.catalog import Catalog, Relation, RelationKind
from engine.chunk import StreamChunk
from engine.errors import EngineError, EpochFailed
from engine.expr import EvalContext
from engine.latency import Histogram, bulk_thread, bulk_work
from engine.plan.stream_plan import StreamPlan
from engine.state.disk_table import DiskTables, HotCache
from engine.state.store import StateStore
from engine.state.table import StateTable
from engine.stream.backfill import Backfiller
from engine.stream.cpu import StreamCpu
from engine.stream.event_log import EventLog
from engine.stream.graph import (
    RowIdGen,
    TableFlow,
    ViewFlow,
)
from engine.stream.job_plan import PlanFn, is_job, load_plan
from engine.stream.operators.watermark import WatermarkTracker
from engine.stream.parallel.pool import WorkerPool
from engine.stream.parallel.transport import WorkerLauncher
from engine.stream.read_snapshot import EpochSnapshot, Pinned, TablePin
from engine.stream.runtime_ddl import DdlPath
from engine.stream.runtime_writes import WritePath
from engine.stream.sink import SinkFlow, SinkNotReady, SinkStatus
from engine.stream.source import (
    CHECKPOINT_EXTRA,
    SourceFlow,
    is_connector_relation,
    source_delta,
)
from engine.stream.source_status import SourceStatus
from engine.stream.ttl import clean_expired

log = logging.getLogger("swell.runtime")

RETRY_START = 0.5
"""Seconds the barrier loop waits after a failed epoch before trying it again."""
RETRY_MAX = 30.0
"""Cap of the retry delay, which doubles with every consecutive failure."""
BARRIER_LOG = 600
"""Completed barriers kept in `Runtime.barrier_log` (the dashboard's latency chart)."""


@dataclass
class EpochFailure:
    """The last failed epoch (cleared by the next committed one); shown in `stats()`."""

    epoch: int  # the epoch that was rolled back
    where: str  # what was running: 'materialized view "v"', 'the checkpoint', ...
    message: str  # what the client was told
    attempts: int  # consecutive failures
    retry_at: float  # time.monotonic() of the next timer retry
    recovered: bool  # the in-process recovery itself worked


class Runtime(DdlPath, WritePath):
    """See the module docstring; the DDL side is `engine.stream.runtime_ddl`, the write
    path `engine.stream.runtime_writes`."""

    def __init__(
        self,
        store: Any,
        wal: Any,
        checkpointer: Any,
        catalog: Catalog,
        barrier_interval_ms: int = 1000,
    ) -> None:
        self.store = store
        self.wal = wal
        self.checkpointer = checkpointer
        self.catalog = catalog
        self.barrier_interval = barrier_interval_ms / 1000.0
        self.lock = threading.RLock()
        self.queue_lock = threading.RLock()  # WAL order = queue order (module docstring)
        self._dml_locks: dict[int, threading.RLock] = {}  # per table, kept across recovery
        self._frozen: set[int] = set()  # tables whose column layout is changing (no writes)
        self.tables: dict[int, TableFlow] = {}
        self.views: dict[int, ViewFlow] = {}
        self.sinks: dict[int, SinkFlow] = {}
        self.data_dir: str | None = None  # set by the database; sinks may keep files there
        # RocksDB-first operator state (engine.state.disk_table) with the operator-cache
        # share of the state budget; the database replaces it with its budget's
        self.disk_tables: DiskTables | None = (
            DiskTables(store, HotCache(64 << 20)) if isinstance(store, StateStore) else None
        )
        self._meta_extra: dict[str, bytes] = {}
        self.fed_tables = False  # a sink INTO a table queued rows at the last commit
        self._commit_cut: int | None = None  # WAL cut of a stepped epoch a sink holds back
        # connector-fed relations (engine.stream.source): SOURCEs and TABLEs with a connector
        self.sources: dict[int, SourceFlow] = {}
        self._source_positions: dict[int, Any] = {}  # from the checkpoint, until restored
        self.row_ids = RowIdGen()
        self.watermarks = WatermarkTracker()
        self.epoch = 0
        self.wal_seq = 0  # highest WAL record queued into pending
        self.plan_fn: PlanFn | None = None  # set by `recover`
        self.failure: EpochFailure | None = None
        self.failed_epochs = 0  # epochs rolled back since start
        self._where = ""  # what the barrier is running (for the failure message)
        self._attempt = 0  # the epoch the barrier is building
        self._carried: dict[int, SinkStatus] = {}  # statuses kept across a rollback
        self._carried_sources: dict[int, SourceStatus] = {}
        self._dropped: list[StateTable] = []
        self._dirty_catalog = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.ctx = EvalContext()  # the barrier's clock; jobs and watermarks get `job_ctx`
        # data errors of streaming jobs (rw_catalog.rw_event_logs, FLUSH warnings)
        self.events = EventLog()
        # metrics
        self.last_barrier_ms = 0.0
        self.barrier_seconds = Histogram()  # every completed barrier (metrics)
        # the latest barriers as (wall time, epoch, milliseconds), for the dashboard
        self.barrier_log: collections.deque[tuple[float, int, float]] = collections.deque(
            maxlen=BARRIER_LOG
        )
        # freshness: from the oldest write an epoch took in until that epoch committed
        # (its rows visible in tables and views)
        self.freshness_seconds = Histogram()
        self._oldest_write: float | None = None
        self.barriers = 0
        self.rows_in = 0
        self.cpu = StreamCpu()  # barrier CPU seconds by phase and operator (engine.stream.cpu)
        self._published = EpochSnapshot(-1)  # the last committed epoch's rows (committed())
        self.backfill = Backfiller(self)  # creating jobs (engine.stream.backfill)
        # parallel execution (engine.stream.parallel): the server's worker count, the
        # default parallelism of new jobs; the pool starts with the first parallel job
        self.parallelism = 1
        self.pool: WorkerPool | None = None
        self.worker_launcher: Callable[[], WorkerLauncher] | None = None  # None: processes
        self.worker_timeout = 60.0  # s a worker may take to answer before it is lost; 0: none

    # ------------------------------------------------------------------------------------
    # lifecycle
    # ------------------------------------------------------------------------------------
    def start(self) -> None:
        with self.lock:
            self._publish()  # the recovered (checkpointed) state is a committed epoch
        self._thread = threading.Thread(target=self._loop, name="swell-barrier", daemon=True)
        self._thread.start()
        self.backfill.start()

    def stop(self) -> None:
        self._stop.set()
        self.backfill.stop()
        if self._thread is not None:
            self._thread.join(timeout=30)
        try:
            self.barrier(force=True)
        except (SinkNotReady, EpochFailed) as e:  # the WAL replays the epoch after restart
            log.error("final checkpoint skipped: %s", e)
        for sf in self.sources.values():
            sf.stop()
        if self.pool is not None:
            self.pool.close()

    def _loop(self) -> None:
        bulk_thread()  # clients' answers run first after a wake-up (`engine.latency`)
        while not self._stop.wait(self.barrier_interval):
            try:
                self.barrier()
            except EpochFailed:
                pass  # rolled back and logged; retried after the backoff
            except Exception:  # keep the loop alive; the error is logged with its traceback
                log.exception("barrier failed")

    # ------------------------------------------------------------------------------------
    # barrier / checkpoint
    # ------------------------------------------------------------------------------------
    def barrier(self, force: bool = False) -> int:
        """Step all flows with the epoch's changes and commit one checkpoint.

        A sink that cannot flush (`SinkNotReady`) leaves the stepped epoch uncommitted:
        timer barriers (`force=False`) return and retry the commit on the next tick before
        stepping anything new, releasing the lock in between (reads, DML and status stay
        live); forced barriers (FLUSH, DDL) wait for the sink.
        """
        with self.lock, bulk_work():  # a session's thread (FLUSH, DDL) runs it as bulk work
            f = self.failure
            if f is not None and not force and time.monotonic() < f.retry_at:
                return self.epoch  # backing off after a failed epoch
            try:
                if f is not None and not f.recovered:  # the last rollback did not finish
                    self.recover()
                    f.recovered = True
                epoch = self._barrier(force)
            except SinkNotReady:
                raise
            except Exception as e:
                raise self._rollback(e) from e
            if f is not None:
                log.info(
                    "barrier succeeded after %s failed attempt(s), epoch %s", f.attempts, epoch
                )
                self.failure = None
            return epoch

    def _barrier(self, force: bool) -> int:
        """One barrier's steps and commit; under the lock (see `barrier`)."""
        if self._commit_cut is not None:
            self._where = "the retried checkpoint"
            try:
                self._commit(self._commit_cut, block=force)
            except SinkNotReady:
                return self.epoch
        has_work = (
            any(t.pending for t in self.tables.values())
            or any(s.backlog or s.wants_checkpoint() for s in self.sinks.values())
            or any(v.time_driven for v in self.views.values())
            or any(s.has_data() for s in self.sources.values())
            or self.backfill.dirty
        )
        if not has_work and not force and not self._dirty_catalog and not self._dropped:
            return self.epoch
        t0 = time.perf_counter()
        cpu = self.cpu
        c = cpu.now()
        self.ctx.now = None
        self._attempt = self.epoch + 1
        deltas: dict[int, StreamChunk | None] = {}
        for sid, sf in self.sources.items():
            self._where = f'source "{sf.rel.name}"'
            chunks = sf.take()
            if sid in self.tables:
                self.enqueue(sid, chunks)
            else:
                deltas[sid] = source_delta(chunks)
                self.rows_in += len(deltas[sid] or ())
                self.watermarks.on_relation_delta(sf.rel, deltas[sid], self.job_ctx(sf.rel))
        faults.hit("sources_taken")
        c = cpu.lap("sources", c)
        with self.queue_lock:  # the WAL records this epoch consumes are the chunks it drains
            cut = self.wal_seq
            for flow in self.tables.values():
                flow.begin_drain()
        for tid, flow in self.tables.items():
            self._where = f'table "{flow.rel.name}"'
            with self.dml_lock(tid):  # a table's stored rows change only under its DML lock
                d = flow.drain()
            if d is not None:
                self.rows_in += len(d)
            deltas[tid] = d
            self.watermarks.on_relation_delta(flow.rel, d, self.job_ctx(flow.rel))
        faults.hit("tables_drained")
        c = cpu.lap("tables", c)
        jobs = self.backfill.jobs
        for vid in sorted(self.views):
            view = self.views[vid]
            self._where = f'materialized view "{view.rel.name}"'
            job = jobs.get(vid)
            if job is not None:  # creating: the position rule, watermarks withheld
                deltas[vid] = view.step(job.forward(deltas), cpu=cpu)
            else:
                deltas[vid] = view.step(deltas, watermarks=self.watermarks.current, cpu=cpu)
                self.watermarks.set_view(vid, view.out_watermarks)
            faults.hit("view_stepped", view.rel.name)
        c = cpu.lap("views", c)
        for sid in sorted(self.sinks):
            self._where = f'sink "{self.sinks[sid].spec.name}"'
            job = jobs.get(sid)
            if job is not None:
                self.sinks[sid].step(job.forward(deltas), self.epoch + 1)
            else:
                self.sinks[sid].step(deltas, self.epoch + 1, watermarks=self.watermarks.current)
        faults.hit("sinks_stepped")
        c = cpu.lap("sinks", c)
        self._where = "the TTL cleanup"
        clean_expired(self.tables, self.watermarks.current, self.dml_lock)  # ... WITH TTL
        try:
            self._commit(cut, block=force)
        except SinkNotReady:
            if force:
                raise
            return self.epoch
        c = cpu.lap("commit", c)
        # State lives in long-lived Python objects; moving them out of the collector's
        # generations after each epoch keeps GC passes proportional to new garbage.
        gc.freeze()
        cpu.lap("gc", c)
        self.last_barrier_ms = (time.perf_counter() - t0) * 1000
        self.barrier_seconds.observe(self.last_barrier_ms / 1000)
        self.barrier_log.append((time.time(), self.epoch, self.last_barrier_ms))
        if self._oldest_write is not None:  # the epoch's oldest write is visible now
            self.freshness_seconds.observe(time.monotonic() - self._oldest_write)
            self._oldest_write = None
        self.barriers += 1
        if force and self.fed_tables:  # FLUSH shows rows sunk INTO tables
            self.fed_tables = False
            return self._barrier(force=True)
        return self.epoch

    def _commit(self, wal_cut: int, block: bool = True) -> None:
        self._commit_cut = wal_cut  # until the sinks are flushed and the checkpoint written
        self._attempt = self.epoch + 1
        sink_state: dict[int, bytes | None] = {}
        for sid, sk in self.sinks.items():
            self._where = f'sink "{sk.spec.name}"'
            sink_state[sid] = sk.pre_commit(self.epoch + 1, block=block)
        faults.hit("sinks_pre_committed")
        self._where = "the checkpoint"
        self._commit_cut = None
        self.epoch += 1
        tables: list[StateTable] = []
        for f in self.tables.values():
            tables.extend(f.tables)
        for v in self.views.values():
            tables.extend(v.tables)
        extra = {
            "catalog": self.catalog.to_bytes(),
            "runtime": json.dumps(
                {"row_id_last": self.row_ids.last, "watermarks": self.watermarks.snapshot()}
            ).encode(),
            CHECKPOINT_EXTRA: json.dumps(
                {str(k): s.position for k, s in self.sources.items() if s.position}
            ).encode(),
        }
        for sid, f in self.sinks.items():
            tables.extend(f.tables)
            if sink_state[sid] is not None:
                extra[f"sink.{sid}"] = sink_state[sid]  # type: ignore[assignment]
        self.checkpointer.commit(self.epoch, wal_cut, tables, extra, self._dropped)
        self.backfill.committed()
        for sf in self.sources.values():
            sf.committed()
        self._publish()
        self._dropped = []
        self._dirty_catalog = False
        faults.hit("checkpoint_written")
        self._where = "the sinks' post-commit"
        for f in self.sinks.values():
            f.post_commit(self.epoch)
        faults.hit("post_committed")

    # ------------------------------------------------------------------------------------
    # rollback
    # ------------------------------------------------------------------------------------
    def _rollback(self, e: Exception) -> EpochFailed:
        """Roll the failed epoch back by recovering from the last checkpoint (see the
        module docstring); returns the error for the caller. Under the lock."""
        failed = self._attempt
        where = self._where or "the barrier"
        self.failed_epochs += 1
        log.error(
            "epoch %s failed in %s; rolling back to the last checkpoint", failed, where, exc_info=e
        )
        recovered = True
        try:
            if self._stop.is_set():  # shutting down: the restart recovers (WAL replay)
                recovered = False
            else:
                self.recover()
        except Exception as re:
            recovered = False
            log.critical(
                "recovery after the failed epoch %s failed; the next barrier tries again",
                failed,
                exc_info=re,
            )
        attempts = self.failure.attempts + 1 if self.failure is not None else 1
        delay = min(RETRY_START * 2 ** (attempts - 1), RETRY_MAX)
        cause = e.message if isinstance(e, EngineError) else "internal error"
        how = (
            "failed after its checkpoint" if self.epoch >= failed else "failed and was rolled back"
        )
        message = f"epoch {failed} {how}: {cause} (in {where})"
        self.failure = EpochFailure(
            failed, where, message, attempts, time.monotonic() + delay, recovered
        )
        if recovered:
            detail = (
                f"The dataflow recovered from epoch {self.epoch}; acknowledged writes are kept "
                f"and applied when an epoch commits. Failed attempts in a row: {attempts}; "
                f"the next automatic retry is in {delay:g} s."
            )
        else:
            detail = "Recovering from the last checkpoint failed too; it is retried."
        err = EpochFailed(message, detail=detail, hint="The server log has the details.")
        if isinstance(e, EngineError):
            err.sqlstate = e.sqlstate  # type: ignore[misc]
        # rw_catalog.rw_event_logs, with RisingWave's event types
        self.events.record_event(
            "COLLECT_BARRIER_FAIL",
            {"epoch": failed, "where": where, "error": message, "attempts": attempts},
        )
        self.events.record_event(
            "RECOVERY",
            {"status": "success" if recovered else "failure", "recovered_epoch": self.epoch},
        )
        return err

    def recover(self, plan_fn: PlanFn | None = None) -> int:
        """Rebuild every flow from the last checkpoint and queue the WAL records after it.

        Used at startup (by the database, on empty flows) and after a failed epoch: the
        current flows are discarded (sources' readers stopped, sinks closed), the catalog
        is restored in place, sources get their checkpointed offsets back, sinks reopen
        with their last pre-commit state. Returns the number of WAL records queued.
        """
        with self.lock, self.queue_lock:  # writers wait until the queues are rebuilt
            if plan_fn is not None:
                self.plan_fn = plan_fn
            for sf in self.sources.values():
                try:
                    sf.stop()
                except Exception:
                    log.exception("source %s: stopping the reader failed", sf.rel.name)
            for sk in self.sinks.values():
                sk.close()
            # rw_sink_status / rw_source_* counters carry over to the rebuilt flows
            self._carried = {k: sk.status for k, sk in self.sinks.items()}
            self._carried_sources = {k: sf.status for k, sf in self.sources.items()}
            self.backfill.clear()  # creating jobs resume from their committed positions
            rollback = bool(self.tables or self.views or self.sinks or self.sources)
            self.tables = {}
            self.views = {}
            self.sinks = {}
            self.sources = {}
            self._dropped = []
            self._dirty_catalog = False
            self._commit_cut = None
            self.fed_tables = False
            self._meta_extra = {}
            self._source_positions = {}
            self._where = ""
            if rollback:  # the discarded flows were frozen out of the collector (`_barrier`):
                gc.unfreeze()  # a full collection frees their reference cycles
                gc.collect()
            faults.hit("recovery")
            if self.pool is not None:  # workers drop their actors; lost ones are replaced
                self.pool.reset()
            if self.wal.last_seq:
                self.wal.wait_durable(self.wal.last_seq)  # every queued record is readable
            meta = self.checkpointer.reset()
            blob = meta.extra.get("catalog") if meta is not None else None
            box = self.catalog.box  # the secret store key opens sealed credentials
            self.catalog.replace_with(Catalog.from_bytes(blob, box) if blob else Catalog())
            row_id_last = self.row_ids.last
            self.watermarks = WatermarkTracker()
            self.epoch = 0
            self.wal_seq = 0
            self.restore(meta)
            self.row_ids.last = max(self.row_ids.last, row_id_last)  # never reuse a row id
            assert self.plan_fn is not None, "recover() needs the planner first"
            rels = self.catalog.ordered()
            if rels:
                log.info("recovering relations=%d epoch=%s", len(rels), self.epoch)
            for i, rel in enumerate(rels, 1):
                t0 = time.monotonic()
                self.restore_relation(rel, self.plan_fn)
                took = time.monotonic() - t0
                # progress on the relations that take a while (large state); others at debug
                level = logging.INFO if took >= 1.0 else logging.DEBUG
                log.log(
                    level,
                    "recovered relation=%s seconds=%.1f progress=%d/%d",
                    rel.name,
                    took,
                    i,
                    len(rels),
                )
            self._carried, self._carried_sources = {}, {}
            self._publish()  # the checkpoint's rows: the last committed epoch
            return self.replay_wal(meta.wal_seq if meta is not None else 0)

    # ------------------------------------------------------------------------------------
    # recovery
    # ------------------------------------------------------------------------------------
    def restore(self, meta: Any) -> None:
        if meta is not None:
            self.epoch = meta.epoch
            self.wal_seq = meta.wal_seq
            self._meta_extra = dict(meta.extra)
            rt = meta.extra.get("runtime")
            if rt:
                self.row_ids.last = json.loads(rt)["row_id_last"]
                self.watermarks.restore(json.loads(rt).get("watermarks"))
            so = meta.extra.get(CHECKPOINT_EXTRA)
            if so:
                self._source_positions = {int(k): v for k, v in json.loads(so).items()}

    def restore_relation(self, rel: Relation, plan_fn: PlanFn) -> None:
        """Rebuild one relation's flow; a view or sink from its stored stream plan
        (`plan_fn` plans one from SQL only for entries stored without one)."""
        splan: StreamPlan | None = None
        if is_job(rel):
            splan, migrated = load_plan(rel, self.catalog, plan_fn)
            self._dirty_catalog = self._dirty_catalog or migrated
        if rel.kind is RelationKind.TABLE:
            self._add_table(rel, load=True)
        elif rel.kind is RelationKind.MATERIALIZED_VIEW:
            assert splan is not None
            view = self._add_view(rel, splan, load=True)
            if rel.extra.get("creating"):
                self._start_backfill(rel, view, load=True)
        elif rel.kind in (RelationKind.SINK, RelationKind.SUBSCRIPTION):
            assert splan is not None
            flow = self._add_sink(rel, splan, load=True)
            flow.reopen(self.epoch, self._meta_extra.get(f"sink.{rel.id}"))
            if rel.extra.get("creating"):
                self._start_backfill(rel, flow, load=True)
        if is_connector_relation(rel):
            self._add_source(rel, self._source_positions.pop(rel.id, None))
        self._start_sources(rel)

    # ------------------------------------------------------------------------------------
    # reads
    # ------------------------------------------------------------------------------------
    def snapshot(self, rel_id: int) -> pa.Table:
        """All committed rows of a table or materialized view (take under the lock)."""
        return self.pin(rel_id).table()

    def pin(self, rel_id: int) -> Pinned:
        """A relation's rows now, immutable: cheap under the lock (O(segments)); build the
        table with `.table()` after releasing it."""
        with self.lock:
            flow = self.tables.get(rel_id) or self.views.get(rel_id)
            if flow is None and rel_id in self.sources:
                return TablePin(self.sources[rel_id].backfill())
            if flow is None:
                raise KeyError(rel_id)
            return flow.mat.pin()  # type: ignore[attr-defined, no-any-return]

    def committed(self) -> EpochSnapshot:
        """The rows of every table and materialized view as of the last committed epoch.

        Takes no lock: the snapshot is published whole at each commit and never changes,
        so it may be read from any thread while the next epoch is computed."""
        return self._published

    def _publish(self) -> None:
        """Pin every relation's rows as the committed epoch's snapshot (under the lock).
        A view still backfilling is left out: its first published rows are complete."""
        pins: dict[int, Pinned] = {}
        flows: list[tuple[int, TableFlow | ViewFlow]] = [*self.tables.items(), *self.views.items()]
        creating = self.backfill.jobs
        for rid, flow in flows:
            if rid in creating:
                continue
            pin = getattr(flow.mat, "pin", None)
            if pin is not None:
                pins[rid] = pin()
        self._published = EpochSnapshot(self.epoch, pins)

    def row_count(self, rel_id: int) -> int | None:
        """Stored rows of a table or materialized view (None: not one), without the lock."""
        snap = self._published
        return snap.row_count(rel_id) if rel_id in snap else None

    def stats(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "barriers": self.barriers,
            "last_barrier_ms": self.last_barrier_ms,
            "rows_in": self.rows_in,
            "tables": len(self.tables),
            "views": len(self.views),
            "sinks": len(self.sinks),
            "failed_epochs": self.failed_epochs,
            "expression_errors": self.events.total,
            "failure": None if self.failure is None else self.failure.message,
            "cpu": self.cpu.snapshot(),
        }
