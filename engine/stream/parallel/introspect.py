"""Seeing parallel execution: fragments, actors and workers, for system tables, EXPLAIN,
metrics and the dashboard.

A streaming job's plan is cut into **fragments** where rows cross an exchange: every node
that runs as actors (`fragment.choose`; a `flow.ParallelOp` in a built flow) is a
fragment of its own, distributed `HASH` over its p actors by the vnode of its input key
columns; everything else of the job (stateless nodes, singletons, the final Materialize)
is the job's `SINGLE` fragment, run by the coordinator (the server process). Rows go from
the coordinator to a hash fragment split by vnode (`StreamExchange { dist: HashShard(..) }`)
and come back gathered (`StreamExchange { dist: Single }`).

Ids are derived, not allocated, so they are stable across restarts and the same in every
table: a job's single fragment is `relation id * 1000`, the fragment of its plan node n is
`relation id * 1000 + n + 1`, and actor i of fragment f is `f * 1000 + i` (the
coordinator's one actor of a single fragment is `f * 1000`).

What is shown (RisingWave's columns first, then Swell's):

* `rw_catalog.rw_fragments`: fragment_id, table_id (the job's OID), distribution_type,
  state_table_ids, upstream_fragment_ids, flags, parallelism, max_parallelism (256 vnodes),
  parallelism_policy (`ADAPTIVE` or `FIXED(n)`); job_name, operators, distribution_key,
  rows_in, rows_out, exchange_bytes;
* `rw_catalog.rw_actors`: actor_id, fragment_id, worker_id (NULL: the coordinator), state;
  job_id, job_name, actor_index, pid, node, address, vnode_first, vnode_last, vnode_count,
  rows_in, rows_out;
* `rw_catalog.rw_worker_nodes`: one row per worker of the server's pool: id, host, type,
  state, parallelism (1 actor slot per process), started/lost counts; pid, address,
  actors, requests, cpu_seconds, busy_seconds, alignment_wait_seconds, exchange bytes
  out/in, rows in/out. `worker_stats` gives the same per worker to the Prometheus
  endpoint and the dashboard overview.

Locking: none. Providers read the runtime's dicts through `dict(...)` copies and plain
attribute reads (as `engine.stream.overview` does), so a read never waits for a barrier;
the figures may mix two neighbouring epochs. Per worker the pool keeps `traffic[i]` =
[requests, bytes out, bytes in, seconds waited, CPU seconds (as the worker last reported),
busy seconds, alignment wait seconds]: the alignment wait of one step is how long the
worker sat idle while the slowest worker of that step finished. A local process's CPU is
read from `/proc/<pid>/stat` (current, not as of its last response).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from engine.catalog import Relation
from engine.catalog.system import (
    RW_CATALOG,
    SystemContext,
    register_system_relation,
    relation_oid,
)
from engine.plan.stream_plan import StreamPlan
from engine.stream.parallel.exchange import VNODES, vnode_ranges
from engine.stream.parallel.flow import ParallelOp
from engine.stream.parallel.fragment import parse_parallelism, partition_keys
from engine.types import BIGINT, DOUBLE, INT, VARCHAR, Field, list_of

ADAPTIVE = "parallelism_adaptive"  # Relation.extra: the job follows the server's --parallelism


def single_fragment_id(rel: Relation) -> int:
    return int(rel.id) * 1000


def node_fragment_id(rel: Relation, node: int) -> int:
    return int(rel.id) * 1000 + node + 1


def actor_id(fragment_id: int, actor: int) -> int:
    return fragment_id * 1000 + actor


def vnodes_text(p: int) -> list[str]:
    """Each actor's vnode range as `first-last` (EXPLAIN)."""
    return [f"{a}-{b}" for a, b in vnode_ranges(p)]


# -- the runtime, read without locks -----------------------------------------------------
def _oid(rel: Relation) -> int:
    return relation_oid(rel)


def _jobs(rt: Any, visible: bool = False) -> list[tuple[Relation, Any, str]]:
    """(relation, flow, flag) of every materialized view and sink, in catalog order (with
    `visible`, of the current database only: what its system tables list)."""
    views = dict(getattr(rt, "views", {}))
    sinks = dict(getattr(rt, "sinks", {}))
    out: list[tuple[Relation, Any, str]] = []
    rels = rt.catalog.visible() if visible else rt.catalog.ordered()
    for rel in rels:
        if rel.id in views:
            out.append((rel, views[rel.id], "MVIEW"))
        elif rel.id in sinks:
            out.append((rel, getattr(sinks[rel.id], "graph", None), "SINK"))
    return out


def _parallel_ops(flow: Any) -> list[tuple[int, ParallelOp]]:
    nodes = list(getattr(flow, "nodes", None) or [])
    return [(n, nd.op) for n, nd in enumerate(nodes) if isinstance(nd.op, ParallelOp)]


