"""Name resolution inputs for the binder: the columns in scope and the statement's parameters.

The planner builds one `Scope` per query level from its FROM clause (each column tagged with
its table alias) and one `ParamContext` per statement; the binder resolves column references
against the scope and records parameter types it infers from context.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.errors import AmbiguousColumn, UndefinedColumn, UndefinedTable
from engine.types import VARCHAR, SqlType


@dataclass
class ColumnBinding:
    """One column visible to expressions: `index` is its position in the input batch."""

    name: str
    type: SqlType
    index: int
    table: str | None = None
    hidden: bool = False
    qualified_only: bool = False  # JOIN USING copies: reached as `t.k` only, not `k` or `*`


class Scope:
    """The columns an expression may reference (names already case-folded by the planner)."""

    def __init__(self, columns: list[ColumnBinding]):
        self.columns = list(columns)

    def _tables(self) -> set[str]:
        return {c.table for c in self.columns if c.table is not None}

    def resolve(
        self, name: str, table: str | None = None, position: int | None = None
    ) -> ColumnBinding:
        if table is not None and table not in self._tables():
            raise UndefinedTable(
                f'missing FROM-clause entry for table "{table}"', position=position
            )
        hits = [
            c
            for c in self.columns
            if c.name == name and (c.table == table if table is not None else not c.qualified_only)
        ]
        if not hits:
            what = f"{table}.{name}" if table is not None else f'"{name}"'
            raise UndefinedColumn(f"column {what} does not exist", position=position)
        if len(hits) > 1:
            what = f"{table}.{name}" if table is not None else name
            raise AmbiguousColumn(f'column reference "{what}" is ambiguous', position=position)
        return hits[0]

    def star(self, table: str | None = None) -> list[ColumnBinding]:
        if table is not None and table not in self._tables():
            raise UndefinedTable(f'missing FROM-clause entry for table "{table}"')
        return [
            c
            for c in self.columns
            if not c.hidden and (c.table == table if table is not None else not c.qualified_only)
        ]


class ParamContext:
    """Parameter types (declared by the client, inferred while binding) and optional values."""

    def __init__(self, types: list[SqlType | None], values: list[Any] | None = None):
        self.types: list[SqlType | None] = list(types)
        self.values = values

    def ensure(self, n: int) -> None:
        while len(self.types) < n:
            self.types.append(None)

    def infer(self, n: int, t: SqlType) -> None:
        self.ensure(n)
        if self.types[n - 1] is None:
            self.types[n - 1] = t

    def finalize(self) -> list[SqlType]:
        return [t if t is not None else VARCHAR for t in self.types]
