"""`PgCdcReader`: one CDC table's initial snapshot, then its replication stream.

Start (no checkpointed position): drop a leftover slot of this table (an earlier start
that never reached a checkpoint), create the slot with `EXPORT_SNAPSHOT` on a
replication connection, read the table with `COPY` inside a REPEATABLE READ transaction
that imports that snapshot (`SET TRANSACTION SNAPSHOT`), then START_REPLICATION at the
slot's consistent point: the snapshot holds exactly the transactions that committed
before that point and the stream exactly those after, so nothing is lost or doubled.
The snapshot rows are buffered with the consistent point as their position.

Restart (position `{"lsn": n}` from a checkpoint): START_REPLICATION at `n`, the end LSN
of the last transaction the checkpoint contains; PostgreSQL skips the transactions
committed before it.

Position and acknowledgement: rows are handed to the runtime only per whole transaction
(`take()` returns the rows of the transactions committed upstream since the last take and
the end LSN of the last one). `committed(position)` is called after the checkpoint holding
them is durable; only then does the reader confirm that LSN to the server (standby status
update, flush LSN), which lets PostgreSQL recycle the WAL. A crash before the checkpoint
re-reads those transactions from the slot.

Errors (upstream down, slot busy for a moment after a crash): the thread reports the
state in rw_source_* (SourceStatus), waits a second and reconnects from its last position.
Lifecycle: created by `PostgresCdcConnector.open_reader`; `close()` stops the thread.
"""

from __future__ import annotations

import contextlib
import io
import logging
import select
import threading
import time
from typing import Any

import psycopg2
import psycopg2.extras

from connectors.postgres_cdc.options import CdcOptions, slot_name
from connectors.postgres_cdc.pgoutput import TxnDecoder, snapshot_csv, to_chunks
from engine.catalog import Relation
from engine.chunk import StreamChunk
from engine.stream.source_status import SourceStatus

log = logging.getLogger("swell.postgres_cdc")

BATCH_ROWS = 20000
MAX_BUFFERED_ROWS = 1_000_000
FEEDBACK_S = 1.0


