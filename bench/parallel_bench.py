"""Parallel execution through the real server: wall clock at --parallelism 1 vs 2.

What a user does: `COPY t FROM STDIN` (CSV, psycopg) into `CREATE TABLE t (id BIGINT,
k BIGINT, v BIGINT) APPEND ONLY`, then FLUSH, with materialized views over it. The same
run is made against a server started with `--parallelism 1` (every job in the server
process) and one with `--parallelism 2` (the views' GROUP BY and join run as 2 actors in
2 worker processes); the server is not pinned to a core here, so its workers can use both.
Phases, each timed by the wall clock from the client:

1. `group-by stream`: `SELECT k, count(*), sum(v) FROM t GROUP BY k` exists; COPY
   `--rows` rows (`--keys` distinct k, 100,000 by default) in batches, then FLUSH;
2. `group-by backfill`: the same view created over the loaded rows (CREATE returns when
   it is filled);
3. `join backfill`: `SELECT d.g, count(*), sum(t.v) FROM t JOIN dim d ON t.k = d.k GROUP
   BY d.g` created over them (`dim`: one row per key, 1,000 groups);
4. `join stream`: that view exists (the group-by is dropped); COPY `--rows / 2` more rows,
   then FLUSH;
   (`--group-by-only` stops after phase 2: both views are checked against their query)
5. `barrier`: one-row INSERT + FLUSH, `--flushes` times: the median FLUSH is the fixed
   cost of an epoch, at 1 worker vs 2 (every parallel node's step is one request/response
   round trip per worker, and the commit one more).

Each phase also reports its CPU seconds (server + workers, from /proc) and its critical
path: the coordinator's CPU plus the busiest worker's (within an epoch the coordinator
waits while the workers step, so this is the wall clock the phase would take on an idle
machine); the CPU critical-path speedup is therefore the figure that does not depend on
what else the (shared, 2-core) machine runs; its load average is printed with the figures.
The coordinator sends the checkpoint's collect right after the step and the workers
write their scratch stores after answering it, so part of their work overlaps the
coordinator's: the overlapped figure (the larger of the coordinator's CPU and the busiest
worker's) bounds the speedup from above, the serial one from below.
Also from the parallel run: exchange bytes per row (`rw_fragments.exchange_bytes` over
rows into the fragment) and the exchange's CPU cost per row: all CPU seconds of phase 1 at
2 workers minus at 1 worker, over its rows.

    python bench/parallel_bench.py [--rows 2000000] [--keys 100000] [--batch 200000]
                                   [--flushes 30] [--parallelism 2]
                                   [--skip-groupby-backfill] [--group-by-only] [--profile]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import report  # noqa: E402
from _server import BenchServer, free_port, process_cpu_seconds  # noqa: E402

TARGET_SPEEDUP = 1.5
GROUP_BY = "SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k"
JOIN = "SELECT d.g, count(*) AS n, sum(t.v) AS s FROM t JOIN dim d ON t.k = d.k GROUP BY d.g"


def csv_batches(start: int, rows: int, batch: int, keys: int, seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    out = []
    for b in range(start, start + rows, batch):
        n = min(batch, start + rows - b)
        ids = np.arange(b, b + n)
        k = rng.integers(0, keys, n)
        v = rng.integers(0, 1_000_000, n)
        lines = np.char.add(
            np.char.add(np.char.add(ids.astype(str), ","), np.char.add(k.astype(str), ",")),
            v.astype(str),
        )
        out.append(("\n".join(lines.tolist()) + "\n").encode())
    return out


def copy_all(c: Any, batches: list[bytes]) -> None:
    for data in batches:
        with c.cursor().copy("COPY t FROM STDIN WITH (FORMAT csv)") as cp:
            for i in range(0, len(data), 1 << 20):
                cp.write(data[i : i + (1 << 20)])


def cpu_parts(srv: BenchServer, c: Any) -> tuple[float, dict[int, float]]:
    """CPU seconds of the server (the coordinator) and of each of its worker processes.

    The workers are the server's child processes: the coordinator's figure is the server
    process's own CPU (its other children, e.g. acceptors, included), not theirs."""
    workers: dict[int, float] = {}
    for (pid,) in c.execute("SELECT pid FROM rw_worker_nodes WHERE pid IS NOT NULL").fetchall():
        with contextlib.suppress(OSError):
            workers[int(pid)] = process_cpu_seconds(int(pid))
    return srv.cpu_seconds(exclude=set(workers)), workers


