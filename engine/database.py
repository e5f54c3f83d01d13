"""Open a Swell database: recover state, start the barrier loop, hand out sessions.

Recovery order (see also `engine.state.checkpoint`):
1. open RocksDB at `<data_dir>/state`; check its format version (`engine.state.format`:
   a newer or unmigratable directory is refused, naming both versions; an older one is
   migrated in one atomic write once the catalog is readable); open the WAL and the
   checkpointer;
2. `Runtime.recover` (the same code rolls a failed epoch back in process): load the
   last checkpoint's metadata: catalog (its credentials opened with the secret store
   key, engine/catalog/secret_box.py), epoch, WAL position, row-id counter;
3. rebuild every relation in creation order: tables get their MaterializeOp and rows
   back; materialized views and sinks are built from the stream plan stored in their
   catalog entry (`engine.stream.job_plan`) and their operators reload the state tables
   the plan names (directories of format version 1 had no stored plans: the format
   migration plans each job once from its SQL and stores the plan);
4. replay WAL records written after the checkpoint into the tables' pending DML, so
   acknowledged writes that missed the checkpoint are applied by the first barrier;
5. start the barrier thread;
6. with a remote state store (`Config.state_store`): before step 1, `engine.state.restore.
   prepare` restores an empty data directory from the store's newest manifest (or checks
   that a full one belongs to the store's history); after step 1 the local epoch is
   checked against the store; after step 5 the uploader (`engine.state.uploader`) starts.
   `close` stops the runtime (final checkpoint), then the uploader (a last upload).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import engine.catalog.state_store_status  # noqa: F401  (registers rw_state_store_status)
import engine.stream.parallel.introspect  # noqa: F401  (registers rw_fragments, rw_actors, ...)
from engine.catalog import Catalog, Relation, RelationKind
from engine.catalog.databases import DEFAULT_DATABASE, database_exists, in_database
from engine.catalog.privileges import require_connect
from engine.catalog.secret_box import KEY_ENV, KEY_FILE, SecretKeyError, open_secret_box
from engine.errors import InvalidCatalogName
from engine.plan.stream_lower import lower_stream_plan
from engine.plan.stream_plan import IdFn, StreamPlan
from engine.state import format as data_format
from engine.state import restore as remote_restore
from engine.state.budget import StateBudget
from engine.state.checkpoint import Checkpointer
from engine.state.disk_table import DiskTables, HotCache
from engine.state.s3 import ObjectStore, parse_store_url
from engine.state.store import StateStore
from engine.state.uploader import Uploader
from engine.state.wal import Wal
from engine.stream.runtime import Runtime
from engine.version import SERVER_VERSION as SERVER_VERSION  # re-exported
from engine.version import SWELL_VERSION

log = logging.getLogger("swell.database")

DATABASE_NAME = DEFAULT_DATABASE  # the default database (engine/catalog/databases.py)


@dataclass
class Config:
    data_dir: Path = Path("swell-data")
    barrier_interval_ms: int = 1000
    options: dict[str, Any] = field(default_factory=dict)
    state_store: str | None = None  # s3://bucket/prefix: checkpoints uploaded there
    upload_interval_s: float = 5.0
    keep_manifests: int = 3  # remote checkpoints retained by the garbage collector
    state_cache_mb: int | None = None
    """The state memory budget (`engine.state.budget`); None: derived from the machine."""
    parallelism: int = 1
    """Worker processes of parallel jobs and the default parallelism of new streaming
    jobs (`engine.stream.parallel`); 1: every job runs in this process."""
    max_heartbeat_interval_secs: float = 60.0
    """Seconds a parallel job's worker may take to answer before it is declared lost and
    the job recovers without it (RisingWave's meta setting of that name); 0: no limit."""
    worker_launcher: Any = None
    """A factory of the workers' `WorkerLauncher` (`engine.stream.parallel.transport`);
    None: child processes of this one."""


class SwellDatabase:
    """The engine instance behind every session (implements `engine.api.Database`)."""

    def __init__(self, config: Config) -> None:
        self.config = config
        data_dir = Path(config.data_dir)
        data_dir.mkdir(parents=True, exist_ok=True)
        self.data_dir = data_dir
        self.uploader: Uploader | None = None
        remote = prepared = None
        if config.state_store:
            remote = ObjectStore(parse_store_url(config.state_store))
            prepared = remote_restore.prepare(data_dir, remote, config.keep_manifests)
        self.budget = StateBudget.from_mb(config.state_cache_mb)
        self.store = StateStore.open(data_dir / "state", self.budget)
        try:
            version = data_format.check(self.store, data_dir)
        except BaseException:
            self.store.close()
            raise
        self.wal = Wal(self.store)
        self.checkpointer = Checkpointer(self.store, self.wal)
        try:
            if remote is not None and prepared is not None:
                remote_restore.check_local_epoch(
                    data_dir, self.checkpointer.last_epoch, prepared, str(remote.url)
                )
            stored = data_format.load_extras(self.checkpointer).get("catalog")
            # credentials in the catalog are sealed with this key (secret_box.py); a new
            # key file only for a catalog that holds no sealed value yet
            box = open_secret_box(data_dir, create=not (stored and Catalog.is_sealed_blob(stored)))
        except SecretKeyError as e:
            self.wal.close()
            self.store.close()
            if prepared is None or prepared.restored is None:
                raise
            raise SecretKeyError(
                e.message,
                detail=e.detail,
                hint=f"The data directory was restored from {config.state_store}, which never "
                f"holds the secret store key: set {KEY_ENV} to the key of the server that "
                f"uploaded it, or copy that server's {KEY_FILE} into {data_dir}.",
            ) from e
        except BaseException:
            self.wal.close()
            self.store.close()
            raise
        catalog = Catalog()  # filled in place by the recovery below
        catalog.box = box
        self.catalog = catalog
        self.runtime = Runtime(
            self.store, self.wal, self.checkpointer, catalog, config.barrier_interval_ms
        )
        self.runtime.data_dir = str(data_dir)
        self.runtime.parallelism = max(1, int(config.parallelism))
        self.runtime.worker_launcher = config.worker_launcher
        self.runtime.worker_timeout = float(config.max_heartbeat_interval_secs)
        self.runtime.disk_tables = DiskTables(
            self.store, HotCache(self.budget.operator_cache_bytes)
        )
        if version < data_format.FORMAT_VERSION:
            self._migrate(version)  # the runtime exists (planner use), nothing recovered yet
        # the same recovery rolls a failed epoch back in process (Runtime.recover)
        replayed = self.runtime.recover(self._plan_from_sql)
        log.info(
            "recovered epoch=%s relations=%s wal_records_replayed=%s data_dir=%s",
            self.runtime.epoch,
            len(catalog.relations),
            replayed,
            data_dir,
        )
        self._next_pid = 1000
        self._pid_lock = threading.Lock()
        self.sessions: dict[int, Any] = {}
        self.closed = False
        self.started_at = time.time()
        self.runtime.start()
        if remote is not None and prepared is not None:
            self.uploader = Uploader(
                store=self.store,
                runtime=self.runtime,
                data_dir=data_dir,
                remote=remote,
                lineage=prepared.lineage,
                manifests=prepared.manifests,
                uploaded_epoch=prepared.newest_epoch,
                interval_s=config.upload_interval_s,
                keep=config.keep_manifests,
                version=SWELL_VERSION,
            )
            self.uploader.start()

    def _migrate(self, version: int) -> None:
        """Bring an older data directory to `FORMAT_VERSION` (engine.state.format)."""
        extras = data_format.load_extras(self.checkpointer)
        if extras.get("catalog"):  # migrations may plan: the catalog must be readable
            self.catalog.replace_with(Catalog.from_bytes(extras["catalog"], self.catalog.box))
        ctx = data_format.MigrationContext(
            self.store, self.store.new_batch(), extras, self.data_dir, db=self
        )
        try:
            data_format.migrate(ctx, version)
        except BaseException:
            self.wal.close()
            self.store.close()
            raise
        for note in ctx.notes:
            log.info("data directory %s: %s", self.data_dir, note)

    def _plan_from_sql(self, rel: Relation, ids: IdFn) -> StreamPlan:
        """A job's stream plan from its SQL with state-table ids `ids`: only for the format
        migration that stores stream plans, and to compile calls a stored plan names but
        cannot look up by name (`engine.stream.job_plan`); jobs are otherwise never
        planned again."""
        from engine.handlers.ddl import plan_view_query

        with in_database(rel.database):
            logical = plan_view_query(self, rel.query, bool(rel.extra.get("emit_on_window_close")))
        sink = rel.kind in (RelationKind.SINK, RelationKind.SUBSCRIPTION)
        return lower_stream_plan(logical, ids, materialize=not sink)

    def connect(self, user: str, database: str, options: dict[str, str] | None = None) -> Any:
        from engine.session import SwellSession

        if not database_exists(self.catalog, database):
            raise InvalidCatalogName(f'database "{database}" does not exist')
        require_connect(self.catalog, user, database)  # 42501 without CONNECT
        with self._pid_lock:
            pid = self._next_pid + os.getpid() % 1000
            self._next_pid += 1
        s = SwellSession(self, user, database, pid, options or {})
        self.sessions[pid] = s
        return s

    def password_verifier(self, user: str) -> str | None:
        """The stored password verifier of `user` (None: trust); raises 28000 for an
        unknown user or one without LOGIN."""
        from engine.errors import InvalidAuthorization

        u = self.catalog.users.find(user)
        if u is None:
            raise InvalidAuthorization(f'role "{user}" does not exist')
        if not u.login:
            raise InvalidAuthorization(f'role "{user}" is not permitted to log in')
        return u.password

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.runtime.stop()
            if self.uploader is not None:
                self.uploader.stop(final=True)
        finally:
            self.wal.close()
            self.store.close()


def open_database(config: Config) -> SwellDatabase:
    return SwellDatabase(config)
