"""Exactly-once writes of a change stream into an Iceberg table.

Lifecycle (driven by the sink framework, or by the `ENGINE = iceberg` table):

1. `open()` at CREATE: load the catalog, find (or create) the table, check the schema;
   every error names the option to fix.
2. `recover()` after a restart: read the last epoch this sink committed from the table's
   snapshot summaries (`swell.sink` / `swell.epoch`), and drop pending log entries at or
   below it: they are already in the table.
3. `write(epoch, chunk)` per barrier: the epoch's changes go into the pending log, a
   `StateTable` keyed `(epoch, seq)` -> Arrow IPC bytes (with an `__op` column). The log is
   committed with the RocksDB checkpoint of the same epoch, so a crash after the checkpoint
   never loses changes the dataflow will not produce again.
4. `after_checkpoint(epoch)` after each RocksDB checkpoint: every `commit_checkpoint_interval`
   checkpoints, the whole pending log goes into Iceberg in one transaction whose snapshot
   summary records the epoch; then the log entries are deleted (persisted by the next
   checkpoint). A crash between the Iceberg commit and that checkpoint leaves entries whose
   epoch the summary already covers: `recover()` drops them. A crash before the Iceberg
   commit leaves orphan data files at most, and the entries are committed again.

Upsert (merge by primary key) is copy-on-write through pyiceberg: one transaction deletes
the batch's keys that the table already has (known from a key frame the writer maintains)
and appends each key's final row, so the common insert-only batch of new keys is a plain
append that rewrites no files (bench/iceberg_sink_bench.py --strategies compares this with
pyiceberg's `Table.upsert`, which joins every batch against the table). pyiceberg can
neither write nor read equality-delete files, which rules merge-on-read out here.
"""

from __future__ import annotations

import io
import logging
import os
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
import pyarrow as pa
from pyiceberg.exceptions import CommitFailedException

from connectors.iceberg.config import IcebergConfig
from connectors.iceberg.schema import to_arrow
from engine.chunk import StreamChunk
from engine.errors import DataError
from engine.numeric import has_special

log = logging.getLogger("swell.iceberg")

SINK_PROP = "swell.sink"
EPOCH_PROP = "swell.epoch"
OP = "__op"
_INSERT_OPS = (1, 4)  # Op.INSERT, Op.UPDATE_INSERT


class MemoryLog:
    """A StateTable stand-in for tests and the benchmark (same get/put/delete/items)."""

    def __init__(self) -> None:
        self._d: dict[tuple[Any, ...], tuple[Any, ...]] = {}

    def put(self, k: tuple[Any, ...], v: tuple[Any, ...]) -> None:
        self._d[k] = v

    def delete(self, k: tuple[Any, ...]) -> None:
        self._d.pop(k, None)

    def items(self) -> Any:
        return iter(list(self._d.items()))

    def __len__(self) -> int:
        return len(self._d)


@dataclass
class CommitStatus:
    """What `rw_iceberg_sinks`-style status tables show."""

    commits: int = 0
    rows_committed: int = 0
    last_commit_epoch: int = 0
    last_commit_time: float | None = None
    last_snapshot_id: int | None = None
    last_error: str | None = None
    pending_rows: int = 0
    files_written: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def _ipc(batch: pa.RecordBatch) -> bytes:
    sink = io.BytesIO()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return sink.getvalue()


def _unipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(data).read_all()


