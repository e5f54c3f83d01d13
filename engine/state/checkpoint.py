"""Checkpoints: one atomic commit per epoch, and the metadata recovery starts from.

Checkpoint order (`Checkpointer.commit`):

1. Wait until the WAL records the epoch consumed (seq <= wal_seq) are durable, so the
   truncation below never races the WAL writer and the checkpoint never covers a record
   that is not in the log yet.
2. Drops: `StateTable.drop(batch)` of every table whose owner was dropped this epoch
   (a delete_range over the table's 4-byte id prefix).
3. State: `StateTable.write_dirty(batch)` of every live table (puts and deletes of the
   keys changed since the previous checkpoint). `batch` here is an `EpochChanges`: it
   only records the operations, in order.
4. Metadata under `META_PREFIX`: the extras (catalog blob, source offsets, ...) replace the
   previous checkpoint's set (delete_range of the extras range, then one put per extra;
   operations in a batch apply in order), then the checkpoint record (epoch, wal_seq).
5. `Wal.truncate_through(wal_seq, batch)`: delete the WAL records now covered by state.
6. Written durably, in one of two ways:
   * small changes (at most `PIECE_OPS` operations and `PIECE_BYTES` bytes): steps 2-5 in
     ONE WriteBatch, `store.write(batch, sync=True)`;
   * larger ones: the changes are cut into pieces of that size, each piece is staged as
     an immutable blob under `STAGE_PREFIX` (marshal of its keys and values, written in
     parts of at most `PIECE_BYTES`, several small writes, no sync); then ONE small
     WriteBatch holds steps 4-5 and `PENDING_KEY` (how many pieces), written with
     sync=True: that is the commit; then each piece is written to its real keys as a
     WriteBatch of its own, and a last batch deletes the staged blobs and `PENDING_KEY`.

Files (`EpochChanges.sst`): a parallel job's workers hand in their actors' writes as
SST files (sorted keys, `engine.stream.parallel`), which step 6 adds to the database
with `StateStore.ingest` instead of one Python put per key. Each is written to
`<store path>.ingest/` and fsynced before the commit batch, which names them under
`INGEST_KEY`; after the commit (and after the pieces, so a file's writes come after the
batch's, as its place in the epoch's operations says) they are ingested, and the batch
that clears the pieces deletes `INGEST_KEY`. Recovery ingests the named files again
after the pieces (the same writes, newer again: nothing else writes an actor's keys
meanwhile) and removes files nothing names (a crash before the commit batch).

The checkpoint writes such files itself for an epoch's large values (`split_bulk`:
puts of at least `BULK_VALUE` bytes adding up to `BULK_BYTES`, e.g. the Arrow segments
of a table a COPY filled, an aggregation's runs): their keys' last operations, sorted,
go into `<epoch>-bulkNNNN.sst`, one uncompressed file per table, staged and named with
the others, and the rest of the epoch's operations stay in the batch or its pieces.
Through the batch each byte of such a value was written four times (its staged piece
and its key, each to RocksDB's log and memtable) and then flushed; the file writes it
once (lz4 doubled that cost). One file per table: an append-only table's new segments
then overlap no other file and land in RocksDB's last level, never compacted. A key a
later range delete covers stays in the batch. The ingestion moves a hard link of the
staged file in (no copy; the staged name stays for recovery until the pieces are
cleared); it holds the interpreter lock for its MANIFEST write, 5 to 20 ms measured.

Why pieces: rocksdict holds the interpreter lock for the whole of a `db.write` (about 1 to
2 ms per MB or per 4k keys on an idle machine, more when RocksDB stalls the write for a
memtable flush), so one WriteBatch of a 1M-row epoch stopped every session's thread for
hundreds of ms. Between pieces the lock is free for a moment and the sessions answer.

Why it is atomic: RocksDB applies a WriteBatch all-or-nothing, including after a crash
(the batch is one record in RocksDB's own log, fsynced by sync=True before `commit`
returns). The commit batch is the single point: before it lands, the store holds the
previous checkpoint, its WAL records and perhaps staged blobs nothing references (removed
at the next open); after it, the new checkpoint's metadata and WAL cut with `PENDING_KEY`
naming staged pieces that hold every change. Recovery (`Checkpointer.__init__`, `reset`)
first writes the pieces named by `PENDING_KEY` to their keys again (puts, deletes and range
deletes in their order, so writing a piece twice gives the same result; nothing else
writes state keys meanwhile) and then clears them. So after any crash the store holds
either the previous checkpoint with its WAL records, or this checkpoint with those records
removed: state, catalog, source offsets and the WAL cut always agree.

Recovery order (the runtime, at startup):

1. `Checkpointer(store, wal)` finishes a checkpoint whose pieces were not all written;
   `Checkpointer.load()` -> `CheckpointMeta` or None (fresh database);
2. rebuild the catalog from `meta.extra` and create the StateTables it names;
3. `StateTable.load(store)` for every table (prefix scan);
4. seek sources to the offsets in `meta.extra`;
5. replay `wal.records_after(meta.wal_seq)` (those records were acknowledged but not yet
   in a checkpoint) as the first epoch's input, then resume normal epochs.

If `commit` raises, the tables have already handed their dirty keys to the lost batch, so
in-memory state is ahead of the store: the Checkpointer refuses further commits until the
runtime has rebuilt its state from the store (`Runtime.recover`) and called `reset()`
(which also finishes the pieces of a commit that failed after its commit batch landed:
that epoch is then the recovered checkpoint).

Fault points (`engine.faults`, for the crash tests): `checkpoint_batch` once the batch is
built, before it is written; `checkpoint_pieces` after the commit batch of a checkpoint
written in pieces, before its pieces are written to their keys.
"""

