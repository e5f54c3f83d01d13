"""Test-only helpers shared by the join and top-N tests: change streams and real-store restarts.

`changes_st` draws a consistent insert/delete/update stream over small value domains
(many key collisions, NULLs), split into epochs. `checkpoint`/`restart` round-trip an
operator's state through a real RocksDB `StateStore`, the way the runtime does at a
checkpoint and on recovery.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st

from engine.chunk import Op, StreamChunk
from engine.state.disk_table import DiskTables, HotCache
from engine.state.store import StateStore
from engine.state.table import StateTable
from engine.stream.operator import Operator
from engine.stream.operators.frames import batch_from_rows
from engine.types import Field, arrow_schema

Row = tuple[Any, ...]
Events = list[tuple[Op, Row]]


def small(lo: int, hi: int, nulls: bool = True) -> st.SearchStrategy[int | None]:
    ints = st.integers(lo, hi)
    return st.one_of(st.none(), ints) if nulls else ints


@st.composite
def changes_st(
    draw: st.DrawFn,
    n_epochs: int,
    payload: st.SearchStrategy[Row],
    keyed: bool,
    max_events: int = 8,
) -> list[Events]:
    """Epochs of events over rows `(id, *payload)`.

    keyed: ids are unique among live rows and updates keep the id (a stream key);
    otherwise ids come from {0, 1} and identical rows may coexist.
    """
    live: list[Row] = []
    next_id = 0
    out: list[Events] = []
    for _ in range(n_epochs):
        ev: Events = []
        for _ in range(draw(st.integers(0, max_events))):
            kind = draw(st.sampled_from(["ins", "ins", "del", "upd"]))
            if kind == "ins" or not live:
                if keyed:
                    rid = next_id
                    next_id += 1
                else:
                    rid = draw(st.integers(0, 1))
                r = (rid, *draw(payload))
                live.append(r)
                ev.append((Op.INSERT, r))
            elif kind == "del":
                ev.append((Op.DELETE, live.pop(draw(st.integers(0, len(live) - 1)))))
            else:
                i = draw(st.integers(0, len(live) - 1))
                new = (live[i][0], *draw(payload))
                ev += [(Op.UPDATE_DELETE, live[i]), (Op.UPDATE_INSERT, new)]
                live[i] = new
        out.append(ev)
    return out


def events_chunk(fields: list[Field], ev: Events) -> StreamChunk | None:
    if not ev:
        return None
    ops = pa.array([int(o) for o, _ in ev], pa.int8())
    return StreamChunk(ops, batch_from_rows(fields, [r for _, r in ev]))


def apply_events(acc: Counter[Row], ev: Events) -> None:
    for op, r in ev:
        acc[r] += op.sign
        if acc[r] == 0:
            del acc[r]


def arrow_table(fields: list[Field], rows: Counter[Row]) -> pa.Table:
    flat = [r for r, n in rows.items() for _ in range(n)]
    return pa.Table.from_batches([batch_from_rows(fields, flat)], arrow_schema(fields))


class DiskAllocator:
    """Hands out RocksDB-first tables over `store` (as the runtime does with a data
    directory), distributed by the first `dist[name]` key columns; same name, same id."""

    def __init__(self, store: StateStore, dist: dict[str, int] | None = None) -> None:
        self._disk = DiskTables(store, HotCache(0))
        self._dist = dist or {}
        self._ids: dict[str, int] = {}

    def table(self, name: str, *, disk: bool = False, dist: bool = True) -> StateTable:
        tid = self._ids.setdefault(name, 1000 + len(self._ids))
        if not disk:
            return StateTable(tid, name)
        d = self._dist.get(name, 0) if dist else 0
        return self._disk.table(tid, name, d)  # type: ignore[return-value]


def checkpoint(store: StateStore, op: Operator) -> None:
    batch = store.new_batch()
    for t in op.state_tables():
        t.write_dirty(batch)
    store.write(batch, sync=False)


def restart(store: StateStore, make: Callable[[], Operator]) -> Operator:
    """A fresh operator (fresh allocator, same table names) loaded from the store."""
    op = make()
    for t in op.state_tables():
        t.load(store)
    return op


def nan_marked(row: Row) -> Row:
    """NaN != NaN defeats multiset comparison; replace NaN by a marker string."""
    return tuple("NaN" if isinstance(v, float) and v != v else v for v in row)


def integrate_marked(acc: Counter[Row], out: StreamChunk | None) -> None:
    """`helpers.integrate` for rows that may hold NaN (compared through `nan_marked`)."""
    if out is None:
        return
    rows = out.to_rows()
    for i, (op, row) in enumerate(rows):
        if op is Op.UPDATE_DELETE:
            assert i + 1 < len(rows) and rows[i + 1][0] is Op.UPDATE_INSERT, "unpaired U-"
        key = nan_marked(row)
        acc[key] += op.sign
        assert acc[key] >= 0, f"row {row} retracted below zero"
        if acc[key] == 0:
            del acc[key]
