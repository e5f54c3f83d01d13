"""Small shared pieces of the planner: the FROM-scope column record and sqlglot helpers.

Kept apart from `planner.py` so the planner's mixins (`plan_from`, `plan_agg`) and future
planning modules (windows, system tables) share them without importing the Planner class.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from engine import expr as ex
from engine.errors import (
    DuplicateObject,
)
from engine.plan.logical import (
    PlanNode,
    Project,
)
from engine.sql.parser import WRITTEN_NAME
from engine.types import Field, SqlType, TypeKind


@dataclass
class _Col:
    """A column visible in a FROM scope."""

    name: str
    type: SqlType
    table: str | None
    hidden: bool = False
    qualified_only: bool = False  # a JOIN USING copy: only `t.k` reaches it (plan_join)


def _explicit_nulls(o: exp.Ordered) -> bool:
    sql = o.sql(dialect="postgres").upper()
    return "NULLS FIRST" in sql or "NULLS LAST" in sql


def _visible(node: PlanNode) -> list[int]:
    return [i for i, f in enumerate(node.schema) if not f.hidden]


def _select_columns(node: PlanNode, idx: list[int]) -> PlanNode:
    exprs = [ex.InputRef(index=i, type=node.schema[i].type, name=node.schema[i].name) for i in idx]
    fields = [Field(node.schema[i].name, node.schema[i].type) for i in idx]
    return Project(fields, None, input=node, exprs=exprs)


def _mapped_key(key: list[int] | None, exprs: list[ex.Expr]) -> list[int] | None:
    if key is None:
        return None
    out = []
    for k in key:
        pos = next(
            (i for i, e in enumerate(exprs) if isinstance(e, ex.InputRef) and e.index == k), None
        )
        if pos is None:
            return None
        out.append(pos)
    return out


def _append(node: PlanNode, extra: list[ex.Expr], prefix: str) -> PlanNode:
    """`node` with `extra` expressions added as columns `prefix0`, `prefix1`, ... (join keys)."""
    exprs: list[ex.Expr] = [
        ex.InputRef(index=i, type=f.type, name=f.name) for i, f in enumerate(node.schema)
    ]
    fields = list(node.schema)
    for j, e in enumerate(extra):
        exprs.append(e)
        fields.append(Field(f"{prefix}{j}", e.type, True))
    return Project(fields, node.stream_key, input=node, exprs=exprs)


def _conjuncts(e: exp.Expression) -> list[exp.Expression]:
    if isinstance(e, exp.And):
        return _conjuncts(e.this) + _conjuncts(e.expression)
    if isinstance(e, exp.Paren):
        return _conjuncts(e.this)
    return [e]


def _and_all(es: list[ex.Expr]) -> ex.Expr | None:
    if not es:
        return None
    from engine.expr.ops import bind_and_or

    out = es[0]
    for e in es[1:]:
        out = bind_and_or("AND", out, e)
    return out


class _AndAll(ex.Expr):
    """Conjunction of bound predicates (used for join residuals)."""

    def __init__(self, parts: list[ex.Expr]) -> None:
        from engine.types import BOOLEAN

        self.parts = parts
        self.type = BOOLEAN

    def eval(self, batch: Any, ctx: Any) -> Any:
        import pyarrow.compute as pc

        out = self.parts[0].eval(batch, ctx)
        for p in self.parts[1:]:
            out = pc.and_kleene(out, p.eval(batch, ctx))
        return out

    def children(self) -> list[ex.Expr]:
        return list(self.parts)

    def input_refs(self) -> set[int]:
        s: set[int] = set()
        for p in self.parts:
            s |= p.input_refs()
        return s

    def remap(self, mapping: dict[int, int]) -> ex.Expr:
        return _AndAll([p.remap(mapping) for p in self.parts])

    def is_constant(self) -> bool:
        return all(p.is_constant() for p in self.parts)

    def has_now(self) -> bool:
        return any(p.has_now() for p in self.parts)

    def __str__(self) -> str:
        return " AND ".join(f"({p})" for p in self.parts)


def _norm_sql(n: exp.Expression) -> str:
    return n.sql(dialect="postgres", normalize=True).lower()


def _quoted(c: exp.Column) -> bool:
    ident = c.this
    return isinstance(ident, exp.Identifier) and bool(ident.args.get("quoted"))


def _pos(n: exp.Expression) -> int | None:
    meta = getattr(n, "meta", None) or {}
    start = meta.get("start")
    if start is None and isinstance(n, exp.Column) and isinstance(n.this, exp.Identifier):
        start = (n.this.meta or {}).get("start")
    if start is None and isinstance(n, exp.Table) and isinstance(n.this, exp.Identifier):
        start = (n.this.meta or {}).get("start")
    return start + 1 if isinstance(start, int) else None


def _name_of(e: exp.Expression, i: int) -> str:
    if isinstance(e, exp.Column):
        return e.name
    return f"_g{i}"


# the column name of `x::type` is PostgreSQL's internal type name
_CAST_NAMES = {
    "int": "int4",
    "integer": "int4",
    "bigint": "int8",
    "smallint": "int2",
    "real": "float4",
    "double precision": "float8",
    "decimal": "numeric",
    "boolean": "bool",
    "char": "bpchar",
}


# sqlglot's node names for functions PostgreSQL names otherwise
_FUNC_NAMES = {
    "current_timestamp": "current_timestamp",
    "current_version": "version",
    "unix_to_time": "to_timestamp",
    "hex": "to_hex",
}


# functions PostgreSQL names otherwise than written (trim(...) is btrim/ltrim/rtrim)
_RENAMED = frozenset({"trim"})

_CALL_NAME = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\(")


def _output_name(it: exp.Expression) -> str:
    if isinstance(it, exp.Alias):
        ident = it.args.get("alias")
        quoted = isinstance(ident, exp.Identifier) and ident.args.get("quoted")
        return it.alias if quoted else it.alias.lower()
    node = it
    while isinstance(node, exp.Paren):
        node = node.this
    if isinstance(node, exp.Column):
        return node.name if _quoted(node) else node.name.lower()
    if isinstance(node, exp.Cast):
        inner = node.this
        while isinstance(inner, exp.Paren):
            inner = inner.this
        if isinstance(inner, exp.Column):
            return inner.name.lower()
        if isinstance(inner, (exp.Anonymous, exp.Func)) and not isinstance(inner, exp.Cast):
            return _output_name(inner)
        name = node.to.sql(dialect="postgres").lower().split("(")[0]
        if name.endswith("[]"):  # PostgreSQL names an array cast after its element type
            name = name[:-2]
        return _CAST_NAMES.get(name, name)
    if isinstance(node, exp.Count):
        return "count"
    if isinstance(node, (exp.Filter, exp.Window, exp.WithinGroup)):
        return _output_name(node.this)
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    if isinstance(node, exp.Dot) and isinstance(node.this, exp.Identifier):
        return _output_name(node.expression)  # pg_catalog.format_type(...)
    if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Identifier):
        return node.expression.name.lower()  # (composite).field
    if isinstance(node, (exp.JSONExtract, exp.JSONExtractScalar, exp.Dot)):
        return "?column?"
    if isinstance(node, exp.Case):
        return "case"
    if isinstance(node, exp.Bracket):  # a subscript is named after what it subscripts
        return _output_name(node.this)
    if isinstance(node, exp.Subquery) and isinstance(node.this, exp.Select):
        items = node.this.expressions  # a scalar subquery is named after its one column
        return _output_name(items[0]) if len(items) == 1 else "?column?"
    if isinstance(node, exp.Interval):
        return "interval"
    written = node.meta.get(WRITTEN_NAME)
    if isinstance(written, str) and written not in _RENAMED:
        return written  # PostgreSQL names the column after the function as written
    if (
        isinstance(node, exp.Func)
        and (isinstance(node, exp.AggFunc) or not isinstance(node, (exp.Binary, exp.Unary)))
    ) or isinstance(node, exp.Pow):
        name = node.sql_name().lower()
        if name in _FUNC_NAMES:
            return _FUNC_NAMES[name]
        # sqlglot's node names differ from PostgreSQL's (GroupConcat for string_agg):
        # the name PostgreSQL output spells the call with
        m = _CALL_NAME.match(node.sql(dialect="postgres"))
        name = m.group(1).lower() if m else name
        if name == "trim":  # trim([BOTH | LEADING | TRAILING] ...) is btrim/ltrim/rtrim
            where = str(node.args.get("position") or "").upper()
            return {"LEADING": "ltrim", "TRAILING": "rtrim"}.get(where, "btrim")
        return _FUNC_NAMES.get(name, name)
    if isinstance(node, exp.Boolean):
        return "bool"
    return "?column?"


def _literal_node(v: Any, t: SqlType) -> exp.Expression:
    if v is None:
        return exp.Null()
    if isinstance(v, bool):
        return exp.Boolean(this=v)
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return exp.Cast(
            this=exp.Literal.string(str(v)), to=exp.DataType.build(t.display, dialect="postgres")
        )
    return exp.Cast(
        this=exp.Literal.string(str(v)),
        to=exp.DataType.build(
            t.display if t.kind is not TypeKind.JSONB else "jsonb", dialect="postgres"
        ),
    )


def check_unique_names(fields: list[Field]) -> None:
    seen: set[str] = set()
    for f in fields:
        if f.hidden:
            continue
        if f.name in seen:
            raise DuplicateObject(f'column "{f.name}" specified more than once')
        seen.add(f.name)