from __future__ import annotations

import marshal
import os
import struct
import time
from array import array
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from itertools import compress, repeat
from operator import is_not, itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from engine import faults
from engine.latency import Histogram
from engine.state.codec import RESERVED_PREFIX
from engine.state.store import StorageError, sst_writer

if TYPE_CHECKING:
    from engine.state.store import StateStore, WriteBatchLike
    from engine.state.table import StateTable
    from engine.state.wal import Wal

META_PREFIX = RESERVED_PREFIX + b"meta/"
CHECKPOINT_KEY = META_PREFIX + b"checkpoint"
"""Value: version byte 1, then epoch and wal_seq as 8-byte big-endian unsigned ints."""
EXTRA_PREFIX = META_PREFIX + b"x/"
EXTRA_END = META_PREFIX + b"x0"  # b"/" + 1

STAGE_PREFIX = META_PREFIX + b"s/"
"""Staged pieces of a checkpoint being written: `STAGE_PREFIX | piece (4 bytes BE) | part
(4 bytes BE)` -> part of `marshal.dumps((keys, values))` (module docstring)."""
STAGE_END = META_PREFIX + b"s0"  # b"/" + 1
PENDING_KEY = META_PREFIX + b"pending"
"""Present while a committed checkpoint's pieces are not all written: 4-byte BE count."""
INGEST_KEY = META_PREFIX + b"ingest"
"""Present while a committed checkpoint's SST files are not all ingested: marshal of
their names in the ingest directory (module docstring)."""
PIECE_OPS = 1024
PIECE_BYTES = 1 << 18
"""A checkpoint larger than this (operations, bytes of values) is written in pieces of at
most this size (module docstring): each is one `db.write` of under a millisecond on an idle
machine (1 MB pieces held the interpreter lock for 2 ms idle, 6-8 ms on a loaded one)."""

BULK_VALUE = 1 << 16
BULK_BYTES = 1 << 20
"""An epoch whose puts of at least `BULK_VALUE` bytes (a table's Arrow segments: a COPY's
rows) add up to `BULK_BYTES` writes those keys as an SST file of its own (`split_bulk`,
module docstring) instead of through the commit batch or its pieces."""

_FORMAT_VERSION = 1
_RECORD = struct.Struct(">BQQ")
_U32 = struct.Struct(">I")