def _policy(rel: Relation, p: int) -> str:
    return "ADAPTIVE" if rel.extra.get(ADAPTIVE) else f"FIXED({p})"


def _key_names(op: ParallelOp) -> str:
    sn = op.node
    parts = []
    for port, cols in enumerate(op.keys):
        parts.append(", ".join(_col(sn.input_schemas[port], c) for c in cols))
    return " | ".join(parts)


def _col(schema: list[Field], c: int) -> str:
    return schema[c].name if c < len(schema) else f"${c}"


def _node_kinds(rel: Relation, flow: Any) -> list[str]:
    """The plan's node kinds (`StreamHashAgg`...) from the stored plan, else the operators'."""
    nodes = list(getattr(flow, "nodes", None) or [])
    stored = list((rel.extra.get("stream_plan") or {}).get("nodes", []))
    if len(stored) == len(nodes):
        return [str(sn.get("node", "")) for sn in stored]
    return [type(nd.op).__name__ for nd in nodes]


def _real_table_ids(flow: Any) -> list[int]:
    ids = []
    for t in list(getattr(flow, "tables", None) or []):
        tid = getattr(t, "table_id", -1)
        if isinstance(tid, int) and tid >= 0:
            ids.append(tid)
    return sorted(ids)


def fragment_rows(rt: Any) -> list[tuple[Any, ...]]:
    """rw_fragments rows (see the module docstring)."""
    jobs = _jobs(rt, visible=True)
    single_of = {rel.id: single_fragment_id(rel) for rel, _, _ in jobs}
    out: list[tuple[Any, ...]] = []
    for rel, flow, flag in jobs:
        if flow is None:
            continue
        pops = _parallel_ops(flow)
        parallel_idx = {n for n, _ in pops}
        single = single_fragment_id(rel)
        kinds = [k for n, k in enumerate(_node_kinds(rel, flow)) if n not in parallel_idx]
        upstream_rels = sorted(getattr(flow, "upstream", lambda: set())())
        ups = [node_fragment_id(rel, n) for n, _ in pops] + [
            single_of[r] for r in upstream_rels if r in single_of
        ]
        out.append((
            single, _oid(rel), "SINGLE", _real_table_ids(flow), ups, [flag], 1, VNODES,
            "FIXED(1)", rel.name, ", ".join(kinds), None, None, None, None,
        ))  # fmt: skip
        for n, op in pops:
            out.append((
                node_fragment_id(rel, n), _oid(rel), "HASH", op.table_ids(), [single], [],
                op.p, VNODES, _policy(rel, op.p), rel.name, op.kind, _key_names(op),
                op.rows_in, op.rows_out, op.exchange_bytes,
            ))  # fmt: skip
    return out


def _actor_counts(op: ParallelOp, name: str, i: int) -> int | None:
    v = getattr(op, name, None)
    if isinstance(v, list) and i < len(v):
        return int(v[i])
    return None


def actor_rows(rt: Any) -> list[tuple[Any, ...]]:
    """rw_actors rows (see the module docstring)."""
    pool = getattr(rt, "pool", None)
    infos = _infos(pool)
    live = set(dict(getattr(pool, "workers", {}) or {})) if pool is not None else set()
    me = os.getpid()
    out: list[tuple[Any, ...]] = []
    for rel, flow, _ in _jobs(rt, visible=True):
        if flow is None:
            continue
        single = single_fragment_id(rel)
        out.append((
            actor_id(single, 0), single, None, "RUNNING", _oid(rel), rel.name, 0, me,
            "coordinator", None, None, None, None, None, None,
        ))  # fmt: skip
        for n, op in _parallel_ops(flow):
            f = node_fragment_id(rel, n)
            ranges = vnode_ranges(op.p)
            for i in range(op.p):
                w = op.workers[i]
                info = infos.get(w, {})
                first, last = ranges[i]
                out.append((
                    actor_id(f, i), f, w, "RUNNING" if w in live else "INACTIVE",
                    _oid(rel), rel.name, i, info.get("pid"), _s(info.get("node")),
                    _s(info.get("address")), first, last, max(0, last - first + 1),
                    _actor_counts(op, "actor_rows_in", i),
                    _actor_counts(op, "actor_rows_out", i),
                ))  # fmt: skip
    return out


def _s(v: Any) -> str | None:
    return None if v is None else str(v)


def _infos(pool: Any) -> dict[int, dict[str, Any]]:
    """Each started worker's transport info (pid, node, address); no remote call."""
    if pool is None:
        return {}
    out: dict[int, dict[str, Any]] = {}
    for i, w in dict(getattr(pool, "workers", {}) or {}).items():
        try:
            out[int(i)] = dict(w.info())
        except Exception:  # noqa: BLE001 - a worker going away while read
            out[int(i)] = {}
    return out


