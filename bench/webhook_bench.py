"""Webhook ingest benchmark: events/s per server CPU-second, requests/s and latency (wrk).

Starts a real Swell server (`python -m pgwire.cli playground`, pinned to CPU 0) and drives
it with wrk (Debian package `wrk`, pinned to CPU 1) over loopback. Tables and the view are
the ones of the user's webhook-to-Iceberg walkthrough:

* `wbhtable1 (data JSONB) ... VALIDATE AS secure_compare(headers->>'authorization', ...)`
  with the `product_view_events` view parsing the JSONB; one event per POST, with
  `webhook.wait_for_persistence` true (default) and false, and once without the view
  (the HTTP + ingest path alone);
* the same with `is_batched = true`, 100-event NDJSON bodies per POST.

The server's CPU time (utime + stime of its process, all threads) is read from /proc before
and after each wrk run, so the events/CPU-s figure (and its inverse, server CPU us per
event) includes HTTP parsing, decoding, VALIDATE, the WAL and the barriers that carry the
rows into the view. Each line also gives wrk's p50/p99 and the machine's 1-minute load
average: on a shared machine wall-clock figures move with the load, CPU per event much
less. At the end the view's row count is checked against the accepted events.

`--floor` first measures the HTTP stacks' own floors on the same machine: a trivial
handler that reads the body and answers 200 (no JSON, no WAL), pinned and driven the same
way, on aiohttp and on Swell's webhook HTTP layer, so the webhook figures can be read as
a fraction of what the HTTP stack allows. `--workers N` runs the server with N webhook
acceptor processes (then nothing is pinned and CPU-s include the acceptors).
`--memory-data-dir` puts the server's data directory in /dev/shm: an fsync there costs
nothing, so the wait_for_persistence figures show what the CPU and the request path allow
apart from the disk (not a durable setup; compare with the default run on disk).

    python bench/webhook_bench.py [--seconds 10] [--connections 32] [--batch 100] [--floor]
                                  [--profile] [--workers N] [--memory-data-dir]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import report  # noqa: E402
from _server import BenchServer, free_port, pinned, process_cpu_seconds  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

EVENT = {
    "event_id": "4b1f0f0e-7c59-4d8e-9d5b-1c1f7f2a9e01",
    "user_id": "usr_1a2b3c4d",
    "event_name": "product_viewed",
    "properties": {"product_id": "prod_9f8e7d6c", "category": "electronics", "price": 9199.99},
    "timestamp": "2026-02-12T10:50:00Z",
}

VIEW = """CREATE MATERIALIZED VIEW {view} AS SELECT
  (data->>'event_id')::VARCHAR AS event_id, (data->>'user_id')::VARCHAR AS user_id,
  (data->>'event_name')::VARCHAR AS event_name,
  (data->'properties'->>'product_id')::VARCHAR AS product_id,
  (data->'properties'->>'category')::VARCHAR AS category,
  (data->'properties'->>'price')::DOUBLE PRECISION AS price,
  (data->>'timestamp')::TIMESTAMP WITH TIME ZONE AS event_timestamp,
  data::VARCHAR AS raw_data FROM {table}"""

LUA = """wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "TEST_WEBHOOK"
local f = io.open("{body}", "rb")
wrk.body = f:read("*a")
f:close()
done = function(summary, latency, requests)
  io.write(string.format("ERRS connect %d read %d write %d status %d timeout %d\\n",
    summary.errors.connect, summary.errors.read, summary.errors.write, summary.errors.status,
    summary.errors.timeout))
  io.write(string.format("STATS %d %d %d %d %d\\n", summary.requests,
    summary.errors.status + summary.errors.connect + summary.errors.read
    + summary.errors.write + summary.errors.timeout,
    latency:percentile(50), latency:percentile(99), summary.duration))
end
"""


FLOOR_APP = """
import sys
from aiohttp import web

async def handle(request):
    await request.read()
    return web.Response(status=200)

app = web.Application()
app.router.add_route("POST", "/{tail:.*}", handle)
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=None, print=None)
"""


OWN_FLOOR_APP = """
import asyncio, sys
from connectors.webhook.http import HttpServer, ok_response

