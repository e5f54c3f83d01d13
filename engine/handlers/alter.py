"""Schema changes (RisingWave's semantics): ALTER ... ADD/DROP/RENAME COLUMN, RENAME TO,
SET SCHEMA, and COMMENT ON.

What each does to the jobs that read the changed relation (their stored stream plans
address relations by id and columns by the names they were planned with,
`engine.stream.graph.ViewFlow.bind_scans`):

* `ADD COLUMN c type [DEFAULT expr]` (plain tables): the column is appended; existing rows
  get the default (a constant, evaluated once) or NULL, and so do later INSERTs and COPYs
  that omit it (`Relation.extra["defaults"]`, engine/handlers/column_defaults.py). The
  table's rows are rewritten in the new layout once (`Runtime.rebuild_table`, one
  checkpoint); views and sinks on it keep reading the columns they were planned with, so
  they need no change.
* `DROP COLUMN`: refused for key, hidden and watermark columns, and (2BP01) while a
  reader uses the column (`engine.handlers.alter_readers.check_drop`); otherwise the rows
  are rewritten without it and jobs that scanned it read NULLs in its place.
* `RENAME COLUMN`: the table's column and its definition change; readers' SQL reads the
  table through a derived table with the old names and their stored plans read the new
  name (`engine.handlers.alter_readers.rename_plan`).
* `RENAME TO` / `SET SCHEMA`: the catalog entry changes; the SQL of every relation that
  names it (views are planned from their SQL, SHOW CREATE prints it) is rewritten to the
  new name; running jobs are unaffected (they address relations by id).
* `COMMENT ON`: `Relation.extra["comment"]` / `["column_comments"]`, shown by `\\d+`
  (`obj_description`, `col_description`, `pg_description`) and DESCRIBE.

Every statement runs under the runtime lock and ends with a checkpoint, so the change is
durable when it returns. Only the relation's owner (or a superuser) may change it.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot import exp

from engine import expr as ex
from engine.api import Notice, QueryResult
from engine.catalog import Relation, RelationKind
from engine.catalog.privileges import require_create_in, require_owner
from engine.errors import (
    DependentObjectsStillExist,
    DuplicateColumn,
    DuplicateTable,
    InvalidParameterValue,
    InvalidSchemaName,
    SqlSyntaxError,
    UndefinedColumn,
    UndefinedTable,
    WrongObjectType,
    not_supported,
)
from engine.expr.codec import value_to_json
from engine.handlers import column_defaults
from engine.handlers.alter_readers import (
    apply_rename,
    check_drop,
    readers,
    rename_plan,
    retarget_scans,
    tombstone,
)
from engine.handlers.schema import schema_exists
from engine.plan.planner import Planner
from engine.sql.parser import Statement
from engine.stream.parallel.fragment import parse_parallelism
from engine.stream.parallel.rescale import rescale
from engine.types import Field

_KINDS = {k.value: k for k in RelationKind}


def _find(cat: Any, args: dict[str, Any]) -> Relation | None:
    rel: Relation | None = cat.find(args["name"], args["schema"])
    if rel is None:
        return None
    kind = _KINDS[args["kind"]] if args.get("kind") else None
    if kind is not None and rel.kind is not kind:
        raise WrongObjectType(f'"{rel.name}" is not a {kind.value}')
    return rel


def run_alter(session: Any, st: Statement) -> QueryResult:
    a = st.args
    tag = "ALTER_" + RelationKind(a["kind"]).tag_name
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        rel = _find(cat, a)
        if rel is None:
            if a["if_exists"]:
                shown = a["name"]
                return QueryResult(
                    tag, notices=[Notice(f'relation "{shown}" does not exist, skipping')]
                )
            raise UndefinedTable(f'relation "{a["name"]}" does not exist')
        require_owner(rel)
        action = a["action"]
        if action == "rename":
            _rename(cat, rel, a["new"], rel.schema_name)
        elif action == "set_schema":
            if not schema_exists(cat, a["new_schema"]):
                raise InvalidSchemaName(f'schema "{a["new_schema"]}" does not exist')
            require_create_in(a["new_schema"])
            _rename(cat, rel, rel.name, a["new_schema"])
        elif action == "set_parallelism":
            _set_parallelism(session, rel, a["value"])
            return QueryResult(tag)
        elif action == "rename_column":
            _rename_column(cat, rel, a["old"], a["new"])
            rt.rebind_scans(rel.id, {a["old"]: a["new"]})
            rt.mark_catalog_dirty()
        elif action == "add_column":
            notice = _add_column(session, cat, rel, a)
            if notice is not None:
                return QueryResult(tag, notices=[notice])
            return QueryResult(tag)
        elif action == "drop_column":
            notice = _drop_column(session, cat, rel, a)
            if notice is not None:
                return QueryResult(tag, notices=[notice])
            return QueryResult(tag)
        cat.version += 1
        rt.barrier(force=True)  # persists the catalog
    return QueryResult(tag)


# -- SET PARALLELISM ---------------------------------------------------------------------
def _set_parallelism(session: Any, rel: Relation, value: str) -> None:
    """Rescale a materialized view's actors (engine/stream/parallel/rescale.py); ADAPTIVE
    (or 0, AUTO, DEFAULT) means the server's --parallelism."""
    if rel.kind is not RelationKind.MATERIALIZED_VIEW:
        raise not_supported(f"ALTER {rel.kind.value.upper()} ... SET PARALLELISM")
    rt = session.db.runtime
    try:
        want = parse_parallelism(value)
    except InvalidParameterValue:
        raise InvalidParameterValue(
            f'invalid parallelism "{value}"',
            hint="Use a positive number of actors or ADAPTIVE (the server's --parallelism).",
        ) from None
    rescale(rt, rel, want if want > 0 else rt.parallelism)
    if want <= 0:
        rel.extra["parallelism_adaptive"] = True
        rt.mark_catalog_dirty()
        rt.barrier(force=True)