# -- per worker ----------------------------------------------------------------------------
_CLK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def proc_cpu_seconds(pid: int) -> float | None:
    """User + system CPU seconds of a local process (None if unknown)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read().decode()
    except OSError:
        return None
    rest = raw[raw.rfind(")") + 2 :].split()
    try:
        return (int(rest[11]) + int(rest[12])) / _CLK
    except (IndexError, ValueError):
        return None


def worker_stats(rt: Any) -> list[dict[str, Any]]:
    """One dict per worker of the pool: identity, state, traffic and work counters."""
    pool = getattr(rt, "pool", None)
    if pool is None:
        return []
    infos = _infos(pool)
    traffic = {int(k): list(v) for k, v in dict(getattr(pool, "traffic", {}) or {}).items()}
    actors: dict[int, int] = {}
    rows_in: dict[int, int] = {}
    rows_out: dict[int, int] = {}
    for _, flow, _ in _jobs(rt):
        for _, op in _parallel_ops(flow):
            for i, w in enumerate(op.workers):
                actors[w] = actors.get(w, 0) + 1
                a = _actor_counts(op, "actor_rows_in", i)
                b = _actor_counts(op, "actor_rows_out", i)
                if a is not None:
                    rows_in[w] = rows_in.get(w, 0) + a
                if b is not None:
                    rows_out[w] = rows_out.get(w, 0) + b
    out = []
    for w in range(int(getattr(pool, "size", 0))):
        info = infos.get(w)
        t = traffic.get(w, [])

        def at(k: int, t: list[Any] = t) -> float:
            return float(t[k]) if len(t) > k else 0.0

        # the worker's own figure from its last response; a local process's from /proc
        cpu: float | None = at(4) if at(4) > 0 else None
        if info and info.get("node") == "local" and info.get("pid"):
            cpu = proc_cpu_seconds(int(info["pid"])) or cpu
        out.append({
            "worker": w,
            "state": "RUNNING" if info is not None else "NOT_STARTED",
            "pid": (info or {}).get("pid"),
            "node": _s((info or {}).get("node")),
            "address": _s((info or {}).get("address")),
            "actors": actors.get(w, 0),
            "requests": int(at(0)),
            "bytes_out": int(at(1)),
            "bytes_in": int(at(2)),
            "wait_seconds": at(3),
            "cpu_seconds": cpu,
            "busy_seconds": at(5) if len(t) > 5 else None,
            "alignment_wait_seconds": at(6) if len(t) > 6 else None,
            "rows_in": rows_in.get(w),
            "rows_out": rows_out.get(w),
        })  # fmt: skip
    return out


def pool_totals(rt: Any) -> dict[str, Any] | None:
    """The pool's size, lost workers and recoveries (None: no parallel job ran yet)."""
    pool = getattr(rt, "pool", None)
    if pool is None:
        return None
    return {
        "workers": int(getattr(pool, "size", 0)),
        "started": len(dict(getattr(pool, "workers", {}) or {})),
        "lost": int(getattr(pool, "lost", 0)),
        "restarts": int(getattr(pool, "restarts", 0)),
    }


def _worker_node_rows(ctx: SystemContext) -> list[tuple[Any, ...]]:
    rt = ctx.db.runtime
    totals = pool_totals(rt) or {}
    out = []
    for s in worker_stats(rt):
        out.append((
            s["worker"], s["node"], "WORKER_TYPE_COMPUTE_NODE", s["state"], 1,
            s["pid"], s["address"], s["actors"], s["requests"], s["cpu_seconds"],
            s["busy_seconds"], s["alignment_wait_seconds"], s["bytes_out"], s["bytes_in"],
            s["rows_in"], s["rows_out"], totals.get("lost"), totals.get("restarts"),
        ))  # fmt: skip
    return out


