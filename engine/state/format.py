"""The data directory's format version, and the migrations from older versions.

Every data directory records the on-disk format it was written in under `FORMAT_KEY` (a
4-byte big-endian unsigned int) in its state store. Directories written before the key
existed have no key but do have data: they are version 1 (`UNVERSIONED`). A store with no
keys at all is fresh and gets `FORMAT_VERSION`.

At open (`engine.database`, before any recovery reads the state):

1. `check(store, data_dir)` reads the version. Newer than `FORMAT_VERSION`: refused (this
   Swell does not know the layout). Older: every step `v -> v + 1` up to `FORMAT_VERSION`
   must have a registered migration, else refused. Both refusals name the directory's
   version and the versions this Swell reads (`DataFormatError`, raised before anything
   is written). A fresh store is stamped with `FORMAT_VERSION` there and then.
2. If the directory is older, the database prepares a `MigrationContext` (the last
   checkpoint's extras, the database object itself with its catalog loaded) and calls
   `migrate(ctx, from_version)`: each migration runs in order and writes into the one
   `ctx.batch`; then the changed extras and the new version are added to it and it is
   written with sync. So a crash during a migration leaves the old version and its data
   untouched, and the next start migrates again.

How to change the format (the one place to do it): bump `FORMAT_VERSION`, then register
the step from the previous version:

    @migration(1)          # 1 -> 2
    def _store_stream_plans(ctx: MigrationContext) -> None:
        ...                 # e.g. ctx.extras["catalog"] = new catalog bytes

A migration must be deterministic and only write through `ctx.batch` / `ctx.extras`.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.state.checkpoint import EXTRA_PREFIX, Checkpointer
from engine.state.codec import RESERVED_PREFIX
from engine.state.store import StorageError

if TYPE_CHECKING:
    from engine.state.store import StateStore, WriteBatchLike

FORMAT_VERSION = 11
"""The on-disk format this Swell writes. Bump it (and register a migration) on any change
of the key layout, the encodings or the meaning of stored catalog entries.

2: catalog entries of views and sinks carry their stream plan (the 1 -> 2 step is
`engine.stream.job_plan._store_stream_plans`).
3: aggregation group tables are RocksDB-first disk tables (`engine.state.disk_table`
layout: vnode, memcomparable keys; the 2 -> 3 step is
`engine.stream.job_plan._disk_group_tables`).
4: the rows of tables and materialized views (`mat.segments`, Arrow segment blobs) are
disk tables too (the 3 -> 4 step is `engine.stream.job_plan._disk_segment_tables`).
5: aggregation group rows may be fixed-width rows (`engine.state.fixed_rows`, first byte
0x02), which older versions cannot decode; marshal rows stay readable and are rewritten
when their group changes (the 4 -> 5 step, `engine.stream.job_plan._fixed_width_groups`,
rewrites nothing).
6: hash join sides (`n<i>.left` / `n<i>.right`) are disk tables keyed by join key
(`engine.stream.operators.keyed_join_side`); the 5 -> 6 step
(`engine.stream.job_plan._keyed_join_sides`) writes nothing: each side still in the
resident segment layout is converted when its job first loads it and rewritten at the
next checkpoint (a crash before that converts it again), so older Swells refuse the
directory from then on.
7: group rows of a numeric sum/avg keep three more slots (the counts of NaN, Infinity and
-Infinity values); the 6 -> 7 step (`engine.stream.job_plan._numeric_special_slots`)
writes nothing: the aggregation widens a row of the older layout as it reads it and
writes it back in the new one.
8: hash join side row blobs may be framed (several groups appended as bytes, first byte
0x00; `engine.stream.operators.row_blob`), which older versions cannot decode; the 7 -> 8
step (`engine.stream.job_plan._framed_join_rows`) writes nothing: single-group blobs of
the older layout stay readable as they are.
9: the rows of a retracting top-N (`n<i>.rows`) are a disk table keyed in window order
(group key, sort key bytes; `engine.stream.operators.top_n`); the 8 -> 9 step
(`engine.stream.job_plan._ordered_top_n_rows`) writes nothing: the operator converts a
table still in the segment (or per-row) layout on its first step and the next checkpoint
rewrites it. Window-function partitions (`n<i>.parts`) are a disk table too, their meta
row keeping the row count and a hash fingerprint (a table of the older layout is read
into the overlay once and rewritten at the next checkpoint).
10: an aggregation's group table may hold runs after its row range (key byte 0xFF after the
table id: blobs of many group rows, `engine.stream.operators.agg_columns`), which older
versions would take for a legacy layout; the 9 -> 10 step
(`engine.stream.job_plan._group_runs`) writes nothing.
11: a hash join side's (or append-only top-N's) one-row groups of a schema of integer and
float columns only may be fixed-width rows (`engine.state.fixed_rows`, first byte 0x02,
inside `engine.stream.operators.row_blob` blobs), which older versions cannot decode; the
10 -> 11 step (`engine.stream.job_plan._fixed_width_join_rows`) writes nothing: marshal
records of the older layout stay readable, also framed with the new rows."""
UNVERSIONED = 1
"""The version of a directory that has data but no `FORMAT_KEY` (written before it existed)."""
FORMAT_KEY = RESERVED_PREFIX + b"format"
_VERSION = struct.Struct(">I")


class DataFormatError(StorageError):
    """The data directory's format version is one this Swell cannot read or migrate."""


