"""A parallel job: its partitionable nodes as `ParallelOp`s over actors in the workers.

`build_parallel_plan` builds a job's nodes like `engine.stream.build.build_plan`, except
that each node chosen by `fragment` becomes a `ParallelOp`: an operator of the flow like
any other (the flow's `step`, the backfill and the CPU accounting do not change), whose
`step` is the exchange. It splits every input chunk by the vnode of the node's key
columns (`exchange.split`), sends each worker one request with its actors' parts, lets
the workers step concurrently, and concatenates the actors' outputs (actor order).

State: actor i of a node owns physical tables of its own, one per `TableDesc` of the
node, recorded in the job's catalog entry under `<table name>@<i>` (`Relation.
state_tables`; allocated at CREATE, found again at recovery). The planned tables of the
node stay empty. Building an actor ships it its tables' committed key ranges read from
the coordinator's store. The flow's state list holds one `ActorTables` per parallel
node instead of the node's tables: at the checkpoint its `write_dirty(batch)` collects
every actor's dirty writes and applies them into the checkpoint's one WriteBatch, so an
epoch commits atomically across the workers; `drop` deletes every actor table's range.

Failures: a lost worker raises `WorkerLost` out of `step` or `write_dirty`; an actor's
exception comes back as `WorkerFailed`. Both happen inside the barrier, which rolls the
epoch back; recovery resets the pool (`pool.WorkerPool.reset`) and rebuilds the flow
from the last checkpoint.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa

from engine.catalog import Relation
from engine.chunk import StreamChunk
from engine.errors import EngineError
from engine.expr import EvalContext
from engine.plan.stream_plan import StreamNode, StreamPlan
from engine.state.codec import table_prefix
from engine.state.disk_table import DiskTables
from engine.state.table import StateTable
from engine.stream.build import PlannedAllocator, build_op
from engine.stream.graph import Node
from engine.stream.operator import Operator
from engine.stream.parallel import protocol
from engine.stream.parallel.exchange import split
from engine.stream.parallel.fragment import PARALLEL_NODES, node_json, partition_keys
from engine.stream.parallel.pool import Pending, WorkerPool
from engine.types import arrow_schema

SHIP_BATCH = 100_000
"""Store entries per IPC body when an actor's committed state is shipped to it."""


def _table_bodies(store: Any, tid: int) -> list[bytes]:
    """Table `tid`'s committed key range as kv bodies of at most SHIP_BATCH entries (the
    entries are held as Arrow binary arrays, not Python lists, once encoded)."""
    out: list[bytes] = []
    ks: list[bytes] = []
    vs: list[bytes] = []
    for k, v in store.scan_range(table_prefix(tid), table_prefix(tid + 1)):
        ks.append(k)
        vs.append(v)
        if len(ks) >= SHIP_BATCH:
            out.append(protocol.kv_body(ks, vs))
            ks, vs = [], []
    if ks or not out:
        out.append(protocol.kv_body(ks, vs))
    return out


def actor_table_name(table: str, actor: int) -> str:
    """The `Relation.state_tables` name of actor `actor`'s copy of planned table `table`."""
    return f"{table}@{actor}"


class _RemoteError(EngineError):
    """An expression error raised in an actor, reported into the job's event log."""


