"""A read-only picture of the running dataflow: every relation's counters and every
streaming job's operator graph, as plain JSON-ready data.

Why: operators of a Swell server want to see what flows where (the web dashboard served
next to pgwire draws it) without a SQL session, and without slowing the barrier. So this
module only *reads* what the runtime keeps anyway: catalog entries, the stored stream plan
of each job (`extra["stream_plan"]`, the same JSON `rw_catalog.rw_internal_tables` reads),
the flows' live counters (`TableFlow.rows_in`, `ViewFlow.node_rows`/`node_cpu`, each
source's `SourceStatus`, each sink's `SinkStatus`), state-table sizes (`len`, and bytes
estimated from a few encoded entries: `approx_bytes`), the
committed row counts (`Runtime.row_count`), the barrier log and the worker processes of
parallel jobs (`engine.stream.parallel.introspect.worker_stats`). Counters are cumulative
since the flow was built (a rollback rebuilds flows, so they may restart from 0); rates
are the caller's business (two snapshots apart in time).

Locking: none is taken except the event log's short one. Dicts of the runtime are copied
with `dict(...)` (atomic in CPython) before iterating, and every figure is a plain
attribute read, so a snapshot may mix two neighbouring epochs' counters but never blocks a
barrier, a DDL or a write.

What is shown is what a superuser sees in the catalogs, minus credentials: definitions are
stored with credential options redacted (`engine.catalog.credentials`) and the webhook
VALIDATE literals are masked here as for a non-owner; connector options go through
`redact_options`. Error messages of streaming jobs are shown without the failing row's
sample values.

Lifecycle: stateless; `overview(runtime)` builds one snapshot per call. Plans are read from
the stored JSON (node kinds, inputs, state tables); the one-line detail of each node
(`StreamNode.details`, as EXPLAIN prints it) is decoded once per job and cached by the
identity of its stored plan.
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from engine.catalog import Relation, RelationKind
from engine.catalog.credentials import option_credentials, redact_options, redact_validate, scrub
from engine.catalog.system import relation_oid
from engine.latency import Histogram
from engine.plan.stream_codec import decode_node
from engine.state import codec
from engine.stream.parallel.introspect import worker_stats

PLAN_KEY = "stream_plan"
DETAIL_MAX = 160  # characters of a node's EXPLAIN detail kept for the picture's tooltip
SAMPLE = 32  # entries of a state table encoded to estimate its size
SIZE_TTL_S = 5.0  # an estimate is reused this long while the table's length is unchanged

_details_cache: dict[int, tuple[int, list[str]]] = {}  # rel id -> (id(stored plan), details)
_size_cache: dict[int, tuple[float, int, int]] = {}  # id(table) -> (monotonic, len, bytes)


def overview(runtime: Any) -> dict[str, Any]:
    """Counters of every relation and the graph of every streaming job, now."""
    catalog = runtime.catalog
    tables = dict(runtime.tables)
    views = dict(runtime.views)
    sinks = dict(runtime.sinks)
    sources = dict(runtime.sources)
    job_errors = _job_errors(runtime)
    relations: list[dict[str, Any]] = []
    jobs: list[dict[str, Any]] = []
    rels = list(catalog.ordered())
    for rel in rels:
        entry = _relation(runtime, rel, tables, views, sinks, sources)
        err = job_errors.get(relation_oid(rel))
        if err is not None:
            entry["errors"] = entry.get("errors", 0) + err[0]
            entry["last_error"] = entry.get("last_error") or err[1]
        # a connector's message might echo a credential option's value: never shown
        entry["last_error"] = scrub(entry["last_error"], option_credentials(rel.options))
        relations.append(entry)
        if rel.id in views:
            jobs.append(job_graph(rel, views[rel.id], rels, stored_rows=entry["rows"]))
        elif rel.id in sinks:
            sk = sinks[rel.id]
            jobs.append(job_graph(rel, sk.graph, rels, sink=str(sk.spec.connector)))
    for stale in set(_details_cache) - {r.id for r in rels}:
        _details_cache.pop(stale, None)
    failure = getattr(runtime, "failure", None)
    return {
        "time": time.time(),
        "epoch": runtime.epoch,
        "barriers": runtime.barriers,
        "barrier_interval_ms": runtime.barrier_interval * 1000,
        "last_barrier_ms": runtime.last_barrier_ms,
        "failure": None if failure is None else failure.message,
        # means since start (engine.latency histograms): write -> visible, checkpoint commit
        "freshness_mean_ms": _mean_ms(getattr(runtime, "freshness_seconds", None)),
        "checkpoint_mean_ms": _mean_ms(
            getattr(getattr(runtime, "checkpointer", None), "duration_seconds", None)
        ),
        "barrier_log": [list(b) for b in list(getattr(runtime, "barrier_log", ()))],
        "relations": relations,
        "jobs": jobs,
        # worker processes of parallel jobs (empty until the first one started them)
        "workers": worker_stats(runtime),
    }


def _mean_ms(h: Any) -> float | None:
    if not isinstance(h, Histogram):
        return None
    _, total, count = h.snapshot()
    return total / count * 1000 if count else None


def _relation(
    runtime: Any,
    rel: Relation,
    tables: dict[int, Any],
    views: dict[int, Any],
    sinks: dict[int, Any],
    sources: dict[int, Any],
) -> dict[str, Any]:
    out: dict[str, Any] = {
        "id": rel.id,
        "name": rel.name,
        "schema": rel.schema_name,
        "kind": rel.kind.value,
        "definition": redact_validate(str(rel.definition)),
        "depends_on": list(rel.depends_on),
        "rows": runtime.row_count(rel.id) if rel.id in tables or rel.id in views else None,
        "counter": None,  # cumulative rows in (sources, tables) or out (views, sinks)
        "state": None,
        "lag": None,
        "errors": 0,
        "last_error": None,
    }
    if rel.options:
        shown = redact_options(rel.options, frozenset(rel.extra.get("secret_options") or ()))
        out["connector"] = shown.get("connector")
    flow = tables.get(rel.id)
    if flow is not None:
        out["counter"] = flow.rows_in
        out["state_keys"] = sum(len(t) for t in flow.tables)
        out["state_bytes"] = _sum_known(approx_bytes(t) for t in flow.tables)
    src = sources.get(rel.id)
    if src is not None:
        st = src.status
        with st.lock:
            out["state"] = st.state
            out["last_error"] = st.last_error
            out["errors"] = sum(st.error_counts.values())
            lags = [
                max(0, st.high_watermarks[p] - off)
                for p, off in st.offsets.items()
                if p in st.high_watermarks
            ]
            if rel.kind is RelationKind.SOURCE:
                out["counter"] = st.messages
        out["lag"] = sum(lags) if lags else None
    view = views.get(rel.id)
    if view is not None:
        out["counter"] = view.node_rows[-1] if view.node_rows else 0
        out["state"] = "running"
        out["state_keys"] = sum(len(t) for t in view.tables)
        out["state_bytes"] = _sum_known(approx_bytes(t) for t in view.tables)
    sink = sinks.get(rel.id)
    if sink is not None:
        st = sink.status
        out["counter"] = st.rows
        out["state"] = st.state
        out["errors"] = st.errors
        out["last_error"] = st.last_error
        out["connector"] = sink.spec.connector
        backlog = list(sink.backlog)
        out["backlog_rows"] = sum(len(c) for c, _ in backlog)
        done = st.last_commit_epoch
        # epochs the downstream system has not committed yet (an Iceberg sink commits
        # every commit_checkpoint_interval checkpoints)
        out["lag"] = max(0, runtime.epoch - done) if done is not None else None
        out["state_keys"] = sum(len(t) for t in sink.tables)
        out["state_bytes"] = _sum_known(approx_bytes(t) for t in sink.tables)
    return out


def _job_errors(runtime: Any) -> dict[int, tuple[int, str]]:
    """job OID -> (failed rows, latest message) from the event log (samples left out)."""
    events = getattr(runtime, "events", None)
    if events is None:
        return {}
    out: dict[int, tuple[int, str, float]] = {}
    with events.lock:
        kinds = list(events.kinds.values())
    for k in kinds:
        n, msg, seen = out.get(k.job_id, (0, "", 0.0))
        if k.last_seen >= seen:
            msg, seen = f"{k.error} (in {k.expression})", k.last_seen
        out[k.job_id] = (n + k.count, msg, seen)
    return {j: (n, m) for j, (n, m, _) in out.items()}


def job_graph(
    rel: Relation,
    flow: Any,
    rels: list[Relation],
    *,
    stored_rows: int | None = None,
    sink: str | None = None,
) -> dict[str, Any]:
    """One job's dataflow: upstream relations and operator nodes with their counters.

    Node ids: `rel:<id>` for an upstream relation, `n<i>` for the plan's i-th node and
    `sink` for a sink's writer (`sink` names its connector); edges go from input to
    consumer. `stored_rows`: a view's committed row count, shown on its materialize."""
    data = rel.extra.get(PLAN_KEY) or {}
    stored = list(data.get("nodes", []))
    details = _details(rel, data)
    by_tid = {t.table_id: t for t in flow.tables}
    names = {r.id: r.name for r in rels}
    scans = {int(rid): name for rid, name, _ in data.get("scans", [])}
    nodes: list[dict[str, Any]] = []
    edges: list[list[str]] = []
    seen_rels: set[int] = set()
    n_flow = len(flow.nodes)
    if len(stored) != n_flow:  # no stored plan (it could not be encoded): the live operators
        stored = [
            {"node": type(n.op).__name__, "inputs": [list(i) for i in n.inputs], "tables": []}
            for n in flow.nodes
        ]
    for i, sn in enumerate(stored):
        op = flow.nodes[i].op
        state = []
        for t in sn.get("tables", []):
            live = by_tid.get(t["id"])
            keys = len(live) if live is not None else 0
            size = approx_bytes(live) if live is not None else 0
            state.append({"id": t["id"], "name": t["name"], "keys": keys, "bytes": size})
        kind = str(sn.get("node", type(op).__name__))
        node = {
            "id": f"n{i}",
            "kind": "node",
            "label": _label(kind, sn),
            "operator": type(op).__name__,
            "detail": details[i] if i < len(details) else "",
            "rows": flow.node_rows[i],
            "cpu_seconds": flow.node_cpu[i],
            "state_tables": state,
            "state_keys": sum(s["keys"] for s in state),
            "state_bytes": _sum_known(s["bytes"] for s in state),
        }
        p = getattr(op, "p", None)
        if isinstance(p, int) and hasattr(op, "actor_keys"):  # runs as actors in the workers
            node["parallelism"] = p
            node["workers"] = list(getattr(op, "workers", []))
            node["exchange_bytes"] = getattr(op, "exchange_bytes", None)
        nodes.append(node)
        for inp_kind, j in sn.get("inputs", []):
            if inp_kind == "rel":
                rid = int(j)
                if rid not in seen_rels:
                    seen_rels.add(rid)
                    nodes.append(
                        {
                            "id": f"rel:{rid}",
                            "kind": "relation",
                            "label": names.get(rid) or scans.get(rid) or f"relation {rid}",
                            "rel_id": rid,
                        }
                    )
                edges.append([f"rel:{rid}", f"n{i}"])
            else:
                edges.append([f"n{int(j)}", f"n{i}"])
    if stored_rows is not None and n_flow:
        nodes[_last_op(nodes)]["rows_stored"] = stored_rows  # the view's materialize
    if sink is not None and n_flow:
        nodes.append({"id": "sink", "kind": "sink", "label": f"StreamSink ({sink})"})
        edges.append([nodes[_last_op(nodes)]["id"], "sink"])
    return {
        "id": rel.id,
        "name": rel.name,
        "kind": rel.kind.value,
        "nodes": nodes,
        "edges": edges,
    }


