"""Webhook ingest benchmark: events/s per server CPU-second, requests/s and latency (wrk).

Starts a real Swell server (`python -m pgwire.cli playground`, pinned to CPU 0) and drives
it with wrk (Debian package `wrk`, pinned to CPU 1) over loopback. Tables and the view are
the ones of the user's webhook-to-Iceberg walkthrough:

* `wbhtable1 (data JSONB) ... VALIDATE AS secure_compare(headers->>'authorization', ...)`
  with the `product_view_events` view parsing the JSONB; one event per POST, with
  `webhook.wait_for_persistence` true (default) and false;
* the same with `is_batched = true`, 100-event NDJSON bodies per POST.

The server's CPU time (utime + stime of its process, all threads) is read from /proc before
and after each wrk run, so the events/CPU-s figure includes HTTP parsing, decoding,
VALIDATE, the WAL and the barriers that carry the rows into the view. At the end the view's
row count is checked against the accepted events.

    python bench/webhook_bench.py [--seconds 10] [--connections 32] [--batch 100]
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
from pathlib import Path

import psycopg

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


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk(url: str, body_file: Path, seconds: int, conns: int, tmp: Path) -> dict[str, float]:
    script = tmp / "post.lua"
    script.write_text(LUA.replace("{body}", str(body_file)))
    cmd = ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", "-s", str(script), url]
    if shutil.which("taskset") and os.cpu_count() and os.cpu_count() > 1:  # type: ignore[operator]
        cmd = ["taskset", "-c", "1", *cmd]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    m = re.search(r"STATS (\d+) (\d+) (\d+) (\d+) (\d+)", out)
    if m is None:
        raise RuntimeError(f"unexpected wrk output:\n{out}")
    req, err, p50, p99, dur = (int(x) for x in m.groups())
    errs = re.search(r"ERRS .*", out)
    if err and errs is not None:
        print(errs.group(0), flush=True)
    return {"requests": req - err, "errors": err, "p50_ms": p50 / 1000, "p99_ms": p99 / 1000,
            "seconds": dur / 1e6}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--only", default="", help="run only the cases whose label has this")
    ap.add_argument("--spy", default="", help="py-spy the server into this file (top view)")
    a = ap.parse_args()
    if shutil.which("wrk") is None:
        sys.exit("wrk is not installed (Debian package `wrk`)")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        pg, wh = free_port(), free_port()
        cmd = [sys.executable, "-m", "pgwire.cli", "playground", "--listen-addr",
               f"127.0.0.1:{pg}", "--webhook-listen-addr", f"127.0.0.1:{wh}",
               "--data-dir", str(tmp / "data"), "--barrier-interval-ms", "1000"]
        if shutil.which("taskset") and (os.cpu_count() or 1) > 1:
            cmd = ["taskset", "-c", "0", *cmd]
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        log = open(tmp / "server.log", "wb")  # noqa: SIM115 - closed with the process
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            for _ in range(300):
                try:
                    conn = psycopg.connect(host="127.0.0.1", port=pg, user="root",
                                           dbname="dev", autocommit=True)
                    break
                except psycopg.OperationalError:
                    time.sleep(0.1)
            else:
                raise RuntimeError("server did not start")
            validate = "VALIDATE AS secure_compare(headers->>'authorization', 'TEST_WEBHOOK')"
            cases = [
                ("single, wait_for_persistence", "w_single", "", False),
                ("single, no wait", "w_nowait", ", webhook.wait_for_persistence = false", False),
                (f"batched {a.batch}/request", "w_batch", ", is_batched = true", True),
            ]
            one = json.dumps(EVENT)
            (tmp / "one.json").write_text(one)
            (tmp / "batch.ndjson").write_text("\n".join([one] * a.batch) + "\n")
            for _, table, opts, _ in cases:
                conn.execute(f"CREATE TABLE {table} (data JSONB) WITH (connector = 'webhook'"
                             f"{opts}) {validate}")
                conn.execute(VIEW.format(view=f"{table}_mv", table=table))
            for label, table, _, batched in cases:
                if a.only not in label:
                    continue
                spy = None
                if a.spy:
                    spy = subprocess.Popen(["py-spy", "record", "-p", str(proc.pid), "-d",
                                            str(a.seconds), "-f", "raw", "-o", a.spy, "-t"],
                                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                body = tmp / ("batch.ndjson" if batched else "one.json")
                url = f"http://127.0.0.1:{wh}/webhook/dev/public/{table}"
                c0 = cpu_seconds(proc.pid)
                r = wrk(url, body, a.seconds, a.connections, tmp)
                if spy is not None:
                    spy.wait()
                conn.execute("FLUSH")
                cpu = cpu_seconds(proc.pid) - c0
                events = r["requests"] * (a.batch if batched else 1)
                got = conn.execute(f"SELECT count(*) FROM {table}_mv").fetchone()
                assert got is not None and got[0] >= events, (got, events)
                print(f"webhook {label:<30} {r['requests'] / r['seconds']:>9,.0f} req/s  "
                      f"{events / r['seconds']:>10,.0f} events/s  "
                      f"{events / cpu:>10,.0f} events/CPU-s  p50 {r['p50_ms']:.1f} ms  "
                      f"p99 {r['p99_ms']:.1f} ms  errors {r['errors']}  (events {events:,}, "
                      f"server cpu {cpu:.1f}s)", flush=True)
            conn.close()
        finally:
            proc.terminate()
            proc.wait(timeout=30)
            log.close()


if __name__ == "__main__":
    main()
