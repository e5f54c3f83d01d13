"""The remote state store's layout: per-epoch manifests naming uploaded files; local snapshots.

Layout under `s3://bucket/prefix/`:

| key                               | what                                              |
|-----------------------------------|---------------------------------------------------|
| `manifests/<epoch>-<writer>-<n>.json` | one committed checkpoint (JSON, below)        |
| `files/<path>.<sha256[:32]>`      | one immutable file of a checkpoint                |

A manifest lists every file of one local checkpoint with its path inside the data
directory (`state/000123.sst`, `state/MANIFEST-000005`, `sinks/7/staged/...arrow`), its
size and either the object key that holds it or, for files of at most `INLINE_BYTES`
(CURRENT, OPTIONS, an empty RocksDB log), the bytes themselves (base64). Object keys carry
the file's name and content hash: RocksDB never reuses an SST file number within one
history, so a key is written once and never changes meaning, and re-uploading after a
retry is idempotent. Writing the manifest is the commit: objects no manifest names are
garbage (an interrupted upload leaves some; the collector deletes them).

`lineage` is a random id born with a history (a fresh data directory) and kept by every
restore of it; a data directory records the store and lineage it belongs to in
`<data_dir>/state-store.json` (`LineageFile`), so a data directory is never mixed with
another history's store. `writer` is a random id per server start: the uploader refuses to
go on when a newer manifest it did not write appears (two servers on one prefix).

Manifest names (`manifest_name`: epoch in 20 digits, writer, attempt number) sort by epoch
and are never written twice: an attempt whose PUT timed out may still land later (a
stalled endpoint answers when it comes back), and must not replace a newer attempt's
manifest of the same epoch. Such a late manifest may name objects the collector already
deleted, so a restore takes the newest manifest whose objects all exist.

What a local snapshot holds (`take_snapshot`, called under the runtime's epoch lock so it
is exactly one committed epoch): a RocksDB checkpoint of `<data_dir>/state` (hard links to
the immutable SSTs, copies of MANIFEST/OPTIONS/CURRENT and the live RocksDB log: it holds
every table, view, source offset, sink state, the catalog with users and sealed secrets,
and the WAL of acknowledged writes) plus hard links to the files sinks keep under
`<data_dir>/sinks` (the Iceberg sink's staged Arrow files, which that checkpoint lists).
Deliberately not uploaded: `secret.key` (a store must not hold the key of the secrets it
holds), the built-in Iceberg catalog under `<data_dir>/iceberg` (table storage, not state;
ENGINE = iceberg tables that must outlive the disk need a connection to a real catalog),
logs.
"""

from __future__ import annotations

import base64
import errno
import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocksdict import Checkpoint

from engine.state.s3 import ObjectStore
from engine.state.store import StateStore, StorageError

MANIFEST_DIR = "manifests/"
FILES_DIR = "files/"
INLINE_BYTES = 16 << 10
WRITER_CHARS = 12
LINEAGE_FILE = "state-store.json"
SNAPSHOT_DIRS = ("state", "sinks")
"""What a snapshot (and so a restore) holds, by top-level entry of the data directory."""
_FORMAT = 1


@dataclass(frozen=True, slots=True)
class FileEntry:
    """One file of a checkpoint: where it goes and where its bytes are."""

    path: str  # relative to the data directory, '/'-separated
    size: int
    key: str | None = None  # object key under the store's prefix, or None when inline
    data: bytes | None = None


