"""The runtime's write path: DML chunks into the WAL and the tables' queues, and WAL replay.

Why a file of its own: this is the part of the runtime that clients' threads run (DML,
COPY, webhook rows), never the barrier thread; it takes only `queue_lock` and a table's
`dml_lock` (the lock order is in `engine.stream.runtime`'s docstring), never the epoch
lock. `Runtime` mixes it in; the state it uses (`tables`, `wal`, `queue_lock`, ...) is
the runtime's.

A write's durability: `write` appends the chunk's WAL record and queues the chunk under
`queue_lock`, so WAL order is queue order; the caller waits for `wal.wait_durable(seq)`
before answering. A chunk larger than `PART_BYTES` (a 1M-row COPY is about 20 MB) is
written as a WAL transaction (`engine.state.wal`): its slices are encoded and written as
parts one by one in the writer's thread, without any runtime lock (each an Arrow IPC
encode and a `db.write` of about 256 kB, so no other thread waits for the interpreter
lock longer than that), then one small commit record is appended and the whole chunk queued
under `queue_lock`. A crash before the commit record is durable leaves none of it
visible after recovery; once the client saw `COPY n`, all of it.

Replay (`replay_wal`, at startup and after a failed epoch, under `queue_lock`) queues the
chunks of every record after the checkpoint again: a commit record brings its parts,
which are then registered with the log (its truncation deletes them); parts no commit
record names are deleted.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pyarrow as pa

from engine import faults
from engine.chunk import StreamChunk, TruncateChunk
from engine.errors import EpochFailed, ObjectNotInPrerequisiteState, UndefinedTable
from engine.state.store import StorageError
from engine.stream.graph import (
    RowIdGen,
    TableFlow,
    commit_of,
    decode_wal_record,
    encode_commit_record,
    encode_wal_record,
    preview_chunks,
)

PART_BYTES = 1 << 18
"""A written chunk larger than this goes to the WAL as a transaction of parts of about
this size (module docstring)."""


class WritePath:
    """`Runtime`'s write-side methods (mixed in; see the module docstring)."""

    tables: dict[int, TableFlow]
    wal: Any
    queue_lock: threading.RLock
    wal_seq: int
    row_ids: RowIdGen
    _dml_locks: dict[int, threading.RLock]
    _frozen: set[int]
    _oldest_write: float | None

    def dml_lock(self, rel_id: int) -> threading.RLock:
        """The lock serialising DML on one table (see the runtime's module docstring)."""
        lk = self._dml_locks.get(rel_id)
        if lk is None:
            lk = self._dml_locks.setdefault(rel_id, threading.RLock())
        return lk

    def live_rows(self, rel_id: int) -> pa.Table:
        """A table's rows including DML not yet pushed by a barrier (for DELETE/UPDATE).

        Call under `dml_lock(rel_id)`: the stored rows do not change meanwhile, and stored
        rows + the chunks being drained + the queued chunks are the table's latest rows
        whatever the barrier does (it moves chunks from the queue into the stored rows,
        which keeps that sum). Never waits for a barrier; during an in-process recovery
        (a drain failed half-way) it waits until the table's flow is rebuilt."""
        deadline = time.monotonic() + 60.0
        while True:
            with self.queue_lock:
                flow = self.tables.get(rel_id)
                if flow is None:
                    raise UndefinedTable(f"relation with id {rel_id} does not exist")
                chunks = [*flow.in_flight, *flow.pending]
            if not flow.broken:
                break
            if time.monotonic() > deadline:
                raise EpochFailed("the table's rows are being recovered; retry the statement")
            time.sleep(0.005)
        if not chunks:
            return flow.mat.snapshot()  # type: ignore[attr-defined]
        if any(isinstance(c, TruncateChunk) for c in chunks):
            chunks = preview_chunks(flow.mat.snapshot(), chunks)  # type: ignore[attr-defined]
        return flow.mat.apply_preview(chunks)  # type: ignore[attr-defined]

    def write(self, rel_id: int, chunk: StreamChunk) -> int:
        """Queue a DML chunk for the next barrier; returns its WAL sequence number.

        Takes only `queue_lock` (never waits for a barrier). The caller waits for
        `wal.wait_durable(seq)` before answering, and holds `dml_lock(rel_id)` when the
        chunk was computed from the table's rows (UPDATE, DELETE, INSERT on a primary key).
        A chunk over `PART_BYTES` is written in parts first (module docstring).
        """
        size = chunk.data.nbytes
        if size > PART_BYTES and len(chunk) > 1 and type(chunk) is StreamChunk:
            return self._write_parts(rel_id, chunk, size)
        payload = encode_wal_record(rel_id, chunk)
        return self._queue_write(rel_id, chunk, lambda: int(self.wal.append(payload)))

    def _write_parts(self, rel_id: int, chunk: StreamChunk, size: int) -> int:
        wal = self.wal
        rows = max(1, len(chunk) * PART_BYTES // size)
        txn = wal.begin()
        try:
            n = 0
            for start in range(0, len(chunk), rows):
                part = StreamChunk(chunk.ops.slice(start, rows), chunk.data.slice(start, rows))
                wal.write_part(txn, n, encode_wal_record(rel_id, part))
                n += 1
                faults.hit("wal_part_written")
            record = encode_commit_record(rel_id, txn, n)
            return self._queue_write(rel_id, chunk, lambda: int(wal.commit(txn, record)))
        finally:
            wal.abort(txn)  # nothing once committed; else its parts are deleted later

    def _queue_write(self, rel_id: int, chunk: StreamChunk, append: Any) -> int:
        """Under `queue_lock`: `append()` the WAL record, queue the chunk; its seq."""
        while True:
            with self.queue_lock:
                # a frozen table may be absent a moment (`rebuild_table` replaces its flow)
                flow = None if rel_id in self._frozen else self.tables.get(rel_id)
                if flow is None and rel_id not in self._frozen:
                    raise UndefinedTable(f"relation with id {rel_id} does not exist")
                if flow is not None:
                    if chunk.data.num_columns != len(flow.rel.fields):
                        raise ObjectNotInPrerequisiteState(
                            f'table "{flow.rel.name}" was altered while the statement ran',
                            hint="Run the statement again.",
                        )
                    seq: int = append()
                    flow.pending.append(chunk)
                    self.wal_seq = max(self.wal_seq, seq)
                    if self._oldest_write is None:
                        self._oldest_write = time.monotonic()
                    return seq
            time.sleep(0.002)  # ALTER TABLE is changing the layout (`rebuild_table`)

    def enqueue(self, rel_id: int, chunks: list[StreamChunk]) -> bool:
        """Queue chunks that are not WAL records (a source's rows, rows sunk INTO a table,
        whose durability is the checkpoint's); False when the table is gone."""
        with self.queue_lock:
            flow = self.tables.get(rel_id)
            if flow is None:
                return False
            flow.pending.extend(chunks)
            return True

    def replay_wal(self, after: int) -> int:
        """Queue the chunks of the WAL records after seq `after` again; the record count."""
        n = 0
        wal = self.wal
        for seq, payload in wal.records_after(after):
            commit = commit_of(payload)
            if commit is None:
                tid, chunk = decode_wal_record(payload)
                chunks = [chunk]
            else:
                tid, txn, parts = commit
                chunks = [decode_wal_record(p)[1] for p in wal.parts(txn)]
                if len(chunks) != parts:
                    raise StorageError(
                        "write-ahead log transaction is incomplete",
                        detail=f"record {seq}: {len(chunks)} of {parts} parts stored",
                    )
                wal.note_commit(seq, txn)
            flow = self.tables.get(tid)
            if flow is None:
                continue  # the table was dropped after this write
            for chunk in chunks:
                if flow.rel.row_id_index is not None:
                    self.row_ids.observe(
                        chunk.data.column(flow.rel.row_id_index).to_numpy(zero_copy_only=False)
                    )
            with self.queue_lock:
                flow.pending.extend(chunks)
                self.wal_seq = max(self.wal_seq, seq)
            n += 1
        wal.drop_orphan_parts()
        return n