# -- EXPLAIN -------------------------------------------------------------------------------
def explain_parallel(
    plan: StreamPlan,
    chosen: Iterable[int],
    p: int,
    *,
    verbose: bool = False,
    header: str | None = None,
) -> list[str]:
    """The job's tree as `explain_lines` prints it, with the exchanges around every node
    that runs as `p` actors, then one line per fragment (coordinator first)."""
    par = sorted(i for i in chosen if partition_keys(plan.nodes[i]) is not None)
    frag_of = {n: k + 1 for k, n in enumerate(par)}
    lines: list[str] = []

    def emit(ref: tuple[str, int], prefix: str, child: str) -> None:
        kind, i = ref
        if kind == "rel":
            name, cols = plan.scans.get(i, (f"relation {i}", []))
            lines.append(
                f"{prefix}StreamTableScan {{ table: {name}, columns: [{', '.join(cols)}] }}"
            )
            return
        node = plan.nodes[i]
        mine = i in frag_of
        if mine:  # its output is gathered back to the coordinator
            lines.append(prefix + "StreamExchange { dist: Single }")
            prefix, child = child + "└─", child + "  "
        lines.append(prefix + node.line() + (f" (fragment {frag_of[i]})" if mine else ""))
        keys = partition_keys(node) if mine else None
        for j, inp in enumerate(node.inputs):
            last = j == len(node.inputs) - 1
            p1 = child + ("└─" if last else "├─")
            c1 = child + ("  " if last else "│ ")
            if keys is not None:
                names = ", ".join(_col(node.input_schemas[j], c) for c in keys[j])
                lines.append(p1 + f"StreamExchange {{ dist: HashShard({names}) }}")
                p1, c1 = c1 + "└─", c1 + "  "
            emit(inp, p1, c1)

    root = ("node", len(plan.nodes) - 1)
    if header is not None:
        lines.append(header)
        emit(root, "└─", "  ")
    else:
        emit(root, "", "")
    single = [plan.nodes[i].kind for i in range(len(plan.nodes)) if i not in frag_of]
    lines.append(f"Fragment 0: coordinator, parallelism 1: {', '.join(single)}")
    ranges = ", ".join(vnodes_text(p))
    for n in par:
        sn = plan.nodes[n]
        keys = partition_keys(sn) or []
        by = " | ".join(
            ", ".join(_col(sn.input_schemas[j], c) for c in cols) for j, cols in enumerate(keys)
        )
        lines.append(
            f"Fragment {frag_of[n]}: {sn.kind}, parallelism {p}, hashed by [{by}], "
            f"vnodes per actor: {ranges}"
        )
    if verbose:
        for t in sorted(plan.tables, key=lambda t: t.id):
            lines.append(t.describe())
    return lines


def planned_parallelism(session_value: str | None, server: int) -> int:
    """What a CREATE in this session would run at (`streaming_parallelism`, 0: the server's)."""
    want = parse_parallelism(session_value)
    return server if want <= 0 else want


# -- system tables -------------------------------------------------------------------------
def _fragments(ctx: SystemContext) -> list[tuple[Any, ...]]:
    return fragment_rows(ctx.db.runtime)


def _actors(ctx: SystemContext) -> list[tuple[Any, ...]]:
    return actor_rows(ctx.db.runtime)


register_system_relation(
    RW_CATALOG,
    "rw_fragments",
    [
        Field("fragment_id", INT),
        Field("table_id", INT),
        Field("distribution_type", VARCHAR),
        Field("state_table_ids", list_of(INT)),
        Field("upstream_fragment_ids", list_of(INT)),
        Field("flags", list_of(VARCHAR)),
        Field("parallelism", INT),
        Field("max_parallelism", INT),
        Field("parallelism_policy", VARCHAR),
        Field("job_name", VARCHAR),
        Field("operators", VARCHAR),
        Field("distribution_key", VARCHAR),
        Field("rows_in", BIGINT),
        Field("rows_out", BIGINT),
        Field("exchange_bytes", BIGINT),
    ],
    _fragments,
    description="fragments of streaming jobs: the coordinator's part and each node run as actors",
)
register_system_relation(
    RW_CATALOG,
    "rw_actors",
    [
        Field("actor_id", BIGINT),
        Field("fragment_id", INT),
        Field("worker_id", INT),
        Field("state", VARCHAR),
        Field("job_id", INT),
        Field("job_name", VARCHAR),
        Field("actor_index", INT),
        Field("pid", INT),
        Field("node", VARCHAR),
        Field("address", VARCHAR),
        Field("vnode_first", INT),
        Field("vnode_last", INT),
        Field("vnode_count", INT),
        Field("rows_in", BIGINT),
        Field("rows_out", BIGINT),
    ],
    _actors,
    description="actors of streaming jobs: their fragment, worker process and vnode range",
)
register_system_relation(
    RW_CATALOG,
    "rw_worker_nodes",
    [
        Field("id", INT),
        Field("host", VARCHAR),
        Field("type", VARCHAR),
        Field("state", VARCHAR),
        Field("parallelism", INT),
        Field("pid", INT),
        Field("address", VARCHAR),
        Field("actors", INT),
        Field("requests", BIGINT),
        Field("cpu_seconds", DOUBLE),
        Field("busy_seconds", DOUBLE),
        Field("alignment_wait_seconds", DOUBLE),
        Field("exchange_bytes_out", BIGINT),
        Field("exchange_bytes_in", BIGINT),
        Field("rows_in", BIGINT),
        Field("rows_out", BIGINT),
        Field("workers_lost", INT),
        Field("recoveries", INT),
    ],
    _worker_node_rows,
    description="worker processes of parallel streaming jobs and what they did",
)
