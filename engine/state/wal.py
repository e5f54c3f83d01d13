"""Wal: the write-ahead log of acknowledged writes (DML and webhook rows) between checkpoints.

Why it lives inside the state store: a checkpoint makes the WAL records it covers obsolete,
and deleting them in the checkpoint's own WriteBatch (`truncate_through`) means there is no
moment where a record is both gone from the WAL and missing from the checkpointed state.
Records are keys `WAL_PREFIX + seq` (8-byte big-endian, so RocksDB order is sequence order)
whose values are the caller's payload bytes; the log does not interpret payloads.

Group commit: `append` only assigns the next sequence number and queues the record. One
background writer thread repeatedly takes everything queued, writes it (in batches of about
`GROUP_BYTES`, the last with sync=True) and then wakes every waiter whose record is now
durable. While one fsync is in flight, new appends pile up and share the next one, so N
concurrent writers cost far fewer than N fsyncs. Records become durable strictly in
sequence order.

Lifecycle:
1. `Wal(store)` resumes numbering after max(highest record, truncation floor) and starts
   the writer thread;
2. recovery reads `records_after(checkpoint.wal_seq)` and replays them;
3. writers call `append` + `wait_durable` (threads), `append_durable_async` or `append`
   + `wait_durable_async` (asyncio) and acknowledge the client only after that returns;
4. each checkpoint calls `truncate_through(seq, batch)` inside its batch;
5. `close()` writes what is queued, stops the writer; close the store afterwards.

A failed write poisons the log: every waiter and every later append raises StorageError
(the records' fate is unknown, so nothing may be acknowledged after that).

Transactions (one big write in several records, all or nothing): a record of tens of MB (a
1M-row COPY) held the interpreter lock for its whole `db.write` and every later record's
acknowledgement waited for its fsync. So a big write is cut into parts: `begin()` gives a
transaction id; `write_part(txn, i, payload)` writes each part in the caller's thread
straight to its own key (`PART_PREFIX + txn + i`, not numbered, not visible to
`records_after`: one short `db.write` each, the caller picks their size; the log files
fsynced every `PART_SYNC_BYTES` with the lock released, so the group commit behind it has
little left to flush); `commit(txn, payload)` then appends an ordinary numbered record
(the caller's payload says which transaction it commits) and the write is acknowledged
when that record is durable. RocksDB's log is sequential, so a durable commit record means
durable parts. Recovery replays a commit record with `parts(txn)` and registers it
(`note_commit`); `drop_orphan_parts()` deletes the parts of transactions that never
committed (a crash or an error half-way; `abort(txn)` after an error). A checkpoint's
`truncate_through` deletes the parts of the commit records it truncates, in its batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import struct
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import TYPE_CHECKING

from engine.latency import Histogram, answer_thread
from engine.state.codec import RESERVED_PREFIX
from engine.state.store import StorageError

if TYPE_CHECKING:
    from engine.state.store import StateStore, WriteBatchLike

WAL_PREFIX = RESERVED_PREFIX + b"wal/"
"""Records: WAL_PREFIX + 8-byte big-endian sequence number."""
WAL_END = RESERVED_PREFIX + b"wal0"  # b"/" + 1: exclusive end of the record range
WAL_FLOOR_KEY = RESERVED_PREFIX + b"walfloor"
"""Highest sequence number ever truncated; keeps numbering monotonic across restarts."""
PART_PREFIX = RESERVED_PREFIX + b"walp/"
"""Parts of transactions: PART_PREFIX + 8-byte BE transaction id + 4-byte BE part number."""
PART_END = RESERVED_PREFIX + b"walp0"
PART_SYNC_BYTES = 1 << 20
"""A transaction's parts fsync the log files once this many bytes were written since."""

_SEQ = struct.Struct(">Q")
_PART = struct.Struct(">QI")
_MAX_SEQ = (1 << 64) - 1


def wal_key(seq: int) -> bytes:
    return WAL_PREFIX + _SEQ.pack(seq)


def part_key(txn: int, part: int) -> bytes:
    return PART_PREFIX + _PART.pack(txn, part)


