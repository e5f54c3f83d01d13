"""Latency of reads and webhook acks while the dataflow is busy: p50/p99 in milliseconds.

What a user sees on a loaded server: other sessions keep asking small things while big
epochs go through the barrier. Through the real server (bench/_server.py), one probe
thread per kind, each on its own connection, asks back to back (a short pause between
requests) and records the client-side latency:

* `SELECT 1`;
* a point SELECT on a materialized view (`SELECT * FROM lb_agg WHERE g = 7`);
* a webhook POST of one JSON row, acknowledged after the WAL fsync.

Load phases (each `--seconds` long; probes run through all of them):

0. `idle`: nothing else runs (the floor on this machine);
1. `epochs`: a loader session inserts `--epoch-rows` rows (100,000 by default) into
   `lb_src`, then FLUSHes, again and again, so each barrier carries a 100k-row epoch
   through a GROUP BY view (`lb_agg`) and a join view (`lb_join`);
2. `copy`: a loader session runs `COPY lb_copy FROM STDIN` of `--copy-rows` rows
   (1,000,000 by default) again and again;
3. `backfill`: a loader session creates (and drops) a materialized view over `lb_src`
   (which holds every row the first phase inserted, topped up to `--backfill-rows` first,
   5,000,000 by default, outside any measured phase, then FLUSHed so the CREATE does not
   commit the earlier phases' queued writes), so a backfill runs; its rows/s is reported.

Also reported: the loader's FLUSH latency in phase 1 (the barrier the probes did not wait
for); the backfill's rows/s over the whole CREATE, per server CPU-second, and over its
first and last fifth of rows (from `rw_ddl_progress`, so a cost that grows with the
view's size shows). Every figure's note has the machine's load average meanwhile.
Target: p99 of every probe below 20 ms.

The server is not pinned to a core: its worker processes (parallel jobs, `--parallelism`
defaults to the core count) would inherit the pin and take the CPU from the sessions the
probes talk to; `--pin` pins it (and them) to CPU 0 as the other end-to-end benchmarks
do. `--background-load N` runs N busy loops at `nice -n 19` through the measured phases
(a machine that is also doing other work).

`--stall` runs the server under `bench/_stall.py`'s monitor and reports, per phase, the
figure a loaded machine does not blur: the longest time one server thread kept the
interpreter from the others (CPU milliseconds it ran while the monitor's 1 ms sleep was
overdue for want of the lock), how often the monitor waited 16 ms or more for the lock, and
where the longest holds ended.

    python bench/read_latency_bench.py [--seconds 10] [--epoch-rows 100000]
                                       [--copy-rows 1000000] [--phases idle,epochs,copy,backfill]
                                       [--backfill-rows 5000000] [--pin] [--background-load 2]
                                       [--profile] [--stall]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import report  # noqa: E402
from _server import BenchServer  # noqa: E402
from _stall import summarise  # noqa: E402

TARGET_MS = 20.0
PAUSE_S = 0.005  # between two requests of one probe
POINT_SQL = "SELECT * FROM lb_agg WHERE g = 7"


class Probe(threading.Thread):
    """Repeats one request; latencies are filed under the phase running at the time."""

    def __init__(self, name: str, make: Callable[[], Callable[[], None]], phase: list[str]):
        super().__init__(name=name, daemon=True)
        self.make = make
        self.phase = phase
        self.samples: dict[str, list[float]] = {}
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            ask = self.make()
            while not self.stop.is_set():
                t0 = time.perf_counter()
                ask()
                ms = (time.perf_counter() - t0) * 1000
                self.samples.setdefault(self.phase[0], []).append(ms)
                time.sleep(PAUSE_S)
        except BaseException as e:  # reported by main
            self.error = e


def sql_probe(srv: BenchServer, sql: str) -> Callable[[], Callable[[], None]]:
    def make() -> Callable[[], None]:
        c = srv.connect()

        def ask() -> None:
            c.execute(sql).fetchall()

        return ask

    return make


def webhook_probe(srv: BenchServer, table: str) -> Callable[[], Callable[[], None]]:
    def make() -> Callable[[], None]:
        conn = http.client.HTTPConnection("127.0.0.1", srv.webhook_port, timeout=60)
        body = json.dumps({"k": 1}).encode()
        path = f"/webhook/dev/public/{table}"

        def ask() -> None:
            conn.request("POST", path, body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
            if r.status != 200:
                raise RuntimeError(f"webhook answered {r.status}")

        return ask

    return make


class ProgressSampler(threading.Thread):
    """Samples `rw_ddl_progress` (time, rows done, rows total) while a backfill runs."""

    def __init__(self, srv: BenchServer) -> None:
        super().__init__(name="progress", daemon=True)
        self.srv = srv
        self.samples: list[tuple[float, int, int]] = []
        self.stop = threading.Event()

    def run(self) -> None:
        with self.srv.connect() as c:
            while not self.stop.wait(0.25):
                row = c.execute("SELECT rows_done, rows_total FROM rw_ddl_progress").fetchone()
                if row is not None and row[0] is not None:
                    self.samples.append((time.monotonic(), int(row[0]), int(row[1])))

    def rates(self) -> tuple[float, float] | None:
        """Rows/s over the first and the last fifth of the rows (None: too few samples)."""
        s = self.samples
        if len(s) < 6 or s[-1][1] <= s[0][1]:
            return None
        total = s[-1][2] or s[-1][1]

        def rate(lo: float, hi: float) -> float:
            pts = [p for p in s if lo * total <= p[1] <= hi * total]
            if len(pts) < 2 or pts[-1][0] <= pts[0][0]:
                return float("nan")
            return (pts[-1][1] - pts[0][1]) / (pts[-1][0] - pts[0][0])

        return rate(0.0, 0.2), rate(0.8, 1.0)


def background_load(n: int) -> list[subprocess.Popen[bytes]]:
    """`n` busy loops at the lowest priority (other work on the machine)."""
    loop = [sys.executable, "-c", "while True: pass"]
    return [subprocess.Popen(["nice", "-n", "19", *loop]) for _ in range(n)]


def loadavg() -> float:
    return os.getloadavg()[0]


def copy_data(rows: int) -> bytes:
    ids = np.arange(rows)
    lines = np.char.add(np.char.add(ids.astype(str), ","), (ids % 1000).astype(str))
    return ("\n".join(lines.tolist()) + "\n").encode()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--epoch-rows", type=int, default=100_000)
    ap.add_argument("--copy-rows", type=int, default=1_000_000)
    ap.add_argument("--phases", default="idle,epochs,copy,backfill")
    ap.add_argument(
        "--backfill-rows",
        type=int,
        default=5_000_000,
        help="top lb_src up to this many rows before the backfill phase (0: as it is)",
    )
    ap.add_argument("--pin", action="store_true", help="pin the server (and workers) to CPU 0")
    ap.add_argument("--background-load", type=int, default=0, metavar="N")
    ap.add_argument("--profile", action="store_true", help="py-spy the server meanwhile")
    ap.add_argument("--stall", action="store_true", help="the server's stall monitor")
    args = ap.parse_args()
    phases = [p for p in args.phases.split(",") if p]
    trace = Path(tempfile.mkdtemp(prefix="swell-stall-")) / "stall.jsonl" if args.stall else None
    spans: dict[str, tuple[float, float]] = {}
    with BenchServer(barrier_ms=1000, cpu=0 if args.pin else None, stall_trace=trace) as srv:
        with srv.connect() as c:
            c.execute("CREATE TABLE lb_src (id BIGINT PRIMARY KEY, g INT, v BIGINT)")
            c.execute("CREATE TABLE lb_dim (g INT PRIMARY KEY, name VARCHAR)")
            c.execute(
                "INSERT INTO lb_dim SELECT g, 'g' || g::varchar FROM generate_series(0, 999) g"
            )
            c.execute(
                "CREATE MATERIALIZED VIEW lb_agg AS "
                "SELECT g, count(*) AS n, sum(v) AS s FROM lb_src GROUP BY g"
            )
            c.execute(
                "CREATE MATERIALIZED VIEW lb_join AS SELECT d.name, count(*) AS n "
                "FROM lb_src s JOIN lb_dim d ON s.g = d.g GROUP BY d.name"
            )
            c.execute("CREATE TABLE lb_copy (id BIGINT, g INT)")
            c.execute("CREATE TABLE lb_w (data JSONB) WITH (connector = 'webhook')")
            c.execute("INSERT INTO lb_src VALUES (0, 7, 1)")
            c.execute("FLUSH")
        phase = ["warmup"]
        probes = [
            Probe("SELECT 1", sql_probe(srv, "SELECT 1"), phase),
            Probe(
                "point SELECT on a view", sql_probe(srv, "SELECT * FROM lb_agg WHERE g = 7"), phase
            ),
            Probe("webhook ack", webhook_probe(srv, "lb_w"), phase),
        ]
        for p in probes:
            p.start()
        time.sleep(1.0)
        flushes: list[float] = []
        next_id = [1]
        loader = srv.connect()

        def epochs() -> None:
            n, start = args.epoch_rows, next_id[0]
            next_id[0] += n
            loader.execute(
                f"INSERT INTO lb_src SELECT g, g % 1000, g FROM "
                f"generate_series({start}, {start + n - 1}) AS g"
            )
            t0 = time.perf_counter()
            loader.execute("FLUSH")
            flushes.append((time.perf_counter() - t0) * 1000)

        data = copy_data(args.copy_rows) if "copy" in phases else b""

        def copy() -> None:
            with loader.cursor().copy("COPY lb_copy FROM STDIN WITH (FORMAT csv)") as cp:
                for i in range(0, len(data), 1 << 20):
                    cp.write(data[i : i + (1 << 20)])

        backfills: list[float] = []
        backfill_cpu: list[float] = []
        progress: list[ProgressSampler] = []

        def fill(upto: int) -> None:
            """Top lb_src up to `upto` rows (the backfill's upstream), 1M rows an epoch."""
            while next_id[0] < upto:
                n, start = min(1_000_000, upto - next_id[0]), next_id[0]
                next_id[0] += n
                loader.execute(
                    f"INSERT INTO lb_src SELECT g, g % 1000, g FROM "
                    f"generate_series({start}, {start + n - 1}) AS g"
                )
                loader.execute("FLUSH")

        def backfill() -> None:
            sampler = ProgressSampler(srv)
            sampler.start()
            t0, c0 = time.perf_counter(), srv.cpu_seconds()
            loader.execute(
                "CREATE MATERIALIZED VIEW lb_bf AS SELECT g, count(*) AS n, max(v) AS m "
                "FROM lb_src GROUP BY g"
            )
            backfills.append(time.perf_counter() - t0)
            backfill_cpu.append(srv.cpu_seconds() - c0)
            sampler.stop.set()
            sampler.join()
            progress.append(sampler)
            loader.execute("DROP MATERIALIZED VIEW lb_bf")

        def idle() -> None:
            time.sleep(0.1)

        work = {"idle": idle, "epochs": epochs, "copy": copy, "backfill": backfill}
        rounds: dict[str, int] = {}
        load: dict[str, tuple[float, float]] = {}
        spy = args.profile and srv.profile_start(Path(tempfile.mkdtemp()) / "profile.txt")
        busy = background_load(args.background_load)
        try:
            for name in phases:
                if name == "backfill":
                    phase[0] = "fill"  # not reported
                    fill(args.backfill_rows)
                    # the earlier phases' writes (a COPY phase leaves seconds of them
                    # queued) are committed here, not by the CREATE's first barrier,
                    # which would count them in the backfill's first fifth
                    loader.execute("FLUSH")
                phase[0] = name
                l0 = loadavg()
                w0 = time.time()
                end = time.monotonic() + args.seconds
                while time.monotonic() < end:
                    work[name]()
                    rounds[name] = rounds.get(name, 0) + 1
                load[name] = (l0, loadavg())
                spans[name] = (w0, time.time())
        finally:
            for b in busy:
                b.kill()
                b.wait()
        phase[0] = "done"
        if spy:
            srv.profile_stop()
        for p in probes:
            p.stop.set()
        for p in probes:
            p.join(timeout=120)
        loader.close()
        for p in probes:
            if p.error is not None:
                raise RuntimeError(f"probe {p.name} failed") from p.error
        rows_in = {"epochs": args.epoch_rows, "copy": args.copy_rows, "backfill": next_id[0]}
        extra = f", {args.background_load} nice-19 busy loops" if args.background_load else ""
        for name in phases:
            l0, l1 = load[name]
            note = f"load average {l0:.1f}->{l1:.1f}{extra}"
            if name != "idle":
                note = f"{rounds.get(name, 0)} rounds of {rows_in[name]:,} rows; {note}"
            for p in probes:
                lat = np.array(p.samples.get(name, [0.0]))
                for q in (50, 99):
                    report(
                        "read_latency",
                        f"{p.name}, during {name}, p{q}",
                        float(np.percentile(lat, q)),
                        "ms",
                        mode="e2e",
                        target=TARGET_MS if q == 99 else None,
                        note=f"{len(lat)} requests; {note}".rstrip("; "),
                    )
        if backfills:
            b = float(np.median(backfills))
            report(
                "read_latency",
                f"backfill of a {next_id[0]:,}-row GROUP BY view, rows/s",
                next_id[0] / b,
                "rows/s",
                mode="e2e",
                note=f"{len(backfills)} CREATEs, median {b:.1f} s each",
            )
            cpu = float(np.median(backfill_cpu))
            report(
                "read_latency",
                f"backfill of a {next_id[0]:,}-row GROUP BY view, rows per server CPU-second",
                next_id[0] / cpu,
                "rows/CPU-s",
                mode="e2e",
                note=f"server and worker processes, median {cpu:.1f} CPU-s per CREATE",
            )
            for i, r in enumerate(p.rates() for p in progress):
                if r is not None:
                    report(
                        "read_latency",
                        f"backfill rows/s, first fifth vs last fifth of the rows (CREATE {i + 1})",
                        r[0],
                        "rows/s",
                        mode="e2e",
                        note=f"last fifth {r[1]:,.0f} rows/s (ratio {r[1] / r[0]:.2f})",
                    )
        if trace is not None:
            report_stalls(trace, spans, load)
        if flushes:
            f = np.array(flushes)
            report(
                "read_latency",
                f"FLUSH of a {args.epoch_rows:,}-row epoch (the barrier), p50",
                float(np.percentile(f, 50)),
                "ms",
                mode="e2e",
                note=f"{len(f)} barriers; the probes above do not wait for it",
            )


def report_stalls(
    trace: Path, spans: dict[str, tuple[float, float]], load: dict[str, tuple[float, float]]
) -> None:
    """The stall monitor's figures per phase (`--stall`; see the module docstring)."""
    for name, s in summarise(trace, spans).items():
        l0, l1 = load[name]
        report(
            "read_latency",
            f"longest interpreter hold during {name}",
            s["max_hold_ms"],
            "CPU-ms",
            mode="e2e",
            note=(
                f"{s['holds_ge_10ms']} holds >= 10 ms; 99% / 99.9% of waits below "
                f"{s['p99_below_ms']:g} / {s['p999_below_ms']:g} ms; {s['wait_ge_16ms']:.2%} of "
                f"{s['wakes']} 1-ms wake-ups waited >= 16 ms for the lock (max "
                f"{s['max_wait_ms']:.0f} ms); load average {l0:.1f}->{l1:.1f}"
            ),
        )
        for x in s["top"]:
            where = " <- ".join(x["stack"][:4])
            hold, wait = x["hold_ms"], x["wait_ms"]
            print(f"    {hold:7.1f} CPU-ms (waited {wait:.0f} ms) in {x['holder']}: {where}")


if __name__ == "__main__":
    main()
