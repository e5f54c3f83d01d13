"""Logical plan nodes for window functions: `OverWindow` and the group top-N it can become.

`OverWindow` appends one column per window function call to its input's columns; every
call of one node shares the same PARTITION BY / ORDER BY (a SELECT with several distinct
window specifications chains several nodes). Rows that tie on the ORDER BY keys are
ordered by `tiebreak` (the input's stream key, or every column), ascending NULLS LAST, so
`row_number()`, `lag()` and ROWS frames are deterministic and a view equals its ad-hoc
query.

`GroupTopN` is what the streaming planner makes of
`SELECT .. FROM (SELECT .., row_number() OVER (PARTITION BY g ORDER BY o) AS rn ..) WHERE
rn <= N`: the first N rows of every partition plus the row number, maintained by
`TopNOp` instead of a full window.

Lifecycle: built by `engine.plan.plan_window`; executed ad hoc by `engine.batch` with the
kernel in `engine.stream.operators.window_kernel`, and in views by `OverWindowOp` (same
kernel per touched partition) or `TopNOp`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.plan.logical import PlanNode, SortKey
from engine.types import SqlType

#: frame bound: (kind, offset) with kind in unbounded_preceding, preceding, current_row,
#: following, unbounded_following; offset only for preceding/following
Bound = tuple[str, Any]


@dataclass(frozen=True)
class WindowFrame:
    mode: str  # rows, range, groups
    start: Bound
    end: Bound

    def __str__(self) -> str:
        def one(b: Bound) -> str:
            k, n = b
            if k in ("preceding", "following"):
                if hasattr(n, "months"):  # an interval offset (RANGE over dates/timestamps)
                    secs = n.nanoseconds / 1e9
                    n = f"INTERVAL '{n.months} mons {n.days} days {secs:g} secs'"
                return f"{n} {k.upper()}"
            return k.replace("_", " ").upper()

        return f"{self.mode.upper()} BETWEEN {one(self.start)} AND {one(self.end)}"


#: the PostgreSQL default frame (with ORDER BY: up to the last peer; without: everything)
DEFAULT_FRAME = WindowFrame("range", ("unbounded_preceding", 0), ("current_row", 0))


@dataclass(frozen=True)
class WindowCall:
    """One window function call over input columns `args`.

    kind: row_number, rank, dense_rank, percent_rank, cume_dist, ntile, lag, lead,
    first_value, last_value, nth_value, count_star, count, sum, avg, min, max.
    lag/lead: args = [value, default]; `offset` is the constant row offset.
    ntile / nth_value: `offset` is the constant bucket count / position.
    """

    kind: str
    args: tuple[int, ...]
    type: SqlType
    frame: WindowFrame = DEFAULT_FRAME
    offset: int = 1

    def __str__(self) -> str:
        inner = ", ".join(f"${a}" for a in self.args)
        if self.kind in ("lag", "lead", "ntile", "nth_value"):
            inner += f"{', ' if inner else ''}{self.offset}"
        name = "count" if self.kind == "count_star" else self.kind
        if self.kind == "count_star":
            inner = "*"
        return f"{name}({inner})"


@dataclass(eq=False)
class OverWindow(PlanNode):
    input: PlanNode = None  # type: ignore[assignment]
    partition_by: list[int] = field(default_factory=list)
    order_by: list[SortKey] = field(default_factory=list)
    calls: list[WindowCall] = field(default_factory=list)
    tiebreak: list[int] = field(default_factory=list)

    def inputs(self) -> list[PlanNode]:
        return [self.input]

    def describe(self) -> str:
        part = ", ".join(f"${p}" for p in self.partition_by)
        order = ", ".join(f"${k.index} {'DESC' if k.desc else 'ASC'}" for k in self.order_by)
        calls = ", ".join(
            f"{c}{'' if c.frame == DEFAULT_FRAME else ' ' + str(c.frame)}" for c in self.calls
        )
        return f"OverWindow {{ partition_by: [{part}], order_by: [{order}], calls: [{calls}] }}"


@dataclass(eq=False)
class GroupTopN(PlanNode):
    """The first `limit` rows (after `offset`) of every group, plus a row_number column."""

    input: PlanNode = None  # type: ignore[assignment]
    group_keys: list[int] = field(default_factory=list)
    order_by: list[SortKey] = field(default_factory=list)
    limit: int | None = None
    offset: int = 0

    def inputs(self) -> list[PlanNode]:
        return [self.input]

    def describe(self) -> str:
        g = ", ".join(f"${p}" for p in self.group_keys)
        order = ", ".join(f"${k.index} {'DESC' if k.desc else 'ASC'}" for k in self.order_by)
        return (
            f"GroupTopN {{ group_key: [{g}], order: [{order}], limit: {self.limit}, "
            f"offset: {self.offset}, output_rank }}"
        )
