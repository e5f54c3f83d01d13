"""StateStore: the one RocksDB database (via rocksdict) that holds all durable engine state.

Why one database: a checkpoint must make every state table's changes, the catalog, source
offsets and the WAL truncation visible together, and a single RocksDB WriteBatch is atomic
only within one database. Everything therefore lives in the default column family of one
`Rdict` at `<data_dir>/state` (`state_path(data_dir)`), in raw mode (bytes keys and values;
key layout in `engine.state`).

Lifecycle:
1. `StateStore.open(path)` creates or opens the database (one process at a time: RocksDB's
   LOCK file refuses a second opener, reported as `StorageError`);
2. readers call `get` / `scan_prefix` / `scan_range`; writers build a batch with
   `new_batch()` and apply it with `write(batch, sync=...)` (the batch is consumed);
3. `close()` ends every scan still open (a live rocksdict iterator keeps the DB LOCK after
   close, so a same-process reopen would fail), flushes and closes the database.

Thread safety: RocksDB is thread-safe; the WAL writer thread and the checkpointing thread
write concurrently through the same `StateStore`.

Durable writes without stalling the process: rocksdict holds the GIL for the whole of a
`sync=True` write, fsync included (measured: every other thread stopped for the fsync, 20
to 120 ms on a loaded disk), so each WAL group commit and checkpoint froze every client.
`write(sync=True)` therefore writes without sync (RocksDB hands the record to the OS
before returning: its log writer flushes after each record unless `manual_wal_flush`,
which is off) and then fsyncs RocksDB's log files itself with `os.fsync`, which releases
the GIL; a new log file also gets its directory fsynced, as RocksDB does. A log file gone
by then was made obsolete by a flush to SST files RocksDB synced before deleting it. The
log files stay open between syncs (`engine.state.log_sync.LogSync`), so a sync is one
system call per live log file, not a directory listing and an open and close each.
Unsynced writes also fsync the log every `SYNC_BACKLOG_BYTES`, so a durable write never
has a big backlog of other writers' bytes to flush first.
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import ClassVar, Protocol

from rocksdict import (
    BlockBasedOptions,
    Cache,
    DBCompressionType,
    IngestExternalFileOptions,
    Options,
    Rdict,
    ReadOptions,
    SstFileWriter,
    WriteBatch,
    WriteBufferManager,
    WriteOptions,
)

from engine.errors import EngineError
from engine.state.budget import StateBudget
from engine.state.log_sync import LogSync

STATE_SUBDIR = "state"

_WRITE_BUFFER_BYTES = 64 << 20
_MAX_WRITE_BUFFERS = 4
_TARGET_FILE_BYTES = 64 << 20


SYNC_BACKLOG_BYTES = 1 << 20
"""Unsynced writes (a checkpoint's pieces, WAL parts) fsync RocksDB's log once this many
bytes were written since its last sync: a small durable write (a webhook ack's WAL
record) fsyncs the same log file, and its fsync waits for every byte written before it,
so a 30 MB checkpoint of a 1M-row COPY written without sync made the next ack wait for
30 MB to reach the disk. The fsync releases the interpreter lock (`_sync_log`); the
writer of the bulk pays it, in wall time only."""


class StorageError(EngineError):
    """The state store failed (I/O error, corruption, locked by another process)."""

    sqlstate: ClassVar[str] = "58030"  # io_error


class WriteBatchLike(Protocol):
    """What state tables, the WAL and the checkpointer write into; atomic once written."""

    def put(self, key: bytes, value: bytes) -> None: ...

    def delete(self, key: bytes) -> None: ...

    def delete_range(self, begin: bytes, end: bytes) -> None: ...


_SORT_MIN = 256
"""Multi-gets of at least this many keys are issued in key order (see `multi_get`)."""


def state_path(data_dir: Path) -> Path:
    """Where the runtime keeps the database inside its data directory."""
    return data_dir / STATE_SUBDIR


def _options(budget: StateBudget | None = None) -> tuple[Options, Cache | None]:
    """The database's options; with a budget, RocksDB's memory (block cache, index and
    filter blocks, memtables) is capped by it (`engine.state.budget`)."""
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    # Checkpoints write an epoch's dirty keys in one batch: a large memtable absorbs a
    # whole epoch without stalling on flushes.
    write_buffer = _WRITE_BUFFER_BYTES
    cache = None
    if budget is not None:
        cache = Cache(budget.block_cache_bytes)
        table = BlockBasedOptions()
        table.set_block_cache(cache)
        # index and filter blocks stay in the table readers (about 1.5 bytes per key),
        # not in the cache: charged to a small cache they are evicted and re-read, and a
        # point read of an absent key costs a disk read (measured 100x slower)
        table.set_bloom_filter(10, False)  # point reads (multi-get) of absent keys skip files
        opts.set_block_based_table_factory(table)
        # memtables are charged to the block cache and flushed at their share
        wbm = WriteBufferManager.new_write_buffer_manager_with_cache(
            budget.memtable_bytes, False, cache
        )
        opts.set_write_buffer_manager(wbm)
        write_buffer = max(min(_WRITE_BUFFER_BYTES, budget.memtable_bytes // 2), 4 << 20)
    opts.set_write_buffer_size(write_buffer)
    opts.set_max_write_buffer_number(_MAX_WRITE_BUFFERS)
    opts.set_target_file_size_base(_TARGET_FILE_BYTES)
    opts.set_level_compaction_dynamic_level_bytes(True)
    opts.set_max_background_jobs(2)  # the machines have 2 cores
    # lz4 costs little CPU and state values (marshal bytes) compress well; keep the
    # bottommost level on lz4 too so reads never pay for zstd.
    opts.set_compression_type(DBCompressionType.lz4())
    opts.set_bottommost_compression_type(DBCompressionType.lz4())
    opts.set_keep_log_file_num(3)
    return opts, cache


class StateStore:
    """One open RocksDB database; see the module docstring for the lifecycle."""

    def __init__(self, db: Rdict, path: Path, block_cache: Cache | None = None) -> None:
        self._db: Rdict | None = db
        self.path = path
        self.block_cache = block_cache
        """The budgeted block cache (None: RocksDB's default), for metrics."""
        self._nosync_opts = WriteOptions()
        self._scans: weakref.WeakSet[Generator[tuple[bytes, bytes], None, None]] = weakref.WeakSet()
        self._lock = threading.Lock()
        self.bytes_written = 0
        """Total `WriteBatch.size_in_bytes()` written since open (for metrics)."""
        self.batches_written = 0
        self.synced_writes = 0
        self._log_sync = LogSync(path, self._super_version)
        self._unsynced = 0  # bytes written to the log since its last sync (approximate)

    @classmethod
    def open(cls, path: Path, budget: StateBudget | None = None) -> StateStore:
        """Open (creating if missing) the database directory `path` itself; `budget`
        caps RocksDB's block cache and memtables (None: RocksDB's defaults)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        opts, cache = _options(budget)
        try:
            db = Rdict(str(path), opts)
        except Exception as e:  # rocksdict raises plain Exception subclasses
            if "lock" in str(e).lower():  # RocksDB's LOCK file is held by another process
                raise StorageError(
                    f'data directory "{path.parent}" is in use by another Swell server',
                    detail=str(e),
                    hint="Stop the other server, or start this one with another --data-dir.",
                ) from e
            raise StorageError(
                f'could not open state store at "{path}"',
                detail=str(e),
                hint="Another Swell process may be using the same data directory.",
            ) from e
        return cls(db, path, cache)

    # -- reads -----------------------------------------------------------------------------
    @property
    def db(self) -> Rdict:
        if self._db is None:
            raise StorageError("state store is closed")
        return self._db

    def get(self, key: bytes) -> bytes | None:
        return self.db.get(key)

    def multi_get(self, keys: list[bytes]) -> list[bytes | None]:
        """The value of every key (None where absent): one RocksDB MultiGet."""
        if not keys:
            return []
        if len(keys) < _SORT_MIN:
            out: list[bytes | None] = self.db.get(keys)  # type: ignore[arg-type,assignment]
            return out
        # in key order: neighbouring lookups share index and data blocks (a chunk's
        # distinct keys are vnode-random, and random order costs several times more)
        order = sorted(range(len(keys)), key=keys.__getitem__)
        got: list[bytes | None] = self.db.get([keys[i] for i in order])  # type: ignore[assignment]
        res: list[bytes | None] = [None] * len(keys)
        for i, v in zip(order, got, strict=True):
            res[i] = v
        return res

    def scan_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) whose key starts with `prefix`, in key order."""
        return self.scan_range(prefix, _prefix_end(prefix))

    def scan_range(self, begin: bytes, end: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        """Every (key, value) with begin <= key < end (end None: to the last key), ordered."""
        gen = self._scan(begin, end)
        with self._lock:
            self._scans.add(gen)
        return gen

    def last_key_in(self, begin: bytes, end: bytes) -> bytes | None:
        """The greatest key in [begin, end), or None (used to resume sequence numbers)."""
        ro = ReadOptions()
        ro.set_iterate_upper_bound(end)
        it = self.db.iter(ro)
        try:
            it.seek_to_last()
            if not it.valid():
                return None
            key: bytes = it.key()
            return key if key >= begin else None
        finally:
            del it

    def _scan(self, begin: bytes, end: bytes | None) -> Generator[tuple[bytes, bytes], None, None]:
        ro = ReadOptions()
        if end is not None:
            ro.set_iterate_upper_bound(end)
        items = self.db.items(from_key=begin, read_opt=ro)
        try:
            yield from items
        finally:
            del items  # drop the rocksdict iterator now: it pins the DB LOCK

    def _super_version(self) -> int | None:
        """RocksDB's super-version number: it changes whenever a log file may have been
        created or deleted (`engine.state.log_sync`; None: unknown, list them again)."""
        return self.db.property_int_value("rocksdb.current-super-version-number")

    # -- writes ----------------------------------------------------------------------------
    def new_batch(self) -> WriteBatch:
        return WriteBatch(raw_mode=True)

    def write(self, batch: WriteBatchLike, *, sync: bool = True) -> int:
        """Apply `batch` atomically (consuming it); with sync, fsync the RocksDB log first.

        Returns the batch size in bytes.
        """
        assert isinstance(batch, WriteBatch)
        size: int = batch.size_in_bytes()
        try:
            self.db.write(batch, self._nosync_opts)
            self._unsynced += size
            if sync or self._unsynced >= SYNC_BACKLOG_BYTES:
                self._unsynced = 0
                self._sync_log()
        except StorageError:
            raise
        except Exception as e:
            raise StorageError("could not write to state store", detail=str(e)) from e
        self.bytes_written += size
        self.batches_written += 1
        self.synced_writes += sync
        return size

    def _sync_log(self) -> None:
        """fsync RocksDB's write-ahead log files, releasing the GIL (module docstring)."""
        self._log_sync.sync()

    def ingest(self, paths: list[str], *, move: bool = False) -> None:
        """Add the SST files at `paths` (made by `sst_writer`, keys of no memtable write
        pending) to the database atomically, newer than everything written before, and
        durably (RocksDB syncs what it added). The files stay where they are (`move`: they
        are removed). No Python call per key: the parallel workers build their actors'
        checkpoint writes as such files (`engine.state.checkpoint`).

        How: rocksdict keeps the interpreter lock for the whole ingestion, and RocksDB
        copying a file (read, write, fsync: 135 ms for an 18 MB file) stopped every other
        thread that long. So each file gets a second name beside it (`os.link`, without
        the lock) and RocksDB moves that name into the database (a link, no copy), which
        leaves the original in place. Where links are not possible RocksDB copies."""
        links: list[str] = []
        if not move:
            try:
                for i, p in enumerate(paths):
                    link = f"{p}.ingest-{os.getpid()}-{i}"
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(link)  # left by a crash between the link and the ingestion
                    os.link(p, link)
                    links.append(link)
            except OSError:  # no hard links here: RocksDB copies the originals
                _unlink_all(links)
                links = []
        opts = IngestExternalFileOptions()
        opts.set_move_files(move or bool(links))
        try:
            self.db.ingest_external_file(links or paths, opts)
        except Exception as e:
            raise StorageError("could not add files to state store", detail=str(e)) from e
        finally:
            _unlink_all(links)  # moved ones are gone already

    def flush(self) -> None:
        """Flush memtables to SST files (not needed for durability; shortens reopen)."""
        self.db.flush()

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._db is None

    def close(self) -> None:
        """End open scans, flush and close; idempotent. The store is unusable afterwards."""
        db = self._db
        if db is None:
            return
        with self._lock:
            scans = list(self._scans)
            self._scans.clear()
        for gen in scans:
            gen.close()
        self._db = None
        self._log_sync.close()
        db.close()
        del db

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"StateStore({str(self.path)!r}{', closed' if self.closed else ''})"


def sst_writer(path: str, *, compress: bool = True) -> SstFileWriter:
    """An open writer of an SST file for `StateStore.ingest` (raw keys and values, lz4 as
    the store's own files, or uncompressed: a checkpoint's blobs, where lz4 doubled the
    cost of writing the file); keys must be added in strictly increasing order."""
    opts = Options(raw_mode=True)
    opts.set_compression_type(DBCompressionType.lz4() if compress else DBCompressionType.none())
    w = SstFileWriter(options=opts)
    w.open(path)
    return w


def _unlink_all(paths: list[str]) -> None:
    for p in paths:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(p)


def _prefix_end(prefix: bytes) -> bytes | None:
    """The smallest key greater than every key starting with `prefix` (None: no bound)."""
    b = bytearray(prefix)
    while b:
        if b[-1] != 0xFF:
            b[-1] += 1
            return bytes(b)
        b.pop()
    return None