@dataclass(slots=True)
class Manifest:
    """One committed remote checkpoint (see the module docstring)."""

    epoch: int
    lineage: str
    writer: str
    created_at: float
    files: list[FileEntry] = field(default_factory=list)
    swell_version: str = ""

    def object_keys(self) -> set[str]:
        return {f.key for f in self.files if f.key is not None}

    @property
    def total_bytes(self) -> int:
        return sum(f.size for f in self.files)

    def to_bytes(self) -> bytes:
        files: list[dict[str, Any]] = []
        for f in self.files:
            d: dict[str, Any] = {"path": f.path, "size": f.size}
            if f.key is not None:
                d["key"] = f.key
            else:
                d["data"] = base64.b64encode(f.data or b"").decode()
            files.append(d)
        doc = {
            "format": _FORMAT,
            "epoch": self.epoch,
            "lineage": self.lineage,
            "writer": self.writer,
            "created_at": self.created_at,
            "swell_version": self.swell_version,
            "files": files,
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> Manifest:
        doc = json.loads(raw)
        if doc.get("format") != _FORMAT:
            raise StorageError(
                "unrecognized state store manifest",
                detail=f"format {doc.get('format')!r}, this Swell reads format {_FORMAT}",
            )
        files = [
            FileEntry(
                f["path"],
                int(f["size"]),
                f.get("key"),
                base64.b64decode(f["data"]) if "data" in f else None,
            )
            for f in doc["files"]
        ]
        for f in files:
            _check_rel_path(f.path)
        return cls(
            int(doc["epoch"]),
            str(doc["lineage"]),
            str(doc.get("writer", "")),
            float(doc.get("created_at", 0.0)),
            files,
            str(doc.get("swell_version", "")),
        )


def manifest_name(epoch: int, writer: str, attempt: int) -> str:
    """Names sort by epoch; each upload attempt writes its own name (never overwritten)."""
    return f"{epoch:020d}-{writer[:WRITER_CHARS]}-{attempt:06d}.json"


def parse_manifest_name(name: str) -> tuple[int, str] | None:
    """(epoch, writer prefix) of a manifest name, None for anything else."""
    parts = name.removesuffix(".json").split("-")
    if not name.endswith(".json") or len(parts) != 3 or not parts[0].isdigit():
        return None
    return int(parts[0]), parts[1]


def manifest_key(name: str) -> str:
    return MANIFEST_DIR + name


def file_key(path: str, digest: str) -> str:
    return f"{FILES_DIR}{path}.{digest[:32]}"


def list_manifests(remote: ObjectStore) -> list[str]:
    """Names of every manifest in the store, oldest epoch first (others ignored)."""
    names = [k[len(MANIFEST_DIR) :] for k, _ in remote.list(MANIFEST_DIR)]
    return sorted(n for n in names if parse_manifest_name(n) is not None)


def read_manifest(remote: ObjectStore, name: str) -> Manifest:
    try:
        return Manifest.from_bytes(remote.get_bytes(manifest_key(name)))
    except (ValueError, KeyError, TypeError) as e:
        raise StorageError(f"state store manifest {name} is unreadable", detail=str(e)) from e


def new_id() -> str:
    return uuid.uuid4().hex


# -- the data directory's side --------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class LineageFile:
    """`<data_dir>/state-store.json`: which store and history this data directory is part of."""

    store: str
    lineage: str

    @staticmethod
    def read(data_dir: Path) -> LineageFile | None:
        try:
            doc = json.loads((data_dir / LINEAGE_FILE).read_text())
        except FileNotFoundError:
            return None
        except ValueError as e:
            raise StorageError(f"{data_dir / LINEAGE_FILE} is unreadable", detail=str(e)) from e
        return LineageFile(str(doc["store"]), str(doc["lineage"]))

    def write(self, data_dir: Path) -> None:
        tmp = data_dir / (LINEAGE_FILE + ".tmp")
        with open(tmp, "w") as f:
            json.dump({"store": self.store, "lineage": self.lineage}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, data_dir / LINEAGE_FILE)


def has_local_state(data_dir: Path) -> bool:
    """True when the data directory holds a RocksDB database (what a restore would replace)."""
    return (data_dir / "state" / "CURRENT").exists()


def take_snapshot(store: StateStore, data_dir: Path, dest: Path) -> None:
    """A local snapshot of one committed epoch at `dest` (must not exist); the caller holds
    the runtime's epoch lock so no epoch commits meanwhile (see the module docstring)."""
    dest.mkdir(parents=True)
    try:
        Checkpoint(store.db).create_checkpoint(str(dest / "state"))
    except Exception as e:  # rocksdict raises plain exceptions
        raise StorageError("could not take a RocksDB checkpoint", detail=str(e)) from e
    sinks = data_dir / "sinks"
    for root, _dirs, files in os.walk(sinks):
        rel = Path(root).relative_to(data_dir)
        (dest / rel).mkdir(parents=True, exist_ok=True)
        for name in files:
            if name.endswith(".tmp"):
                continue
            try:
                os.link(Path(root) / name, dest / rel / name)
            except FileNotFoundError:  # deleted meanwhile (committed to its sink)
                continue
            except OSError as e:
                if e.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK):
                    raise
                shutil.copy2(Path(root) / name, dest / rel / name)


def snapshot_files(dest: Path) -> list[tuple[str, Path, os.stat_result]]:
    """(path relative to the snapshot, absolute path, stat) of every file, sorted."""
    out = []
    for root, _dirs, files in os.walk(dest):
        for name in files:
            p = Path(root) / name
            out.append((p.relative_to(dest).as_posix(), p, p.stat()))
    out.sort(key=lambda t: t[0])
    return out


def remove_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


def _check_rel_path(path: str) -> None:
    """A manifest may only name files inside the snapshot directories (no '..', no root)."""
    parts = path.split("/")
    if not parts or parts[0] not in SNAPSHOT_DIRS or any(p in ("", ".", "..") for p in parts):
        raise StorageError(f"state store manifest names an unexpected path {path!r}")


def now() -> float:
    return time.time()
