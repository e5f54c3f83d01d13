"""Rescaling a running materialized view: `ALTER MATERIALIZED VIEW mv SET PARALLELISM = N`.

The view is not recomputed: the state of each of its partitionable nodes is moved between
actors by vnode, at a barrier. Under the runtime lock (the caller holds it):

1. a checkpoint commits everything so far, so the store holds every actor's state;
2. for each node that runs as actors before or after (the nodes recorded at CREATE, or
   `fragment.choose` of the plan when the view ran at 1), every state table's committed
   rows are read from the store, per old actor (or the coordinator's one copy), through
   the table classes the node's operator uses (`PlannedAllocator`, as a worker does);
3. each row goes to the new actor owning its vnode (`crc32(encode_key(key[:len(dist
   key)])) mod 256`, the state layout's and the exchange's function; `exchange.actor_of`)
   and is written into fresh physical tables (new ids under `<table>@<i>`) built on a
   staging RocksDB in a temporary directory, so their bytes are the layout the actor's
   operator reads; a node moving into the coordinator (N = 1) gets the rows written into
   its planned tables instead;
4. the old actors are dropped on their workers, the catalog entry is changed
   (`parallelism`, `parallel_nodes`, the `@i` table ids) and the flow is rebuilt as at
   recovery, the new actors loading their tables from the staging store; the next
   checkpoint (which this ends with) writes the staged rows, deletes the old tables'
   ranges and stores the catalog in one atomic batch. If anything fails before that
   commit, the epoch is rolled back and recovery rebuilds the view as it was.

Moved: GROUP BY aggregations and equi-joins (`MOVABLE`). Refused (0A000): a view still
being created, a view with another parallel node (a grouped top-N and window partitions
keep rows under segment ids of their own stores: the vnode of a stored row cannot be read
from its key), a node whose tables are not keyed by their distribution key first, and
views whose plan has no partitionable node. All checks run before anything changes.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from engine.catalog import Relation
from engine.errors import FeatureNotSupported, InvalidParameterValue
from engine.plan.stream_plan import StreamHashAgg, StreamHashJoin, StreamNode, StreamPlan
from engine.state import memcmp
from engine.state.codec import table_prefix
from engine.state.disk_table import DiskTables, HotCache
from engine.state.store import StateStore
from engine.stream.build import PlannedAllocator, build_op
from engine.stream.operators.hash_join import HashJoinOp
from engine.stream.operators.keyed_join_side import KeyedJoinSide
from engine.stream.parallel.exchange import actor_of
from engine.stream.parallel.flow import ParallelOp, actor_table_name
from engine.stream.parallel.fragment import PARALLEL_NODES, PARALLELISM, choose

ADAPTIVE = "parallelism_adaptive"
_CACHE = 16 << 20


class _Staged:
    """A flow's state entry that writes the staged tables' rows into the next checkpoint
    once (then holds nothing); `drop` deletes the old tables' ranges."""

    def __init__(self, name: str, staging: StateStore, new_ids: list[int], old_ids: list[int]):
        self.table_id = -1_000_000
        self.name = name
        self.dirty_count = 0
        self.keyed = True
        self.staging = staging
        self.new_ids = new_ids
        self.old_ids = old_ids
        self.done = False

    def write_dirty(self, batch: Any) -> int:
        if self.done:
            return 0
        n = 0
        for tid in self.old_ids:
            batch.delete_range(table_prefix(tid), table_prefix(tid + 1))
        for tid in self.new_ids:
            for k, v in self.staging.scan_range(table_prefix(tid), table_prefix(tid + 1)):
                batch.put(k, v)
                n += 1
        self.done = True
        return n

    def drop(self, batch: Any) -> None:
        for tid in self.new_ids:
            batch.delete_range(table_prefix(tid), table_prefix(tid + 1))

    def __len__(self) -> int:
        return 0

    def items(self) -> Iterator[tuple[Any, Any]]:
        return iter(())


