"""Table TTL: `WATERMARK FOR ts AS ts - INTERVAL '5' SECOND WITH TTL` cleans old rows.

RisingWave's table TTL (watermark WITH TTL) is state cleanup only: rows whose watermark
column is below the table's current watermark leave the table's storage, so ad-hoc reads
and new views no longer see them, but no deletes flow to existing materialized views (their
results keep the rows they already counted; views over such tables usually aggregate
closed windows). A row that arrives already below the watermark is cleaned at once.

Lifecycle: the runtime calls `clean_expired` once per epoch, after every view and sink has
stepped and before the epoch's commit. For each table with a TTL watermark that advanced
since its last cleanup, the table's rows are filtered vectorised (`ts < watermark`) and fed
to the table's own materialize operator as deletes whose output is discarded; the dirty
state commits with the epoch, so the cleanup is as durable as the rows were. The scan is
over the whole table, which TTL keeps small; the last cleaned watermark is kept on the
flow and a restart cleans once more (idempotent).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.chunk import StreamChunk


def clean_expired(
    tables: dict[int, Any],
    watermarks: dict[int, dict[int, int]],
    lock: Callable[[int], AbstractContextManager[Any]] | None = None,
) -> int:
    """Delete (without output) every TTL table's rows below its watermark; rows removed.

    `lock(table_id)`: held while a table's rows change (the runtime's DML lock)."""
    removed = 0
    for tid, flow in tables.items():
        spec = flow.rel.extra.get("watermark")
        if not spec or not spec.get("ttl"):
            continue
        col = int(spec["column"])
        wm = watermarks.get(tid, {}).get(col)
        if wm is None or getattr(flow, "ttl_cleaned", None) == wm:
            continue
        with lock(tid) if lock is not None else nullcontext():
            flow.ttl_cleaned = wm
            removed += _clean_one(flow, col, wm)
    return removed


def _clean_one(flow: Any, col: int, wm: int) -> int:
    snap = flow.mat.snapshot()
    if snap.num_rows == 0:
        return 0
    ts = snap.column(col)
    micros = pc.cast(ts, pa.timestamp("us", tz=ts.type.tz)).cast(pa.int64())
    old = pc.fill_null(pc.less(micros, pa.scalar(wm, pa.int64())), False)
    expired = snap.filter(old)
    if expired.num_rows == 0:
        return 0
    flow.mat.step([StreamChunk.deletes(expired)])
    return int(expired.num_rows)
