"""The views, materialized views, sinks and indexes over a table whose column is renamed
or dropped (`ALTER TABLE t RENAME COLUMN` / `DROP COLUMN` while jobs read `t`).

A reader has two forms, and both must stay right:

* its **SQL** (`Relation.query` / `definition`): plain views are planned from it at every
  query; materialized views use it for SHOW CREATE, VERIFY and the rare re-planning of a
  stored plan (`engine.stream.job_plan`);
* its **stored stream plan** (jobs only), which reads the table's columns by the names it
  was planned with (`ViewFlow.scan_names` / the plan's `scans`).

RENAME COLUMN b TO bb: each reference to the table in a reader's SQL becomes a derived
table that shows the table's old layout, `(SELECT a, bb AS b, c FROM t) AS t`, so every
column reference, `*` and output name inside the reader means what it meant (nothing in
the reader needs to be resolved again by hand); the stored plans' scan names change from
`b` to `bb`. DROP COLUMN c: a reader keeps working when its SQL, planned over the table
without `c`, still plans with the same output columns (it never used `c`); the stored
plans then read a NULL column in place of `c` (the scan names keep a tombstone with its
type). Otherwise the statement is refused (2BP01) and names the readers that use the
column, as PostgreSQL does. An index whose key, INCLUDE or DISTRIBUTED BY columns name the
column refuses both (ad-hoc lookups match index columns by name): drop the index first.

Every rewritten reader is checked by planning it against the changed table: the same
output names and types, or the statement is refused; a change never leaves a reader that
plans differently.

Lifecycle: `engine.handlers.alter` calls `check_drop` / `rename_plan` before it changes
anything (under the runtime lock), then applies the result with `apply_rename`; the
runtime re-binds the jobs' scans (`Runtime.rebind_scans`) in the same locked section.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import sqlglot
from sqlglot import exp

from engine.catalog import Relation, RelationKind
from engine.catalog.catalog import type_to_json
from engine.catalog.indexes import index_info
from engine.catalog.privileges import reading_as_owner
from engine.errors import DependentObjectsStillExist, EngineError
from engine.plan.planner import Planner
from engine.sql.parser import parse_one
from engine.types import Field

TOMBSTONE = "\x00"  # a stored scan name that starts with it: a dropped column (NULLs)


def readers(cat: Any, rel: Relation) -> list[Relation]:
    """The relations that read `rel` directly, in creation order."""
    return [r for r in cat.ordered() if rel.id in r.depends_on]


def _refuse(rel: Relation, column: str, action: str, users: list[Relation], hint: str) -> None:
    raise DependentObjectsStillExist(
        f"cannot {action} column {column} of table {rel.name} because other objects depend on it",
        detail="\n".join(
            f"{_kind(r)} {r.name} depends on column {column} of table {rel.name}" for r in users
        ),
        hint=hint,
    )


def _kind(r: Relation) -> str:
    return "index" if index_info(r) is not None else r.kind.value


def _indexes_naming(users: list[Relation], rel: Relation, column: str) -> list[Relation]:
    out = []
    for r in users:
        i = index_info(r)
        if i is None or i.get("on") != rel.id:
            continue
        named = [*(i.get("columns") or []), *(i.get("include") or [])]
        named += list(i.get("distributed_by") or [])
        if column in named:
            out.append(r)
    return out


def _with(cat: Any, changed: dict[int, Relation]) -> Any:
    """A shallow copy of the catalog in which the `changed` entries replace theirs."""
    c = copy.copy(cat)
    c.relations = {**cat.relations, **changed}
    return c


def _output(cat: Any, r: Relation, query: str) -> list[tuple[str, Any]] | None:
    """The visible output columns (name, type) of reader `r`'s `query` planned over `cat`;
    None when it does not plan."""
    materialized = r.kind is not RelationKind.VIEW
    try:
        st = parse_one(query)
        assert st.ast is not None
        planner = Planner(cat, streaming=materialized, subquery_runner=lambda _plan: [])
        with reading_as_owner(r):  # the reader's inputs are checked against its owner
            plan = planner.plan_query(st.ast)
    except (EngineError, sqlglot.errors.SqlglotError, AssertionError, RecursionError):
        return None
    return [(f.name, f.type) for f in plan.schema if not f.hidden]


def _same(before: list[tuple[str, Any]] | None, cat: Any, r: Relation, query: str) -> bool:
    """Does `query` plan over the changed catalog `cat` as `r`'s SQL planned before?"""
    return before is None or _output(cat, r, query) == before


def _scans_column(r: Relation, rel_id: int, column: str) -> bool:
    """Does job `r`'s stored plan read `column` of relation `rel_id`? (A job planned before
    an ADD COLUMN reads only the columns it was planned with.) True for other readers."""
    data = r.extra.get("stream_plan")
    if not isinstance(data, dict):
        return True
    return any(int(e[0]) == rel_id and column in e[2] for e in data.get("scans", []))