class ParallelOp(Operator):
    """One stream node as p actors; see the module docstring."""

    def __init__(
        self,
        rel: Relation,
        index: int,
        sn: StreamNode,
        keys: list[list[int]],
        p: int,
        pool: WorkerPool,
        ctx: EvalContext,
        new_id: Callable[[], int],
    ) -> None:
        self.rel = rel
        self.index = index
        self.node = sn
        self.kind = sn.kind
        self.schema = list(sn.schema)
        self.stream_key = list(sn.stream_key or [])
        self.keys = keys
        self.p = p
        self.pool = pool
        self.ctx = ctx
        self.actor_keys = [f"{rel.id}/{index}/{i}" for i in range(p)]
        self.workers = [pool.worker_of(i) for i in range(p)]
        # per actor: planned table name -> physical table id
        self.phys: list[dict[str, int]] = []
        for i in range(p):
            ids: dict[str, int] = {}
            for t in sn.tables:
                name = actor_table_name(t.name, i)
                tid = rel.state_tables.get(name)
                if tid is None:
                    tid = new_id()
                    rel.state_tables[name] = tid
                ids[t.name] = tid
            self.phys.append(ids)
        self._target = arrow_schema(self.schema)
        self.rows_in = 0
        self.rows_out = 0
        self.exchange_bytes = 0
        self.actor_rows_in = [0] * p  # rows sent to / received from each actor
        self.actor_rows_out = [0] * p
        # actors stepped (or built) since their writes were last collected: only they can
        # have dirty writes, so an idle view's checkpoint sends its workers nothing
        self.dirty: set[int] = set(range(p))
        # backfill slices of an aggregation hold their output in the actors (`hold`, set
        # by `holding_outputs`); `held`: the actors holding some, released at the next
        # step without hold, which the barrier makes (`time_driven`)
        self.holds = sn.kind == "StreamHashAgg"
        self.hold = False
        self.held: set[int] = set()
        # a barrier's step (not a backfill slice: `holding_outputs` sets `slicing`) sends
        # the checkpoint's collect right away: the workers write their logs while the
        # coordinator runs the rest of the job, and `collect` reads them
        self.slicing = False
        self._collecting: Pending | None = None

    @property
    def time_driven(self) -> bool:
        """Step me at the barrier even without input while actors hold output: the epoch's
        checkpoint must not commit their state without the view's rows."""
        return bool(self.held)

    def actors_on(self) -> dict[int, list[int]]:
        """worker -> the actor indexes it runs."""
        out: dict[int, list[int]] = {}
        for i, w in enumerate(self.workers):
            out.setdefault(w, []).append(i)
        return out

    def build(self, store: Any | None) -> None:
        """Start every actor; with `store`, ship each its tables' committed rows."""
        node = node_json(self.node)
        by_worker = self.actors_on()
        for r in range(max(len(v) for v in by_worker.values())):
            reqs: dict[int, bytes] = {}
            for w, actors in by_worker.items():
                if r >= len(actors):
                    continue
                i = actors[r]
                bodies: list[bytes] = []
                if store is not None:
                    for t in self.node.tables:
                        bodies.extend(_table_bodies(store, self.phys[i][t.name]))
                header = {
                    "cmd": "build",
                    "actor": self.actor_keys[i],
                    "node": node,
                    "tables": self.phys[i],
                    "owner": self.rel.name,
                    "timezone": self.ctx.timezone,
                }
                reqs[w] = protocol.encode(header, bodies)
            self.pool.call(reqs)

    def step(self, inputs: list[StreamChunk | None]) -> StreamChunk | None:
        hold = self.hold and self.holds
        release = set() if hold else self.held  # actors to step for their held output
        # no input: every actor is stepped (a forced step), unless it is the barrier's
        # call to release held output (then only the holders, without stepping them)
        force = all(c is None or len(c) == 0 for c in inputs) and not release
        parts = [split(c, self.keys[k], self.p) for k, c in enumerate(inputs)]
        self.rows_in += sum(len(c) for c in inputs if c is not None)
        reqs: dict[int, bytes] = {}
        order: dict[int, list[int]] = {}
        now = self.ctx.now_utc().isoformat()
        for w, actors in self.actors_on().items():
            steps: list[dict[str, Any]] = []
            bodies: list[bytes] = []
            for i in actors:
                mine = [parts[k][i] for k in range(len(inputs))]
                idle = all(c is None for c in mine)
                if not force and idle and i not in release:
                    continue
                refs: list[int] = []
                for c in mine:
                    if c is None:
                        refs.append(-1)
                    else:
                        self.actor_rows_in[i] += len(c)
                        refs.append(len(bodies))
                        bodies.append(protocol.chunk_body(c))
                run = force or not idle  # else only its held output is wanted
                steps.append({"actor": self.actor_keys[i], "inputs": refs, "run": run})
                order.setdefault(w, []).append(i)
                self.dirty.add(i)
            if steps:
                head = {"cmd": "step", "steps": steps, "now": now, "hold": hold}
                req = protocol.encode(head, bodies)
                self.exchange_bytes += len(req)
                reqs[w] = req
        if not reqs:
            return None
        res = self.pool.call(reqs)
        outs: list[tuple[int, StreamChunk]] = []
        for w, (header, got) in res.items():
            for i, s in zip(order[w], header["steps"], strict=True):
                for expr, sqlstate, message, count, sample in s["errors"]:
                    self._report(expr, sqlstate, message, count, sample)
                if s.get("held"):
                    self.held.add(i)
                else:
                    self.held.discard(i)
                if s["out"] >= 0:
                    c = protocol.chunk_from(got[s["out"]])
                    if c is not None:
                        outs.append((i, c))
                        self.actor_rows_out[i] += len(c)
                        self.exchange_bytes += len(got[s["out"]])
        outs.sort(key=lambda x: x[0])
        chunks = [c for _, c in outs]
        if not self.slicing and not self.held:
            self._collect_early()
        if not chunks:
            return None
        self.rows_out += sum(len(c) for c in chunks)
        return self._concat(chunks)

    def _collect_early(self) -> None:
        """Send the collect of every actor stepped since the last one without waiting
        (`collect` reads the answers at the checkpoint; a step meanwhile on the same
        worker reads them first and makes its actors dirty again)."""
        if self._collecting is not None:
            return  # read at the checkpoint together with what is dirty then
        reqs = self._collect_requests()
        if reqs:
            self._collecting = self.pool.start(reqs)
            self.dirty.clear()

    def _concat(self, chunks: list[StreamChunk]) -> StreamChunk | None:
        if len(chunks) == 1:
            return chunks[0]
        first = chunks[0].data.schema
        if any(c.data.schema != first for c in chunks[1:]):
            target = pa.schema(
                [pa.field(f.name, t.type) for f, t in zip(first, self._target, strict=True)]
            )
            chunks = [StreamChunk(c.ops, c.data.cast(target)) for c in chunks]
        return StreamChunk.concat(chunks)

    def _report(self, expr: str, sqlstate: str, message: str, count: int, sample: str) -> None:
        errors = getattr(self.ctx, "errors", None)
        if errors is None:
            return
        err = _RemoteError(message)
        err.sqlstate = sqlstate  # type: ignore[misc]
        errors.report(expr, err, count, sample)

    def _collect_requests(self) -> dict[int, bytes]:
        reqs: dict[int, bytes] = {}
        for w, actors in self.actors_on().items():
            keys = [self.actor_keys[i] for i in actors if i in self.dirty]
            if keys:
                reqs[w] = protocol.encode({"cmd": "collect", "actors": keys, "sst": True})
        return reqs

    def collect(self, batch: Any) -> int:
        """Every actor's dirty writes into the checkpoint `batch` (in actor order): the
        answers of the collect sent after the barrier's step (`_collect_early`), then one
        request to each worker with an actor stepped since."""
        n = 0
        early, self._collecting = self._collecting, None
        if early is not None:
            n += self._replay(self.pool.result(early), batch)
        reqs = self._collect_requests()
        if reqs:
            res = self.pool.call(reqs)
            self.dirty.clear()
            n += self._replay(res, batch)
        return n

    @staticmethod
    def _replay(res: dict[int, tuple[dict[str, Any], list[memoryview]]], batch: Any) -> int:
        """The collect answers into `batch`: an SST file is handed to the checkpoint
        whole (`EpochChanges.sst`, ingested after the commit batch: no Python call per
        key here), a write log replayed."""
        n = 0
        for w in sorted(res):
            header, bodies = res[w]
            kinds = header.get("kinds") or ["log"] * len(bodies)
            for kind, body in zip(kinds, bodies, strict=True):
                if kind == "sst":
                    batch.sst(body)
                else:
                    protocol.replay_body(body, batch)
            n += int(header.get("keys", 0))
        return n

    def drop_actors(self) -> None:
        reqs = {
            w: protocol.encode({"cmd": "drop", "actors": [self.actor_keys[i] for i in actors]})
            for w, actors in self.actors_on().items()
        }
        with contextlib.suppress(EngineError):  # a lost worker has no actors left
            self.pool.call(reqs)

    def table_ids(self) -> list[int]:
        return sorted(tid for ids in self.phys for tid in ids.values())

    def explain(self) -> str:
        return f"{self.kind} (parallel: {self.p} actors)"


