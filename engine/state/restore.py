"""Startup with a remote state store: restore an empty data directory, or check a full one.

`prepare(data_dir, remote)` runs before the database opens RocksDB:

* **empty data directory** (no `state/CURRENT`) and a store with manifests: download the
  newest readable manifest's files into `<data_dir>/restore.tmp`, checking each size, with
  progress lines in the log (files, MB, MB/s, at most one a second), then move `sinks` and,
  last, `state` into place. An interrupted restore leaves no `state/CURRENT`, so the next
  start simply restores again. The restored directory then recovers like any other:
  catalog (tables, views, sources, sinks, users, sealed secrets), state, source offsets
  (Kafka resumes from them), sinks' staged files (the Iceberg sink commits exactly once),
  and the acknowledged writes the snapshot's WAL holds.
* **empty data directory and an empty store**: a new history (a new lineage id).
* **data directory with state** (the choice, and why): the local copy wins when it belongs
  to the store's history (same lineage in `<data_dir>/state-store.json`) and is not older
  than the newest manifest, the normal restart: the local directory is that manifest's
  epoch or newer, and it holds writes acknowledged since the last upload that the store
  does not. A local directory of another history, or one older than the store (another
  server went on from it), is refused with what to do, rather than silently discarding
  either side. The epoch comparison happens after the open (`check_local_epoch`).

The secret store key is never in the store: a restore needs the same
`SWELL_SECRET_STORE_PRIVATE_KEY_HEX` (or a copy of the old `secret.key`); without it the
database refuses to open the catalog and says so (engine/catalog/secret_box.py).
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from engine.state.manifest import (
    FILES_DIR,
    SNAPSHOT_DIRS,
    LineageFile,
    Manifest,
    has_local_state,
    list_manifests,
    new_id,
    read_manifest,
    remove_tree,
)
from engine.state.s3 import ObjectStore
from engine.state.store import StorageError

log = logging.getLogger("swell.state_store")

RESTORE_DIR = "restore.tmp"
PROGRESS_EVERY_S = 1.0


@dataclass
class Prepared:
    """What the uploader starts from."""

    lineage: str
    manifests: dict[str, Manifest] = field(default_factory=dict)  # the retained ones, by name
    restored: Manifest | None = None  # the manifest an empty data directory came from
    newest: Manifest | None = None  # the newest manifest whose objects all exist

    @property
    def newest_epoch(self) -> int:
        return self.newest.epoch if self.newest is not None else -1


def prepare(data_dir: Path, remote: ObjectStore, keep: int) -> Prepared:
    """Restore or check the data directory against the store (see the module docstring)."""
    manifests: dict[str, Manifest] = {}
    for name in list_manifests(remote)[-keep:]:
        try:
            manifests[name] = read_manifest(remote, name)
        except StorageError as exc:  # a damaged manifest: older ones still restore
            log.warning("state store manifest skipped: %s (%s)", exc.message, exc.detail)
    newest = _restorable(remote, manifests)
    local = LineageFile.read(data_dir)
    url = str(remote.url)
    if not has_local_state(data_dir):
        if newest is None:
            lineage = new_id()
            LineageFile(url, lineage).write(data_dir)
            log.info("state store %s is empty: a new history starts here", url)
            return Prepared(lineage)
        restore(data_dir, remote, newest)
        LineageFile(url, newest.lineage).write(data_dir)
        return Prepared(newest.lineage, manifests, newest, newest)
    if newest is None:
        lineage = local.lineage if local is not None else new_id()
        LineageFile(url, lineage).write(data_dir)
        log.info("state store %s is empty: the data directory will be uploaded", url)
        return Prepared(lineage)
    if local is None or local.lineage != newest.lineage:
        whose = "was never uploaded there" if local is None else f"belongs to {local.store}"
        raise StorageError(
            f'data directory "{data_dir}" and state store {url} hold different histories',
            detail=f"The store's newest checkpoint is epoch {newest.epoch} of another "
            f"data directory; this one {whose}.",
            hint="Start with an empty --data-dir to restore from the store, or use another "
            "--state-store prefix for this data directory.",
        )
    return Prepared(local.lineage, manifests, None, newest)


def _restorable(remote: ObjectStore, manifests: dict[str, Manifest]) -> Manifest | None:
    """The newest manifest whose objects are all in the store (see engine.state.manifest)."""
    if not manifests:
        return None
    present = {k for k, _ in remote.list(FILES_DIR)}
    for name in sorted(manifests, reverse=True):
        m = manifests[name]
        missing = m.object_keys() - present
        if not missing:
            return m
        log.warning(
            "state store manifest %s skipped: %d of its objects are missing", name, len(missing)
        )
    return None


def check_local_epoch(data_dir: Path, local_epoch: int, prepared: Prepared, url: str) -> None:
    """Refuse a local directory older than the store's newest manifest (after the open)."""
    if prepared.restored is None and local_epoch < prepared.newest_epoch:
        raise StorageError(
            f'data directory "{data_dir}" is at epoch {local_epoch}, older than the newest '
            f"checkpoint in state store {url} (epoch {prepared.newest_epoch})",
            detail="Another server went on from this history after this data directory.",
            hint="Move this data directory away and start with an empty --data-dir to "
            "restore the store's newest checkpoint.",
        )
    log.info(
        "state store %s: %s",
        url,
        f"restored epoch {local_epoch}"
        if prepared.restored is not None
        else f"the local data directory (epoch {local_epoch}) is used; the store holds "
        f"epoch {prepared.newest_epoch}",
    )