class Wal:
    """Sequence-numbered, group-committed log records in the state store; see module doc."""

    def __init__(self, store: StateStore) -> None:
        self._store = store
        self._lock = threading.Lock()
        self._work = threading.Condition(self._lock)
        self._durable_cv = threading.Condition(self._lock)
        self._queue: list[tuple[int, bytes]] = []
        self._async_waiters: deque[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[int]]]
        self._async_waiters = deque()
        self._error: BaseException | None = None
        self._closing = False

        floor_raw = store.get(WAL_FLOOR_KEY)
        self._floor = _SEQ.unpack(floor_raw)[0] if floor_raw is not None else 0
        last_key = store.last_key_in(WAL_PREFIX, WAL_END)
        last = _SEQ.unpack(last_key[len(WAL_PREFIX) :])[0] if last_key is not None else 0
        self._last_seq = max(self._floor, last)
        self._durable_seq = self._last_seq
        last_part = store.last_key_in(PART_PREFIX, PART_END)
        self._last_txn = _PART.unpack(last_part[len(PART_PREFIX) :])[0] if last_part else 0
        self._open: dict[int, int] = {}  # open transaction -> part bytes written since a sync
        self._commits: dict[int, int] = {}  # commit record seq -> transaction (not truncated)
        self._aborted: list[int] = []  # transactions whose parts the next truncation deletes

        # metrics (read without the lock; approximate is fine)
        self.fsyncs = 0
        self.records_written = 0
        self.bytes_written = 0
        self.max_batch_records = 0
        self.write_seconds = 0.0
        self.queue_seconds = Histogram()
        """Per group commit: from the first record's append until the writer took the
        group (the writer was busy with the previous fsync, or waited for a core)."""
        self.sync_seconds = Histogram()
        """Per group commit: the writer's `db.write` and fsync of the group. With
        `queue_seconds` and the webhook's ack histogram it splits an ack's latency into
        waiting for the writer, the disk, and the answer's wake-up (the rest)."""
        self._queued_at = 0.0  # when the queue last went from empty to non-empty

        self._thread = threading.Thread(target=self._run, name="swell-wal-writer", daemon=True)
        self._thread.start()

    # -- appending --------------------------------------------------------------------------
    @property
    def last_seq(self) -> int:
        """Highest sequence number assigned so far (0: none ever)."""
        return self._last_seq

    @property
    def durable_seq(self) -> int:
        """Every record with seq <= this is fsynced (or was truncated by a checkpoint)."""
        return self._durable_seq

    def append(self, payload: bytes) -> int:
        """Assign the next sequence number and queue the record; durable later (wait_durable)."""
        with self._lock:
            return self._append_locked(payload)

    def _append_locked(self, payload: bytes) -> int:
        if self._error is not None:
            raise StorageError("write-ahead log failed earlier") from self._error
        if self._closing:
            raise StorageError("write-ahead log is closed")
        if type(payload) is not bytes:
            raise TypeError(f"WAL payload must be bytes, not {type(payload).__name__}")
        self._last_seq = seq = self._last_seq + 1
        if not self._queue:
            self._queued_at = time.perf_counter()
        self._queue.append((seq, payload))
        self._work.notify()
        return seq

    def wait_durable(self, seq: int, timeout: float | None = None) -> None:
        """Block until record `seq` (and every earlier one) is fsynced.

        Raises TimeoutError after `timeout` seconds, StorageError if the log failed.
        """
        with self._lock:
            if seq > self._last_seq:
                raise ValueError(f"WAL sequence {seq} was never assigned")
            ok = self._durable_cv.wait_for(
                lambda: self._durable_seq >= seq or self._error is not None, timeout
            )
            if self._durable_seq >= seq:
                return
            if self._error is not None:
                raise StorageError("write-ahead log write failed") from self._error
            if not ok:
                raise TimeoutError(f"WAL record {seq} not durable after {timeout} s")

    def append_durable(self, payload: bytes, timeout: float | None = None) -> int:
        seq = self.append(payload)
        self.wait_durable(seq, timeout)
        return seq

    async def append_durable_async(self, payload: bytes) -> int:
        """Append and wait for durability without blocking the event loop; returns the seq."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()
        with self._lock:
            seq = self._append_locked(payload)
            self._async_waiters.append((seq, loop, fut))
        return await fut

    def wait_durable_async(self, seq: int) -> asyncio.Future[int]:
        """A future (of the running loop) done when record `seq` is durable; for callers
        that appended with `append` elsewhere (e.g. under another lock). The writer thread
        resolves it with one loop wake-up per fsync, however many futures it completes."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()
        with self._lock:
            if self._durable_seq >= seq:
                fut.set_result(seq)
            elif self._error is not None:
                fut.set_exception(StorageError("write-ahead log write failed"))
            elif seq > self._last_seq:
                raise ValueError(f"WAL sequence {seq} was never assigned")
            else:
                waiters = self._async_waiters
                if waiters and waiters[-1][0] > seq:  # keep them in sequence order
                    i = len(waiters)
                    while i and waiters[i - 1][0] > seq:
                        i -= 1
                    waiters.insert(i, (seq, loop, fut))
                else:
                    waiters.append((seq, loop, fut))
        return fut

    # -- transactions (module docstring) ------------------------------------------------------
    def begin(self) -> int:
        """A new transaction's id, for `write_part` and then `commit` (or `abort`)."""
        with self._lock:
            if self._error is not None:
                raise StorageError("write-ahead log failed earlier") from self._error
            if self._closing:
                raise StorageError("write-ahead log is closed")
            self._last_txn = txn = self._last_txn + 1
            self._open[txn] = 0
            return txn

    def write_part(self, txn: int, part: int, payload: bytes) -> None:
        """Write part `part` of open transaction `txn` now, in this thread (not durable
        until its commit record is; fsyncs the log files every `PART_SYNC_BYTES`)."""
        with self._lock:
            if txn not in self._open:
                raise ValueError(f"WAL transaction {txn} is not open")
            unsynced = self._open[txn] + len(payload)
            sync = unsynced >= PART_SYNC_BYTES
            self._open[txn] = 0 if sync else unsynced
        batch = self._store.new_batch()
        batch.put(part_key(txn, part), payload)
        self._store.write(batch, sync=sync)

    def commit(self, txn: int, payload: bytes) -> int:
        """Append the numbered record that commits `txn` (as `append`); returns its seq."""
        with self._lock:
            if txn not in self._open:
                raise ValueError(f"WAL transaction {txn} is not open")
            seq = self._append_locked(payload)
            del self._open[txn]
            self._commits[seq] = txn
            return seq

    def abort(self, txn: int) -> None:
        """Give up open transaction `txn`: its parts go with the next truncation. A
        committed (or unknown) transaction is left alone."""
        with self._lock:
            if self._open.pop(txn, None) is not None:
                self._aborted.append(txn)

    def parts(self, txn: int) -> Iterator[bytes]:
        """The stored parts of transaction `txn`, in part order (for replay)."""
        for _, payload in self._store.scan_range(part_key(txn, 0), part_key(txn + 1, 0)):
            yield payload

    def note_commit(self, seq: int, txn: int) -> None:
        """Replay found record `seq` committing `txn`: truncating `seq` deletes its parts."""
        with self._lock:
            self._commits[seq] = txn
            self._last_txn = max(self._last_txn, txn)

    def drop_orphan_parts(self) -> None:
        """Delete the parts of every transaction neither open nor committed by a record
        still in the log (after replay has `note_commit`ted them): what a crash or a failed
        write left half-written. Range deletes between the live ids, so it reads nothing."""
        with self._lock:
            live = sorted({*self._open, *self._commits.values()})
            self._aborted = []  # deleted here
            last = self._last_txn  # transactions begun later are not touched
        batch = self._store.new_batch()
        start = PART_PREFIX
        for txn in live:
            batch.delete_range(start, part_key(txn, 0))
            start = part_key(txn + 1, 0)
        batch.delete_range(start, part_key(last + 1, 0))
        self._store.write(batch, sync=False)

    # -- recovery and truncation ------------------------------------------------------------
    def records_after(self, seq: int) -> Iterator[tuple[int, bytes]]:
        """Stored records with sequence > seq, in order (for replay after a checkpoint)."""
        if seq >= _MAX_SEQ:
            return
        plen = len(WAL_PREFIX)
        unpack = _SEQ.unpack
        for key, payload in self._store.scan_range(wal_key(seq + 1), WAL_END):
            yield unpack(key[plen:])[0], payload

    def truncate_through(self, seq: int, batch: WriteBatchLike) -> None:
        """Add to a checkpoint batch: delete records <= seq (and the parts of the
        transactions they commit, and of aborted ones) and raise the numbering floor."""
        with self._lock:
            if seq > self._last_seq:
                raise ValueError(f"cannot truncate WAL through {seq}: last is {self._last_seq}")
            self._floor = floor = max(self._floor, seq)
            done = [s for s in self._commits if s <= floor]
            txns = [self._commits.pop(s) for s in done] + self._aborted
            self._aborted = []
        end = wal_key(floor + 1) if floor < _MAX_SEQ else WAL_END
        batch.delete_range(WAL_PREFIX, end)
        batch.put(WAL_FLOOR_KEY, _SEQ.pack(floor))
        for txn in sorted(txns):
            batch.delete_range(part_key(txn, 0), part_key(txn + 1, 0))

    # -- writer thread ----------------------------------------------------------------------
    def _run(self) -> None:
        answer_thread()  # the acks wait for this thread (`engine.latency`)
        store = self._store
        while True:
            with self._lock:
                while not self._queue and not self._closing:
                    self._work.wait()
                if not self._queue:
                    return  # closing and drained
                records, self._queue = self._queue, []
                queued_at = self._queued_at
            t0 = time.perf_counter()
            self.queue_seconds.observe(t0 - queued_at)
            try:
                size = 0
                groups = _groups(records)
                for i, group in enumerate(groups):
                    batch = store.new_batch()
                    for seq, payload in group:
                        batch.put(wal_key(seq), payload)
                    size += store.write(batch, sync=i == len(groups) - 1)
            except BaseException as e:  # noqa: BLE001 - every waiter must learn of it
                self._fail(e)
                return
            took = time.perf_counter() - t0
            self.write_seconds += took
            self.sync_seconds.observe(took)
            self.fsyncs += 1
            self.records_written += len(records)
            self.bytes_written += size
            self.max_batch_records = max(self.max_batch_records, len(records))
            self._publish(records[-1][0])

    def _publish(self, durable: int) -> None:
        ready: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[int], int]]] = {}
        with self._lock:
            self._durable_seq = durable
            self._durable_cv.notify_all()
            waiters = self._async_waiters
            while waiters and waiters[0][0] <= durable:
                seq, loop, fut = waiters.popleft()
                ready.setdefault(loop, []).append((fut, seq))
        for loop, futs in ready.items():
            _call_in_loop(loop, _resolve, futs, None)

    def _fail(self, error: BaseException) -> None:
        with self._lock:
            self._error = error
            self._durable_cv.notify_all()
            waiters = list(self._async_waiters)
            self._async_waiters.clear()
        exc = StorageError("write-ahead log write failed", detail=str(error))
        exc.__cause__ = error
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[int], int]]] = {}
        for seq, loop, fut in waiters:
            by_loop.setdefault(loop, []).append((fut, seq))
        for loop, futs in by_loop.items():
            _call_in_loop(loop, _resolve, futs, exc)

    # -- lifecycle --------------------------------------------------------------------------
    def close(self) -> None:
        """Write everything queued, then stop the writer. Idempotent; appends then fail."""
        with self._lock:
            self._closing = True
            self._work.notify()
        self._thread.join()

    def __repr__(self) -> str:
        return f"Wal(last_seq={self._last_seq}, durable_seq={self._durable_seq})"


