"""What operators need from the rest of the engine: state tables and scalar expressions.

Operators never create `StateTable`s themselves. Table ids must survive restarts (the
store keys every row by its table id), so the runtime owns them: at build time it hands
each operator a `StateAllocator`, and the operator asks it for its tables by a name that
is stable for that operator (`"groups"`, `"minmax_1"`, `"rows"`). Asking again for the
same name after a restart must return the table with the same id, which the runtime then
fills with `StateTable.load` before the first step.

`LocalStateAllocator` numbers tables itself; it serves tests and one-shot runs (an ad-hoc
SELECT runs the streaming plan once over a snapshot with throwaway state).

Scalar expressions come from `engine.expr`; operators only rely on the structural `Expr`
protocol below, so this package does not import the expression package.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import pyarrow as pa

from engine.state.table import StateTable
from engine.types import SqlType


class StateAllocator(Protocol):
    """Hands out an operator's state tables; the same name yields the same table id.

    `disk=True`: the operator can work with a RocksDB-first table (rows in RocksDB, a
    bounded cache in memory; `engine.state.disk_table`); allocators without a store
    hand out a resident `StateTable`, which answers the same interface. `dist=False`:
    the disk table keeps every row in one vnode (keys that are not the plan's key, such
    as segment ids)."""

    def table(self, name: str, *, disk: bool = False, dist: bool = True) -> StateTable: ...


class LocalStateAllocator:
    """Allocator with its own id counter, for tests and one-shot (ad-hoc) plan runs.

    Repeated requests for one name return the same table object, so a test can build a
    second operator over the same allocator to simulate a restart after `load`.
    """

    def __init__(self, first_id: int = 1) -> None:
        self._next = first_id
        self.tables: dict[str, StateTable] = {}

    def table(self, name: str, *, disk: bool = False, dist: bool = True) -> StateTable:
        t = self.tables.get(name)
        if t is None:
            t = StateTable(self._next, name)
            self._next += 1
            self.tables[name] = t
        return t


class EvalContextLike(Protocol):
    """Session facts an expression may read (`engine.expr.EvalContext` satisfies it)."""

    timezone: str


@runtime_checkable
class Expr(Protocol):
    """A scalar expression over a record batch (implemented by `engine.expr`).

    `eval` returns one value per row of `batch`, of Arrow type `type.arrow`.
    """

    @property
    def type(self) -> SqlType: ...

    def eval(self, batch: pa.RecordBatch, ctx: Any) -> pa.Array: ...