def restore(data_dir: Path, remote: ObjectStore, m: Manifest) -> None:
    """Download `m`'s files into an empty data directory (see the module docstring)."""
    tmp = data_dir / RESTORE_DIR
    remove_tree(tmp)
    tmp.mkdir(parents=True)
    total = m.total_bytes
    log.info(
        "restoring from state store %s: epoch %d, %d files, %.1f MB",
        remote.url,
        m.epoch,
        len(m.files),
        total / 1e6,
    )
    t0 = last = time.monotonic()
    done = 0
    for i, f in enumerate(m.files, 1):
        dest = tmp / f.path
        dest.parent.mkdir(parents=True, exist_ok=True)
        if f.key is None:
            dest.write_bytes(f.data or b"")
        else:
            base = done

            def progress(n: int, _i: int = i) -> None:
                nonlocal done, last
                done += n
                t = time.monotonic()
                if t - last >= PROGRESS_EVERY_S:
                    last = t
                    _progress(_i, len(m.files), done, total, t - t0)

            remote.download_file(f.key, dest, progress)
            done = base + f.size
        got = dest.stat().st_size
        if got != f.size:
            raise StorageError(
                f"state store object {f.path} has {got} bytes, the manifest says {f.size}",
                hint="The store is damaged; an older manifest may still restore.",
            )
    _fsync_tree(tmp)
    for name in SNAPSHOT_DIRS[::-1]:  # `state` last: its CURRENT marks a finished restore
        src = tmp / name
        if not src.exists():
            continue
        remove_tree(data_dir / name)
        os.replace(src, data_dir / name)
    remove_tree(tmp)
    elapsed = time.monotonic() - t0
    _progress(len(m.files), len(m.files), total, total, elapsed)
    log.info("restore finished: epoch %d in %.1fs", m.epoch, elapsed)


def _progress(i: int, n: int, done: int, total: int, elapsed: float) -> None:
    rate = done / 1e6 / elapsed if elapsed > 0 else 0.0
    log.info(
        "restore progress: file %d/%d, %.1f/%.1f MB (%.0f%%), %.1f MB/s",
        i,
        n,
        done / 1e6,
        total / 1e6,
        100.0 * done / total if total else 100.0,
        rate,
    )


def _fsync_tree(root: Path) -> None:
    for d, _dirs, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(d, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
