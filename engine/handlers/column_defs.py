"""Column definitions of CREATE TABLE and CREATE SOURCE, read the same way for both.

Both statements list `name type [constraints]` items and `PRIMARY KEY (...)` clauses in a
sqlglot `Schema`; the names fold to lower case unless quoted, a name may appear once and
every column needs a type. What each statement then accepts as constraints differs (a
table knows NOT NULL and refuses the rest, a source ignores them), so only the shared part
lives here and the callers keep their own loops. Pure functions, no state.
"""

from __future__ import annotations

from sqlglot import exp

from engine import expr as ex
from engine.errors import DuplicateColumn, not_supported
from engine.types import Field


def column_field(item: exp.ColumnDef, fields: list[Field]) -> Field:
    """The Field of one column definition, refusing a name already in `fields`."""
    cname = item.name if item.this.args.get("quoted") else item.name.lower()
    if any(f.name == cname for f in fields):
        raise DuplicateColumn(f'column "{cname}" specified more than once')
    kind = item.args.get("kind")
    if kind is None:
        raise not_supported(f'column "{cname}" needs a type')
    return Field(cname, ex.parse_data_type(kind))


def key_names(item: exp.PrimaryKey) -> list[str]:
    """The column names of a `PRIMARY KEY (...)` clause, folded like column names."""
    return [
        c.name if isinstance(c, exp.Identifier) and c.args.get("quoted") else c.name.lower()
        for c in item.expressions
    ]
