"""Committed-epoch snapshots of relations' rows, readable without the runtime lock.

Why: an ad-hoc SELECT (and a backfill reading its upstream) needs every relation it reads
as of one committed epoch. Building Arrow tables under the runtime lock makes readers and
the barrier wait for each other; instead the rows are *pinned*: a relation's rows live in
immutable Arrow segments whose live masks are never changed in place
(`engine.stream.operators.keyed_segments`), so a pin is a tuple of (segment, mask)
references, O(segments) to take and unaffected by later epochs.

Lifecycle (`engine.stream.runtime.Runtime`):

1. at the end of every committed barrier (after the checkpoint is durable) and at start,
   still under the lock, the runtime pins each table's and materialized view's rows
   (`ColumnarMaterializeOp.pin`; a relation that did not change returns the same pin)
   into one `EpochSnapshot` and publishes it by replacing one reference;
2. a reader calls `Runtime.committed()` (no lock) and reads any relation of it with
   `table(rel_id)` from any thread, while the next epoch is being computed; every
   relation is as of the same epoch, `epoch`;
3. the snapshot stays valid as long as the reader holds it; segments dropped by later
   compactions stay alive through its references and are freed with it.

Ad-hoc SELECT reads every table and view from `committed()` (engine.handlers.query), so
it never waits for a barrier. `Runtime.pin(rel_id)` pins one relation now, under the lock
(a backfill reading its upstream; a SELECT of a relation whose CREATE has not committed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

import pyarrow as pa


class Pinned(Protocol):
    """Rows that later writes cannot change (`SegmentSnapshot`, `TablePin`)."""

    def table(self) -> pa.Table: ...

    def __len__(self) -> int: ...


class TablePin:
    """An already built Arrow table as a pin (sources' backfill rows, empty relations)."""

    __slots__ = ("_table",)

    def __init__(self, table: pa.Table) -> None:
        self._table = table

    def table(self) -> pa.Table:
        return self._table

    def __len__(self) -> int:
        return int(self._table.num_rows)


@dataclass(frozen=True)
class EpochSnapshot:
    """Every table's and materialized view's rows as of committed epoch `epoch`."""

    epoch: int
    pins: Mapping[int, Pinned] = field(default_factory=dict)

    def __contains__(self, rel_id: object) -> bool:
        return rel_id in self.pins

    def table(self, rel_id: int) -> pa.Table:
        """The relation's rows (KeyError for a relation the epoch does not have)."""
        return self.pins[rel_id].table()

    def row_count(self, rel_id: int) -> int:
        return len(self.pins[rel_id])
