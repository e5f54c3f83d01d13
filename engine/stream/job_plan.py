"""The stored stream plan of a streaming job (materialized view or sink) in its catalog entry.

* CREATE: the handler lowers the logical plan with `state_ids` (new table ids from the
  catalog counter, recorded in `Relation.state_tables` under their stable names), then
  `store_plan` writes the encoded plan into `rel.extra["stream_plan"]` and returns it
  decoded again: the job is built from exactly what recovery will read.
* Recovery: `load_plan` decodes the stored plan; the job is not planned again, so a
  changed planner cannot attach old state to other operators. A call whose compiled
  kernel cannot be looked up by name (`engine.expr.codec.restore_func`) is taken from the
  job's SQL bound again, matched by its stored name, arguments and type.
* Migration (data-directory format 1 -> 2, `engine.state.format`): entries written
  before plans were stored have none; each is planned once from its SQL with the ids
  already recorded under each state table's name (the names `n<i>.<table>` are the ones
  those versions used), and the plans are written with the new format version in one
  atomic batch. An entry that still has no plan (its plan could not be encoded) is planned
  the same way at each recovery.

`rw_catalog.rw_internal_tables` lists every job's state tables from its stored plan (id,
name, operator, columns, key, distribution key): what a job's state is made of.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from engine.catalog import Catalog, Relation, RelationKind
from engine.catalog.system import RW_CATALOG, SystemContext, register_system_relation
from engine.expr.codec import PlanDecodeError, PlanEncodeError
from engine.expr.core import Func
from engine.plan.stream_codec import decode_plan, encode_plan, funcs_of
from engine.plan.stream_plan import IdFn, StreamPlan, local_ids
from engine.state import format as data_format
from engine.state.disk_table import DiskStateTable
from engine.types import INT, VARCHAR, Field

log = logging.getLogger("swell.stream")

PLAN_KEY = "stream_plan"

#: a job's stream plan planned from its SQL with the given state-table ids (the database
#: passes its planner in: this layer runs plans, it does not plan)
PlanFn = Callable[[Relation, IdFn], StreamPlan]


def state_ids(rel: Relation, catalog: Catalog) -> IdFn:
    """Table ids by stable name: the one recorded for `rel`, else a new one (recorded)."""

    def ids(name: str) -> int:
        tid = rel.state_tables.get(name)
        if tid is None:
            tid = catalog.allocate_state_table_id()
            rel.state_tables[name] = tid
        return tid

    return ids


def is_job(rel: Relation) -> bool:
    return rel.kind in (
        RelationKind.MATERIALIZED_VIEW,
        RelationKind.SINK,
        RelationKind.SUBSCRIPTION,
    )


def store_plan(rel: Relation, plan: StreamPlan) -> StreamPlan:
    """Record `plan` in the catalog entry; returns the plan as recovery will decode it."""
    try:
        data = encode_plan(plan)
    except PlanEncodeError as e:  # keep working; recovery will plan it like a migration
        log.warning("stream plan of %s not stored: %s", rel.name, e)
        rel.extra.pop(PLAN_KEY, None)
        return plan
    rel.extra[PLAN_KEY] = data
    return decode_plan(data, funcs_of(plan))


def load_plan(rel: Relation, catalog: Catalog, plan_fn: PlanFn) -> tuple[StreamPlan, bool]:
    """The job's stream plan, and whether it was migrated (planned now, to be stored)."""
    data = rel.extra.get(PLAN_KEY)
    if data is None:
        plan = plan_fn(rel, state_ids(rel, catalog))
        log.info("stream plan of %s stored (planned from its SQL once)", rel.name)
        return store_plan(rel, plan), True
    fresh: list[Callable[[Func], Func | None]] = []

    def source(f: Func) -> Func | None:
        if not fresh:  # bind the SQL again only if some call needs it
            again = plan_fn(rel, local_ids())
            fresh.append(funcs_of(again))
        return fresh[0](f)

    try:
        return decode_plan(data, source), False
    except PlanDecodeError as e:
        raise PlanDecodeError(f'{rel.kind.value} "{rel.name}": {e}') from e


@data_format.migration(1)
def _store_stream_plans(ctx: data_format.MigrationContext) -> None:
    """Format 1 -> 2: every materialized view and sink gets its stored stream plan."""
    db = ctx.db
    if db is None or not ctx.extras.get("catalog"):
        return
    catalog: Catalog = db.catalog  # loaded from ctx.extras by the database
    n = 0
    for rel in catalog.ordered():
        if is_job(rel) and PLAN_KEY not in rel.extra:
            plan = db._plan_from_sql(rel, state_ids(rel, catalog))
            store_plan(rel, plan)
            n += 1
    ctx.extras["catalog"] = catalog.to_bytes()
    ctx.notes.append(f"stored the stream plans of {n} materialized views and sinks")


DISK_TABLES = {("StreamHashAgg", "groups")}
"""(operator, local table name) of the state tables operators keep as disk tables."""


@data_format.migration(2)
def _disk_group_tables(ctx: data_format.MigrationContext) -> None:
    """Format 2 -> 3: rewrite every aggregation's group table from the resident table's
    log/keyed records into the disk-table layout (in the migration's one batch)."""
    db = ctx.db
    if db is None or not ctx.extras.get("catalog"):
        return
    catalog: Catalog = db.catalog
    n = 0
    for rel in catalog.ordered():
        data = rel.extra.get(PLAN_KEY) if is_job(rel) else None
        for node in (data or {}).get("nodes", []):
            for t in node.get("tables", []):
                if (node.get("node"), t["name"].split(".", 1)[1]) not in DISK_TABLES:
                    continue
                key, dist = list(t["key"]), list(t["dist_key"])
                d = len(dist) if dist == key[: len(dist)] else 0
                name = f"{rel.name}.{t['name']}"
                table = DiskStateTable(int(t["id"]), name, ctx.store, dist_len=d)
                table.load(ctx.store)  # reads the old layout into its overlay
                table.write_dirty(ctx.batch)  # the new layout, and the old range deleted
                n += 1
    ctx.notes.append(f"moved {n} aggregation group tables to the disk-table layout")