@dataclass
class MigrationContext:
    """What a migration may read and write (see the module docstring)."""

    store: StateStore
    batch: WriteBatchLike
    """Written atomically, with sync, together with the new version after the last step."""
    extras: dict[str, bytes]
    """The last checkpoint's extras (`catalog`, `runtime`, `source_offsets`, `sink.<id>`);
    entries a migration sets or changes are written back."""
    data_dir: Path
    db: Any = None
    """The database being opened (catalog loaded from `extras`, nothing recovered yet):
    for migrations that need the planner. None in the state layer's own tests."""
    notes: list[str] = field(default_factory=list)
    """One line per migration step, logged by the database."""


Migration = Callable[[MigrationContext], None]
MIGRATIONS: dict[int, Migration] = {}
"""from_version -> the migration to from_version + 1."""


def migration(from_version: int) -> Callable[[Migration], Migration]:
    """Register `fn` as the step from `from_version` to `from_version + 1`."""

    def register(fn: Migration) -> Migration:
        if from_version in MIGRATIONS:
            raise ValueError(f"a migration from format version {from_version} exists already")
        MIGRATIONS[from_version] = fn
        return fn

    return register


def stored_version(store: StateStore) -> int | None:
    """The directory's format version; None for a fresh (empty) store."""
    raw = store.get(FORMAT_KEY)
    if raw is not None:
        if len(raw) != _VERSION.size:
            raise DataFormatError("unrecognized format version record in the state store")
        return int(_VERSION.unpack(raw)[0])
    if store.last_key_in(b"", b"\xff" * 16) is None:
        return None
    return UNVERSIONED


def check(store: StateStore, data_dir: Path) -> int:
    """The directory's version, after refusing what cannot be read (module docstring, 1)."""
    current = FORMAT_VERSION
    found = stored_version(store)
    if found is None:  # fresh
        store.write(_stamp(store, current), sync=True)
        return current
    reads = f"format version {current}" + (
        f" (and migrates from {_oldest_migratable(current)})"
        if _oldest_migratable(current) < current
        else ""
    )
    if found > current:
        raise DataFormatError(
            f'data directory "{data_dir}" has format version {found}, newer than this Swell '
            f"reads: {reads}",
            hint="Start the Swell release that wrote it (or a newer one).",
        )
    missing = [v for v in range(found, current) if v not in MIGRATIONS]
    if missing:
        raise DataFormatError(
            f'data directory "{data_dir}" has format version {found}, which this Swell '
            f"({reads}) cannot migrate",
            detail=f"No migration from format version {missing[0]} to {missing[0] + 1}.",
            hint="Migrate it with an intermediate Swell release first.",
        )
    if found == current and store.get(FORMAT_KEY) is None:
        store.write(_stamp(store, current), sync=True)  # written before the key existed
    return found


def migrate(ctx: MigrationContext, from_version: int) -> int:
    """Run every step from `from_version` to `FORMAT_VERSION` and write the result
    atomically with the new version (module docstring, 2); returns the new version."""
    current = FORMAT_VERSION
    if from_version >= current:
        return from_version
    before = dict(ctx.extras)
    for v in range(from_version, current):
        MIGRATIONS[v](ctx)
        ctx.notes.append(f"migrated format version {v} -> {v + 1} ({MIGRATIONS[v].__name__})")
    for name, blob in ctx.extras.items():
        if before.get(name) != blob:
            ctx.batch.put(EXTRA_PREFIX + name.encode(), blob)
    ctx.batch.put(FORMAT_KEY, _VERSION.pack(current))
    ctx.store.write(ctx.batch, sync=True)
    return current


def load_extras(checkpointer: Checkpointer) -> dict[str, bytes]:
    """The last checkpoint's extras (empty without a checkpoint), for a MigrationContext."""
    meta = checkpointer.load()
    return dict(meta.extra) if meta is not None else {}


def _stamp(store: StateStore, version: int) -> WriteBatchLike:
    batch = store.new_batch()
    batch.put(FORMAT_KEY, _VERSION.pack(version))
    return batch


def _oldest_migratable(current: int) -> int:
    v = current
    while v - 1 in MIGRATIONS:
        v -= 1
    return v
