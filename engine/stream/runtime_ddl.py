"""The runtime's DDL side: adding, rebuilding and dropping flows, and creating jobs' backfill.

Why a file of its own: these are the catalog changes (CREATE / ALTER / DROP of tables,
sources, materialized views and sinks), each taken under the epoch lock and ended with a
checkpoint (`barrier(force=True)`), apart from the barrier loop and recovery
(`engine.stream.runtime`) and the clients' write path (`engine.stream.runtime_writes`).
`Runtime` mixes it in; the state it uses (`tables`, `views`, `sinks`, `catalog`, ...) is
the runtime's, declared below for the type checker.

Lifecycle of a job: `create_view` / `create_sink` build its flow (`_build_job`: in
process, or with actors in worker processes when its parallelism is above 1), add it as
creating and hand it to the backfill (`_start_backfill`, `engine.stream.backfill`), which
calls `finish_backfill` once every upstream is read; `cancel_job` and `drop` remove it.
Recovery rebuilds the same flows through `restore_relation` (in the runtime) with
`load=True`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from engine.catalog import Catalog, Relation, RelationKind
from engine.catalog.system import relation_oid
from engine.chunk import StreamChunk
from engine.errors import not_supported
from engine.expr import EvalContext
from engine.expr.core import job_context
from engine.plan.stream_plan import StreamPlan
from engine.state.disk_table import DiskTables
from engine.state.table import StateTable
from engine.stream.backfill import PROGRESS_TABLE, Backfiller, BackfillJob, UpstreamState
from engine.stream.backfill_cursor import orderable
from engine.stream.build import build_plan
from engine.stream.event_log import EventLog
from engine.stream.graph import Allocator, TableFlow, ViewFlow
from engine.stream.job_plan import store_plan
from engine.stream.operators import ColumnarMaterializeOp
from engine.stream.operators.watermark import WatermarkTracker
from engine.stream.parallel.flow import build_parallel_plan, holding_outputs
from engine.stream.parallel.fragment import PARALLEL_NODES, PARALLELISM, choose
from engine.stream.parallel.pool import WorkerPool
from engine.stream.parallel.transport import WorkerLauncher, config_of
from engine.stream.read_snapshot import Pinned
from engine.stream.sink import SinkFlow, SinkStatus, build_sink_flow
from engine.stream.source import SourceFlow, is_connector_relation, needs_reader
from engine.stream.source_status import SourceStatus
from engine.types import arrow_schema

log = logging.getLogger("swell.runtime")


class DdlPath:
    """`Runtime`'s DDL methods (mixed in; see the module docstring)."""

    if TYPE_CHECKING:  # the runtime's state and methods these use
        store: Any
        catalog: Catalog
        lock: threading.RLock
        queue_lock: threading.RLock
        tables: dict[int, TableFlow]
        views: dict[int, ViewFlow]
        sinks: dict[int, SinkFlow]
        sources: dict[int, SourceFlow]
        backfill: Backfiller
        disk_tables: DiskTables | None
        data_dir: str | None
        pool: WorkerPool | None
        parallelism: int
        worker_launcher: Callable[[], WorkerLauncher] | None
        worker_timeout: float
        watermarks: WatermarkTracker
        events: EventLog
        ctx: EvalContext
        epoch: int
        _frozen: set[int]
        _dropped: list[StateTable]
        _dirty_catalog: bool
        _commit_cut: int | None
        _carried: dict[int, SinkStatus]
        _carried_sources: dict[int, SourceStatus]
        _stop: threading.Event

        def barrier(self, force: bool = False) -> int: ...
        def dml_lock(self, rel_id: int) -> threading.RLock: ...
        def snapshot(self, rel_id: int) -> pa.Table: ...
        def pin(self, rel_id: int) -> Pinned: ...

    def _alloc(self, rel: Relation, load: bool) -> Allocator:
        store = self.store if load else None
        return Allocator(rel, self.catalog.allocate_state_table_id, store, self.disk_tables)

    def _add_table(self, rel: Relation, load: bool) -> TableFlow:
        alloc = self._alloc(rel, load)
        alloc.prefix = "mat."
        mat = ColumnarMaterializeOp(rel.fields, list(rel.pk), alloc)
        flow = TableFlow(rel, mat, tables=alloc.tables)
        self.tables[rel.id] = flow
        return flow

    def job_ctx(self, rel: Relation) -> EvalContext:
        """A streaming job's evaluation context: non-strict (a failing expression yields
        NULL for the row; the error goes to the event log), on the runtime's clock."""
        return job_context(self.ctx, self.events.for_job(relation_oid(rel), rel.name))

    def worker_pool(self) -> WorkerPool:
        """The server's workers (engine.stream.parallel.pool), created on first use."""
        if self.pool is None:
            scratch = f"{self.data_dir}/workers" if self.data_dir else None
            launcher = self.worker_launcher() if self.worker_launcher is not None else None
            # each worker's scratch store and operator caches get a 1/W share of the
            # server's state budget (the actors hold 1/W of the parallel jobs' state)
            op_mb = 64
            if self.disk_tables is not None:
                cache = self.disk_tables.cache
                op_mb = (cache.cap_entries * cache.entry_bytes) >> 20
            share = max(op_mb // self.parallelism, 64)
            config = config_of(scratch, cache_mb=share, state_mb=4 * share)
            self.pool = WorkerPool(
                self.parallelism, config, launcher, self.events.record_event, self.worker_timeout
            )
        return self.pool

    def _plan_parallel(self, rel: Relation, plan: StreamPlan) -> None:
        """At CREATE: the job's parallelism (0/'adaptive' or unset: the server's) and
        which of its nodes run as actors, recorded in its catalog entry."""
        want = int(rel.extra.get(PARALLELISM) or 0)
        if want <= 0:
            want = self.parallelism
            rel.extra["parallelism_adaptive"] = True
        want = min(want, 256)  # one actor per vnode at most
        rel.extra[PARALLELISM] = want
        chosen = choose(plan) if want > 1 else []
        if chosen:
            rel.extra[PARALLEL_NODES] = chosen
        else:
            rel.extra.pop(PARALLEL_NODES, None)

    def _build_job(self, rel: Relation, plan: StreamPlan, store: Any | None) -> tuple[Any, Any]:
        """A job's operator nodes and state tables: its parallel nodes as actors
        (engine.stream.parallel) when it was created at parallelism > 1."""
        p = int(rel.extra.get(PARALLELISM) or 1)
        if p > 1 and rel.extra.get(PARALLEL_NODES):
            return build_parallel_plan(
                plan,
                rel,
                store,
                self.job_ctx(rel),
                self.disk_tables,
                self.worker_pool(),
                p,
                self.catalog.allocate_state_table_id,
            )
        return build_plan(plan, rel.name, store, self.job_ctx(rel), self.disk_tables)

    def _add_view(self, rel: Relation, plan: StreamPlan, load: bool) -> ViewFlow:
        nodes, tables = self._build_job(rel, plan, self.store if load else None)
        flow = ViewFlow(rel, nodes, tables=tables)
        flow.scan_names = {rid: list(cols) for rid, (_, cols) in plan.scans.items()}
        flow.bind_scans(self.catalog.relations)
        self.views[rel.id] = flow
        return flow

    def replace_view(self, rel: Relation, plan: StreamPlan, store: Any) -> ViewFlow:
        """Build materialized view `rel`'s flow again from `store` in place of the running
        one (under the lock, right after a checkpoint: ALTER ... SET PARALLELISM,
        engine/stream/parallel/rescale.py)."""
        self.views.pop(rel.id, None)
        nodes, tables = self._build_job(rel, plan, store)
        flow = ViewFlow(rel, nodes, tables=tables)
        flow.scan_names = {rid: list(cols) for rid, (_, cols) in plan.scans.items()}
        flow.bind_scans(self.catalog.relations)
        self.views[rel.id] = flow
        return flow

    def _add_sink(self, rel: Relation, plan: StreamPlan, load: bool) -> SinkFlow:
        flow = build_sink_flow(
            rel,
            plan,
            self.store if load else None,
            self.job_ctx(rel),
            self.catalog,
            self.data_dir,
            runtime=self,
            status=self._carried.pop(rel.id, None),
            build=lambda p, st: self._build_job(rel, p, st),
        )
        flow.stopping = self._stop
        flow.graph.scan_names = {rid: list(cols) for rid, (_, cols) in plan.scans.items()}
        flow.graph.bind_scans(self.catalog.relations)
        self.sinks[rel.id] = flow
        return flow

    def rebuild_table(self, rel: Relation, change: Callable[[pa.Table], pa.Table]) -> None:
        """Change table `rel`'s column layout (ALTER TABLE ... ADD/DROP COLUMN): after the
        queued writes went in with the old layout, `change(rows)` updates the catalog entry
        (fields, keys) and returns the stored rows in the new layout; they are stored in new
        state tables, the old ones deleted by the checkpoint this ends with (one atomic
        commit with the catalog). Nothing is emitted downstream (no row changed); jobs
        reading the table are fed the columns they were planned with from then on."""
        creating = [j.rel.name for j in self.backfill.jobs.values() if rel.id in j.upstreams]
        if creating:  # its key positions are over the current layout
            raise not_supported(
                f'ALTER TABLE "{rel.name}" while "{creating[0]}" is being created from it',
                hint="Wait for the job (WAIT) or cancel it (CANCEL JOBS), then alter.",
            )
        with self.lock, self.dml_lock(rel.id):  # DML on the table waits for the change
            with self.queue_lock:  # writes into it wait too (`write`), then see the new layout
                self._frozen.add(rel.id)
            try:
                self.barrier(force=True)
                old = self.tables[rel.id]
                rows = old.mat.snapshot()  # type: ignore[attr-defined]
                rows = change(rows)
                self.tables.pop(rel.id)
                self._dropped.extend(old.tables)
                for name in [n for n in rel.state_tables if n.startswith("mat.")]:
                    rel.state_tables.pop(name)
                flow = self._add_table(rel, load=False)
                if rows.num_rows:
                    flow.mat.step([StreamChunk.inserts(rows)])
                for job in [*self.views.values(), *(s.graph for s in self.sinks.values())]:
                    job.bind_scans(self.catalog.relations)
                self.catalog.version += 1
                self._dirty_catalog = True
            finally:
                with self.queue_lock:
                    self._frozen.discard(rel.id)
            self.barrier(force=True)

    def rebind_scans(self, rel_id: int, names: dict[str, str]) -> None:
        """The running jobs that read relation `rel_id` read its column `old` as
        `names[old]` from now on (ALTER TABLE ... RENAME/DROP COLUMN; their stored plans
        are changed by the caller, under the lock)."""
        with self.lock:
            for job in [*self.views.values(), *(s.graph for s in self.sinks.values())]:
                cols = job.scan_names.get(rel_id)
                if cols is not None:
                    job.scan_names[rel_id] = [names.get(c, c) for c in cols]
                job.bind_scans(self.catalog.relations)

    def create_sink(
        self, rel: Relation, plan: StreamPlan, snapshot: bool, job: dict[str, Any] | None = None
    ) -> BackfillJob | None:
        """Add a sink: validate + open its writer, then fill it from the existing data.

        With `snapshot = 'false'` the operators step over the existing rows at once (their
        state must be right) without handing the output to the writer. Otherwise the sink
        is created as a backfilling job (`engine.stream.backfill`; `job` holds its
        statement, background flag and rate limit) and returned; the caller waits for it.
        """
        with self.lock:
            self.barrier()  # acknowledged DML counts as existing data (snapshot = 'false')
            flow: SinkFlow | None = None
            bf: BackfillJob | None = None
            try:
                if rel.kind is RelationKind.SINK:
                    self._plan_parallel(rel, plan)
                flow = build_sink_flow(
                    rel,
                    store_plan(rel, plan),
                    None,
                    self.job_ctx(rel),
                    self.catalog,
                    self.data_dir,
                    runtime=self,
                    build=lambda p, st: self._build_job(rel, p, st),
                )
                flow.writer.validate()
                flow.writer.open()
                flow.stopping = self._stop
                if snapshot and flow.upstream():
                    rel.extra["creating"] = True
                self.catalog.add(rel)
                self.sinks[rel.id] = flow
                if rel.extra.get("creating"):
                    flow.step({}, self.epoch + 1, force=True)
                    bf = self._start_backfill(rel, flow, load=False, **(job or {}))
                else:
                    snap: dict[int, StreamChunk | None] = {}
                    for rid in flow.upstream():
                        if rid in self.tables or rid in self.views or rid in self.sources:
                            t = self.snapshot(rid)
                            snap[rid] = StreamChunk.inserts(t) if t.num_rows else None
                    flow.step(snap, self.epoch + 1, force=True, emit=snapshot)
                self._start_sources(rel)
            except BaseException:
                self.catalog.discard(rel.id)
                self.sinks.pop(rel.id, None)
                self.backfill.forget(rel.id)
                if flow is not None:
                    flow.close()
                raise
            self._dirty_catalog = True
            self.barrier(force=True)
            return bf

    def mark_catalog_dirty(self) -> None:
        """A catalog entry changed in place (ALTER): the next checkpoint stores the catalog."""
        self._dirty_catalog = True

    def interrupt_sink(self, rel_id: int) -> None:
        """Stop a sink's retry loop (called without the lock, before DROP SINK takes it)."""
        flow = self.sinks.get(rel_id)
        if flow is not None:
            flow.cancelled.set()

    def _add_source(self, rel: Relation, position: Any = None) -> SourceFlow:
        sf = SourceFlow(rel, position)
        carried = self._carried_sources.pop(rel.id, None)
        if carried is not None:
            sf.status = carried
        self.sources[rel.id] = sf
        if rel.kind is RelationKind.TABLE:
            sf.ensure_running()
        return sf

    def _start_sources(self, rel: Relation) -> None:
        """Start the readers of the sources a new materialized view or sink reads."""
        flow: Any = self.views.get(rel.id) or self.sinks.get(rel.id)
        for rid in flow.upstream() if flow is not None else ():
            sf = self.sources.get(rid)
            if sf is not None:
                sf.ensure_running()

    def create_source(self, rel: Relation) -> None:
        """CREATE SOURCE: catalog entry only; the reader starts with its first view."""
        with self.lock:
            self.catalog.add(rel)
            self._add_source(rel)
            self._dirty_catalog = True
            self.barrier(force=True)

    def create_table(self, rel: Relation) -> None:
        with self.lock:
            self.catalog.add(rel)
            self._add_table(rel, load=False)
            if is_connector_relation(rel):
                self._add_source(rel)
            self._dirty_catalog = True
            self.barrier(force=True)

    def create_view(
        self, rel: Relation, plan: StreamPlan | None, job: dict[str, Any] | None = None
    ) -> BackfillJob | None:
        """Add a view; a materialized view (with its stored stream plan, see
        `engine.stream.job_plan`) is created as a backfilling job over its upstreams
        (`engine.stream.backfill`; `job`: statement, background flag, rate limit), which
        is returned for the caller to wait on. Ends with a checkpoint."""
        with self.lock:
            bf: BackfillJob | None = None
            self.catalog.add(rel)
            try:
                if plan is not None:
                    self._plan_parallel(rel, plan)
                    flow = self._add_view(rel, store_plan(rel, plan), load=False)
                    # operators see an empty start first (a global aggregate's first row)
                    flow.step({}, force=True)
                    if flow.upstream():
                        rel.extra["creating"] = True
                        bf = self._start_backfill(rel, flow, load=False, **(job or {}))
                    else:
                        self.watermarks.set_view(rel.id, flow.out_watermarks)
                    self._start_sources(rel)
            except BaseException:
                self.catalog.remove(rel.id)
                self.views.pop(rel.id, None)
                self.backfill.forget(rel.id)
                raise
            self._dirty_catalog = True
            self.barrier(force=True)
            return bf

    # ------------------------------------------------------------------------------------
    # backfill (engine.stream.backfill)
    # ------------------------------------------------------------------------------------
    def _start_backfill(
        self,
        rel: Relation,
        flow: ViewFlow | SinkFlow,
        load: bool,
        statement: str = "",
        background: bool = False,
        rate_limit: int | None = None,
    ) -> BackfillJob:
        """Track a creating job: its progress table (loaded on recovery) and upstreams."""
        tid = rel.state_tables.get(PROGRESS_TABLE)
        if tid is None:
            tid = rel.state_tables[PROGRESS_TABLE] = self.catalog.allocate_state_table_id()
        table = StateTable(tid, f"{rel.name}.{PROGRESS_TABLE}")
        if load:
            table.load(self.store)
        flow.tables.append(table)
        ups: dict[int, UpstreamState] = {}
        for rid in sorted(flow.upstream()):
            up = self.tables.get(rid) or self.views.get(rid)
            keys = list(up.mat.pk) if up is not None else None  # type: ignore[attr-defined]
            if keys is not None:  # a key Arrow cannot order: one slice, like a source
                schema = arrow_schema(self.catalog.relations[rid].fields)
                if not orderable([schema.field(i).type for i in keys]):
                    keys = None
            ups[rid] = UpstreamState(rid, keys)

        def step(d: dict[int, StreamChunk | None], f: ViewFlow | SinkFlow = flow) -> None:
            if isinstance(f, SinkFlow):
                f.step(d, self.epoch + 1)  # its output goes to the writer with this epoch
                return
            # parallel aggregations keep a slice's output in their actors until the
            # barrier's step; not while a checkpoint of the stepped epoch is pending (it
            # would commit the actors' state without the view's rows)
            with holding_outputs(f.nodes, on=self._commit_cut is None):
                f.step(d)

        job = BackfillJob(
            rel, ups, table, step, statement or rel.definition, background, rate_limit
        )
        parallel = int(rel.extra.get(PARALLELISM) or 1) > 1
        job.actors = parallel and bool(rel.extra.get(PARALLEL_NODES))  # backfill.STEP_ROWS
        if load:
            job.load()
        else:
            job.save()
        self.backfill.add(job)
        return job

    def is_source_upstream(self, rel_id: int) -> bool:
        """A SOURCE (no stored rows): a new dependent reads it once from the broker."""
        return rel_id in self.sources and rel_id not in self.tables and rel_id not in self.views

    def upstream_pin(self, rel_id: int) -> Pinned:
        """An upstream's rows now (a source: read up to the reader's position)."""
        return self.pin(rel_id)

    def finish_backfill(self, job: BackfillJob) -> None:
        """Every upstream is read: the job is created; commit (under the lock)."""
        rel = job.rel
        rel.extra.pop("creating", None)
        flow: Any = self.views.get(rel.id) or self.sinks.get(rel.id)
        if flow is not None and job.table in flow.tables:
            flow.tables.remove(job.table)
        rel.state_tables.pop(PROGRESS_TABLE, None)
        self._dropped.append(job.table)
        self._dirty_catalog = True
        log.info("backfill finished job=%s rows=%d", rel.name, job.rows_done())
        # this checkpoint already steps it as a created job (watermarks flow again)
        with self.backfill.finishing(rel.id):
            self.barrier(force=True)

    def cancel_job(self, rel_id: int) -> bool:
        """Drop a creating job (CANCEL JOBS, a cancelled CREATE): no catalog entry, no
        state left. False if no such job is creating."""
        with self.lock:
            job = self.backfill.jobs.get(rel_id)
            if job is None:
                return False
            log.info("backfill cancelled job=%s", job.rel.name)
            self.drop([job.rel])
            return True

    def drop(self, rels: list[Relation]) -> None:
        with self.lock:
            for rel in rels:
                flow: TableFlow | ViewFlow | SinkFlow | None = (
                    self.tables.pop(rel.id, None)
                    or self.views.pop(rel.id, None)
                    or self.sinks.pop(rel.id, None)
                )
                if isinstance(flow, SinkFlow):
                    flow.close()
                if flow is not None:
                    self._dropped.extend(flow.tables)
                self.watermarks.forget(rel.id)
                self.backfill.forget(rel.id)
                self.catalog.remove(rel.id)
                sf = self.sources.pop(rel.id, None)
                if sf is not None:
                    sf.stop(forget=True)
            for sf in self.sources.values():
                if sf.running and not needs_reader(sf.rel, self.catalog.dependents(sf.rel.id)):
                    sf.stop(forget=True)
            self._dirty_catalog = True
            self.barrier(force=True)