class Phase:
    """Wall clock and CPU of one phase: the coordinator's, each worker's, and the critical
    path, bounded by two figures: serial (coordinator + the busiest worker: they take
    turns within an epoch) and overlapped (the larger of the two: what the phase would
    take if the coordinator's work and the workers' overlapped fully)."""

    def __init__(self, srv: BenchServer, c: Any) -> None:
        self.srv, self.c = srv, c
        self.cpu0 = cpu_parts(srv, c)
        self.t0 = time.perf_counter()

    def end(self) -> dict[str, float]:
        wall = time.perf_counter() - self.t0
        coord1, workers1 = cpu_parts(self.srv, self.c)
        coord0, workers0 = self.cpu0
        per = [v - workers0.get(pid, 0.0) for pid, v in workers1.items()]
        coord = coord1 - coord0
        busiest = max(per) if per else 0.0
        return {
            "wall": wall,
            "cpu": coord + sum(per),
            "coordinator": coord,
            "critical": coord + busiest,
            "overlapped": max(coord, busiest),
        }


def run(p: int, args: argparse.Namespace, data: dict[str, list[bytes]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    # own metrics port and no dashboard: nobody else's poller adds to the coordinator's CPU
    extra = ["--parallelism", str(p), "--prometheus-listener-addr", f"127.0.0.1:{free_port()}"]
    extra += ["--dashboard-listen-addr", "off"]
    with BenchServer(barrier_ms=1000, extra_args=extra, cpu=None) as srv:
        c = srv.connect()
        c.execute("CREATE TABLE t (id BIGINT, k BIGINT, v BIGINT) APPEND ONLY")
        c.execute("CREATE TABLE dim (k BIGINT PRIMARY KEY, g BIGINT)")
        c.execute(f"INSERT INTO dim SELECT x, x % 1000 FROM generate_series(0, {args.keys - 1}) x")
        c.execute("FLUSH")
        c.execute(f"CREATE MATERIALIZED VIEW gb AS {GROUP_BY}")  # workers start here
        spy = args.profile and srv.profile_start(srv.dir / "profile.txt")

        ph = Phase(srv, c)
        copy_all(c, data["first"])
        c.execute("FLUSH")
        out["group-by stream"] = ph.end()
        if p > 1:
            row = c.execute(
                "SELECT sum(exchange_bytes), sum(rows_in) FROM rw_fragments "
                "WHERE job_name = 'gb' AND distribution_type = 'HASH'"
            ).fetchone()
            out["bytes per row"] = float(row[0]) / max(float(row[1]), 1.0)

        if not args.skip_groupby_backfill:
            ph = Phase(srv, c)
            c.execute(f"CREATE MATERIALIZED VIEW gb2 AS {GROUP_BY}")
            out["group-by backfill"] = ph.end()
            c.execute("DROP MATERIALIZED VIEW gb2")
        want = c.execute(f"SELECT count(*), sum(n), sum(s) FROM ({GROUP_BY}) q").fetchone()
        got = c.execute("SELECT count(*), sum(n), sum(s) FROM gb").fetchone()
        if tuple(want) != tuple(got):
            raise RuntimeError(f"gb differs from its query at parallelism {p}: {got} != {want}")
        if args.group_by_only:
            if spy:
                srv.profile_stop()
            c.close()
            return out

        ph = Phase(srv, c)
        c.execute(f"CREATE MATERIALIZED VIEW jn AS {JOIN}")
        out["join backfill"] = ph.end()
        c.execute("DROP MATERIALIZED VIEW gb")

        ph = Phase(srv, c)
        copy_all(c, data["second"])
        c.execute("FLUSH")
        out["join stream"] = ph.end()

        flushes = []
        ph = Phase(srv, c)
        for i in range(args.flushes):
            c.execute(f"INSERT INTO t VALUES ({-1 - i}, {i % args.keys}, 1)")
            t0 = time.perf_counter()
            c.execute("FLUSH")
            flushes.append(time.perf_counter() - t0)
        cost = ph.end()
        out["barrier"] = float(np.median(flushes))
        out["barrier cpu"] = cost["coordinator"] / args.flushes  # incl. the INSERT

        want = c.execute(f"SELECT count(*), sum(n) FROM ({JOIN}) q").fetchone()
        got = c.execute("SELECT count(*), sum(n) FROM jn").fetchone()
        if tuple(want) != tuple(got):
            raise RuntimeError(f"jn differs from its query at parallelism {p}: {got} != {want}")
        if spy:
            srv.profile_stop()
        c.close()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=200_000)
    ap.add_argument("--flushes", type=int, default=30)
    ap.add_argument("--parallelism", type=int, default=2, help="the parallel run's workers")
    ap.add_argument(
        "--skip-groupby-backfill",
        action="store_true",
        help="leave out phase 2 (the slowest: minutes at 2M rows on a loaded machine)",
    )
    ap.add_argument(
        "--group-by-only",
        action="store_true",
        help="only phases 1 and 2 (the join phases take most of the run's time)",
    )
    ap.add_argument("--profile", action="store_true", help="py-spy the servers meanwhile")
    args = ap.parse_args()
    data = {
        "first": csv_batches(0, args.rows, args.batch, args.keys, 7),
        "second": csv_batches(args.rows, args.rows // 2, args.batch, args.keys, 8),
    }
    p = args.parallelism
    one = run(1, args, data)
    load1 = os.getloadavg()[0]
    par = run(p, args, data)
    load2 = os.getloadavg()[0]
    note = f"load average {load1:.1f} / {load2:.1f} on {os.cpu_count()} cores"
    rows = {
        "group-by stream": args.rows,
        "group-by backfill": args.rows,
        "join backfill": args.rows,
        "join stream": args.rows // 2,
    }
    for phase, n in rows.items():
        if phase not in one:
            continue
        a, b = one[phase], par[phase]
        for who, r in ((1, a), (p, b)):
            report(
                "parallel",
                f"{phase}, {n:,} rows, {who} worker{'s' if who > 1 else ''}",
                r["wall"],
                "s",
                mode="e2e",
                note=f"CPU {r['cpu']:.2f} s (coordinator {r['coordinator']:.2f} s, critical "
                f"path {r['critical']:.2f} s serial, {r['overlapped']:.2f} s overlapped); {note}",
            )
        report(
            "parallel",
            f"{phase}: wall-clock speedup 1 -> {p} workers",
            a["wall"] / b["wall"],
            "x",
            mode="e2e",
            target=TARGET_SPEEDUP,
            note=f"{n / a['wall']:,.0f} -> {n / b['wall']:,.0f} rows/s; {note}",
        )
        report(
            "parallel",
            f"{phase}: CPU critical-path speedup 1 -> {p} workers",
            a["critical"] / b["critical"],
            "x",
            mode="e2e",
            note="CPU of 1 worker's run over (coordinator + busiest worker) of the parallel "
            "run: the speedup on an idle machine if the two took turns; overlapped (over the "
            f"larger of the two): {a['critical'] / max(b['overlapped'], 1e-9):.2f}x",
        )
    g1, g2 = one["group-by stream"], par["group-by stream"]
    report(
        "parallel",
        "exchange CPU per row (group-by stream, all processes)",
        (g2["cpu"] - g1["cpu"]) / args.rows * 1e6,
        "us",
        mode="e2e",
        note=f"CPU {g1['cpu']:.2f} s at 1 worker, {g2['cpu']:.2f} s at {p}; {note}",
    )
    report(
        "parallel",
        "exchange bytes per row (group-by: request + response)",
        par.get("bytes per row", 0.0),
        "B",
        mode="e2e",
    )

    if "barrier" in one:
        report(
            "parallel",
            f"barrier (FLUSH of a 1-row epoch), median, 1 worker -> {p} workers",
            par["barrier"] * 1000,
            "ms",
            mode="e2e",
            note=f"1 worker: {one['barrier'] * 1000:.1f} ms; {args.flushes} FLUSHes; {note}",
        )
        report(
            "parallel",
            f"coordinator CPU per 1-row epoch (INSERT + FLUSH), {p} workers",
            par["barrier cpu"] * 1000,
            "ms",
            mode="e2e",
            note=f"1 worker: {one['barrier cpu'] * 1000:.2f} ms; the view has 2 parallel nodes",
        )


if __name__ == "__main__":
    main()
