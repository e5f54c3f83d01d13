"""Column defaults of tables: `CREATE TABLE t (c type DEFAULT expr)` and `ALTER TABLE ...
ADD COLUMN c type DEFAULT expr`.

A default is checked when it is defined (bound without columns, assignment-cast to the
column's type: 42804 as PostgreSQL when the types do not fit) and kept in the catalog entry
in one of two forms:

* `Relation.extra["defaults"][name]`: the value of a constant default (no `now()`, no
  volatile or session function), folded once when it is defined (JSON form,
  `engine.expr.codec.value_to_json`);
* `Relation.extra["default_exprs"][name]`: the SQL text of any other default (`now()`,
  `current_user`, `random()`), bound again and evaluated per write: once per statement for
  stable functions (`now()` is the statement's timestamp, as in PostgreSQL), over the
  chunk's rows for volatile ones.

Writes that leave a column out (INSERT with a column list, `DEFAULT` in VALUES, `INSERT ...
DEFAULT VALUES`, COPY with a column list) get the default through `fill`, one Arrow array
per chunk; the catalog (and so restarts) keeps both forms; `pg_attrdef` shows them.
Pure functions over the catalog entry, no state of their own.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import exp

from engine import expr as ex
from engine.catalog import Relation
from engine.errors import (
    DatatypeMismatch,
    FeatureNotSupported,
    SqlSyntaxError,
    UndefinedColumn,
    not_supported,
)
from engine.expr.codec import value_from_json, value_to_json
from engine.types import Field, SqlType


def bind_default(node: exp.Expression, t: SqlType, column: str) -> ex.Expr:
    """The default expression `node` bound and cast to the column's type `t`."""
    if node.find(exp.Select, exp.Subquery) is not None:
        raise FeatureNotSupported("cannot use subquery in DEFAULT expression")
    try:
        bound = ex.ExprBinder(ex.Scope([])).bind(node)
    except UndefinedColumn as e:
        raise FeatureNotSupported("cannot use column reference in DEFAULT expression") from e
    if bound.input_refs():
        raise FeatureNotSupported("cannot use column reference in DEFAULT expression")
    try:
        return ex.assign_cast(bound, t)
    except DatatypeMismatch as e:
        raise DatatypeMismatch(
            f'column "{column}" is of type {t.display} but default expression is of type '
            f"{bound.type.display}",
            hint="You will need to rewrite or cast the expression.",
        ) from e


def parse_default(text: str) -> exp.Expression:
    try:
        node: exp.Expression = sqlglot.parse_one(f"SELECT {text}", read="risingwave").expressions[0]
    except (sqlglot.errors.ParseError, AttributeError, IndexError) as e:
        raise SqlSyntaxError(f'syntax error at or near "{text}"') from e
    return node


def define(rel: Relation, f: Field, node: exp.Expression, ctx: ex.EvalContext) -> None:
    """Record the default `node` of column `f` in `rel`'s catalog entry (see the module
    docstring for the two forms); DEFAULT NULL records nothing, as no default."""
    bound = bind_default(node, f.type, f.name)
    if bound.is_constant():
        value = ex.evaluate_constant(bound, ctx)
        if value is not None:
            rel.extra.setdefault("defaults", {})[f.name] = value_to_json(value)
        return
    rel.extra.setdefault("default_exprs", {})[f.name] = default_sql(node)


def default_sql(node: exp.Expression) -> str:
    """The text kept (and shown by `\\d`) for a default expression: PostgreSQL's spelling,
    where `now()` stays `now()` (sqlglot reads it as CURRENT_TIMESTAMP; only the function
    call carries a source position)."""

    def spell(n: exp.Expression) -> exp.Expression:
        if isinstance(n, exp.CurrentTimestamp) and n.meta.get("start") is not None:
            return exp.Anonymous(this="now", expressions=[])
        if isinstance(n, exp.Rand) and not n.args:
            return exp.Anonymous(this="random", expressions=[])
        return n

    return str(node.copy().transform(spell).sql(dialect="postgres", normalize_functions=False))


def has_defaults(rel: Relation) -> bool:
    return bool(rel.extra.get("defaults") or rel.extra.get("default_exprs"))


def default_exprs(rel: Relation) -> dict[int, ex.Expr]:
    """{field index: bound default} of `rel`'s columns that have one (a Literal for a
    folded constant)."""
    values = rel.extra.get("defaults") or {}
    texts = rel.extra.get("default_exprs") or {}
    out: dict[int, ex.Expr] = {}
    for i, f in enumerate(rel.fields):
        if f.name in values:
            out[i] = ex.Literal(value=value_from_json(values[f.name]), type=f.type)
        elif f.name in texts:
            out[i] = bind_default(parse_default(texts[f.name]), f.type, f.name)
    return out


def fill(e: ex.Expr, t: SqlType, n: int, ctx: ex.EvalContext) -> pa.Array:
    """`n` values of the default `e` for one chunk: a constant is repeated, an expression
    is evaluated once over the chunk (a stable function gives one value, a volatile one a
    value per row)."""
    if isinstance(e, ex.Literal):
        return _repeat(e.value, t, n)
    batch = pa.RecordBatch.from_arrays([pa.nulls(n)], names=["_"])
    got = e.eval(batch, ctx)
    if isinstance(got, pa.ChunkedArray):
        got = got.combine_chunks()
    if not isinstance(got, pa.Array):
        return _repeat(got.as_py(), t, n)
    if len(got) != n:
        return _repeat(got[0].as_py() if len(got) else None, t, n)
    return got if got.type == t.arrow else got.cast(t.arrow)


def _repeat(value: Any, t: SqlType, n: int) -> pa.Array:
    if value is None:
        return pa.nulls(n, t.arrow)
    return pa.repeat(pa.scalar(value, t.arrow), n)


def check_connector(rel: Relation) -> None:
    """Tables fed by a connector (Kafka, webhook) take no DEFAULT: their rows come whole
    from the source."""
    if has_defaults(rel) and rel.options.get("connector"):
        raise not_supported(
            "DEFAULT columns of a table with a connector",
            hint="Use a plain table, or COALESCE in the views that read the source.",
        )