# -- RENAME TO / SET SCHEMA ---------------------------------------------------------------
def _rename(cat: Any, rel: Relation, new: str, schema: str) -> None:
    if cat.find(new, schema) is not None and (new, schema) != (rel.name, rel.schema_name):
        raise DuplicateTable(f'relation "{new}" already exists')
    old_name, old_schema = rel.name, rel.schema_name
    if (new, schema) == (old_name, old_schema):
        return
    users = [r for r in cat.ordered() if rel.id in r.depends_on]
    rewritten = {}
    for r in users:  # rewrite first: a failure leaves the catalog unchanged
        rewritten[r.id] = (
            _rename_table_in(r.query, old_name, old_schema, new, schema) if r.query else r.query,
            _rename_table_in(r.definition, old_name, old_schema, new, schema),
        )
    own = _rename_own(rel, new, schema)
    for r in users:
        r.query, r.definition = rewritten[r.id]
    rel.definition = own
    rel.name, rel.schema_name = new, schema


def _qualify(name: str, schema: str) -> exp.Table:
    return exp.Table(
        this=exp.to_identifier(name, quoted=not name.islower() or not name.isidentifier()),
        db=exp.to_identifier(schema) if schema != "public" else None,
    )


def _rename_table_in(sql: str, old: str, old_schema: str, new: str, schema: str) -> str:
    """`sql` with every reference to relation `old_schema.old` naming `schema.new`."""
    try:
        tree = sqlglot.parse_one(sql, read="risingwave")
    except sqlglot.errors.ParseError:
        return sql
    if tree is None:
        return sql
    changed = False

    def swap(node: exp.Expression) -> exp.Expression:
        nonlocal changed
        if isinstance(node, exp.Table) and isinstance(node.this, exp.Identifier):
            ref_schema = node.db or "public"
            if node.name == old and ref_schema == old_schema:
                changed = True
                t = _qualify(new, schema)
                if node.args.get("alias") is not None:
                    t.set("alias", node.args["alias"])
                elif new != old:
                    t.set("alias", exp.TableAlias(this=exp.to_identifier(old)))
                return t
        if isinstance(node, exp.Column) and node.table == old and new != old:
            return node  # keeps the old qualifier: the alias above still names it
        return node

    out = tree.transform(swap)
    return out.sql(dialect="risingwave") if changed else sql


def _rename_own(rel: Relation, new: str, schema: str) -> str:
    """`rel`'s own CREATE statement naming it `schema.new`."""
    text = rel.definition
    try:
        tree = sqlglot.parse_one(text, read="risingwave")
    except sqlglot.errors.ParseError:
        return text
    target = tree.find(exp.Table) if tree is not None else None
    if target is None or target.name != rel.name:
        return text
    start = target.this.meta.get("start") if isinstance(target.this, exp.Identifier) else None
    end = target.this.meta.get("end") if isinstance(target.this, exp.Identifier) else None
    if start is None or end is None:
        return text
    db = target.args.get("db")
    if isinstance(db, exp.Identifier) and db.meta.get("start") is not None:
        start = db.meta["start"]
    shown = new if schema == "public" else f"{schema}.{new}"
    return text[:start] + shown + text[end + 1 :]