# -- DROP COLUMN --------------------------------------------------------------------------
def check_drop(cat: Any, rel: Relation, column: str) -> dict[int, tuple[str, str]]:
    """Refuse (2BP01) unless every reader of `rel` plans the same without `column`; the
    readers whose SQL changes (a derived table of an earlier rename loses the column) are
    returned with their new (query, definition), for `apply_rename`."""
    users = readers(cat, rel)
    if not users:
        return {}
    hint = "Drop {} {} first."
    named = _indexes_naming(users, rel, column)
    if named:
        _refuse(rel, column, "drop", named, hint.format("index", named[0].name))
    idx = next(i for i, f in enumerate(rel.fields) if f.name == column)
    without = copy.copy(rel)
    without.fields = [f for i, f in enumerate(rel.fields) if i != idx]
    without.pk = [k - 1 if k > idx else k for k in rel.pk]
    if rel.row_id_index is not None and rel.row_id_index > idx:
        without.row_id_index = rel.row_id_index - 1
    changed: dict[int, Relation] = {rel.id: without}
    using: list[Relation] = []
    rewritten: dict[int, tuple[str, str]] = {}
    for r in users:
        if not r.query or not _scans_column(r, rel.id, column):
            continue
        before = _output(cat, r, r.query)
        if before is None:  # its SQL does not plan now: whether it uses the column is unknown
            using.append(r)
            continue
        if not _same(before, _with(cat, changed), r, r.query):
            # a reader renamed before shows the column in its derived table only
            query = _unwrap_column(r.query, rel, column) or ""
            if not query or not _same(before, _with(cat, changed), r, query):
                using.append(r)
                continue
            definition = _unwrap_column(r.definition, rel, column) or r.definition
            rewritten[r.id] = (query, definition)
            upd = copy.copy(r)
            upd.query = query
            changed[r.id] = upd
    if using:
        _refuse(rel, column, "drop", using, hint.format(_kind(using[0]), using[0].name))
    return rewritten


def _unwrap_column(sql: str, rel: Relation, column: str) -> str | None:
    """`sql` without `column` in the derived tables RENAME COLUMN wrapped `rel` in (a
    plain column list over `rel` alone); None when there is none or it cannot be read."""
    try:
        tree = sqlglot.parse_one(sql, read="risingwave")
    except sqlglot.errors.ParseError:
        return None
    if tree is None:
        return None
    changed = False
    for sel in list(tree.find_all(exp.Select)):
        src = sel.args.get("from_") or sel.args.get("from")
        base = src.this if src is not None else None
        if (
            not isinstance(base, exp.Table)
            or base.name != rel.name
            or (base.db or "public") != rel.schema_name
            or not isinstance(sel.parent, exp.Subquery)
            or any(sel.args.get(k) for k in ("where", "group", "having", "joins", "order"))
        ):
            continue
        cols = sel.expressions
        if not all(isinstance(c.unalias(), exp.Column) for c in cols):
            continue
        keep = [c for c in cols if c.unalias().name != column]
        if len(keep) != len(cols) and keep:
            sel.set("expressions", keep)
            changed = True
    return str(tree.sql(dialect="risingwave")) if changed else None


def tombstone(field: Field) -> str:
    """The scan name a job keeps for a dropped column it never used: NULLs of its type."""
    return TOMBSTONE + json.dumps([field.name, type_to_json(field.type)])


# -- RENAME COLUMN ------------------------------------------------------------------------
def rename_plan(cat: Any, rel: Relation, old: str, new: str) -> dict[int, tuple[str, str]]:
    """The rewritten (query, definition) of every reader of `rel` whose SQL names it,
    checked against the renamed table; refuses (2BP01) a reader it cannot rewrite."""
    users = readers(cat, rel)
    if not users:
        return {}
    named = _indexes_naming(users, rel, old)
    if named:
        _refuse(rel, old, "rename", named, f"Drop index {named[0].name} first.")
    renamed = copy.copy(rel)
    renamed.fields = [Field(new, f.type, f.hidden) if f.name == old else f for f in rel.fields]
    layout = [(f.name if f.name != old else new, f.name) for f in rel.fields if not f.hidden]
    changed: dict[int, Relation] = {rel.id: renamed}
    out: dict[int, tuple[str, str]] = {}
    failed: list[Relation] = []
    for r in users:  # creation order: a view over a rewritten view sees the new one
        if not r.query:
            continue
        before = _output(cat, r, r.query)
        if before is None:  # its SQL does not plan now either: nothing to keep right
            continue
        query = _wrap_table(r.query, rel, layout)
        if query is None or not _same(before, _with(cat, changed), r, query):
            failed.append(r)
            continue
        definition = _wrap_table(r.definition, rel, layout) or r.definition
        out[r.id] = (query, definition)
        if query != r.query:
            upd = copy.copy(r)
            upd.query = query
            changed[r.id] = upd
    if failed:
        _refuse(
            rel,
            old,
            "rename",
            failed,
            f"Drop {_kind(failed[0])} {failed[0].name} first, or rename it back.",
        )
    return out


