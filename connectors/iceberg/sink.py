"""`CREATE SINK ... WITH (connector = 'iceberg', ...)`: the sink framework's writer for Iceberg.

Maps the framework's contract (`engine.stream.sink`) onto `IcebergWriter`:

* `validate()` (CREATE SINK): parse options, reach the catalog, find or create the table,
  check the schema by column name: every seed pitfall fails the statement here;
* `write(chunk, epoch)`: the epoch's changes are staged in the sink's data directory as
  one Arrow IPC file per write (`<data_dir>/staged/<epoch>-<seq>.arrow`);
* `pre_commit(epoch)`: fsync the staged files; return their names, which the framework
  stores in the RocksDB checkpoint of the same epoch;
* `post_commit(epoch)`: every `commit_checkpoint_interval` checkpoints, commit the staged
  changes to Iceberg in one transaction tagged with the epoch, then delete the files;
* `recover(epoch, state)` (restart): keep exactly the staged files the last checkpoint
  listed (later ones belong to epochs the dataflow recomputes from the WAL), then drop those
  whose epoch the table's snapshot summaries say is committed.

So a crash anywhere (before the checkpoint, between checkpoint and Iceberg commit, between
Iceberg commit and the next checkpoint) neither loses nor duplicates rows.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from typing import Any

from connectors.iceberg.config import IcebergConfig
from connectors.iceberg.writer import IcebergWriter
from engine.chunk import StreamChunk
from engine.errors import InvalidParameterValue, not_supported

log = logging.getLogger("swell.iceberg")

SINK_OPTION_KEYS = (
    "connector",
    "type",
    "primary_key",
    "force_append_only",
    "database.name",
    "table.name",
    "create_table_if_not_exists",
    "commit_checkpoint_interval",
    "partition_by",
    "connection",
    "is_exactly_once",
    "snapshot",
)


class FileLog:
    """The writer's pending log as files in a directory: (epoch, seq) -> Arrow IPC bytes."""

    def __init__(self, directory: str) -> None:
        self.dir = directory
        os.makedirs(directory, exist_ok=True)
        self._unsynced: list[str] = []

    @staticmethod
    def _name(k: tuple[Any, ...]) -> str:
        return f"{int(k[0]):020d}-{int(k[1]):08d}.arrow"

    @staticmethod
    def _key(name: str) -> tuple[int, int]:
        e, s = name.split(".")[0].split("-")
        return int(e), int(s)

    def names(self) -> list[str]:
        return sorted(n for n in os.listdir(self.dir) if n.endswith(".arrow"))

    def put(self, k: tuple[Any, ...], v: tuple[Any, ...]) -> None:
        name = self._name(k)
        with open(os.path.join(self.dir, name), "wb") as f:
            f.write(v[0])
        self._unsynced.append(name)

    def delete(self, k: tuple[Any, ...]) -> None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(self.dir, self._name(k)))

    def items(self) -> Any:
        import pyarrow as pa

        out = []
        for n in self.names():
            with open(os.path.join(self.dir, n), "rb") as f:
                data = f.read()
            rows = pa.ipc.open_stream(data).read_all().num_rows
            out.append((self._key(n), (data, rows)))
        return iter(out)

    def __len__(self) -> int:
        return len(self.names())

    def sync(self) -> None:
        for n in self._unsynced:
            path = os.path.join(self.dir, n)
            try:
                fd = os.open(path, os.O_RDONLY)
            except FileNotFoundError:
                continue
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        if self._unsynced:
            dfd = os.open(self.dir, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
        self._unsynced = []

    def keep_only(self, names: set[str]) -> None:
        for n in self.names():
            if n not in names:
                os.unlink(os.path.join(self.dir, n))


def _truthy(v: str | None) -> bool:
    return v is not None and v.strip().lower() in ("true", "t", "1", "yes", "on")


class IcebergSinkWriter:
    def __init__(self, spec: Any) -> None:
        self.spec = spec
        self.writer: IcebergWriter | None = None
        self.log: Any = None

    # -- construction -----------------------------------------------------------------------
    def _build(self) -> IcebergWriter:
        spec = self.spec
        o = {k.lower(): v for k, v in spec.options.items()}
        cfg = IcebergConfig.parse(o)
        if spec.sink_type == "debezium":
            raise not_supported(
                "type 'debezium' for Iceberg sinks", hint="Use 'upsert' or 'append-only'."
            )
        mode = "upsert" if spec.sink_type == "upsert" else "append-only"
        if mode == "upsert" and not spec.pk:
            raise InvalidParameterValue(
                "primary_key is required for an upsert Iceberg sink",
                hint="Add primary_key = 'col[,col...]' to the WITH options, or use "
                "type = 'append-only'.",
            )
        interval = o.get("commit_checkpoint_interval", "60")
        try:
            n = int(interval)
            if n < 1:
                raise ValueError
        except ValueError as e:
            raise InvalidParameterValue(
                f"commit_checkpoint_interval must be a positive integer, got '{interval}'"
            ) from e
        if spec.data_dir:
            self.log = FileLog(os.path.join(spec.data_dir, "staged"))
        return IcebergWriter(
            cfg,
            spec.fields,
            list(spec.pk),
            mode=mode,
            sink_key=f"{spec.name}#{spec.sink_id}",
            commit_interval=n,
            create_if_not_exists=_truthy(o.get("create_table_if_not_exists")),
            partition_by=o.get("partition_by"),
            log_table=self.log,
        )

    # -- the SinkWriter contract ---------------------------------------------------------------
    def validate(self) -> None:
        self.writer = self._build()
        self.writer.open()

    def open(self) -> None:
        if self.writer is None:
            self.writer = self._build()
        if self.writer.table is None:
            try:
                self.writer.open()
            except Exception as e:  # catalog down at restart: retried at the next commit
                log.warning("iceberg sink %s: cannot open the table yet: %s", self.spec.name, e)

    def recover(self, last_checkpoint_epoch: int, state: bytes | None) -> None:
        assert self.writer is not None
        if isinstance(self.log, FileLog):
            listed = set(json.loads(state)["staged"]) if state else set()
            self.log.keep_only(listed)
        if self.writer.table is None:
            self.writer.open()
        self.writer.recover()
        self._publish()

    def write(self, chunk: StreamChunk, epoch: int) -> None:
        assert self.writer is not None
        self.writer.write(epoch, chunk)

    def pre_commit(self, epoch: int) -> bytes | None:
        if isinstance(self.log, FileLog):
            self.log.sync()
            return json.dumps({"staged": self.log.names()}).encode()
        return None

    def post_commit(self, epoch: int) -> None:
        w = self.writer
        assert w is not None
        if w.table is None:
            w.open()
            w.recover()
        w.after_checkpoint(epoch)
        self._publish()
        if w.status.last_error:
            raise RuntimeError(w.status.last_error)

    def close(self) -> None:
        return None

    def wants_checkpoint(self) -> bool:
        w = self.writer
        return w is not None and w.status.pending_rows > 0

    def _publish(self) -> None:
        w = self.writer
        if w is None:
            return
        st = w.status
        self.spec.status.extra.update(
            {
                "iceberg_commits": st.commits,
                "iceberg_rows_committed": st.rows_committed,
                "iceberg_last_commit_epoch": st.last_commit_epoch,
                "iceberg_last_commit_time": st.last_commit_time,
                "iceberg_snapshot_id": st.last_snapshot_id,
                "iceberg_pending_rows": st.pending_rows,
                "iceberg_files_written": st.files_written,
                "iceberg_last_error": st.last_error,
            }
        )