GROUP_BYTES = 1 << 20
"""The writer writes what is queued in batches of about this many bytes (one record each at
least), fsyncing once after the last: rocksdict holds the interpreter lock for a whole
`db.write` (about 2 ms per MB), so a queue of big records (a COPY's) written as one batch
stopped every other thread for tens of ms. Records are independent (each is acknowledged
only once every record up to it is durable), and a crash loses a suffix of the batches
written without fsync, so durability stays in sequence order."""


def _groups(records: list[tuple[int, bytes]]) -> list[list[tuple[int, bytes]]]:
    """`records` cut into consecutive runs of about `GROUP_BYTES`."""
    out: list[list[tuple[int, bytes]]] = [[]]
    size = 0
    for rec in records:
        if size >= GROUP_BYTES and out[-1]:
            out.append([])
            size = 0
        out[-1].append(rec)
        size += len(rec[1])
    return out


def _resolve(futs: list[tuple[asyncio.Future[int], int]], error: BaseException | None) -> None:
    for fut, seq in futs:
        if fut.done():  # the awaiting task was cancelled
            continue
        if error is None:
            fut.set_result(seq)
        else:
            fut.set_exception(error)


def _call_in_loop(loop: asyncio.AbstractEventLoop, fn: object, *args: object) -> None:
    with contextlib.suppress(RuntimeError):  # a closed loop has nobody waiting any more
        loop.call_soon_threadsafe(fn, *args)  # type: ignore[arg-type]
