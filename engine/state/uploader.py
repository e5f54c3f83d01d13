"""The uploader: copies committed epochs to the remote state store, then collects garbage.

Why: the local data directory survives `kill -9` (RocksDB plus the WAL) but not the loss of
its disk; a copy on S3 survives both. RisingWave uploads every checkpoint to Hummock; Swell
uploads every `interval_s` seconds (and on FLUSH), at an epoch boundary.

One upload (`_upload_once`), on the uploader's own thread:
1. under the runtime's epoch lock (no epoch commits meanwhile; the lock is held only for
   RocksDB's checkpoint, which flushes the memtable and hard-links the SSTs): note the
   committed epoch and take a local snapshot (`engine.state.manifest.take_snapshot`);
2. without any lock: for every file of the snapshot, upload it unless an earlier upload
   already holds it (object keys carry the content hash; SSTs are immutable, so only the
   ones new since the last manifest go up; small files travel inside the manifest);
3. check that no other server wrote a manifest meanwhile (fencing), then write the epoch's
   manifest: the commit. Waiters (FLUSH) for that epoch or an older one are released;
4. garbage collection (state 'collecting'): keep the newest `keep` manifests, delete older
   manifests and then every object no retained manifest names (leftovers of interrupted
   uploads included);
5. delete the local snapshot.

Failures (S3 unreachable, slow, refusing): the step is abandoned and retried with backoff
(`RETRY_START_S` doubling to `RETRY_MAX_S`), from a fresh snapshot; objects already up are
kept and not sent again. Nothing on S3 is ever overwritten or deleted before a newer
manifest commits, so an outage cannot corrupt the store; reads, DML and epochs go on
(the lock is never held while talking to S3). `status()` feeds
`rw_catalog.rw_state_store_status`; the counters feed the Prometheus metrics.

Lifecycle: built by the database after recovery (`engine.state.restore.prepare` supplies
the lineage and what the store holds), `start()`; `wait_uploaded(epoch)` from FLUSH;
`stop()` at shutdown after the runtime's final checkpoint makes one last attempt when the
store is healthy, then ends the thread.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.errors import EngineError
from engine.latency import bulk_thread
from engine.state.manifest import (
    FILES_DIR,
    INLINE_BYTES,
    WRITER_CHARS,
    FileEntry,
    Manifest,
    file_key,
    list_manifests,
    manifest_key,
    manifest_name,
    new_id,
    parse_manifest_name,
    read_manifest,
    remove_tree,
    snapshot_files,
    take_snapshot,
)
from engine.state.s3 import ObjectStore
from engine.state.store import StateStore, StorageError

log = logging.getLogger("swell.state_store")

UPLOAD_TUNING = {
    # An upload flushes the memtable, so every interval adds one small L0 file. RocksDB's
    # defaults (compact at 4 L0 files; 64 MB files) then rewrite the whole bottom file every
    # few uploads, and every rewritten SST goes up again: at 1,000 rows/s, uploads every 5 s,
    # that was about 15x the state's size per 20 minutes. Compacting L0 at 20 files into
    # 4 MB files rewrites less, less often (about 3.7x fewer bytes up, bench/state_store_bench
    # and the architecture notes); reads check a few more small L0 files (bloom filters).
    "level0_file_num_compaction_trigger": "20",
    "level0_slowdown_writes_trigger": "48",
    "level0_stop_writes_trigger": "64",
    "target_file_size_base": str(4 << 20),
}
"""RocksDB options (mutable at run time) set while a remote store is in use."""

RETRY_START_S = 0.5
RETRY_MAX_S = 15.0
SNAPSHOT_DIR = "upload.tmp"


class Fenced(StorageError):
    """Another server wrote a manifest to this store: this one stops uploading."""


class Uploader:
    """Uploads committed epochs to one remote store; see the module docstring."""

    def __init__(
        self,
        *,
        store: StateStore,
        runtime: Any,
        data_dir: Path,
        remote: ObjectStore,
        lineage: str,
        manifests: dict[str, Manifest],
        uploaded_epoch: int,
        interval_s: float = 5.0,
        keep: int = 3,
        version: str = "",
    ) -> None:
        self.store = store
        store.db.set_options(UPLOAD_TUNING)
        self.runtime = runtime
        self.data_dir = data_dir
        self.remote = remote
        self.lineage = lineage
        self.writer = new_id()
        self.interval_s = max(float(interval_s), 0.05)
        self.keep = max(int(keep), 1)
        self.version = version
        self._manifests = dict(manifests)  # retained manifests we know (name -> manifest)
        self._attempts = 0
        self._known: set[str] = set()  # object keys on S3 that we may reuse
        for m in self._manifests.values():
            self._known |= m.object_keys()
        self._digests: dict[tuple[int, int, int, int], str] = {}
        self._cond = threading.Condition()
        self._stop = False
        self._want = -1
        self._thread: threading.Thread | None = None
        # status (rw_catalog.rw_state_store_status) and metrics
        self.state = "idle"
        self.uploaded_epoch = uploaded_epoch  # of the newest restorable manifest
        self.last_upload_at: float | None = None
        self.last_duration = 0.0
        self.last_objects = 0
        self.last_bytes = 0
        self.uploads = 0  # manifests written
        self.objects_uploaded = 0
        self.bytes_uploaded = 0
        self.objects_deleted = 0
        self.manifests_deleted = 0
        self.failures = 0
        self.consecutive_failures = 0
        self.last_error: str | None = None
        self.last_error_at: float | None = None
        self.retry_at: float | None = None
        newest = [m for m in self._manifests.values() if m.epoch == self.uploaded_epoch]
        self.remote_bytes = newest[-1].total_bytes if newest else 0

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="swell-upload", daemon=True)
        self._thread.start()

    def stop(self, final: bool = True) -> None:
        """End the thread; with `final`, first upload the last epoch if S3 is healthy."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=60)
        if final and self.consecutive_failures == 0 and self.state != "fenced":
            try:
                self._upload_once()
            except Exception as e:  # noqa: BLE001 - shutdown goes on; the local disk has it
                log.warning("final state store upload failed: %s", _describe(e))
        self.state = "stopped"
        with self._cond:
            self._cond.notify_all()

    def wait_uploaded(self, epoch: int, check: Callable[[], None] | None = None) -> int:
        """Block until a manifest of `epoch` or later is on S3 (FLUSH); returns its epoch.
        `check` runs every few hundred ms and may raise (statement cancel or timeout)."""
        with self._cond:
            self._want = max(self._want, epoch)
            self._cond.notify_all()
            while self.uploaded_epoch < epoch:
                if self.state in ("fenced", "stopped"):
                    raise StorageError(
                        f"the state store does not take uploads ({self.state})",
                        detail=self.last_error,
                    )
                self._cond.wait(0.25)
                if check is not None:
                    check()
            return self.uploaded_epoch

    # -- the loop ------------------------------------------------------------------------
    def _loop(self) -> None:
        bulk_thread()  # clients' answers run first after a wake-up (`engine.latency`)
        next_at = time.monotonic() + self.interval_s
        while True:
            with self._cond:
                while not self._stop:
                    t = time.monotonic()
                    if self.retry_at is not None and t < self.retry_at:
                        self._cond.wait(self.retry_at - t)
                        continue
                    if self._want > self.uploaded_epoch or t >= next_at:
                        break
                    self._cond.wait(next_at - t)
                if self._stop:
                    return
            next_at = time.monotonic() + self.interval_s
            try:
                self._upload_once()
            except Fenced as e:
                self._failed(e)
                log.error("state store uploads stopped: %s", _describe(e))
                with self._cond:
                    self.state = "fenced"
                    self._cond.notify_all()
                return
            except Exception as e:  # noqa: BLE001 - retried with backoff, reported
                self._failed(e)
            else:
                self.retry_at = None
                if self.consecutive_failures:
                    log.info(
                        "state store upload succeeded after %d failed attempt(s), epoch %d",
                        self.consecutive_failures,
                        self.uploaded_epoch,
                    )
                self.consecutive_failures = 0

    def _failed(self, e: BaseException) -> None:
        self.failures += 1
        self.consecutive_failures += 1
        self.last_error = _describe(e)
        self.last_error_at = time.time()
        delay = min(RETRY_START_S * 2 ** (self.consecutive_failures - 1), RETRY_MAX_S)
        self.retry_at = time.monotonic() + delay
        self.state = "retrying"
        level = logging.WARNING if self.consecutive_failures in (1, 5, 20) else logging.DEBUG
        if self.consecutive_failures % 100 == 0:
            level = logging.WARNING
        log.log(
            level,
            "state store upload failed (attempt %d, next in %.1fs): %s",
            self.consecutive_failures,
            delay,
            self.last_error,
        )

    # -- one upload ------------------------------------------------------------------------
    def _upload_once(self) -> None:
        snap = self.data_dir / SNAPSHOT_DIR
        remove_tree(snap)
        t0 = time.perf_counter()
        with self.runtime.lock:
            epoch = self.runtime.checkpointer.last_epoch
            if epoch <= self.uploaded_epoch:
                if self.state != "retrying":
                    self.state = "idle"
                return
            if self.state != "retrying":
                self.state = "uploading"
            take_snapshot(self.store, self.data_dir, snap)
        try:
            entries, objects, nbytes = self._upload_files(snap)
            names = list_manifests(self.remote)
            me = self.writer[:WRITER_CHARS]
            for n in names:
                parsed = parse_manifest_name(n)
                if parsed is not None and parsed[0] > self.uploaded_epoch and parsed[1] != me:
                    raise Fenced(
                        "another server writes to this state store",
                        detail=f"manifest {n} was not written by this server",
                        hint="Run one server per --state-store prefix.",
                    )
            m = Manifest(epoch, self.lineage, self.writer, time.time(), entries, self.version)
            self._attempts += 1
            name = manifest_name(epoch, self.writer, self._attempts)
            self.remote.put_bytes(manifest_key(name), m.to_bytes())  # the commit
            with self._cond:
                self._manifests[name] = m
                self.uploaded_epoch = epoch
                self.state = "collecting"
                self._cond.notify_all()
            self.uploads += 1
            self.last_upload_at = time.time()
            self.last_objects = objects
            self.last_bytes = nbytes
            self.remote_bytes = m.total_bytes
            self.last_duration = time.perf_counter() - t0
            log.debug(
                "state store upload epoch=%d objects=%d bytes=%d seconds=%.3f",
                epoch,
                objects,
                nbytes,
                self.last_duration,
            )
            try:
                self._collect(sorted({*names, name}))
            except Exception as e:  # noqa: BLE001 - the manifest is committed; retried next time
                log.warning("state store garbage collection failed: %s", _describe(e))
            self.state = "idle"
        finally:
            remove_tree(snap)

    def _upload_files(self, snap: Path) -> tuple[list[FileEntry], int, int]:
        entries: list[FileEntry] = []
        objects = nbytes = 0
        digests: dict[tuple[int, int, int, int], str] = {}
        for rel, path, st in snapshot_files(snap):
            if self._stop and threading.current_thread() is self._thread:
                raise StorageError("upload interrupted by shutdown")  # stop() retries once
            if st.st_size <= INLINE_BYTES:
                entries.append(FileEntry(rel, st.st_size, None, path.read_bytes()))
                continue
            ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
            digest = self._digests.get(ident)
            if digest is None:
                with open(path, "rb") as f:
                    digest = hashlib.file_digest(f, "sha256").hexdigest()
            digests[ident] = digest
            key = file_key(rel, digest)
            if key not in self._known:
                self.remote.put_file(key, path)
                self._known.add(key)
                objects += 1
                nbytes += st.st_size
                self.objects_uploaded += 1
                self.bytes_uploaded += st.st_size
            entries.append(FileEntry(rel, st.st_size, key))
        self._digests = digests  # only files still alive stay cached
        return entries, objects, nbytes

    def _collect(self, names: list[str]) -> None:
        """Keep the newest `keep` manifests and the objects they name; delete the rest."""
        retained = names[-self.keep :]
        dropped = names[: -self.keep] if len(names) > self.keep else []
        named: set[str] = set()
        for n in retained:
            m = self._manifests.get(n)
            if m is None:
                m = self._manifests[n] = read_manifest(self.remote, n)
            named |= m.object_keys()
        if dropped:  # manifests first: no manifest ever names a deleted object
            self.manifests_deleted += self.remote.delete_many(manifest_key(n) for n in dropped)
            for n in dropped:
                self._manifests.pop(n, None)
        garbage = [k for k, _ in self.remote.list(FILES_DIR) if k not in named]
        if garbage:
            self.objects_deleted += self.remote.delete_many(garbage)
        self._known = named

    # -- status -------------------------------------------------------------------------
    def status(self) -> dict[str, Any]:
        committed = self.runtime.checkpointer.last_epoch
        return {
            "url": str(self.remote.url),
            "state": self.state,
            "committed_epoch": committed,
            "uploaded_epoch": self.uploaded_epoch,
            "epochs_behind": max(committed - self.uploaded_epoch, 0),
            "last_upload_at": self.last_upload_at,
            "last_upload_seconds": self.last_duration,
            "last_upload_objects": self.last_objects,
            "last_upload_bytes": self.last_bytes,
            "uploads": self.uploads,
            "objects_uploaded": self.objects_uploaded,
            "bytes_uploaded": self.bytes_uploaded,
            "objects_deleted": self.objects_deleted,
            "manifests_retained": len(self._manifests),
            "remote_bytes": self.remote_bytes,
            "failures": self.failures,
            "consecutive_failures": self.consecutive_failures,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
        }


def _describe(e: BaseException) -> str:
    if isinstance(e, EngineError):
        return f"{e.message}: {e.detail}" if e.detail else e.message
    return f"{type(e).__name__}: {e}"
