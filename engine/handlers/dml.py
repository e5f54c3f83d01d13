"""INSERT, UPDATE, DELETE on tables.

DML is evaluated when the statement runs, against the table's latest rows (stored rows
plus DML still waiting for the barrier, `Runtime.live_rows`), and becomes a chunk of row
changes: plain inserts, deletes of the matched rows, or U-/U+ pairs for updates. The chunk
is appended to the WAL and queued for the next barrier (`Runtime.write`, under the
runtime's short queue lock, so WAL order is queue order); the session waits for the WAL
fsync before answering, so an acknowledged statement survives `kill -9`. No statement
waits for a barrier.

UPDATE and DELETE hold the table's DML lock (`Runtime.dml_lock`) from reading its rows to
queueing their chunk, so DML on one table is serialised: two concurrent `UPDATE t SET v =
v + 1` never lose an increment. INSERT and COPY take it only to queue rows into a table
with a primary key (an insert there may overwrite a row an UPDATE is computing from);
rows of a table keyed by the hidden row id are new rows and need no order.
"""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from engine import expr as ex
from engine.api import QueryResult
from engine.catalog import Relation, RelationKind
from engine.catalog.privileges import require
from engine.chunk import Op, StreamChunk
from engine.errors import (
    DuplicateColumn,
    NotNullViolation,
    SqlSyntaxError,
    UndefinedColumn,
    WrongObjectType,
)
from engine.expr import ParamContext
from engine.expr.casts import cast_datum
from engine.handlers import column_defaults, query
from engine.numeric import array_of
from engine.sql.parser import Statement
from engine.types import Field, SqlType, arrow_schema


def _target(session: Any, table: exp.Expression, verb: str) -> Relation:
    name = table.name if isinstance(table, exp.Table) else str(table)
    quoted = isinstance(table, exp.Table) and table.this.args.get("quoted")
    from engine.plan.helpers import _pos

    rel = session.db.catalog.get(
        name if quoted else name.lower(),
        table.db or None if isinstance(table, exp.Table) else None,
        position=_pos(table),
    )
    if rel.kind is not RelationKind.TABLE:
        kind = rel.kind.value
        raise WrongObjectType(
            f'cannot {verb} {kind} "{rel.name}"'
            if verb != "change"
            else f'cannot change {kind} "{rel.name}"'
        )
    if rel.options.get("connector") and rel.options.get("connector") != "webhook":
        raise WrongObjectType(f'cannot {verb} table "{rel.name}" with a connector')
    require(rel, _VERB_PRIVILEGE[verb])
    if verb in ("update", "delete from") and isinstance(table.parent, (exp.Update, exp.Delete)):
        stmt = table.parent
        if stmt.args.get("where") is not None or stmt.args.get("returning") is not None:
            require(rel, "r")  # reading the rows it changes, as PostgreSQL
    return rel


# the privilege each DML verb needs on its target (engine/catalog/privileges.py)
_VERB_PRIVILEGE = {"insert into": "a", "copy to": "a", "update": "w", "delete from": "d"}


def _scope(rel: Relation, alias: str | None) -> ex.Scope:
    return ex.Scope(
        [
            ex.ColumnBinding(
                name=f.name, type=f.type, index=i, table=alias or rel.name, hidden=f.hidden
            )
            for i, f in enumerate(rel.fields)
        ]
    )


# -- INSERT --------
def _insert_columns(rel: Relation, ins: exp.Insert) -> list[int]:
    target = ins.this
    if isinstance(target, exp.Schema) and target.expressions:
        idx = []
        for c in target.expressions:
            name = c.name
            pos = next(
                (i for i, f in enumerate(rel.fields) if f.name == name and not f.hidden), None
            )
            if pos is None:
                raise UndefinedColumn(f'column "{name}" of relation "{rel.name}" does not exist')
            if pos in idx:
                raise DuplicateColumn(f'column "{name}" specified more than once')
            idx.append(pos)
        return idx
    return [i for i, f in enumerate(rel.fields) if not f.hidden]


def _table_of(ins: exp.Insert) -> exp.Expression:
    t = ins.this
    return t.this if isinstance(t, exp.Schema) else t