def _wrap_table(sql: str, rel: Relation, layout: list[tuple[str, str]]) -> str | None:
    """`sql` with every reference to `rel` showing the old column names (`layout`:
    (current name, old name) per visible column): a derived table over `rel`, or the
    derived table of an earlier rename with its column list changed (and dropped again
    when it comes back to the table's own layout); None when the text cannot be read."""
    try:
        tree = sqlglot.parse_one(sql, read="risingwave")
    except sqlglot.errors.ParseError:
        return None
    if tree is None:
        return None
    renamed = {was: now for now, was in layout if now != was}
    targets = [
        t
        for t in tree.find_all(exp.Table)
        if isinstance(t.this, exp.Identifier)
        and t.name == rel.name
        and (t.db or "public") == rel.schema_name
        and not isinstance(t.parent, (exp.Create, exp.Schema))  # the reader's own name
    ]
    if not targets:
        return sql
    for t in targets:
        wrapper = _wrapper_of(t)
        if wrapper is not None:
            _rename_in_wrapper(wrapper, renamed, [now for now, _was in layout])
            continue
        alias = t.args.get("alias")
        shown = alias.this if alias is not None and alias.this else exp.to_identifier(rel.name)
        cols = [
            exp.column(now, quoted=True)
            if now == was
            else exp.alias_(exp.column(now, quoted=True), was, quoted=True)
            for now, was in layout
        ]
        base = exp.Table(
            this=exp.to_identifier(rel.name, quoted=True),
            db=exp.to_identifier(rel.schema_name, quoted=True),
        )
        sub = exp.Subquery(
            this=exp.select(*cols).from_(base),
            alias=alias.copy() if alias is not None else exp.TableAlias(this=shown.copy()),
        )
        t.replace(sub)
    return str(tree.sql(dialect="risingwave"))


def _wrapper_of(t: exp.Table) -> exp.Select | None:
    """The SELECT of a derived table that an earlier rename made around table `t`: a
    plain column list over `t` alone, inside a subquery."""
    sel = t.parent.parent if t.parent is not None else None
    if not isinstance(sel, exp.Select) or not isinstance(sel.parent, exp.Subquery):
        return None
    src = sel.args.get("from_") or sel.args.get("from")
    if src is None or src.this is not t or t.args.get("alias") is not None:
        return None
    if any(sel.args.get(k) for k in ("where", "group", "having", "joins", "order", "limit")):
        return None
    if not all(isinstance(c.unalias(), exp.Column) for c in sel.expressions):
        return None
    return sel


def _rename_in_wrapper(sel: exp.Select, renamed: dict[str, str], now: list[str]) -> None:
    cols = []
    for c in sel.expressions:
        col = c.unalias()
        shown = c.alias if isinstance(c, exp.Alias) else col.name
        inner = renamed.get(col.name, col.name)
        ref = exp.column(inner, quoted=True)
        cols.append(ref if inner == shown else exp.alias_(ref, shown, quoted=True))
    sel.set("expressions", cols)
    if [c.name for c in cols if not isinstance(c, exp.Alias)] == now and all(
        not isinstance(c, exp.Alias) for c in cols
    ):  # the table's own layout again: the table itself, under the derived table's alias
        sub = sel.parent
        assert isinstance(sub, exp.Subquery)
        src = sel.args.get("from_") or sel.args.get("from")
        assert src is not None
        base = src.this.copy()
        alias = sub.args.get("alias")
        if alias is not None and alias.name != base.name:
            base.set("alias", alias.copy())
        sub.replace(base)


def apply_rename(cat: Any, rel: Relation, rewritten: dict[int, tuple[str, str]]) -> None:
    for rid, (query, definition) in rewritten.items():
        r = cat.relations[rid]
        r.query, r.definition = query, definition


def retarget_scans(cat: Any, rel_id: int, names: dict[str, str]) -> None:
    """In every job's stored plan, read column `old` of relation `rel_id` as `names[old]`
    (a new name, or a tombstone)."""
    for r in cat.ordered():
        data = r.extra.get("stream_plan")
        if not isinstance(data, dict):
            continue
        for entry in data.get("scans", []):
            if int(entry[0]) == rel_id:
                entry[2] = [names.get(c, c) for c in entry[2]]