class EpochChanges:
    """The operations of one checkpoint, recorded in order (a `WriteBatchLike`).

    A value is the bytes of a put, None for a delete, or `(end,)` for a range delete
    starting at the key: the form a staged piece keeps (marshal reads it back as is).
    `sizes` holds each operation's value bytes (0 for deletes), for `pieces`."""

    __slots__ = ("keys", "values", "nbytes", "sizes", "ssts")

    def __init__(self) -> None:
        self.keys: list[bytes] = []
        self.values: list[bytes | tuple[bytes] | None] = []
        self.nbytes = 0
        self.sizes = array("q")
        self.ssts: list[bytes] = []

    def sst(self, data: bytes) -> None:
        """The bytes of an SST file (`store.sst_writer`) whose writes come after every
        operation recorded so far and before none recorded later that touches its keys
        (the checkpoint ingests it after writing the operations)."""
        self.ssts.append(data)

    def put(self, key: bytes, value: bytes) -> None:
        self.keys.append(key)
        self.values.append(value)
        self.sizes.append(len(value))
        self.nbytes += len(value)

    def put_many(self, keys: list[bytes], values: list[bytes]) -> None:
        """Puts of `keys[i]` -> `values[i]` in that order (a table's changed rows at C
        speed: no Python call per row)."""
        self.keys.extend(keys)
        self.values.extend(values)
        n = len(self.sizes)
        self.sizes.extend(map(len, values))
        self.nbytes += sum(memoryview(self.sizes)[n:])

    def delete(self, key: bytes) -> None:
        self.keys.append(key)
        self.values.append(None)
        self.sizes.append(0)

    def delete_range(self, begin: bytes, end: bytes) -> None:
        self.keys.append(begin)
        self.values.append((end,))
        self.sizes.append(0)

    def __len__(self) -> int:
        return len(self.keys)

    def pieces(self) -> list[tuple[int, int]]:
        """[start, end) ranges of at most `PIECE_OPS` operations and about `PIECE_BYTES`."""
        n = len(self.keys)
        if n <= PIECE_OPS and self.nbytes <= PIECE_BYTES:
            return [(0, n)] if n else []
        # a piece ends at the first operation past PIECE_OPS ones, or after the one whose
        # value brought its bytes to PIECE_BYTES: found with the running byte total
        sizes = np.frombuffer(self.sizes, np.int64)
        total = np.concatenate([[0], np.cumsum(sizes)])
        out: list[tuple[int, int]] = []
        start = 0
        while True:
            by_bytes = int(np.searchsorted(total, total[start] + PIECE_BYTES, "left"))
            end = min(start + PIECE_OPS, max(by_bytes, start + 1))
            if end >= n:
                out.append((start, n))
                return out
            out.append((start, end))
            start = end


def split_bulk(
    changes: EpochChanges,
) -> tuple[EpochChanges, list[tuple[bytes, bytes | None]]] | None:
    """The epoch's large values apart (module docstring, "Files"): None when its puts of
    `BULK_VALUE` bytes or more that can move add up to less than `BULK_BYTES`. Else the
    operations on other keys, in order, and for every key with such a put its last
    operation (a value, or None for a delete), sorted by key: what the files hold,
    applied after the batch. A key moves unless a range delete after its last operation
    covers it (the batch applies range deletes first, so the file's operation must be
    the key's last word); a range delete before it is overwritten by the file as it was
    by the operation. So applying the rest, then the file, gives the epoch's result."""
    sizes = np.frombuffer(changes.sizes, np.int64)
    big = np.flatnonzero(sizes >= BULK_VALUE)
    if not len(big) or int(sizes[big].sum()) < BULK_BYTES:
        return None
    keys, values = changes.keys, changes.values
    moved = set(map(keys.__getitem__, big.tolist()))
    not_put = map(is_not, map(type, values), repeat(bytes))
    ranges = [
        (i, v[0]) for i in compress(range(len(keys)), not_put) if type(v := values[i]) is tuple
    ]
    in_file = list(map(moved.__contains__, keys))
    for j, _ in ranges:  # a range delete starting at a moved key stays in the batch
        in_file[j] = False
    at = list(compress(range(len(keys)), in_file))  # a few large values
    if ranges:
        last_at = {keys[i]: i for i in at}
        covered = {
            k for k, i in last_at.items() if any(j > i and keys[j] <= k < e for j, e in ranges)
        }
        if covered:
            at = [i for i in at if keys[i] not in covered]
    last: dict[bytes, bytes | None] = {}
    for i in at:
        last[keys[i]] = values[i]  # type: ignore[assignment]  # a moved key: bytes or None
    moved_bytes = int(sizes[at].sum()) if at else 0
    if moved_bytes < BULK_BYTES:
        return None
    stay = np.ones(len(keys), bool)
    stay[at] = False
    flags = stay.tolist()
    rest = EpochChanges()
    rest.keys = list(compress(keys, flags))
    rest.values = list(compress(values, flags))
    kept = sizes[stay]
    rest.sizes = array("q", kept.tobytes())
    rest.nbytes = int(kept.sum())
    rest.ssts = changes.ssts
    return rest, sorted(last.items(), key=itemgetter(0))