def bind_only(session: Any, st: Statement, params: ex.ParamContext) -> None:
    """Bind a DML statement to infer its parameter types (extended-protocol Parse)."""
    ast = st.ast
    # the catalog is read without a lock (copy-on-write)
    if isinstance(ast, exp.Insert):
        rel = _target(session, _table_of(ast), "insert into")
        cols = _insert_columns(rel, ast)
        src = ast.expression
        if isinstance(src, exp.Values):
            for tup in src.expressions:
                items = tup.expressions if isinstance(tup, exp.Tuple) else [tup]
                _bind_row(items, [rel.fields[i] for i in cols], params)
        else:
            from engine.handlers.query import planner_for

            planner_for(session, params).plan_query(src)
    elif isinstance(ast, (exp.Update, exp.Delete)):
        rel = _target(session, ast.this, "update" if isinstance(ast, exp.Update) else "delete from")
        scope = _scope(rel, ast.this.alias or None)
        where = ast.args.get("where")
        if where is not None:
            ex.ExprBinder(scope, params).bind(where.this)
        if isinstance(ast, exp.Update):
            for a in ast.expressions:
                col = _set_column(rel, a)
                _preset_param(a.expression, rel.fields[col].type, params)
                ex.ExprBinder(scope, params).bind(a.expression)


def _preset_param(node: exp.Expression, t: Any, params: ex.ParamContext | None) -> None:
    if params is None or not isinstance(node, (exp.Parameter, exp.Placeholder)):
        return
    try:
        n = int(node.this.this if isinstance(node.this, exp.Literal) else node.name)
    except (TypeError, ValueError):
        return
    while len(params.types) < n:
        params.types.append(None)
    if params.types[n - 1] is None:
        params.types[n - 1] = t


def _bind_row(
    items: list[exp.Expression],
    fields: list[Field],
    params: ex.ParamContext | None,
    defaults: list[ex.Expr | None] | None = None,
) -> list[ex.Expr]:
    if len(items) > len(fields):
        raise SqlSyntaxError("INSERT has more expressions than target columns")
    if len(items) < len(fields):
        raise SqlSyntaxError("INSERT has more target columns than expressions")
    ds = defaults or [None] * len(fields)
    return [_bind_one(node, f, params, d) for node, f, d in zip(items, fields, ds, strict=True)]


def _bind_one(
    node: exp.Expression, f: Field, params: ex.ParamContext | None, default: ex.Expr | None = None
) -> ex.Expr:
    """One VALUES item bound and cast to its column's type (DEFAULT is the column's
    default, NULL without one)."""
    _preset_param(node, f.type, params)
    if isinstance(node, exp.Var) and node.name.upper() == "DEFAULT":
        return default if default is not None else ex.Literal(value=None, type=f.type)
    e = ex.ExprBinder(ex.Scope([]), params).bind(node)
    return ex.assign_cast(e, f.type) if _needs_cast(e.type, f.type) else e


def run_insert(
    session: Any, st: Statement, params: ex.ParamContext | None
) -> tuple[QueryResult, int | None]:
    ast = st.ast
    assert isinstance(ast, exp.Insert)
    rt = session.db.runtime
    rel = _target(session, _table_of(ast), "insert into")
    cols = _insert_columns(rel, ast)
    fields = [rel.fields[i] for i in cols]
    src = ast.expression
    ctx = session.eval_ctx()
    if src is None and ast.args.get("default"):  # INSERT ... DEFAULT VALUES: one row
        n, arrays = 1, {}
    elif isinstance(src, exp.Values):
        n = len(src.expressions)
        dflt = column_defaults.default_exprs(rel) if column_defaults.has_defaults(rel) else {}
        columns = values_columns(src, fields, params, ctx, [dflt.get(i) for i in cols])
        arrays = dict(zip(cols, columns, strict=True))
    else:
        from engine.handlers.query import planner_for, run_plan

        plan = planner_for(session, params).plan_query(src)
        vis = [i for i, f in enumerate(plan.schema) if not f.hidden]
        if len(vis) != len(cols):
            raise SqlSyntaxError(
                "INSERT has more target columns than expressions"
                if len(vis) < len(cols)
                else "INSERT has more expressions than target columns"
            )
        t = run_plan(session, plan)
        batch = _one_batch(t)
        arrays = {}
        for c, v in zip(cols, vis, strict=True):
            ref = ex.InputRef(index=v, type=plan.schema[v].type, name=plan.schema[v].name)
            e = (
                ex.assign_cast(ref, rel.fields[c].type)
                if _needs_cast(ref.type, rel.fields[c].type)
                else ref
            )
            arrays[c] = (
                e.eval(batch, ctx) if batch.num_rows else pa.array([], rel.fields[c].type.arrow)
            )
        n = t.num_rows
    if n == 0:
        return QueryResult("INSERT 0 0"), None
    with insert_lock(rt, rel):
        seq = write_inserts(rt, rel, arrays, n, ctx)
    return QueryResult(f"INSERT 0 {n}"), seq