async def main():
    srv = HttpServer(lambda req: ok_response(), max_body=10 * 1024 * 1024)
    await srv.start("127.0.0.1", int(sys.argv[1]))
    await asyncio.Event().wait()

asyncio.run(main())
"""


def wrk(
    url: str, body_file: Path, seconds: int, conns: int, tmp: Path, pin: bool = True
) -> dict[str, float]:
    script = tmp / "post.lua"
    script.write_text(LUA.replace("{body}", str(body_file)))
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "-s", str(script), url]
    if pin:
        cmd = pinned(cmd, 1)
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    m = re.search(r"STATS (\d+) (\d+) (\d+) (\d+) (\d+)", out)
    if m is None:
        raise RuntimeError(f"unexpected wrk output:\n{out}")
    req, err, p50, p99, dur = (int(x) for x in m.groups())
    errs = re.search(r"ERRS .*", out)
    if err and errs is not None:
        print(errs.group(0), flush=True)
    return {
        "requests": req - err,
        "errors": err,
        "p50_ms": p50 / 1000,
        "p99_ms": p99 / 1000,
        "seconds": dur / 1e6,
    }


def load_average() -> str:
    """The 1-minute load average, for the notes (figures move with the machine's load)."""
    return f"load {os.getloadavg()[0]:.1f}"


def run_wrk(
    cpu_seconds: Callable[[], float], url: str, body: Path, a: argparse.Namespace, tmp: Path,
    pin: bool = True,
) -> tuple[dict[str, float], float, str]:  # fmt: skip
    """wrk against `url`: (its figures, server CPU seconds meanwhile, the load average)."""
    c0 = cpu_seconds()
    r = wrk(url, body, a.seconds, a.connections, tmp, pin=pin)
    return r, cpu_seconds() - c0, load_average()


def wait_port(port: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


BARE_FLOOR_APP = """
import asyncio, sys

OK = b"HTTP/1.1 200 OK\\r\\nContent-Length: 0\\r\\n\\r\\n"

class Bare(asyncio.Protocol):
    # the least an asyncio server can do: find the header end and Content-Length, answer
    def connection_made(self, t):
        self.t, self.buf = t, b""

    def data_received(self, data):
        buf = self.buf + data
        while (end := buf.find(b"\\r\\n\\r\\n")) >= 0:
            i = buf.lower().find(b"content-length:", 0, end)
            n = int(buf[i + 15 : buf.find(b"\\r\\n", i)]) if i >= 0 else 0
            if len(buf) < end + 4 + n:
                break
            buf = buf[end + 4 + n :]
            self.t.write(OK)
        self.buf = buf

async def main():
    loop = asyncio.get_running_loop()
    await loop.create_server(Bare, "127.0.0.1", int(sys.argv[1]), backlog=1024)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def floor(a: argparse.Namespace, tmp: Path, one: Path, batch: Path) -> None:
    """The HTTP stacks' own floors: a trivial handler, same pinning and load: aiohttp's,
    that of Swell's webhook HTTP layer (`connectors/webhook/http.py`), and a bare asyncio
    Protocol that only frames requests (what any asyncio server pays: the event loop,
    the socket calls)."""
    for name, source in (
        ("aiohttp", FLOOR_APP),
        ("swell http.py", OWN_FLOOR_APP),
        ("bare asyncio Protocol", BARE_FLOOR_APP),
    ):
        _floor(a, tmp, one, batch, name, source)


def _floor(
    a: argparse.Namespace, tmp: Path, one: Path, batch: Path, name: str, source: str
) -> None:
    port = free_port()
    app = tmp / "floor_app.py"
    app.write_text(source)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(pinned([sys.executable, str(app), str(port)], 0), env=env)
    try:
        wait_port(port)
        for label, body in (("single event", one), (f"NDJSON {a.batch}/request", batch)):
            url = f"http://127.0.0.1:{port}/x"
            r, cpu, load = run_wrk(lambda: process_cpu_seconds(proc.pid), url, body, a, tmp)
            report(
                "webhook",
                f"{name} floor (trivial handler), {label}",
                r["requests"] / r["seconds"],
                "req/s",
                mode="e2e",
                note=f"p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, "
                f"{r['requests'] / cpu:,.0f} req/CPU-s ({1e6 * cpu / r['requests']:.1f} us/req), "
                + load,
            )
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--only", default="", help="run only the cases whose label has this")
    ap.add_argument("--floor", action="store_true", help="also measure aiohttp's floor")
    ap.add_argument("--profile", action="store_true", help="py-spy the server per case")
    ap.add_argument(
        "--workers",
        type=int,
        default=0,
        help="--webhook-workers of the server (acceptor processes; then neither the server "
        "nor wrk is pinned, and CPU-s include the acceptors)",
    )
    ap.add_argument(
        "--memory-data-dir",
        action="store_true",
        help="data directory in /dev/shm (fsync costs nothing: the CPU's share of the figures)",
    )
    a = ap.parse_args(argv)
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (Debian package `wrk`)")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        one = json.dumps(EVENT)
        (tmp / "one.json").write_text(one)
        (tmp / "batch.ndjson").write_text("\n".join([one] * a.batch) + "\n")
        if a.floor:
            floor(a, tmp, tmp / "one.json", tmp / "batch.ndjson")
        extra = ["--webhook-workers", str(a.workers)] if a.workers else []
        cpu = None if a.workers else 0
        parent = "/dev/shm" if a.memory_data_dir else None
        with (
            BenchServer(extra_args=extra, cpu=cpu, parent_dir=parent) as srv,
            srv.connect() as conn,
        ):
            wait_port(srv.webhook_port)  # acceptor processes may still be starting
            validate = "VALIDATE AS secure_compare(headers->>'authorization', 'TEST_WEBHOOK')"
            cases = [
                ("single, wait_for_persistence", "w_single", "", False),
                ("single, table only (no view)", "w_plain", "", False),
                ("single, no wait", "w_nowait", ", webhook.wait_for_persistence = false", False),
                (f"batched {a.batch}/request", "w_batch", ", is_batched = true", True),
                (f"batched {a.batch}/request, table only", "w_bplain", ", is_batched = true", True),
            ]
            plain = {"w_plain", "w_bplain"}  # no view: the HTTP + ingest path alone
            for _, table, opts, _ in cases:
                conn.execute(
                    f"CREATE TABLE {table} (data JSONB) WITH (connector = 'webhook'"
                    f"{opts}) {validate}"
                )
                if table not in plain:
                    conn.execute(VIEW.format(view=f"{table}_mv", table=table))
            for label, table, _, batched in cases:
                if a.only not in label:
                    continue
                spied = a.profile and srv.profile_start(srv.dir / f"{table}.spy")
                body = tmp / ("batch.ndjson" if batched else "one.json")
                url = f"http://127.0.0.1:{srv.webhook_port}/webhook/dev/public/{table}"
                c0 = srv.cpu_seconds()
                r, _, load = run_wrk(srv.cpu_seconds, url, body, a, tmp, pin=not a.workers)
                conn.execute("FLUSH")  # the barrier carrying the rows counts too
                cpu = srv.cpu_seconds() - c0
                if spied:
                    srv.profile_stop()
                events = r["requests"] * (a.batch if batched else 1)
                src = table if table in plain else f"{table}_mv"
                got = conn.execute(f"SELECT count(*) FROM {src}").fetchone()
                assert got is not None and got[0] >= events, (got, events)
                label = f"{label}, {a.workers} acceptors" if a.workers else label
                label = f"{label}, data in memory" if a.memory_data_dir else label
                note = (
                    f"p50 {r['p50_ms']:.1f} ms, p99 {r['p99_ms']:.1f} ms, errors {r['errors']}, "
                    f"{events / cpu:,.0f} events/CPU-s ({1e6 * cpu / events:.1f} us/event), " + load
                )
                if batched:
                    report("webhook", label, events / r["seconds"], "events/s", mode="e2e",
                           target=400_000, note=note)  # fmt: skip
                else:
                    report("webhook", label, r["requests"] / r["seconds"], "req/s", mode="e2e",
                           target=15_000, note=note)  # fmt: skip


if __name__ == "__main__":
    main()
