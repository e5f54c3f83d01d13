"""`rw_catalog.rw_iceberg_sinks`: commit status of every Iceberg sink (and engine table).

One row per running sink whose connector is `iceberg`, including the hidden sinks of
`ENGINE = iceberg` tables: how many Iceberg commits it made, the rows and data files they
added, the last committed epoch, snapshot id and time, rows staged for the next commit,
and the last error (NULL once a later commit succeeded). The figures come from the
writer (`connectors.iceberg.sink`), which publishes them into the framework's
`SinkStatus.extra` after every checkpoint. Registered at import by `engine.catalog.system`.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from engine.catalog.system import RW_CATALOG, SystemContext, register_system_relation
from engine.types import BIGINT, INT, TIMESTAMPTZ, VARCHAR, Field

FIELDS = [
    Field("sink_id", INT),
    Field("sink_name", VARCHAR),
    Field("state", VARCHAR),
    Field("commits", BIGINT),
    Field("rows_committed", BIGINT),
    Field("files_written", BIGINT),
    Field("last_commit_epoch", BIGINT),
    Field("last_commit_time", TIMESTAMPTZ),
    Field("snapshot_id", BIGINT),
    Field("pending_rows", BIGINT),
    Field("last_error", VARCHAR),
]


def _rows(ctx: SystemContext) -> list[tuple[Any, ...]]:
    out = []
    sinks = dict(getattr(ctx.db.runtime, "sinks", {}))  # a copy: DDL may change the flows
    for sid in sorted(sinks):
        spec = sinks[sid].spec
        if spec.connector != "iceberg":
            continue
        x = spec.status.extra
        t = x.get("iceberg_last_commit_time")
        out.append(
            (
                sid,
                spec.name,
                spec.status.state,
                x.get("iceberg_commits", 0),
                x.get("iceberg_rows_committed", 0),
                x.get("iceberg_files_written", 0),
                x.get("iceberg_last_commit_epoch"),
                datetime.fromtimestamp(t, UTC) if t else None,
                x.get("iceberg_snapshot_id"),
                x.get("iceberg_pending_rows", 0),
                x.get("iceberg_last_error") or spec.status.last_error,
            )
        )
    return out


register_system_relation(
    RW_CATALOG,
    "rw_iceberg_sinks",
    FIELDS,
    _rows,
    description="Iceberg sinks: commits, rows, snapshot, staged rows, last error",
)