def values_columns(
    src: exp.Values,
    fields: list[Field],
    params: ex.ParamContext | None,
    ctx: ex.EvalContext,
    defaults: list[ex.Expr | None] | None = None,
) -> list[pa.Array]:
    """The rows of a VALUES list as one Arrow array per target column.

    Per value, binding and evaluating a literal costs far more than the value (an Arrow
    kernel call on a one-element array, a `datetime` for a timestamp). So a column made
    only of plain literals (numbers, quoted strings, NULL, booleans) is bound literal by
    literal without its cast, and the casts to the column's type run once per source
    type over an array of the literals (the same cast functions the binder folds
    literals with); other columns are bound value by value, and their remaining casts of
    quoted literals are also evaluated together. If anything fails, the rows are bound
    and evaluated one by one in order, as before, so the error is the first bad row's."""
    tuples = [tup.expressions if isinstance(tup, exp.Tuple) else [tup] for tup in src.expressions]
    try:
        if any(len(items) != len(fields) for items in tuples):
            raise SqlSyntaxError("INSERT has a wrong number of expressions")
        binder = ex.ExprBinder(ex.Scope([]), params)
        ds = defaults or [None] * len(fields)
        return [
            _column_of([items[j] for items in tuples], f, binder, params, ctx, ds[j])
            for j, f in enumerate(fields)
        ]
    except Exception:  # noqa: BLE001 - the exact path below raises the first row's error
        rows = [_bind_row(items, fields, params, defaults) for items in tuples]
        return _evaluate_rows(rows, fields, ctx)


def _plain_literal(node: exp.Expression, binder: ex.ExprBinder) -> ex.Literal | None:
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal):
        if node.this.is_string:
            return None
    elif not isinstance(node, (exp.Literal, exp.Null, exp.Boolean)):
        return None
    e = binder.bind(node)
    return e if isinstance(e, ex.Literal) else None


def _column_of(
    nodes: list[exp.Expression],
    f: Field,
    binder: ex.ExprBinder,
    params: ex.ParamContext | None,
    ctx: ex.EvalContext,
    default: ex.Expr | None = None,
) -> pa.Array:
    if f.type.mod is None:
        lits = [_plain_literal(node, binder) for node in nodes]
        if all(lit is not None for lit in lits):
            return _cast_literals(lits, f.type, ctx)  # type: ignore[arg-type]
    return _values_column([_bind_one(node, f, params, default) for node in nodes], f, ctx)


def _cast_literals(lits: list[ex.Literal], target: Any, ctx: ex.EvalContext) -> pa.Array:
    """Literals cast to `target` as the binder's assignment cast does, per source type."""
    out: list[Any] = [None] * len(lits)
    groups: dict[tuple[bool, Any], list[int]] = {}
    for i, lit in enumerate(lits):
        if lit.value is None:
            continue
        untyped = isinstance(lit, ex.UntypedLiteral)
        if lit.type == target and not untyped:
            out[i] = lit.value
        else:
            groups.setdefault((untyped, lit.type), []).append(i)
    col = array_of(out, target.arrow)
    for (untyped, src_type), idx in groups.items():
        arr = pa.array([lits[i].value for i in idx], src_type.arrow)
        if untyped:
            got = cast_datum(arr, src_type, target, len(idx), ctx)
        else:
            ref = ex.InputRef(index=0, type=src_type, name="v")
            batch = pa.RecordBatch.from_arrays([arr], names=["v"])
            got = ex.assign_cast(ref, target).eval(batch, ctx)
        mask = np.zeros(len(lits), dtype=bool)
        mask[idx] = True
        col = pc.replace_with_mask(col, pa.array(mask), got.cast(target.arrow))
    return col


