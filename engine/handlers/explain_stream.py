"""`EXPLAIN (VERBOSE) CREATE MATERIALIZED VIEW ...`: the dataflow operators and their state.

Plain EXPLAIN prints the logical plan tree (operator names and keys). VERBOSE builds the
view's real operators (without data, nothing allocated in the database) and appends one
line per operator: its own explain text, its stream key, and its state tables with their
names and ids. Ids are the view's catalog ids when a materialized view of that name
exists (so an existing view's state can be inspected), `new` otherwise.
"""

from __future__ import annotations

from typing import Any

from engine.plan.logical import PlanNode
from engine.state.table import StateTable


class _ExplainAllocator:
    """An `Allocator` look-alike that records table names and ids instead of creating."""

    def __init__(self, known: dict[str, int]) -> None:
        self.known = known
        self.prefix = ""
        self.names: dict[int, str] = {}
        self.new: set[int] = set()
        self._next = 1

    def table(self, name: str) -> StateTable:
        full = f"{self.prefix}{name}"
        tid = self.known.get(full)
        t = StateTable(self._next if tid is None else tid, full)
        self._next += 1
        if tid is None:
            self.new.add(id(t))
        self.names[id(t)] = full
        return t


def operator_lines(session: Any, plan: PlanNode, view_name: str | None) -> list[str]:
    from engine.stream.build import build_view_nodes

    known: dict[str, int] = {}
    if view_name:
        rel = session.db.catalog.find(view_name, None)
        if rel is not None:
            known = dict(getattr(rel, "state_tables", {}) or {})
    alloc = _ExplainAllocator(known)
    nodes = build_view_nodes(plan, alloc, session.eval_ctx())  # type: ignore[arg-type]
    lines = ["Operators:"]
    for i, node in enumerate(nodes):
        op = node.op
        ins = ", ".join(
            f"{_rel_name(session, ref)}" if kind == "rel" else f"op {ref}"
            for kind, ref in node.inputs
        )
        names = [f.name for f in op.schema]
        key = ", ".join(names[k] for k in op.stream_key) if op.stream_key is not None else ""
        lines.append(f"  op {i}: {op.explain()}")
        lines.append(f"    inputs: [{ins}], stream_key: [{key}]")
        for t in op.state_tables():
            tid = "new" if id(t) in alloc.new else str(t.table_id)
            lines.append(f"    state table {alloc.names.get(id(t), t.name)} (id: {tid})")
    return lines


def _rel_name(session: Any, rid: int) -> str:
    try:
        return str(session.db.catalog.by_id(rid).name)
    except (KeyError, LookupError):
        return f"relation {rid}"