class ActorTables:
    """The state of one `ParallelOp` as the checkpoint sees it (see the module docstring)."""

    def __init__(self, op: ParallelOp) -> None:
        self.op = op
        self.table_id = -1 - op.index  # never a real table id: the actors own the tables
        self.name = f"{op.rel.name}.n{op.index}@actors"
        self.dirty_count = 0
        self.keyed = True

    def write_dirty(self, batch: Any) -> int:
        return self.op.collect(batch)

    def drop(self, batch: Any) -> None:
        for tid in self.op.table_ids():
            batch.delete_range(table_prefix(tid), table_prefix(tid + 1))
        self.op.drop_actors()

    def __len__(self) -> int:
        return 0

    def items(self) -> Iterator[tuple[Any, Any]]:
        return iter(())

    def __repr__(self) -> str:
        return f"ActorTables({self.name!r}, actors={self.op.p})"


def build_parallel_plan(
    plan: StreamPlan,
    rel: Relation,
    store: Any | None,
    ctx: EvalContext,
    disk: DiskTables | None,
    pool: WorkerPool,
    p: int,
    new_id: Callable[[], int],
) -> tuple[list[Node], list[StateTable]]:
    """The job's nodes with the nodes in `rel.extra[PARALLEL_NODES]` as `ParallelOp`s of
    `p` actors (built now; with `store`, from the last checkpoint); the other nodes are
    built as `build_plan` builds them. Returns the nodes and the flow's state tables."""
    chosen = set(rel.extra.get(PARALLEL_NODES, []))
    nodes: list[Node] = []
    tables: list[Any] = []
    for i, sn in enumerate(plan.nodes):
        keys = partition_keys(sn) if i in chosen else None
        if i in chosen and keys is None:
            raise EngineError(
                f'materialized view "{rel.name}": node {i} ({sn.kind}) was created as a '
                "parallel node but cannot run as one in this version"
            )
        if keys is not None:
            op = ParallelOp(rel, i, sn, keys, p, pool, ctx, new_id)
            op.build(store)
            tables.append(ActorTables(op))
            nodes.append(Node(op, list(sn.inputs), sn.watermark_transfer()))
            continue
        alloc = PlannedAllocator(sn, rel.name, store, disk)
        built = build_op(sn, alloc, ctx)
        alloc.check_used(sn)
        tables.extend(alloc.made.values())
        nodes.append(Node(built, list(sn.inputs), sn.watermark_transfer()))
    return nodes, tables


@contextlib.contextmanager
def holding_outputs(nodes: list[Node], on: bool = True) -> Iterator[None]:
    """Within the block, the flow's parallel aggregations keep their actors' outputs in the
    workers (`ParallelOp.hold`): for the backfill's slices of a creating view, whose rows
    nobody reads before its checkpoint. The barrier's step releases them; `on=False`
    (a checkpoint of stepped state is pending) holds nothing."""
    ops = [n.op for n in nodes if isinstance(n.op, ParallelOp)]
    for op in ops:
        op.hold = on
        op.slicing = True
    try:
        yield
    finally:
        for op in ops:
            op.hold = False
            op.slicing = False