def _evaluate_rows(
    rows: list[list[ex.Expr]], fields: list[Field], ctx: ex.EvalContext
) -> list[pa.Array]:
    values: list[list[Any]] = [[] for _ in fields]
    for row in rows:
        for j, e in enumerate(row):
            values[j].append(ex.evaluate_constant(e, ctx))
    return [array_of(v, f.type.arrow) for v, f in zip(values, fields, strict=True)]


def _values_column(exprs: list[ex.Expr], f: Field, ctx: ex.EvalContext) -> pa.Array:
    out: list[Any] = [None] * len(exprs)
    casts: dict[Any, list[int]] = {}
    for i, e in enumerate(exprs):
        if isinstance(e, ex.Literal) and e.type == f.type:
            out[i] = e.value
        elif (
            isinstance(e, ex.Func)
            and e.name == "cast"
            and e.type == f.type
            and len(e.args) == 1
            and isinstance(e.args[0], ex.Literal)
        ):
            casts.setdefault((type(e.args[0]), e.args[0].type), []).append(i)
        else:
            out[i] = ex.evaluate_constant(e, ctx)
    col = array_of(out, f.type.arrow)
    for (_, src_type), idx in casts.items():
        first = exprs[idx[0]]
        assert isinstance(first, ex.Func)
        lits = pa.array([exprs[i].args[0].value for i in idx], src_type.arrow)  # type: ignore[attr-defined]
        batch = pa.RecordBatch.from_arrays([lits], names=["v"])
        ref = ex.InputRef(index=0, type=src_type, name="v")
        got = first.with_children([ref]).eval(batch, ctx)
        if not isinstance(got, pa.Array):
            got = pa.array([got.as_py()] * len(idx), f.type.arrow)
        mask = np.zeros(len(exprs), dtype=bool)
        mask[idx] = True
        col = pc.replace_with_mask(col, pa.array(mask), got.cast(f.type.arrow))
    return col


def insert_lock(rt: Any, rel: Relation) -> Any:
    """What an insert into `rel` holds while it queues its rows: the table's DML lock when
    it has a primary key (see the module docstring), else nothing."""
    if rel.row_id_index is None:
        return rt.dml_lock(rel.id)
    return nullcontext()


def write_inserts(
    rt: Any,
    rel: Relation,
    arrays: dict[int, pa.Array],
    n: int,
    ctx: ex.EvalContext | None = None,
) -> int:
    """Log `n` new rows of `rel` given some of its columns (INSERT, COPY FROM STDIN): the
    hidden row id is drawn, columns left out get their DEFAULT (evaluated in `ctx`, the
    statement's: one `now()` per statement) or NULL, NOT NULL is checked. The caller holds
    `insert_lock(rt, rel)`; returns the WAL sequence number to wait for."""
    full = []
    defaults = column_defaults.default_exprs(rel) if column_defaults.has_defaults(rel) else {}
    for i, f in enumerate(rel.fields):
        if i in arrays:
            full.append(arrays[i])
        elif i == rel.row_id_index:
            full.append(pa.array(rt.row_ids.take(n), pa.int64()))
        elif i in defaults:  # CREATE TABLE ... DEFAULT / ALTER TABLE ... ADD COLUMN ... DEFAULT
            full.append(column_defaults.fill(defaults[i], f.type, n, ctx or ex.EvalContext()))
        else:
            full.append(pa.nulls(n, f.type.arrow))
    batch = pa.RecordBatch.from_arrays(full, schema=arrow_schema(rel.fields))
    _check_not_null(rel, batch)
    return rt.write(rel.id, StreamChunk.inserts(batch))


def _check_not_null(rel: Relation, batch: pa.RecordBatch) -> None:
    required = set(rel.pk) | set(rel.extra.get("not_null", []))
    for i in sorted(required):
        if batch.column(i).null_count:
            raise NotNullViolation(
                f'null value in column "{rel.fields[i].name}" of relation "{rel.name}" '
                "violates not-null constraint"
            )


def _one_batch(t: pa.Table) -> pa.RecordBatch:
    t = t.combine_chunks()
    bs = t.to_batches()
    return bs[0] if bs else pa.RecordBatch.from_pylist([], schema=t.schema)