def approx_bytes(table: Any) -> int | None:
    """About how many bytes the table's entries take encoded as the store keeps them:
    the first `SAMPLE` entries encoded (`engine.state.codec`), scaled to the table's
    length (reused for `SIZE_TTL_S` while the length stays the same, so polling costs
    little). None when it cannot be read now (the barrier is writing it)."""
    n = len(table)
    if n == 0:
        return 0
    now = time.monotonic()
    key = id(table)
    hit = _size_cache.get(key)
    if hit is not None and hit[1] == n and now - hit[0] < SIZE_TTL_S:
        return hit[2]
    if len(_size_cache) > 10_000:
        _size_cache.clear()
    try:
        sample = list(itertools.islice(table.items(), SAMPLE))
        if not sample:
            return 0
        keys = codec.encode_keys([k for k, _ in sample])
        values = codec.encode_values([v for _, v in sample])
    except Exception:  # noqa: BLE001 - changed while sampled: unknown this time
        return None
    size = int((sum(map(len, keys)) + sum(map(len, values))) * n / len(sample))
    _size_cache[key] = (now, n, size)
    return size


def _sum_known(values: Any) -> int | None:
    vals = list(values)
    return None if any(v is None for v in vals) else sum(vals)


def _last_op(nodes: list[dict[str, Any]]) -> int:
    return max(i for i, n in enumerate(nodes) if n["kind"] == "node")


def _label(kind: str, sn: dict[str, Any]) -> str:
    """The operator's name as EXPLAIN prints it (StreamSimpleAgg, StreamTumble, ...)."""
    if kind == "StreamHashAgg" and not sn.get("group_keys"):
        return "StreamSimpleAgg"
    if kind == "StreamTimeWindow":
        return "StreamTumble" if sn.get("window_kind") == "tumble" else "StreamHopWindow"
    return kind


def _details(rel: Relation, data: dict[str, Any]) -> list[str]:
    """Each node's EXPLAIN detail (`group_key: [k], aggs: [...]`), decoded once per plan."""
    hit = _details_cache.get(rel.id)
    if hit is not None and hit[0] == id(data):
        return hit[1]
    out = []
    for d in data.get("nodes", []):
        try:
            sn = decode_node(d)
            text = ", ".join(f"{k}: {v}" for k, v in sn.details())
        except Exception:  # noqa: BLE001 - a call that needs the job's SQL: no detail
            text = ""
        out.append(text if len(text) <= DETAIL_MAX else text[: DETAIL_MAX - 1] + "…")
    _details_cache[rel.id] = (id(data), out)
    return out