# -- columns ------------------------------------------------------------------------------
def _plain_table(cat: Any, rel: Relation, what: str) -> None:
    """Column changes apply to plain tables: not to connector, webhook or Iceberg tables
    (their columns come from outside), nor to targets of `CREATE SINK ... INTO` (the sink
    writes rows in the layout it was created with)."""
    if rel.kind is not RelationKind.TABLE:
        raise WrongObjectType(f'"{rel.name}" is not a table')
    if any(rel.extra.get(k) for k in ("source", "webhook", "iceberg", "hidden_for")) or (
        rel.options.get("connector")
    ):
        raise not_supported(
            f"{what} on a table with a connector",
            hint="Its columns come from the connector's format; recreate the table instead.",
        )
    into = [
        r.name
        for r in cat.ordered()
        if r.kind is RelationKind.SINK and (r.extra.get("sink") or {}).get("into") == rel.id
    ]
    if into:
        raise DependentObjectsStillExist(
            f"cannot alter table {rel.name} because sink {into[0]} writes into it",
            hint=f"Drop sink {into[0]} first.",
        )


def _add_column(session: Any, cat: Any, rel: Relation, a: dict[str, Any]) -> Notice | None:
    _plain_table(cat, rel, "ALTER TABLE ... ADD COLUMN")
    name, t = a["column"], a["type"]
    if any(f.name == name for f in rel.fields):
        if a["if_not_exists"]:
            return Notice(f'column "{name}" of relation "{rel.name}" already exists, skipping')
        raise DuplicateColumn(f'column "{name}" of relation "{rel.name}" already exists')
    value = None
    if a["default"] is not None:
        value = _default_value(session, a["default"], t)
    if a["not_null"]:
        raise not_supported(
            "NOT NULL in ALTER TABLE ... ADD COLUMN",
            hint="Swell's tables have no NOT NULL constraints; leave it out.",
        )

    column_sql = f"{name} {t.display}" + (f" DEFAULT {a['default']}" if a["default"] else "")

    def change(rows: pa.Table) -> pa.Table:
        rel.definition = _edit_columns(rel.definition, add=column_sql)
        rel.fields.append(Field(name, t))
        if a["default"] is not None and not _constant_default(a["default"], t, name):
            # now(), random(): existing rows got one value, later writes evaluate it
            rel.extra.setdefault("default_exprs", {})[name] = column_defaults.default_sql(
                column_defaults.parse_default(a["default"])
            )
        elif value is not None:
            rel.extra.setdefault("defaults", {})[name] = value_to_json(value)
        col = pa.array([value] * rows.num_rows, t.arrow)
        return rows.append_column(name, col)

    session.db.runtime.rebuild_table(rel, change)
    return None


def _constant_default(text: str, t: Any, column: str) -> bool:
    node = column_defaults.parse_default(text)
    return column_defaults.bind_default(node, t, column).is_constant()


def _default_value(session: Any, text: str, t: Any) -> Any:
    try:
        node = sqlglot.parse_one(f"SELECT {text}", read="risingwave").expressions[0]
    except (sqlglot.errors.ParseError, AttributeError, IndexError) as e:
        raise SqlSyntaxError(f'syntax error at or near "{text}"') from e
    planner = Planner(session.db.catalog)
    bound = planner._bind(node, ex.Scope([]))
    if bound.input_refs():
        raise not_supported("a DEFAULT that reads columns", hint="Use a constant.")
    bound = ex.assign_cast(bound, t)
    return ex.evaluate_constant(bound, session.eval_ctx())


def _drop_column(session: Any, cat: Any, rel: Relation, a: dict[str, Any]) -> Notice | None:
    _plain_table(cat, rel, "ALTER TABLE ... DROP COLUMN")
    name = a["column"]
    idx = next((i for i, f in enumerate(rel.fields) if f.name == name and not f.hidden), None)
    if idx is None:
        if a["column_if_exists"]:
            return Notice(f'column "{name}" of relation "{rel.name}" does not exist, skipping')
        raise UndefinedColumn(f'column "{name}" of relation "{rel.name}" does not exist')
    if idx in rel.pk:
        raise not_supported(f'dropping primary key column "{name}"')
    if rel.extra.get("watermark"):
        raise not_supported("DROP COLUMN on a table with a watermark")
    if sum(1 for f in rel.fields if not f.hidden) == 1:
        raise not_supported("dropping the only column of a table")
    rewritten = check_drop(cat, rel, name)  # 2BP01 while a reader uses the column
    gone = {name: tombstone(rel.fields[idx])}
    rt = session.db.runtime

    def change(rows: pa.Table) -> pa.Table:
        apply_rename(cat, rel, rewritten)
        if readers(cat, rel):  # the jobs read NULLs in its place (they never used it)
            retarget_scans(cat, rel.id, gone)
            for job in [*rt.views.values(), *(s.graph for s in rt.sinks.values())]:
                cols = job.scan_names.get(rel.id)
                if cols is not None:
                    job.scan_names[rel.id] = [gone.get(c, c) for c in cols]
        rel.definition = _edit_columns(rel.definition, drop=name)
        rel.fields.pop(idx)
        rel.pk = [k - 1 if k > idx else k for k in rel.pk]
        if rel.row_id_index is not None and rel.row_id_index > idx:
            rel.row_id_index -= 1
        (rel.extra.get("defaults") or {}).pop(name, None)
        (rel.extra.get("default_exprs") or {}).pop(name, None)
        comments = rel.extra.get("column_comments") or {}
        comments.pop(name, None)
        return rows.remove_column(idx)

    session.db.runtime.rebuild_table(rel, change)
    return None