class _Overlay:
    """A store that answers `scan_range` of the staged table ids from the staging store and
    everything else from the real one (what building the new flow reads)."""

    def __init__(self, real: Any, staging: StateStore, staged: set[int]) -> None:
        self._real = real
        self._staging = staging
        self._staged = staged

    def scan_range(self, begin: bytes, end: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        tid = int.from_bytes(begin[:4], "big") if len(begin) >= 4 else -1
        if tid in self._staged:
            return self._staging.scan_range(begin, end)
        return self._real.scan_range(begin, end)  # type: ignore[no-any-return]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def _with_ids(sn: StreamNode, ids: dict[str, int]) -> StreamNode:
    node = dataclasses.replace(sn)
    node.tables = [dataclasses.replace(t, id=ids[t.name]) for t in sn.tables]
    return node


def _tables_of(
    sn: StreamNode, ids: dict[str, int], owner: str, store: Any, disk: DiskTables, ctx: Any
) -> dict[str, Any]:
    """The node's state tables as its operator makes them (by planned table name)."""
    node = _with_ids(sn, ids)
    alloc = PlannedAllocator(node, owner, store, disk)
    op = build_op(node, alloc, ctx)
    if isinstance(sn, StreamHashJoin) and not (
        isinstance(op, HashJoinOp)
        and all(isinstance(s, KeyedJoinSide) for s in (op._left, op._right))
    ):  # a join whose sides are not keyed by join key (no disk tables): not movable
        raise FeatureNotSupported(
            f"Not supported: rescaling this {sn.kind}: its state is not keyed by join key",
            hint="Recreate the materialized view with the wanted streaming_parallelism.",
        )
    by_local = {t.local: t.name for t in node.tables}
    return {by_local[local]: t for local, t in alloc.made.items()}


MOVABLE = (StreamHashAgg, StreamHashJoin)
"""The operators whose every state row is keyed by the distribution key first, so a row's
vnode is read from its key: a GROUP BY's groups (and its min/max and distinct tables) and
an equi-join's two sides (`KeyedJoinSide`: a key's head and fragments all start with the
join key, and fragment ids are numbered per key, so whole keys move without clashing)."""


def _check_movable(sn: StreamNode) -> None:
    """Refuse a node whose state cannot be moved by vnode: a grouped top-N and a window
    function's partitions keep rows under segment ids of their own stores, so a stored
    row's vnode cannot be read from its key."""
    if type(sn) not in MOVABLE:
        what = {"StreamTopN": "a top-N", "StreamOverWindow": "a window function"}.get(
            sn.kind, sn.kind
        )
        raise FeatureNotSupported(
            f"Not supported: rescaling a materialized view whose {what} ({sn.kind}) runs as actors",
            hint="Views whose parallel operators are GROUP BY aggregations and equi-joins "
            "can be rescaled; recreate this one after SET streaming_parallelism to change "
            "its parallelism.",
        )


def _dist_len(sn: StreamNode) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in sn.tables:
        d = list(t.dist_key)
        if not d or d != list(t.key[: len(d)]):
            raise FeatureNotSupported(
                f"Not supported: rescaling {sn.kind}: its state table {t.name!r} is not "
                "keyed by its distribution key",
                hint="Recreate the materialized view with the wanted streaming_parallelism.",
            )
        out[t.name] = len(d)
    return out


def _vnodes(keys: list[tuple[Any, ...]], d: int) -> np.ndarray:
    if not keys:
        return np.zeros(0, dtype=np.int64)
    enc = memcmp.encode_keys([k[:d] for k in keys])
    return np.fromiter((zlib.crc32(b) & 255 for b in enc), dtype=np.int64, count=len(keys))


def rescale(rt: Any, rel: Relation, n: int) -> bool:
    """Move `rel`'s actor state to `n` actors per parallel node (see the module docstring);
    False when it already runs at `n`. The caller holds `rt.lock`."""
    from engine.stream.job_plan import load_plan

    if n < 1 or n > 256:
        raise InvalidParameterValue(
            f"invalid parallelism {n}", hint="Use a number of actors between 1 and 256."
        )
    if rel.extra.get("creating") or rel.id in rt.backfill.jobs:
        raise FeatureNotSupported(
            f'Not supported: rescaling "{rel.name}" while it is being created',
            hint="Wait for the job (WAIT) or cancel it (CANCEL JOBS), then alter.",
        )
    old_p = int(rel.extra.get(PARALLELISM) or 1)
    old_nodes = list(rel.extra.get(PARALLEL_NODES) or []) if old_p > 1 else []
    rt.barrier(force=True)  # 1. the store holds every actor's state
    plan: StreamPlan = load_plan(rel, rt.catalog, rt.plan_fn)[0]
    nodes = old_nodes or choose(plan)
    if not nodes:
        if n == 1:
            rel.extra[PARALLELISM] = 1
            rel.extra.pop(ADAPTIVE, None)
            rt.mark_catalog_dirty()
            rt.barrier(force=True)
            return True
        raise FeatureNotSupported(
            f'Not supported: "{rel.name}" has no operator that can run in parallel',
            hint="Aggregations with GROUP BY, equi-joins, grouped top-N and partitioned "
            "window functions run as actors.",
        )
    if n == old_p and (n == 1 or old_nodes):
        rel.extra.pop(ADAPTIVE, None)
        rt.mark_catalog_dirty()
        rt.barrier(force=True)
        return False
    new_nodes = nodes if n > 1 else []
    for i in nodes:
        _check_movable(plan.nodes[i])
    dists = {i: _dist_len(plan.nodes[i]) for i in nodes}
    flow = rt.views[rel.id]
    reader = DiskTables(rt.store, HotCache(_CACHE))
    tmp = Path(tempfile.mkdtemp(prefix="swell-rescale-"))
    staging = StateStore.open(tmp / "store")
    stage_disk = DiskTables(staging, HotCache(_CACHE))
    owner = rel.name
    ctx = rt.job_ctx(rel)
    moved: dict[int, dict[str, list[tuple[Any, Any]]]] = {}  # node -> table -> rows
    old_ids: list[int] = []
    try:
        # 2. every row of every old copy of each node's tables
        for i in nodes:
            sn = plan.nodes[i]
            copies: list[dict[str, int]] = []
            if i in old_nodes:
                for a in range(old_p):
                    copies.append({
                        t.name: int(rel.state_tables[actor_table_name(t.name, a)])
                        for t in sn.tables
                    })  # fmt: skip
            else:
                copies.append({t.name: t.id for t in sn.tables})
            rows: dict[str, list[tuple[Any, Any]]] = {t.name: [] for t in sn.tables}
            for ids in copies:
                for name, table in _tables_of(sn, ids, owner, rt.store, reader, ctx).items():
                    rows[name].extend(table.items())
                old_ids.extend(ids.values())
            moved[i] = rows
        # 3. stage the new copies
        new_ids: list[int] = []
        new_names: dict[str, int] = {}
        for i in new_nodes:
            sn = plan.nodes[i]
            owners = actor_of(n)
            per_actor: list[dict[str, list[tuple[Any, Any]]]] = [
                {t.name: [] for t in sn.tables} for _ in range(n)
            ]
            for t in sn.tables:
                kv = moved[i][t.name]
                vn = _vnodes([k for k, _ in kv], dists[i][t.name])
                for (k, v), a in zip(kv, owners[vn], strict=True):
                    per_actor[int(a)][t.name].append((k, v))
            for a in range(n):
                ids = {t.name: rt.catalog.allocate_state_table_id() for t in sn.tables}
                for t in sn.tables:
                    new_names[actor_table_name(t.name, a)] = ids[t.name]
                new_ids.extend(ids.values())
                tables = _tables_of(sn, ids, owner, None, stage_disk, ctx)
                batch = staging.new_batch()
                for name, table in tables.items():
                    kv = per_actor[a][name]
                    if kv:
                        table.put_many([k for k, _ in kv], [v for _, v in kv])
                    table.write_dirty(batch)
                staging.write(batch, sync=False)
        # 4. drop the old actors, change the catalog entry, rebuild the flow
        for nd in flow.nodes:
            if isinstance(nd.op, ParallelOp):
                nd.op.drop_actors()
        for name in [k for k in rel.state_tables if "@" in k]:
            node_table = name.rsplit("@", 1)[0]
            if any(t.name == node_table for i in nodes for t in plan.nodes[i].tables):
                rel.state_tables.pop(name)
        rel.state_tables.update(new_names)
        rel.extra[PARALLELISM] = n
        rel.extra.pop(ADAPTIVE, None)
        if new_nodes:
            rel.extra[PARALLEL_NODES] = list(new_nodes)
        else:
            rel.extra.pop(PARALLEL_NODES, None)
        planned = {t.id for i in nodes for t in plan.nodes[i].tables}
        keep_old = [tid for tid in old_ids if not (n == 1 and tid in planned)]
        staged = _Staged(f"{rel.name}.rescale", staging, new_ids, keep_old)
        try:
            new_flow = rt.replace_view(rel, plan, _Overlay(rt.store, staging, set(new_ids)))
            new_flow.tables.append(staged)
            if n == 1:  # the nodes run in the coordinator again: into their planned tables
                by_id = {getattr(t, "table_id", None): t for t in new_flow.tables}
                for i in nodes:
                    for t in plan.nodes[i].tables:
                        kv = moved[i][t.name]
                        if kv:
                            by_id[t.id].put_many([k for k, _ in kv], [v for _, v in kv])
        except BaseException:
            rt.recover()  # the catalog entry and every flow as of the last checkpoint
            raise
        rt.mark_catalog_dirty()
        rt.barrier(force=True)  # the staged rows, the old ranges' deletes and the catalog
        if staged in new_flow.tables:
            new_flow.tables.remove(staged)
    finally:
        staging.close()
        shutil.rmtree(tmp, ignore_errors=True)
    return True
