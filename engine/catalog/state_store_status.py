"""`rw_catalog.rw_state_store_status`: the remote state store's upload status, one row.

Why: an S3 outage must be visible without reading logs. RisingWave shows its object
store's health only through metrics (`object_store_failure_count`, operation latencies)
and Hummock's versions in `rw_catalog.rw_hummock_version`; Swell has no meta node, so this
table answers the operator's questions directly: is the store keeping up (`state`,
`committed_epoch` vs `uploaded_epoch`), since when not (`last_upload_at`), why
(`consecutive_failures`, `last_error`), and how much it moves (objects and bytes uploaded
and deleted). `state` is idle, uploading, collecting (garbage), retrying (failures, with
backoff), fenced (another server wrote to the prefix: uploads stopped) or stopped.

Lifecycle: registered when imported (by `engine.database`); no row without
`--state-store`; read at query time from `SwellDatabase.uploader.status()`.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from engine.catalog.system import RW_CATALOG, SystemContext, register_system_relation
from engine.types import BIGINT, DOUBLE, TIMESTAMPTZ, VARCHAR, Field

FIELDS = [
    Field("url", VARCHAR),
    Field("state", VARCHAR),
    Field("committed_epoch", BIGINT),
    Field("uploaded_epoch", BIGINT),
    Field("epochs_behind", BIGINT),
    Field("last_upload_at", TIMESTAMPTZ),
    Field("last_upload_seconds", DOUBLE),
    Field("last_upload_objects", BIGINT),
    Field("last_upload_bytes", BIGINT),
    Field("uploads", BIGINT),
    Field("objects_uploaded", BIGINT),
    Field("bytes_uploaded", BIGINT),
    Field("objects_deleted", BIGINT),
    Field("manifests_retained", BIGINT),
    Field("remote_bytes", BIGINT),
    Field("failures", BIGINT),
    Field("consecutive_failures", BIGINT),
    Field("last_error", VARCHAR),
    Field("last_error_at", TIMESTAMPTZ),
]
_TIMES = {"last_upload_at", "last_error_at"}


def _ts(t: float | None) -> dt.datetime | None:
    return None if t is None else dt.datetime.fromtimestamp(t, dt.UTC)


def _rows(ctx: SystemContext) -> list[tuple[Any, ...]]:
    uploader = getattr(ctx.db, "uploader", None)
    if uploader is None:
        return []
    st = uploader.status()
    return [tuple(_ts(st[f.name]) if f.name in _TIMES else st[f.name] for f in FIELDS)]


register_system_relation(
    RW_CATALOG,
    "rw_state_store_status",
    FIELDS,
    _rows,
    description="uploads of checkpoints to the remote state store (--state-store)",
)