class PgCdcReader:
    def __init__(
        self, rel: Relation, position: dict[str, Any] | None, status: SourceStatus
    ) -> None:
        self.rel = rel
        self.opts = CdcOptions.parse(rel.options)
        self.fields = list(rel.fields)
        self.slot = slot_name(self.opts, rel.id)
        sch, tab = self.opts.table_parts()
        self.decoder = TxnDecoder(self.fields, sch, tab)
        self.lsn: int | None = int(position["lsn"]) if position else None  # buffered up to
        self.confirmed = self.lsn or 0  # durable in a checkpoint
        self._sent = 0
        self.stats = status
        with status.lock:
            status.topic = f"{sch}.{tab}"
        self._lock = threading.Lock()
        self._buf: list[StreamChunk] = []
        self._buf_rows = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name=f"swell-pgcdc-{rel.name}", daemon=True
        )
        self._thread.start()

    # -- runtime side ----------------------------------------------------------------------
    def take(self) -> tuple[list[StreamChunk], dict[str, Any]]:
        with self._lock:
            chunks, self._buf, self._buf_rows = self._buf, [], 0
            pos = {"lsn": self.lsn} if self.lsn is not None else {}
        return chunks, pos

    def committed(self, position: dict[str, Any] | None) -> None:
        if position and position.get("lsn"):
            self.confirmed = max(self.confirmed, int(position["lsn"]))

    def has_data(self) -> bool:
        return bool(self._buf)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    # -- reader thread ---------------------------------------------------------------------
    def _run(self) -> None:
        logged = False
        while not self._stop.is_set():
            conn = None
            try:
                conn = self.opts.connect(replication=True)
                cur = conn.cursor()
                if self.lsn is None:
                    self._snapshot(cur)
                self._stream(cur)
            except Exception as e:  # upstream down, slot busy: retry from the position
                self.stats.set_state("unreachable", str(e).strip())
                if not logged:
                    logged = True
                    log.warning("postgres-cdc %s: %s (retrying)", self.rel.name, e)
                self._stop.wait(1.0)
            finally:
                if conn is not None:
                    with contextlib.suppress(Exception):
                        conn.close()

    def _snapshot(self, cur: Any) -> None:
        plain = self.opts.connect()
        try:
            pc = plain.cursor()
            pc.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                " WHERE slot_name = %s",
                (self.slot,),
            )
            cur.execute(f'CREATE_REPLICATION_SLOT "{self.slot}" LOGICAL pgoutput EXPORT_SNAPSHOT')
            _name, point, snap, _plugin = cur.fetchone()
            plain.autocommit = False
            pc.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            pc.execute("SET TRANSACTION SNAPSHOT %s", (snap,))
            sch, tab = self.opts.table_parts()
            cols = ", ".join(f'"{f.name}"' for f in self.fields)
            data = io.BytesIO()
            pc.copy_expert(
                f'COPY (SELECT {cols} FROM "{sch}"."{tab}") TO STDOUT (FORMAT csv)', data
            )
            plain.rollback()
        finally:
            plain.close()
        size = data.tell()
        data.seek(0)
        batches = snapshot_csv(data, self.fields) if size else []
        lsn = _parse_lsn(point)
        with self._lock:
            for b in batches:
                self._buf.append(StreamChunk.inserts(b))
                self._buf_rows += b.num_rows
            self.lsn = lsn
        with self.stats.lock:
            self.stats.messages += sum(b.num_rows for b in batches)
        log.info(
            "postgres-cdc %s: snapshot of %d rows at %s",
            self.rel.name,
            sum(b.num_rows for b in batches),
            point,
        )

    def _stream(self, cur: Any) -> None:
        assert self.lsn is not None
        cur.start_replication(
            slot_name=self.slot,
            decode=False,
            start_lsn=self.lsn,
            options={"proto_version": "1", "publication_names": self.opts.publication},
        )
        self.stats.set_state("running")
        self.decoder.txn = []
        pending = 0
        last_flush = time.monotonic()
        while not self._stop.is_set():
            if self._buf_rows >= MAX_BUFFERED_ROWS:
                self._stop.wait(0.01)
                self._feedback(cur)
                continue
            msg = cur.read_message()
            if msg is not None:
                self.decoder.feed(msg.payload)
                pending += 1
                if pending < BATCH_ROWS:
                    continue
            now = time.monotonic()
            self._publish()
            pending = 0
            if now - last_flush >= FEEDBACK_S or self._sent < self.confirmed:
                self._feedback(cur)
                last_flush = now
            if msg is None:
                select.select([cur], [], [], 0.05)

    def _publish(self) -> None:
        rows = self.decoder.take_rows()
        end = self.decoder.end_lsn
        if not rows and (self.lsn is None or end <= self.lsn):
            return
        chunks = to_chunks(rows, self.fields) if rows else []
        with self._lock:
            self._buf.extend(chunks)
            self._buf_rows += len(rows)
            if self.lsn is None or end > self.lsn:
                self.lsn = end
        with self.stats.lock:
            self.stats.messages += len(rows)
        if self.decoder.unchanged_toast:
            log.warning(
                "postgres-cdc %s: %d unchanged TOAST values read as NULL (set REPLICA IDENTITY"
                " FULL upstream)",
                self.rel.name,
                self.decoder.unchanged_toast,
            )
            self.decoder.unchanged_toast = 0

    def _feedback(self, cur: Any) -> None:
        lsn = self.confirmed
        cur.send_feedback(write_lsn=lsn, flush_lsn=lsn, apply_lsn=lsn, reply=lsn > self._sent)
        self._sent = max(self._sent, lsn)


def _parse_lsn(text: str) -> int:
    hi, lo = text.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


def drop_slot(opts: CdcOptions, rel_id: int) -> None:
    """Drop a table's replication slot upstream (DROP TABLE); errors are logged only."""
    try:
        conn = opts.connect()
    except Exception as e:
        log.warning("postgres-cdc: could not drop slot %s: %s", slot_name(opts, rel_id), e)
        return
    try:
        for _ in range(20):  # the walsender of a just-closed stream may still hold it
            try:
                conn.cursor().execute(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                    " WHERE slot_name = %s",
                    (slot_name(opts, rel_id),),
                )
                return
            except psycopg2.errors.ObjectInUse:
                time.sleep(0.1)
    except Exception as e:
        log.warning("postgres-cdc: could not drop slot %s: %s", slot_name(opts, rel_id), e)
    finally:
        conn.close()


__all__ = ["PgCdcReader", "drop_slot", "psycopg2"]