def _rename_column(cat: Any, rel: Relation, old: str, new: str) -> None:
    if rel.kind is not RelationKind.TABLE:
        raise WrongObjectType(f'"{rel.name}" is not a table')
    idx = next((i for i, f in enumerate(rel.fields) if f.name == old and not f.hidden), None)
    if idx is None:
        raise UndefinedColumn(f'column "{old}" does not exist')
    if any(f.name == new for f in rel.fields):
        raise DuplicateColumn(f'column "{new}" of relation "{rel.name}" already exists')
    if rel.extra.get("source") or rel.options.get("connector"):
        raise not_supported("RENAME COLUMN on a table with a connector")
    if rel.extra.get("watermark"):
        raise not_supported(
            "RENAME COLUMN on a table with a watermark",
            hint="The watermark names its column; recreate the table instead.",
        )
    rewritten = rename_plan(cat, rel, old, new)  # 2BP01 for a reader it cannot rewrite
    apply_rename(cat, rel, rewritten)
    retarget_scans(cat, rel.id, {old: new})
    f = rel.fields[idx]
    rel.fields[idx] = Field(new, f.type, f.hidden)
    for key in ("defaults", "default_exprs", "column_comments"):
        d = rel.extra.get(key) or {}
        if old in d:
            d[new] = d.pop(old)
    rel.definition = _rename_column_def(rel.definition, old, new)


def _rename_column_def(text: str, old: str, new: str) -> str:
    try:
        tree = sqlglot.parse_one(text, read="risingwave")
    except sqlglot.errors.ParseError:
        return text
    if tree is None:
        return text

    def swap(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.ColumnDef) and node.name == old:
            node = node.copy()
            node.set("this", exp.to_identifier(new))
        elif isinstance(node, exp.Column) and node.name == old and not node.table:
            return exp.column(new)
        elif (
            isinstance(node, exp.Identifier)
            and node.this == old
            and isinstance(node.parent, (exp.PrimaryKey, exp.Schema))
        ):
            return exp.to_identifier(new)
        return node

    return str(tree.transform(swap).sql(dialect="risingwave"))


def _edit_columns(text: str, add: str | None = None, drop: str | None = None) -> str:
    """A CREATE TABLE statement with a column definition added or removed (SHOW CREATE
    shows the table as it is); unchanged when the statement cannot be read back."""
    try:
        tree = sqlglot.parse_one(text, read="risingwave")
        schema = tree.find(exp.Schema) if tree is not None else None
        if schema is None:
            return text
        if add is not None:
            extra = sqlglot.parse_one(f"CREATE TABLE x ({add})", read="risingwave")
            col = extra.find(exp.ColumnDef) if extra is not None else None
            if col is None:
                return text
            schema.append("expressions", col)
        if drop is not None:
            keep = [
                e
                for e in schema.expressions
                if not (isinstance(e, exp.ColumnDef) and e.name == drop)
            ]
            schema.set("expressions", keep)
        return str(tree.sql(dialect="risingwave"))
    except sqlglot.errors.SqlglotError:
        return text


# -- COMMENT ON -----------------------------------------------------------------------------
def run_comment(session: Any, st: Statement) -> QueryResult:
    a = st.args
    rt = session.db.runtime
    with rt.lock:
        cat = session.db.catalog
        rel = _find(cat, {**a, "kind": a["kind"]})
        if rel is None:
            raise UndefinedTable(f'relation "{a["name"]}" does not exist')
        require_owner(rel)
        if a["target"] == "column":
            if not any(f.name == a["column"] for f in rel.fields):
                raise UndefinedColumn(
                    f'column "{a["column"]}" of relation "{rel.name}" does not exist'
                )
            comments = rel.extra.setdefault("column_comments", {})
            if a["value"] is None:
                comments.pop(a["column"], None)
            else:
                comments[a["column"]] = a["value"]
        elif a["value"] is None:
            rel.extra.pop("comment", None)
        else:
            rel.extra["comment"] = a["value"]
        cat.version += 1
        rt.barrier(force=True)
    return QueryResult("COMMENT")