def _unlink_stale(path: Path) -> None:
    """Remove a staged file's name before writing it again: an ingested file shares its
    inode with a live SST file of the database (hard link), so writing through an old
    name (truncating it) would change the database's file under it."""
    path.unlink(missing_ok=True)


def _fill(batch: WriteBatchLike, keys: list[bytes], values: list[Any]) -> None:
    """Replay recorded operations (`EpochChanges`) into a WriteBatch: runs of puts (a
    table's rows) at C speed, deletes and range deletes one by one, all in order."""
    put, delete, delete_range = batch.put, batch.delete, batch.delete_range
    n = len(keys)
    if len(values) != n:
        raise ValueError("keys and values differ in length")
    other = list(compress(range(n), map(is_not, map(type, values), repeat(bytes))))
    start = 0
    for i in other:
        if i > start:
            deque(map(put, keys[start:i], values[start:i]), 0)
        v = values[i]
        if v is None:
            delete(keys[i])
        elif v.__class__ is tuple:
            delete_range(keys[i], v[0])
        else:
            put(keys[i], v)
        start = i + 1
    if start < n:
        deque(map(put, keys[start:], values[start:]), 0)


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
        self._ingest_dir = Path(str(store.path) + ".ingest")
        self._finish_pieces()
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
        changes = EpochChanges()
        try:
            for t in dropped:  # 2
                t.drop(changes)
            keys = 0
            for t in tables:  # 3
                keys += t.write_dirty(changes)
            meta = EpochChanges()
            meta.delete_range(EXTRA_PREFIX, EXTRA_END)  # 4
            for name, blob in extra.items():
                meta.put(EXTRA_PREFIX + name.encode(), blob)
            meta.put(CHECKPOINT_KEY, _RECORD.pack(_FORMAT_VERSION, epoch, wal_seq))
            self._wal.truncate_through(wal_seq, meta)  # 5
            bulk = split_bulk(changes)
            own: list[tuple[bytes, bytes | None]] = []
            if bulk is not None:
                changes, own = bulk
            files, file_bytes = self._stage_files(epoch, own, changes.ssts)
            if files:
                meta.put(INGEST_KEY, marshal.dumps(files))
            faults.hit("checkpoint_batch")
            t1 = time.perf_counter()
            pieces = changes.pieces()
            if len(pieces) <= 1:  # 6: one batch
                batch = self._store.new_batch()
                _fill(batch, changes.keys, changes.values)
                _fill(batch, meta.keys, meta.values)
                size = self._store.write(batch, sync=True)
                if files:
                    faults.hit("checkpoint_pieces")
                    self._ingest(files)
                    self._clear_pieces()
            else:
                size = self._write_pieces(changes, pieces, meta, files)
            size += file_bytes
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

    def _stage_files(
        self, epoch: int, own: list[tuple[bytes, bytes | None]], ssts: list[bytes]
    ) -> tuple[list[str], int]:
        """The epoch's SST files written and fsynced into the ingest directory (before
        the commit batch names them): first the file of `own` (`split_bulk`'s sorted
        keys), then the files handed in; returns their names and bytes."""
        if not ssts and not own:
            return [], 0
        d = self._ingest_dir
        d.mkdir(exist_ok=True)
        names: list[str] = []
        size = sum(map(len, ssts))
        # a file per table (the 4-byte prefix): a table whose large values are new keys
        # (an append-only table's segments) then overlaps no other file and lands in the
        # last level, never compacted. Uncompressed: lz4 doubled the cost of the file.
        cuts = [0, *(i for i in range(1, len(own)) if own[i][0][:4] != own[i - 1][0][:4])]
        for j, (a, b) in enumerate(zip(cuts, [*cuts[1:], len(own)], strict=True) if own else ()):
            name = f"{epoch:016x}-bulk{j:04d}.sst"
            _unlink_stale(d / name)
            w = sst_writer(str(d / name), compress=False)
            for k, v in own[a:b]:
                if v is None:
                    del w[k]
                else:
                    w[k] = v
            w.finish()
            fd = os.open(d / name, os.O_RDONLY)
            try:
                os.fsync(fd)
                size += os.fstat(fd).st_size
            finally:
                os.close(fd)
            names.append(name)
        for i, data in enumerate(ssts):
            name = f"{epoch:016x}-{i:04d}.sst"
            _unlink_stale(d / name)
            fd = os.open(d / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                _write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            names.append(name)
        dfd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        return names, size

    def _ingest(self, names: list[str]) -> None:
        """Add the staged files to the database: each through a second name that RocksDB
        moves in (a hard link, no copy of the bytes), the staged name kept until the
        pieces are cleared (recovery ingests it again); copied where links fail."""
        d = self._ingest_dir
        moved: list[str] = []
        try:
            for n in names:
                link = d / (n + ".in")
                link.unlink(missing_ok=True)
                os.link(d / n, link)
                moved.append(str(link))
        except OSError:
            for m in moved:
                Path(m).unlink(missing_ok=True)
            self._store.ingest([str(d / n) for n in names])
            return
        self._store.ingest(moved, move=True)

    def _remove_files(self) -> None:
        """Delete the ingest directory's files (none is named by `INGEST_KEY` any more)."""
        if self._ingest_dir.is_dir():
            for f in self._ingest_dir.iterdir():
                f.unlink(missing_ok=True)

    def _write_pieces(
        self,
        changes: EpochChanges,
        pieces: list[tuple[int, int]],
        meta: EpochChanges,
        files: list[str],
    ) -> int:
        """Step 6 for a large checkpoint (module docstring): stage, commit, write, clear."""
        store = self._store
        size = 0
        for i, (a, b) in enumerate(pieces):
            blob = marshal.dumps((changes.keys[a:b], changes.values[a:b]))
            for part, off in enumerate(range(0, len(blob), PIECE_BYTES)):
                staged = store.new_batch()
                staged.put(_stage_key(i, part), blob[off : off + PIECE_BYTES])
                size += store.write(staged, sync=False)
            del blob
        meta.put(PENDING_KEY, _U32.pack(len(pieces)))
        commit = store.new_batch()
        _fill(commit, meta.keys, meta.values)
        size += store.write(commit, sync=True)  # the commit
        faults.hit("checkpoint_pieces")
        for a, b in pieces:
            batch = store.new_batch()
            _fill(batch, changes.keys[a:b], changes.values[a:b])
            size += store.write(batch, sync=False)
        if files:
            self._ingest(files)
        self._clear_pieces()
        return size

    def _clear_pieces(self) -> None:
        """Drop the staged pieces, the pending mark and the ingest list; not synced: if a
        crash loses this write, the next open writes the pieces and ingests the files
        again, which changes nothing. The files go once the list is gone (a file RocksDB
        still needs was copied into the database by its ingestion)."""
        batch = self._store.new_batch()
        batch.delete_range(STAGE_PREFIX, STAGE_END)
        batch.delete(PENDING_KEY)
        batch.delete(INGEST_KEY)
        self._store.write(batch, sync=False)
        self._remove_files()

    def _finish_pieces(self) -> None:
        """Write the pieces of a committed checkpoint again (a crash or a failure may have
        stopped their writing), then clear them; staged blobs nothing references (a crash
        before the commit batch) are cleared too."""
        raw = self._store.get(PENDING_KEY)
        ingest = self._store.get(INGEST_KEY)
        if raw is None and ingest is None:
            if self._store.last_key_in(STAGE_PREFIX, STAGE_END) is not None:
                self._clear_pieces()
            self._remove_files()  # staged for a commit batch that never landed
            return
        (count,) = _U32.unpack(raw) if raw is not None else (0,)
        for i in range(count):
            prefix = STAGE_PREFIX + _U32.pack(i)
            parts = [v for _, v in self._store.scan_range(prefix, _stage_key(i + 1, 0))]
            if not parts:
                raise StorageError(
                    "a committed checkpoint's staged changes are missing",
                    detail=f"piece {i} of {count}",
                )
            keys, values = marshal.loads(b"".join(parts))
            batch = self._store.new_batch()
            _fill(batch, keys, values)
            self._store.write(batch, sync=False)
        if ingest is not None:
            names: list[str] = marshal.loads(ingest)
            missing = [n for n in names if not (self._ingest_dir / n).is_file()]
            if missing:
                raise StorageError(
                    "a committed checkpoint's state files are missing",
                    detail=f"{len(missing)} of {len(names)} in {self._ingest_dir}",
                )
            self._ingest(names)
        self._clear_pieces()
        self._store.write(self._store.new_batch(), sync=True)

    def reset(self) -> CheckpointMeta | None:
        """Forget an earlier failed commit and re-read what the store holds (the runtime
        calls it when it rebuilds its state from the store); returns that checkpoint."""
        self._finish_pieces()
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


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _stage_key(piece: int, part: int) -> bytes:
    return STAGE_PREFIX + _U32.pack(piece) + _U32.pack(part)