class IcebergWriter:
    def __init__(
        self,
        cfg: IcebergConfig,
        fields: list[Any],
        pk: list[int],
        *,
        mode: str,
        sink_key: str,
        commit_interval: int = 60,
        create_if_not_exists: bool = False,
        partition_by: str | None = None,
        log_table: Any | None = None,
    ) -> None:
        self.cfg = cfg
        self.fields = [f for f in fields if not getattr(f, "hidden", False)]
        self.names = [f.name for f in self.fields]
        self.pk_names = [fields[i].name for i in pk]
        self.mode = mode
        self.sink_key = sink_key
        self.commit_interval = max(1, int(commit_interval))
        self.create_if_not_exists = create_if_not_exists
        self.partition_by = partition_by
        self.log = log_table if log_table is not None else MemoryLog()
        self.table: Any = None
        self.status = CommitStatus()
        self._since_commit = 0
        self._seq = 0
        self._lock = threading.Lock()
        self._keys: pl.DataFrame | None = None  # the table's primary keys (upsert only)
        self._pending_keys: tuple[pa.Table, pl.DataFrame] | None = None
        self._keys_snapshot: int | None = None  # the table snapshot `_keys` describes

    # -- lifecycle ------------------------------------------------------------------------
    def open(self) -> None:
        from connectors.iceberg.tables import resolve_table

        self.table = resolve_table(
            self.cfg,
            self.fields,
            [self.names.index(n) for n in self.pk_names if n in self.names],
            create_if_not_exists=self.create_if_not_exists,
            partition_by=self.partition_by,
        )

    def committed_epoch(self) -> int:
        """The last epoch this sink committed, from the snapshot summaries (0 if none)."""
        self.table.refresh()
        md = self.table.metadata
        snap_id = md.current_snapshot_id
        by_id = {s.snapshot_id: s for s in md.snapshots}
        while snap_id is not None:
            s = by_id.get(snap_id)
            if s is None:
                break
            props = s.summary.additional_properties if s.summary else {}
            if props.get(SINK_PROP) == self.sink_key and EPOCH_PROP in props:
                return int(props[EPOCH_PROP])
            snap_id = s.parent_snapshot_id
        return 0

    def recover(self) -> int:
        """Drop pending entries the table already has; returns the last committed epoch."""
        if self.table is None:
            self.open()
        done = self.committed_epoch()
        for k, _ in self.log.items():
            if k[0] <= done:
                self.log.delete(k)
        self.status.last_commit_epoch = done
        self.status.pending_rows = self._count_pending()
        return done

    def _count_pending(self) -> int:
        n = 0
        for _, v in self.log.items():
            n += int(v[1])
        return n

    # -- per epoch ------------------------------------------------------------------------
    def write(self, epoch: int, chunk: StreamChunk) -> None:
        if not len(chunk):
            return
        data = chunk.data
        cols = [data.column(data.schema.get_field_index(n)) for n in self.names]
        for name, col in zip(self.names, cols, strict=True):
            if has_special(col):  # Iceberg decimals have no NaN / Infinity
                raise DataError(
                    f"numeric NaN or Infinity in column {name} cannot be written to an "
                    "Iceberg decimal",
                    hint="Filter such rows out or cast the column to double precision.",
                )
        if self.mode == "append-only":
            mask = pa.compute.is_in(chunk.ops, pa.array(_INSERT_OPS, pa.int8()))
            batch = pa.RecordBatch.from_arrays(cols, names=self.names).filter(mask)
            if not batch.num_rows:
                return
            ops = pa.array(np.ones(batch.num_rows, dtype=np.int8))
        else:
            batch = pa.RecordBatch.from_arrays(cols, names=self.names)
            ops = chunk.ops
        rb = pa.RecordBatch.from_arrays([*batch.columns, ops], names=[*self.names, OP])
        self._seq += 1
        self.log.put((epoch, self._seq), (_ipc(rb), rb.num_rows))
        self.status.pending_rows += rb.num_rows

    def after_checkpoint(self, epoch: int) -> bool:
        """Called once the epoch's RocksDB checkpoint is durable; commits every N-th one."""
        self._since_commit += 1
        if self._since_commit < self.commit_interval:
            return False
        return self.commit(epoch)

    def commit(self, epoch: int) -> bool:
        with self._lock:
            entries = sorted(self.log.items(), key=lambda kv: kv[0])
            if not entries:
                self._since_commit = 0
                return False
            try:
                self._commit(epoch, [_unipc(v[0]) for _, v in entries])
            except Exception as e:  # keep the log; the next checkpoint retries
                self.status.last_error = f"{type(e).__name__}: {e}"[:500]
                log.warning("iceberg commit of %s at epoch %d failed: %s", self.sink_key, epoch, e)
                return False
            for k, _ in entries:
                self.log.delete(k)
            self._since_commit = 0
            self.status.pending_rows = 0
            self.status.last_error = None
            return True

    def _commit(self, epoch: int, tables: list[pa.Table]) -> None:
        changes = pa.concat_tables(tables, promote_options="default")
        props = {SINK_PROP: self.sink_key, EPOCH_PROP: str(epoch)}
        schema = self.table.schema()
        if self.mode == "append-only":
            rows = changes.drop_columns([OP])
            delete_keys = None
        else:
            rows, delete_keys = self._net_upsert(changes)
        for attempt in range(4):
            try:
                if attempt:
                    self.table.refresh()
                    if self.committed_epoch() >= epoch:
                        return  # an earlier attempt did land
                tx = self.table.transaction()
                if delete_keys is not None and delete_keys.num_rows:
                    tx.delete(self._key_filter(delete_keys), snapshot_properties=props)
                if rows.num_rows:
                    tx.append(to_arrow(rows, schema), snapshot_properties=props)
                elif delete_keys is None or not delete_keys.num_rows:
                    return
                tx.commit_transaction()
                if os.environ.get("SWELL_TEST_CRASH_AFTER_ICEBERG_COMMIT"):
                    # crash tests: die in the window between the Iceberg commit and the
                    # checkpoint that forgets the staged changes
                    os.kill(os.getpid(), signal.SIGKILL)
                break
            except CommitFailedException:
                if attempt == 3:
                    raise
                time.sleep(0.05 * (attempt + 1))
        self._update_keys()
        snap = self.table.current_snapshot()
        st = self.status
        st.commits += 1
        st.rows_committed += rows.num_rows
        st.last_commit_epoch = epoch
        st.last_commit_time = time.time()
        st.last_snapshot_id = snap.snapshot_id if snap else None
        if snap is not None and snap.summary is not None:
            st.files_written += int(snap.summary.additional_properties.get("added-data-files", 0))

    def _net_upsert(self, changes: pa.Table) -> tuple[pa.Table, pa.Table]:
        """Each key's final row (if its last change inserts) and the keys to delete first.

        The keys to delete are the keys the batch touched that the table already has, so
        an insert-only batch of new keys is a plain append that rewrites no data files.
        The table's keys are kept in a polars frame, loaded once by a key-only scan and
        maintained per commit (reloaded if another writer committed in between); this also
        handles a primary key that is not the upstream's stream key (no retraction seen).
        """
        df = pl.from_arrow(changes)
        assert isinstance(df, pl.DataFrame)
        df = df.with_row_index("__i")
        last = df.group_by(self.pk_names, maintain_order=True).agg(pl.all().sort_by("__i").last())
        final = last.filter(pl.col(OP).is_in(list(_INSERT_OPS)))
        # delete exactly the touched keys the table has (the key frame is exact: it is
        # reloaded whenever someone else committed to the table since our last commit)
        touched = last.select(self.pk_names)
        existing = self._existing_keys().cast(dict(touched.schema))
        dels = touched.join(existing, on=self.pk_names, how="semi")
        rows = final.sort("__i").select(self.names).to_arrow()
        keys = dels.select(self.pk_names).to_arrow()
        self._pending_keys = (keys, final.select(self.pk_names))
        return rows, keys

    def _existing_keys(self) -> pl.DataFrame:
        snap = self.table.current_snapshot()
        if snap is not None and snap.snapshot_id != self._keys_snapshot:
            self._keys = None  # another writer committed: our key frame may be stale
        if self._keys is None:
            t = self.table.scan(selected_fields=tuple(self.pk_names)).to_arrow()
            df = pl.from_arrow(t.select(self.pk_names))
            assert isinstance(df, pl.DataFrame)
            self._keys = df.unique()
            snap = self.table.current_snapshot()
            self._keys_snapshot = snap.snapshot_id if snap is not None else None
        return self._keys

    def _update_keys(self) -> None:
        if self._keys is None or self._pending_keys is None:
            return
        deleted, inserted = self._pending_keys
        keys = self._keys
        if deleted.num_rows:
            d = pl.from_arrow(deleted)
            assert isinstance(d, pl.DataFrame)
            keys = keys.join(d.cast(dict(keys.schema)), on=self.pk_names, how="anti")
        if len(inserted):
            keys = pl.concat([keys, inserted.cast(dict(keys.schema))]).unique()
        self._keys = keys
        self._pending_keys = None
        snap = self.table.current_snapshot()
        self._keys_snapshot = snap.snapshot_id if snap is not None else None

    def _key_filter(self, keys: pa.Table) -> Any:
        from pyiceberg.expressions import And, EqualTo, In, Or

        if len(self.pk_names) == 1:
            name = self.pk_names[0]
            return In(name, keys.column(name).to_pylist())
        expr: Any = None
        for row in keys.to_pylist():  # composite keys: per key at a true row boundary
            term: Any = None
            for n in self.pk_names:
                t = EqualTo(n, row[n])
                term = t if term is None else And(term, t)
            expr = term if expr is None else Or(expr, term)
        return expr
