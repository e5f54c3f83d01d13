"""`rw_catalog.rw_sink_status`: one row per sink with its live delivery counters.

Rows come from each `SinkFlow`'s `SinkStatus` (rows handed to the writer, last write,
flush and commit, errors and retries, the last error, connector figures as jsonb). While
a sink cannot flush, timer barriers keep retrying without holding the runtime lock, so
this table shows `state = 'retrying'` and growing `retries` during an outage.
Lifecycle: registered when `engine.stream.sink` is imported; read at query time.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from engine.catalog.system import RW_CATALOG, SystemContext, register_system_relation
from engine.types import BIGINT, INT, JSONB, TIMESTAMPTZ, VARCHAR, Field

FIELDS = [
    Field("sink_id", INT),
    Field("sink_name", VARCHAR),
    Field("connector", VARCHAR),
    Field("sink_type", VARCHAR),
    Field("state", VARCHAR),
    Field("rows_written", BIGINT),
    Field("epochs_written", BIGINT),
    Field("last_write_at", TIMESTAMPTZ),
    Field("last_flush_at", TIMESTAMPTZ),
    Field("last_commit_epoch", BIGINT),
    Field("last_commit_at", TIMESTAMPTZ),
    Field("errors", BIGINT),
    Field("retries", BIGINT),
    Field("last_error", VARCHAR),
    Field("detail", JSONB),
]


def _ts(t: float | None) -> dt.datetime | None:
    return None if t is None else dt.datetime.fromtimestamp(t, dt.UTC)


def _rows(ctx: SystemContext) -> list[tuple[Any, ...]]:
    out = []
    for sid, flow in sorted(dict(ctx.db.runtime.sinks).items()):
        spec, st = flow.spec, flow.status
        out.append(
            (
                sid,
                spec.name,
                spec.connector,
                spec.sink_type,
                st.state,
                st.rows,
                st.epochs,
                _ts(st.last_write_at),
                _ts(st.last_flush_at),
                st.last_commit_epoch,
                _ts(st.last_commit_at),
                st.errors,
                st.retries,
                st.last_error,
                json.dumps(st.extra, sort_keys=True, separators=(", ", ": "), default=str),
            )
        )
    return out


register_system_relation(
    RW_CATALOG,
    "rw_sink_status",
    FIELDS,
    _rows,
    description="delivery status of every sink",
)
