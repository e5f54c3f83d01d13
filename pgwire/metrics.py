"""Prometheus metrics endpoint: `GET /metrics` in the text exposition format.

Why a separate port: like RisingWave (`--prometheus-listener-addr`, 127.0.0.1:1250 by
default, the meta node's convention), metrics stay off the client-facing ports and bind
to loopback unless the operator says otherwise.

What is exported: the counters the components already keep, read at scrape time (no second
bookkeeping): the stream runtime (epochs, barriers, rows in, relation counts), the
checkpointer, the WAL and the state store, the webhook server (requests by status, rows,
acks) when it runs, and pgwire (connections, authentication failures, cancels). Histograms
(engine.latency): barrier and checkpoint durations, freshness (a write until its epoch
committed), statement latency by kind, webhook request-to-ack time. Series per source
(`source` label: messages, bad messages, up, lag), per sink (`sink` label: rows, errors,
retries, up), per table and materialized view (rows in/out, stored rows, state entries),
per streaming job (expression errors) and per worker process of parallel jobs (`worker`
label: CPU seconds, rows in/out, barrier alignment wait, exchange bytes;
`engine.stream.parallel.introspect.worker_stats`). Process metrics (`process_*`: CPU
seconds, resident memory, open file descriptors) from prometheus_client's process
collector. A component missing a counter simply omits it (getattr with a default), so the
endpoint never fails because some component changed.

Lifecycle: `start_metrics_server(host, port, sources)` binds and returns a
`MetricsServer`; `close()` stops it. `sources` is a `MetricsSources` holding references to
the database, the pgwire server and the webhook server (any may be None). A failed bind is
reported by the caller, which keeps serving without metrics.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from engine.latency import STATEMENTS, Histogram
from engine.stream.parallel import introspect

log = logging.getLogger("swell.metrics")

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
DEFAULT_ADDR = "127.0.0.1:1250"


@dataclass
class MetricsSources:
    db: Any = None
    pgwire: Any = None
    webhook: Any = None
    started_at: float = 0.0


def _num(obj: Any, name: str) -> float | None:
    v = getattr(obj, name, None)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    return float(v)


class SwellCollector(Collector):
    """Builds every metric family from the live components at each scrape."""

    def __init__(self, sources: MetricsSources) -> None:
        self.sources = sources

    def collect(self) -> Iterator[Metric]:
        s = self.sources
        yield from self._process(s)
        yield from self._latency(s)
        db = s.db
        if db is not None:
            yield from self._runtime(getattr(db, "runtime", None))
            yield from self._relations(getattr(db, "runtime", None))
            yield from self._jobs(getattr(db, "runtime", None))
            yield from self._workers(getattr(db, "runtime", None))
            yield from self._attrs(
                getattr(db, "checkpointer", None),
                "swell_checkpoint",
                counters={
                    "commits": ("s", "checkpoints committed"),
                    "total_bytes": ("_bytes", "bytes written by checkpoints"),
                },
                gauges={
                    "last_duration": ("_last_duration_seconds", "last checkpoint, WAL wait"),
                    "last_write_duration": ("_last_write_duration_seconds", "last fsynced write"),
                    "last_bytes": ("_last_bytes", "size of the last checkpoint batch"),
                    "last_keys": ("_last_keys", "state keys in the last checkpoint"),
                },
            )
            yield from self._attrs(
                getattr(db, "wal", None),
                "swell_wal",
                counters={
                    "records_written": ("_records", "WAL records written"),
                    "bytes_written": ("_bytes", "WAL bytes written"),
                    "fsyncs": ("_fsyncs", "WAL group-commit fsyncs"),
                    "write_seconds": ("_write_seconds", "seconds spent writing the WAL"),
                },
                gauges={"max_batch_records": ("_max_batch_records", "largest group commit")},
            )
            yield from self._attrs(
                getattr(db, "store", None),
                "swell_state_store",
                counters={
                    "bytes_written": ("_bytes_written", "bytes written to RocksDB"),
                    "batches_written": ("_batches", "RocksDB write batches"),
                    "synced_writes": ("_synced_writes", "fsynced RocksDB writes"),
                },
                gauges={},
            )
            yield from self._attrs(
                getattr(db, "uploader", None),
                "swell_state_store_upload",
                counters={
                    "uploads": ("s", "checkpoint manifests written to the remote store"),
                    "objects_uploaded": ("_objects", "objects uploaded to the remote store"),
                    "bytes_uploaded": ("_bytes", "bytes uploaded to the remote store"),
                    "objects_deleted": ("_deleted_objects", "objects garbage-collected"),
                    "failures": ("_failures", "failed upload attempts (retried)"),
                },
                gauges={
                    "uploaded_epoch": ("_epoch", "newest epoch on the remote store"),
                    "consecutive_failures": ("_consecutive_failures", "failures in a row"),
                    "last_duration": ("_last_duration_seconds", "last upload"),
                    "last_bytes": ("_last_bytes", "bytes the last upload sent"),
                    "remote_bytes": ("_remote_bytes", "size of the newest remote checkpoint"),
                },
            )
            sessions = getattr(db, "sessions", None)
            if sessions is not None:
                g = GaugeMetricFamily("swell_sessions", "open SQL sessions")
                g.add_metric([], len(sessions))
                yield g
        if s.pgwire is not None:
            yield from self._pgwire(s.pgwire)
        if s.webhook is not None:
            yield from self._webhook(s.webhook)

    @staticmethod
    def _process(s: MetricsSources) -> Iterator[Metric]:
        g = GaugeMetricFamily("swell_uptime_seconds", "seconds since the server started")
        g.add_metric([], time.time() - s.started_at if s.started_at else 0.0)
        yield g

    @staticmethod
    def _latency(s: MetricsSources) -> Iterator[Metric]:
        rt = getattr(s.db, "runtime", None)
        ck = getattr(s.db, "checkpointer", None)
        for obj, attr, name, doc in (
            (rt, "barrier_seconds", "swell_barrier_duration_seconds", "barrier duration"),
            (ck, "duration_seconds", "swell_checkpoint_duration_seconds", "checkpoint commit"),
            (
                rt,
                "freshness_seconds",
                "swell_freshness_seconds",
                "oldest write of an epoch until the epoch committed (visible in views)",
            ),
            (s.webhook, "ack_histogram", "swell_webhook_ack_seconds", "webhook request to ack"),
            (
                getattr(s.db, "wal", None),
                "queue_seconds",
                "swell_wal_queue_seconds",
                "WAL group commit: first record appended until the writer took it",
            ),
            (
                getattr(s.db, "wal", None),
                "sync_seconds",
                "swell_wal_sync_seconds",
                "WAL group commit: write and fsync",
            ),
        ):
            h = getattr(obj, attr, None)
            if isinstance(h, Histogram):
                yield histogram(name, doc, h)
        m = HistogramMetricFamily(
            "swell_statement_duration_seconds", "SQL statement latency", labels=["statement"]
        )
        for kind, h in STATEMENTS.items():
            _add_histogram(m, h, [kind])
        yield m

    @staticmethod
    def _relations(rt: Any) -> Iterator[Metric]:
        """Series per source and per sink, labelled with their names."""
        if rt is None:
            return
        msgs = CounterMetricFamily("swell_source_messages", "messages read", labels=["source"])
        bad = CounterMetricFamily("swell_source_bad_messages", "bad messages", labels=["source"])
        up = GaugeMetricFamily(
            "swell_source_up", "1 while the source's reader reaches its brokers", labels=["source"]
        )
        for flow in list(getattr(rt, "sources", {}).values()):
            st = getattr(flow, "status", None)
            if st is None:
                continue
            name = str(st.source)
            msgs.add_metric([name], float(st.messages))
            bad.add_metric([name], float(sum(st.error_counts.values())))
            up.add_metric([name], 1.0 if getattr(st, "state", "") == "running" else 0.0)
        yield from (msgs, bad, up)
        rows = CounterMetricFamily("swell_sink_rows", "rows handed to the sink", labels=["sink"])
        errs = CounterMetricFamily("swell_sink_errors", "sink errors", labels=["sink"])
        retries = CounterMetricFamily("swell_sink_retries", "sink retries", labels=["sink"])
        sink_up = GaugeMetricFamily("swell_sink_up", "1 while the sink runs", labels=["sink"])
        for flow in list(getattr(rt, "sinks", {}).values()):
            spec, st = getattr(flow, "spec", None), getattr(flow, "status", None)
            if spec is None or st is None:
                continue
            name = str(spec.name)
            rows.add_metric([name], float(getattr(st, "rows", 0) or 0))
            errs.add_metric([name], float(getattr(st, "errors", 0) or 0))
            retries.add_metric([name], float(getattr(st, "retries", 0) or 0))
            sink_up.add_metric([name], 1.0 if getattr(st, "state", "") == "running" else 0.0)
        yield from (rows, errs, retries, sink_up)

    @staticmethod
    def _jobs(rt: Any) -> Iterator[Metric]:
        """Series per table and materialized view (rows in/out, stored rows, state size),
        per job (expression errors) and per source (lag), labelled with their names
        (`schema.name` outside `public`); the same counters the dashboard shows."""
        if rt is None or not hasattr(rt, "views"):
            return
        rows_in = CounterMetricFamily(
            "swell_table_rows_in",
            "rows written into the table (DML, webhooks, connectors)",
            labels=["table"],
        )
        rows_out = CounterMetricFamily(
            "swell_view_rows_out", "row changes the materialized view emitted", labels=["view"]
        )
        stored = GaugeMetricFamily(
            "swell_relation_rows",
            "rows stored by a table or materialized view",
            labels=["relation", "kind"],
        )
        state = GaugeMetricFamily(
            "swell_relation_state_keys",
            "entries of the relation's state tables",
            labels=["relation", "kind"],
        )
        for kind, flows in (("table", rt.tables), ("materialized view", rt.views)):
            for rid, flow in list(dict(flows).items()):
                name = _qualified(flow.rel)
                if kind == "table":
                    rows_in.add_metric([name], float(getattr(flow, "rows_in", 0)))
                else:
                    node_rows = getattr(flow, "node_rows", None) or [0]
                    rows_out.add_metric([name], float(node_rows[-1]))
                n = rt.row_count(rid)
                if n is not None:
                    stored.add_metric([name, kind], float(n))
                state.add_metric([name, kind], float(sum(len(t) for t in flow.tables)))
        for flow in list(dict(rt.sinks).values()):
            state.add_metric(
                [_qualified(flow.graph.rel), "sink"], float(sum(len(t) for t in flow.tables))
            )
        yield from (rows_in, rows_out, stored, state)
        errors = CounterMetricFamily(
            "swell_job_expression_errors",
            "rows whose expression failed in the streaming job and became NULL",
            labels=["job"],
        )
        events = getattr(rt, "events", None)
        if events is not None:
            per_job: dict[str, int] = {}
            with events.lock:
                for k in events.kinds.values():
                    per_job[k.job_name] = per_job.get(k.job_name, 0) + k.count
            for job, n in sorted(per_job.items()):
                errors.add_metric([job], float(n))
        yield errors
        lag = GaugeMetricFamily(
            "swell_source_lag",
            "messages behind the partitions' high watermarks",
            labels=["source"],
        )
        for flow in list(dict(getattr(rt, "sources", {})).values()):
            st = getattr(flow, "status", None)
            if st is None:
                continue
            with st.lock:
                behind = [
                    max(0, hw - st.offsets[p])
                    for p, hw in st.high_watermarks.items()
                    if p in st.offsets
                ]
            if behind:
                lag.add_metric([str(st.source)], float(sum(behind)))
        yield lag

    @staticmethod
    def _attrs(
        obj: Any,
        prefix: str,
        counters: dict[str, tuple[str, str]],
        gauges: dict[str, tuple[str, str]],
    ) -> Iterator[Metric]:
        if obj is None:
            return
        for attr, (suffix, doc) in counters.items():
            v = _num(obj, attr)
            if v is not None:
                c = CounterMetricFamily(prefix + suffix, doc)
                c.add_metric([], v)
                yield c
        for attr, (suffix, doc) in gauges.items():
            v = _num(obj, attr)
            if v is not None:
                g = GaugeMetricFamily(prefix + suffix, doc)
                g.add_metric([], v)
                yield g

    @staticmethod
    def _runtime(rt: Any) -> Iterator[Metric]:
        if rt is None or not hasattr(rt, "stats"):
            return
        st = rt.stats()
        simple = {
            "epoch": (GaugeMetricFamily, "swell_epoch", "current epoch", 1.0),
            "barriers": (CounterMetricFamily, "swell_barriers", "barriers completed", 1.0),
            "last_barrier_ms": (
                GaugeMetricFamily,
                "swell_barrier_last_duration_seconds",
                "duration of the last barrier",
                0.001,
            ),
            "rows_in": (CounterMetricFamily, "swell_stream_rows_in", "rows into the dataflow", 1.0),
            "failed_epochs": (
                CounterMetricFamily,
                "swell_failed_epochs",
                "epochs rolled back after a failure inside the barrier",
                1.0,
            ),
            "expression_errors": (
                CounterMetricFamily,
                "swell_stream_expression_errors",
                "rows whose expression failed in a streaming job and became NULL "
                "(rw_catalog.rw_event_logs)",
                1.0,
            ),
        }
        for key, (cls, name, doc, scale) in simple.items():
            v = st.get(key)
            if isinstance(v, (int, float)):
                m = cls(name, doc)
                m.add_metric([], float(v) * scale)
                yield m
        g = GaugeMetricFamily("swell_relations", "streaming relations by kind", labels=["kind"])
        for key in ("tables", "views", "sinks"):
            v = st.get(key)
            if isinstance(v, (int, float)):
                g.add_metric([key], float(v))
        yield g
        cpu = st.get("cpu")
        if isinstance(cpu, dict):  # engine.stream.cpu: barrier CPU by phase / operator
            for key, name, label, doc in (
                ("phases", "swell_stream_cpu_seconds", "phase", "barrier CPU by phase"),
                ("operators", "swell_operator_cpu_seconds", "operator", "view operator CPU"),
            ):
                c = CounterMetricFamily(name, doc, labels=[label])
                for k, v in sorted(cpu.get(key, {}).items()):
                    c.add_metric([k], float(v))
                yield c

    @staticmethod
    def _workers(rt: Any) -> Iterator[Metric]:
        """Per worker process of parallel jobs (`worker`, `node` labels); nothing before
        the first parallel job started the pool."""
        if rt is None:
            return
        totals = introspect.pool_totals(rt)
        if totals is None:
            return
        for key, name, doc in (
            ("lost", "swell_workers_lost", "worker processes lost (each made the job recover)"),
            ("restarts", "swell_worker_pool_recoveries", "recoveries the worker pool went through"),
        ):
            c = CounterMetricFamily(name, doc)
            c.add_metric([], float(totals[key]))
            yield c
        stats = introspect.worker_stats(rt)
        labels = ["worker", "node"]
        up = GaugeMetricFamily("swell_worker_up", "1 while the worker process runs", labels=labels)
        actors = GaugeMetricFamily(
            "swell_worker_actors", "actors placed on the worker", labels=labels
        )
        families = {
            "cpu_seconds": CounterMetricFamily(
                "swell_worker_cpu_seconds", "CPU seconds of the worker process", labels=labels
            ),
            "requests": CounterMetricFamily(
                "swell_worker_requests", "requests the coordinator sent the worker", labels=labels
            ),
            "rows_in": CounterMetricFamily(
                "swell_worker_rows_in", "rows into the worker's actors", labels=labels
            ),
            "rows_out": CounterMetricFamily(
                "swell_worker_rows_out", "rows out of the worker's actors", labels=labels
            ),
            "busy_seconds": CounterMetricFamily(
                "swell_worker_busy_seconds", "seconds the worker spent on requests", labels=labels
            ),
            "alignment_wait_seconds": CounterMetricFamily(
                "swell_worker_barrier_alignment_wait_seconds",
                "seconds the worker's part of a step waited for the slowest worker",
                labels=labels,
            ),
            "wait_seconds": CounterMetricFamily(
                "swell_worker_response_wait_seconds",
                "seconds the coordinator waited for the worker's responses",
                labels=labels,
            ),
        }
        xbytes = CounterMetricFamily(
            "swell_worker_exchange_bytes",
            "bytes of requests (out) and responses (in) between coordinator and worker",
            labels=[*labels, "direction"],
        )
        for st in stats:
            lv = [str(st["worker"]), st["node"] or ""]
            up.add_metric(lv, 1.0 if st["state"] == "RUNNING" else 0.0)
            actors.add_metric(lv, float(st["actors"]))
            for key, fam in families.items():
                v = st.get(key)
                if isinstance(v, (int, float)):
                    fam.add_metric(lv, float(v))
            xbytes.add_metric([*lv, "out"], float(st["bytes_out"]))
            xbytes.add_metric([*lv, "in"], float(st["bytes_in"]))
        yield up
        yield actors
        yield from families.values()
        yield xbytes

    @staticmethod
    def _pgwire(srv: Any) -> Iterator[Metric]:
        g = GaugeMetricFamily("swell_pgwire_connections", "open client connections")
        g.add_metric([], float(getattr(srv, "connection_count", 0)))
        yield g
        for attr, name, doc in (
            ("connections_total", "swell_pgwire_connections_accepted", "connections accepted"),
            ("auth_failures", "swell_pgwire_auth_failures", "failed authentications"),
            ("cancel_requests", "swell_pgwire_cancel_requests", "cancel requests received"),
            ("statements_total", "swell_pgwire_statements", "statements executed"),
            ("errors_total", "swell_pgwire_errors", "statements that failed"),
        ):
            v = _num(srv, attr)
            if v is not None:
                c = CounterMetricFamily(name, doc)
                c.add_metric([], v)
                yield c

    @staticmethod
    def _webhook(wh: Any) -> Iterator[Metric]:
        if not hasattr(wh, "stats"):
            return
        st = wh.stats()
        for key, name, doc in (
            ("requests", "swell_webhook_requests", "webhook requests"),
            ("rows_ingested", "swell_webhook_rows_ingested", "rows ingested by webhooks"),
            ("flushes", "swell_webhook_flushes", "webhook batch flushes"),
            ("ack_count", "swell_webhook_acks", "acknowledged webhook requests"),
        ):
            if isinstance(st.get(key), (int, float)):
                c = CounterMetricFamily(name, doc)
                c.add_metric([], float(st[key]))
                yield c
        responses = st.get("responses")
        if isinstance(responses, dict):
            c = CounterMetricFamily(
                "swell_webhook_responses", "webhook responses by HTTP status", labels=["status"]
            )
            for status, n in sorted(responses.items()):
                c.add_metric([str(status)], float(n))
            yield c
        for key, name, doc in (
            ("ack_seconds_avg", "swell_webhook_ack_seconds_avg", "mean request-to-ack time"),
            ("ack_seconds_max", "swell_webhook_ack_seconds_max", "max request-to-ack time"),
            ("inflight", "swell_webhook_inflight", "requests waiting for durability"),
        ):
            if isinstance(st.get(key), (int, float)):
                g = GaugeMetricFamily(name, doc)
                g.add_metric([], float(st[key]))
                yield g


def _qualified(rel: Any) -> str:
    schema = getattr(rel, "schema_name", "public")
    return str(rel.name) if schema == "public" else f"{schema}.{rel.name}"


def histogram(name: str, doc: str, h: Histogram, labels: dict[str, str] | None = None) -> Metric:
    """A Prometheus histogram family from an `engine.latency.Histogram` snapshot."""
    m = HistogramMetricFamily(name, doc, labels=list(labels or {}))
    return _add_histogram(m, h, list((labels or {}).values()))


def _add_histogram(m: HistogramMetricFamily, h: Histogram, values: list[str]) -> Metric:
    buckets, total, count = h.snapshot()
    pairs = [(repr(float(le)), float(n)) for le, n in buckets] + [("+Inf", float(count))]
    m.add_metric(values, pairs, total)
    return m


def render(sources: MetricsSources) -> bytes:
    """The exposition text for one scrape."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(SwellCollector(sources))
    ProcessCollector(registry=registry)  # process_cpu_seconds_total, resident memory, fds
    return generate_latest(registry)


class MetricsServer:
    def __init__(self, runner: web.AppRunner, site: web.TCPSite, host: str, port: int) -> None:
        self._runner = runner
        self._site = site
        self.host = host
        self.port = port

    async def close(self) -> None:
        await self._runner.cleanup()


async def start_metrics_server(host: str, port: int, sources: MetricsSources) -> MetricsServer:
    async def metrics(request: web.Request) -> web.Response:
        body = render(sources)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    runner, site, bound = await start_site(app, host, port)
    return MetricsServer(runner, site, host, bound)


async def start_site(
    app: web.Application, host: str, port: int
) -> tuple[web.AppRunner, web.TCPSite, int]:
    """Serve `app` on host:port (the HTTP listeners of the metrics and dashboard ports):
    the runner to clean up, the site, and the bound port (port 0 picks a free one)."""
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    bound = port
    server = getattr(site, "_server", None)
    if server is not None and server.sockets:
        bound = server.sockets[0].getsockname()[1]
    return runner, site, bound