@data_format.migration(3)
def _disk_segment_tables(ctx: data_format.MigrationContext) -> None:
    """Format 3 -> 4: every table's and view's `mat.segments` (Arrow segment blobs) moves
    from the resident table's records into the disk-table layout (one vnode)."""
    db = ctx.db
    if db is None or not ctx.extras.get("catalog"):
        return
    catalog: Catalog = db.catalog
    n = 0
    for rel in catalog.ordered():
        tid = rel.state_tables.get("mat.segments")
        if tid is None:
            continue
        table = DiskStateTable(int(tid), f"{rel.name}.mat.segments", ctx.store, dist_len=0)
        table.load(ctx.store)
        table.write_dirty(ctx.batch)
        n += 1
    ctx.notes.append(f"moved the rows of {n} tables and views to the disk-table layout")


@data_format.migration(4)
def _fixed_width_groups(ctx: data_format.MigrationContext) -> None:
    """Format 4 -> 5: the columnar aggregation path writes group rows in the fixed-width
    form; the marshal rows already stored stay readable (`codec.decode_value` and the
    columnar reader take both) and are rewritten as their groups change, so nothing is
    rewritten here: the version bump only keeps older Swells off the directory."""


@data_format.migration(5)
def _keyed_join_sides(ctx: data_format.MigrationContext) -> None:
    """Format 5 -> 6: hash join sides move to disk tables keyed by join key. Their old
    segment layout is converted by the operator when the job first loads it (it needs
    the operator's schema and keys), so this step only records the new version."""
    ctx.notes.append("hash join state converts to the keyed disk layout on first load")


@data_format.migration(6)
def _numeric_special_slots(ctx: data_format.MigrationContext) -> None:
    """Format 6 -> 7: numeric sum/avg group rows gain the NaN / Infinity / -Infinity
    counts. `HashAggOp` widens a row of the older layout when it reads it (the counts
    start at zero: older versions could not store those values), so this step only
    records the new version, which older Swells then refuse."""
    ctx.notes.append("numeric sum/avg group rows widen to the new layout as they are read")


@data_format.migration(7)
def _framed_join_rows(ctx: data_format.MigrationContext) -> None:
    """Format 7 -> 8: a hash join side appends a key's new rows to its stored blob at the
    bytes level (a framed blob), which older versions cannot decode. Stored blobs of the
    older layout are single groups, which this version reads as they are, so this step
    only records the new version, which older Swells then refuse."""
    ctx.notes.append("hash join rows stay readable; new rows are appended as framed blobs")


@data_format.migration(8)
def _ordered_top_n_rows(ctx: data_format.MigrationContext) -> None:
    """Format 8 -> 9: a retracting top-N keeps its rows in a disk table in window order.
    `TopNOp` converts a table of the older layouts when its job first steps (it needs the
    operator's order and keys), so this step only records the new version."""
    ctx.notes.append("top-N state converts to the ordered disk layout on first use")


@data_format.migration(9)
def _group_runs(ctx: data_format.MigrationContext) -> None:
    """Format 9 -> 10: an aggregation's group table may hold runs (blobs of many group
    rows after the table's row range, `engine.stream.operators.agg_columns`), which older
    versions would read as a legacy layout. Nothing stored changes meaning, so this step
    only records the new version, which older Swells then refuse."""
    ctx.notes.append("aggregation groups may be checkpointed as runs of many rows")


@data_format.migration(10)
def _fixed_width_join_rows(ctx: data_format.MigrationContext) -> None:
    """Format 10 -> 11: one-row groups of a join side (or append-only top-N) whose columns
    are all integers or floats are written as fixed-width rows, which older versions
    cannot decode. Stored marshal records stay readable as they are, so this step only
    records the new version, which older Swells then refuse."""
    ctx.notes.append("join rows of numeric columns may be written as fixed-width rows")


# -- rw_catalog.rw_internal_tables: the state tables of every job, from its stored plan ----------
_INTERNAL_FIELDS = [
    Field("id", INT),
    Field("name", VARCHAR),
    Field("job_id", INT),
    Field("job_name", VARCHAR),
    Field("job_kind", VARCHAR),
    Field("operator", VARCHAR),
    Field("columns", VARCHAR),
    Field("primary_key", VARCHAR),
    Field("distribution_key", VARCHAR),
]


def _internal_rows(ctx: SystemContext) -> list[tuple[Any, ...]]:
    """Read from the stored JSON (no decoding): one row per state table of each job."""
    out: list[tuple[Any, ...]] = []
    for rel in ctx.catalog.visible():
        data = rel.extra.get(PLAN_KEY) if is_job(rel) else None
        if not data:
            continue
        for node in data.get("nodes", []):
            for t in node.get("tables", []):
                cols = t["columns"]
                out.append(
                    (
                        t["id"],
                        f"{rel.name}.{t['name']}",
                        rel.id,
                        rel.name,
                        rel.kind.value,
                        node["node"],
                        ", ".join(cols),
                        ", ".join(cols[i] for i in t["key"]),
                        ", ".join(cols[i] for i in t["dist_key"]),
                    )
                )
    return out


register_system_relation(
    RW_CATALOG,
    "rw_internal_tables",
    _INTERNAL_FIELDS,
    _internal_rows,
    description="the state tables of every materialized view and sink, as their stored "
    "stream plans name them",
)
