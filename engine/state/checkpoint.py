"""Checkpoints: one atomic RocksDB WriteBatch per epoch, and the metadata recovery starts from.

Checkpoint order (`Checkpointer.commit`), everything in ONE WriteBatch:

1. Wait until the WAL records the epoch consumed (seq <= wal_seq) are durable, so the
   truncation below never races the WAL writer and the checkpoint never covers a record
   that is not in the log yet.
2. Drops: `StateTable.drop(batch)` of every table whose owner was dropped this epoch
   (a delete_range over the table's 4-byte id prefix).
3. State: `StateTable.write_dirty(batch)` of every live table (puts and deletes of the
   keys changed since the previous checkpoint).
4. Metadata under `META_PREFIX`: the extras (catalog blob, source offsets, ...) replace the
   previous checkpoint's set (delete_range of the extras range, then one put per extra;
   operations in a batch apply in order), then the checkpoint record (epoch, wal_seq).
5. `Wal.truncate_through(wal_seq, batch)`: delete the WAL records now covered by state.
6. `store.write(batch, sync=True)`.

Why it is atomic: RocksDB applies a WriteBatch all-or-nothing, including after a crash
(the batch is one record in RocksDB's own log, fsynced by sync=True before `commit`
returns). So after any crash the store holds either the previous checkpoint with its WAL
records, or this checkpoint with those records removed: state, catalog, source offsets and
the WAL cut always agree.

Recovery order (the runtime, at startup):

1. `Checkpointer.load()` -> `CheckpointMeta` or None (fresh database);
2. rebuild the catalog from `meta.extra` and create the StateTables it names;
3. `StateTable.load(store)` for every table (prefix scan);
4. seek sources to the offsets in `meta.extra`;
5. replay `wal.records_after(meta.wal_seq)` (those records were acknowledged but not yet
   in a checkpoint) as the first epoch's input, then resume normal epochs.

If `commit` raises, the tables have already handed their dirty keys to the lost batch, so
in-memory state is ahead of the store: the Checkpointer refuses further commits until the
runtime has rebuilt its state from the store (`Runtime.recover`) and called `reset()`.

Fault points (`engine.faults`, for the crash tests): `checkpoint_batch` once the batch is
built, before it is written.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine import faults
from engine.latency import Histogram
from engine.state.codec import RESERVED_PREFIX
from engine.state.store import StorageError

if TYPE_CHECKING:
    from engine.state.store import StateStore
    from engine.state.table import StateTable
    from engine.state.wal import Wal

META_PREFIX = RESERVED_PREFIX + b"meta/"
CHECKPOINT_KEY = META_PREFIX + b"checkpoint"
"""Value: version byte 1, then epoch and wal_seq as 8-byte big-endian unsigned ints."""
EXTRA_PREFIX = META_PREFIX + b"x/"
EXTRA_END = META_PREFIX + b"x0"  # b"/" + 1

_FORMAT_VERSION = 1
_RECORD = struct.Struct(">BQQ")


@dataclass(frozen=True, slots=True)
class CheckpointMeta:
    """What a committed checkpoint covers: its epoch, its WAL cut and opaque extras."""

    epoch: int
    wal_seq: int
    """WAL records with seq <= wal_seq are reflected in the checkpointed state."""
    extra: dict[str, bytes] = field(default_factory=dict)


class Checkpointer:
    """Builds and writes checkpoints (see the module docstring); one per open store."""

    def __init__(self, store: StateStore, wal: Wal) -> None:
        self._store = store
        self._wal = wal
        self._failed: BaseException | None = None
        meta = self.load()
        self._last_epoch = meta.epoch if meta else -1
        self._last_wal_seq = meta.wal_seq if meta else 0
        # metrics
        self.commits = 0
        self.last_duration = 0.0
        self.duration_seconds = Histogram()  # every commit, WAL wait included (metrics)
        """Seconds the last commit took, including the WAL wait and the fsync."""
        self.last_write_duration = 0.0
        self.last_bytes = 0
        self.last_keys = 0
        self.total_bytes = 0

    @property
    def last_epoch(self) -> int:
        """Epoch of the newest committed checkpoint (-1: none)."""
        return self._last_epoch

    def commit(
        self,
        epoch: int,
        wal_seq: int,
        tables: Iterable[StateTable],
        extra: dict[str, bytes],
        dropped: Iterable[StateTable] = (),
    ) -> None:
        """Write one checkpoint atomically and durably; see the numbered order above."""
        if self._failed is not None:
            raise StorageError("an earlier checkpoint failed; the state must be recovered")
        if epoch < self._last_epoch:
            raise ValueError(f"checkpoint epoch {epoch} is before {self._last_epoch}")
        if wal_seq < self._last_wal_seq:
            raise ValueError(f"checkpoint WAL cut {wal_seq} is before {self._last_wal_seq}")
        t0 = time.perf_counter()
        if wal_seq > 0:
            self._wal.wait_durable(wal_seq)  # 1
        batch = self._store.new_batch()
        try:
            for t in dropped:  # 2
                t.drop(batch)
            keys = 0
            for t in tables:  # 3
                keys += t.write_dirty(batch)
            batch.delete_range(EXTRA_PREFIX, EXTRA_END)  # 4
            for name, blob in extra.items():
                batch.put(EXTRA_PREFIX + name.encode(), blob)
            batch.put(CHECKPOINT_KEY, _RECORD.pack(_FORMAT_VERSION, epoch, wal_seq))
            self._wal.truncate_through(wal_seq, batch)  # 5
            faults.hit("checkpoint_batch")
            t1 = time.perf_counter()
            size = self._store.write(batch, sync=True)  # 6
        except BaseException as e:
            self._failed = e
            raise
        t2 = time.perf_counter()
        self._last_epoch = epoch
        self._last_wal_seq = wal_seq
        self.commits += 1
        self.last_duration = t2 - t0
        self.duration_seconds.observe(self.last_duration)
        self.last_write_duration = t2 - t1
        self.last_bytes = size
        self.last_keys = keys
        self.total_bytes += size

    def reset(self) -> CheckpointMeta | None:
        """Forget an earlier failed commit and re-read what the store holds (the runtime
        calls it when it rebuilds its state from the store); returns that checkpoint."""
        meta = self.load()
        self._failed = None
        self._last_epoch = meta.epoch if meta else -1
        self._last_wal_seq = meta.wal_seq if meta else 0
        return meta

    def load(self) -> CheckpointMeta | None:
        """The newest committed checkpoint's metadata, or None for a fresh store."""
        raw = self._store.get(CHECKPOINT_KEY)
        if raw is None:
            return None
        if len(raw) != _RECORD.size or raw[0] != _FORMAT_VERSION:
            raise StorageError(
                "unrecognized checkpoint record in state store",
                detail=f"{len(raw)} bytes, format {raw[0] if raw else None}",
            )
        _, epoch, wal_seq = _RECORD.unpack(raw)
        plen = len(EXTRA_PREFIX)
        extra = {k[plen:].decode(): v for k, v in self._store.scan_range(EXTRA_PREFIX, EXTRA_END)}
        return CheckpointMeta(epoch, wal_seq, extra)

    def records_to_replay(self, meta: CheckpointMeta | None) -> Iterator[tuple[int, bytes]]:
        """The WAL records recovery must replay after loading `meta`'s state."""
        return self._wal.records_after(meta.wal_seq if meta is not None else 0)