def _matching(
    session: Any, rel: Relation, ast: exp.Expression, params: ex.ParamContext | None
) -> tuple[pa.RecordBatch, ex.Scope]:
    rt = session.db.runtime
    scope = _scope(rel, ast.this.alias or None)
    live = _one_batch(rt.live_rows(rel.id))
    where = ast.args.get("where")
    if where is not None and live.num_rows:
        pred = ex.ExprBinder(scope, params).bind(where.this)
        mask = pc.fill_null(pred.eval(live, session.eval_ctx()), False)
        live = live.filter(mask)
    elif where is not None:
        ex.ExprBinder(scope, params).bind(where.this)
    return live, scope


# -- DELETE --------
def run_delete(
    session: Any, st: Statement, params: ex.ParamContext | None
) -> tuple[QueryResult, int | None]:
    ast = st.ast
    assert isinstance(ast, exp.Delete)
    rt = session.db.runtime
    rel = _target(session, ast.this, "delete from")
    with rt.dml_lock(rel.id):
        rows, _ = _matching(session, rel, ast, params)
        n = rows.num_rows
        if n == 0:
            return QueryResult("DELETE 0"), None
        seq = rt.write(rel.id, StreamChunk.deletes(rows))
    return QueryResult(f"DELETE {n}"), seq


# -- UPDATE --------
def _set_column(rel: Relation, a: exp.Expression) -> int:
    if not isinstance(a, exp.EQ) or not isinstance(a.this, exp.Column):
        raise SqlSyntaxError("syntax error in SET clause")
    name = a.this.name
    pos = next((i for i, f in enumerate(rel.fields) if f.name == name and not f.hidden), None)
    if pos is None:
        raise UndefinedColumn(f'column "{name}" of relation "{rel.name}" does not exist')
    return pos


def run_update(
    session: Any, st: Statement, params: ex.ParamContext | None
) -> tuple[QueryResult, int | None]:
    ast = st.ast
    assert isinstance(ast, exp.Update)
    rt = session.db.runtime
    rel = _target(session, ast.this, "update")
    with rt.dml_lock(rel.id):
        old, scope = _matching(session, rel, ast, params)
        sets: dict[int, ex.Expr] = {}
        for a in ast.expressions:
            col = _set_column(rel, a)
            if col in sets:
                raise DuplicateColumn(
                    f'multiple assignments to same column "{rel.fields[col].name}"'
                )
            _preset_param(a.expression, rel.fields[col].type, params)
            e = ex.ExprBinder(scope, params).bind(a.expression)
            t = rel.fields[col].type
            sets[col] = ex.assign_cast(e, t) if _needs_cast(e.type, t) else e
        n = old.num_rows
        if n == 0:
            return QueryResult("UPDATE 0"), None
        ctx = session.eval_ctx()
        cols = [
            sets[i].eval(old, ctx) if i in sets else old.column(i) for i in range(len(rel.fields))
        ]
        new = pa.RecordBatch.from_arrays(cols, schema=old.schema)
        _check_not_null(rel, new)
        both = pa.Table.from_batches([old, new]).combine_chunks()
        order = np.empty(2 * n, dtype=np.int64)
        order[0::2] = np.arange(n)
        order[1::2] = np.arange(n, 2 * n)
        data = _one_batch(both.take(pa.array(order)))
        ops = np.empty(2 * n, dtype=np.int8)
        ops[0::2] = Op.UPDATE_DELETE
        ops[1::2] = Op.UPDATE_INSERT
        seq = rt.write(rel.id, StreamChunk(pa.array(ops), data))
    return QueryResult(f"UPDATE {n}"), seq


def _needs_cast(src: SqlType, column: SqlType) -> bool:
    """A value of `src` stored in a `column`: another type, or a varchar(n) / numeric(p, s)
    column whose modifier must be checked (modifiers take no part in type equality)."""
    return src != column or column.mod is not None


def describe_statement(session: Any, st: Statement, params: ParamContext) -> list[Field] | None:
    """Result columns of a statement without running it (and infer parameter types)."""
    if st.kind == "select":
        assert st.ast is not None
        plan = query.plan_select(session, st.ast, params)
        return [f for f in plan.schema if not f.hidden]
    bind_only(session, st, params)
    return None
