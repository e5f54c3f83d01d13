"""min/max and DISTINCT state over an input that can retract: backfill rows per CPU-second.

Starts a real Swell server (`bench/_server.py`, pinned to one core), loads `--rows` rows
into a table with a primary key (so its changes can retract: min/max keep every value of
a group, DISTINCT keeps every value's count) with COPY, then creates one view per case
and reports the server's CPU-seconds for the backfill (rows per CPU-second), then
deletes a tenth of the rows (retractions that remove the current extreme of many groups)
and reports that too. Cases:

* `max_seq`: `max(v)` per group, values rising with the row id (the quiet case);
* `max_rand`, `min_rand`: random values;
* `count_distinct`: `count(DISTINCT v)` per group;
* `max_global`: `max(v)` of the whole table (one group holding every value).

Each line also gives the server's RSS after the backfill and its growth during it, and
the last line the server's peak RSS. The growth understates a view's state: the
allocator first reuses what the COPY freed (run one case per invocation with `--only`
and compare RSS at the same `--state-cache-mb`). `--skip-deletes` leaves out the
retraction phase.

    python bench/minmax_state_bench.py [--rows 1000000] [--groups 100000] [--only max_seq]
        [--state-cache-mb 256] [--parallelism 1] [--profile] [--skip-deletes]
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _server import BenchServer  # noqa: E402

CASES = {
    "max_seq": "SELECT g, max(s) AS m FROM t GROUP BY g",
    "max_rand": "SELECT g, max(r) AS m FROM t GROUP BY g",
    "min_rand": "SELECT g, min(r) AS m FROM t GROUP BY g",
    "count_distinct": "SELECT g, count(DISTINCT d) AS m FROM t GROUP BY g",
    "max_global": "SELECT max(r) AS m FROM t",
}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--groups", type=int, default=100_000)
    ap.add_argument("--only", default="")
    ap.add_argument("--state-cache-mb", type=int, default=256)
    ap.add_argument("--parallelism", type=int, default=0, help="0: the server's default")
    ap.add_argument("--profile", action="store_true", help="py-spy the backfills")
    ap.add_argument("--skip-deletes", action="store_true", help="no retraction phase")
    args = ap.parse_args()
    n = args.rows
    rng = np.random.default_rng(7)
    ids = np.arange(n)
    g = ids % args.groups
    r = rng.integers(0, 1 << 40, n)
    d = rng.integers(0, 50, n)
    cases = [c for c in CASES if not args.only or c in args.only.split(",")]
    extra = ["--state-cache-mb", str(args.state_cache_mb)]
    if args.parallelism:
        extra += ["--parallelism", str(args.parallelism)]
    with BenchServer(extra_args=extra) as srv:
        c = srv.connect()
        c.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, g BIGINT, s BIGINT, r BIGINT, d INT)")
        buf = io.StringIO()
        buf.write(
            "".join(
                f"{a}\t{b}\t{a}\t{x}\t{y}\n"
                for a, b, x, y in zip(ids.tolist(), g.tolist(), r.tolist(), d.tolist(), strict=True)
            )
        )
        with c.cursor().copy("COPY t FROM STDIN") as cp:
            cp.write(buf.getvalue())
        c.execute("FLUSH")
        print(f"rows {n}, groups {args.groups}, load {os.getloadavg()[0]:.2f}")
        for name in cases:
            spy = args.profile and srv.profile_start(srv.dir / f"{name}.spy")
            rss0 = _rss_mb(srv.pid, "VmRSS")
            cpu0, t0 = srv.cpu_seconds(), time.perf_counter()
            c.execute(f"CREATE MATERIALIZED VIEW {name} AS {CASES[name]}")
            c.execute("FLUSH")
            cpu, wall = srv.cpu_seconds() - cpu0, time.perf_counter() - t0
            if spy:
                srv.profile_stop()
            rss = _rss_mb(srv.pid, "VmRSS")
            print(
                f"{name:15s} backfill {cpu:6.2f} CPU-s {wall:6.2f} s "
                f"{n / cpu / 1e3:7.1f}k rows/CPU-s  RSS {rss:6.0f} MB (+{rss - rss0:5.0f})  "
                f"load {os.getloadavg()[0]:.2f}"
            )
            ok = c.execute(
                f"SELECT count(*) FROM ((SELECT * FROM {name}) EXCEPT ({CASES[name]})) q"
            ).fetchone()
            assert ok == (0,), f"{name} differs from its query"
            c.execute(f"DROP MATERIALIZED VIEW {name}")
        if args.skip_deletes:
            print(f"peak RSS {_rss_mb(srv.pid, 'VmHWM'):.0f} MB")
            return
        # retractions: every view at once, then a tenth of the rows deleted
        for name in cases:
            c.execute(f"CREATE MATERIALIZED VIEW {name} AS {CASES[name]}")
        c.execute("FLUSH")
        cpu0 = srv.cpu_seconds()
        c.execute("DELETE FROM t WHERE id % 10 = 3")
        c.execute("FLUSH")
        cpu = srv.cpu_seconds() - cpu0
        print(f"delete {n // 10} rows under {len(cases)} views: {cpu:6.2f} CPU-s")
        for name in cases:
            ok = c.execute(
                f"SELECT count(*) FROM ((SELECT * FROM {name}) EXCEPT ({CASES[name]})) q"
            ).fetchone()
            assert ok == (0,), f"{name} differs from its query after the deletes"
        print(f"peak RSS {_rss_mb(srv.pid, 'VmHWM'):.0f} MB")


def _rss_mb(pid: int, field: str) -> float:
    """`field` (VmRSS, VmHWM) of /proc/<pid>/status in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


if __name__ == "__main__":
    main()
