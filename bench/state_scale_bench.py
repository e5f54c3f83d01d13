"""Groups per second into a GROUP BY view as distinct keys grow, under a state budget.

Through the real server (`bench/_server.py`), as a user loads data: an APPEND ONLY table,
`CREATE MATERIALIZED VIEW g AS SELECT k, count(*), sum(v) FROM t GROUP BY k` first, then
`INSERT INTO t SELECT ... FROM generate_series(...)` batches of new distinct keys, each
followed by FLUSH. After every batch it prints the keys so far, the batch's groups/s
(wall clock) and per server CPU-second, the server's RSS and its peak (VmHWM), each
summed over the server and its stream worker processes (`--parallelism`, passed to the
server when given). At the end it checks the view against its query (count and sum over
the whole view).

    python bench/state_scale_bench.py --keys 2000000 --batch 500000 --budget-mb 256
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import report  # noqa: E402
from _server import BenchServer, child_pids  # noqa: E402


def rss_mb(pid: int) -> tuple[float, float]:
    """(current RSS, peak RSS) in MB of process `pid` plus its children (stream workers),
    from /proc; the peak is the sum of each process's own peak (an upper bound)."""
    cur = peak = 0.0
    for p in [pid, *child_pids(pid)]:
        try:
            lines = Path(f"/proc/{p}/status").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            if line.startswith("VmRSS:"):
                cur += int(line.split()[1]) / 1024
            elif line.startswith("VmHWM:"):
                peak += int(line.split()[1]) / 1024
    return cur, peak


def run(
    keys: int, batch: int, budget_mb: int, profile: bool = False, parallelism: int | None = None
) -> None:
    args = ["--state-cache-mb", str(budget_mb)]
    if parallelism is not None:
        args += ["--parallelism", str(parallelism)]
    with BenchServer(barrier_ms=1000, extra_args=args) as srv:
        c = srv.connect()
        c.execute("CREATE TABLE t (k BIGINT, v BIGINT) APPEND ONLY")
        c.execute(
            "CREATE MATERIALIZED VIEW g AS SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k"
        )
        spy = profile and srv.profile_start(srv.dir / f"profile-{budget_mb}.txt")
        done = 0
        t_all = time.perf_counter()
        cpu_all = srv.cpu_seconds()
        while done < keys:
            n = min(batch, keys - done)
            t0, c0 = time.perf_counter(), srv.cpu_seconds()
            c.execute(
                f"INSERT INTO t SELECT g, g % 7 FROM generate_series({done}, {done + n - 1}) AS g"
            )
            c.execute("FLUSH")
            dt, dc = time.perf_counter() - t0, srv.cpu_seconds() - c0
            done += n
            cur, peak = rss_mb(srv.pid)
            print(
                f"keys={done:>11,}  {n / dt:>10,.0f} groups/s  {n / max(dc, 1e-9):>10,.0f} "
                f"groups/CPU-s  rss={cur:,.0f} MB  peak={peak:,.0f} MB",
                flush=True,
            )
        if spy:
            srv.profile_stop()
        total_s = time.perf_counter() - t_all
        total_cpu = srv.cpu_seconds() - cpu_all
        cur, peak = rss_mb(srv.pid)
        (cnt, tot) = c.execute("SELECT count(*), sum(n) FROM g").fetchone()  # type: ignore[misc]
        assert cnt == keys and tot == keys, (cnt, tot)
        case = f"{keys:,} keys, budget {budget_mb} MB"
        if parallelism is not None:
            case += f", parallelism {parallelism}"
        report("state_scale", case, keys / total_s, "groups/s", mode="e2e")
        report("state_scale", case, keys / total_cpu, "groups/CPU-s", mode="e2e")
        report("state_scale", case + " peak RSS", peak, "MB", mode="e2e")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--keys", type=int, default=1_000_000)
    p.add_argument("--batch", type=int, default=500_000)
    p.add_argument("--budget-mb", type=int, nargs="+", default=[256])
    p.add_argument("--full", action="store_true", help="10M keys at 256 MB and 2 GB")
    p.add_argument("--profile", action="store_true", help="py-spy the server meanwhile")
    p.add_argument("--parallelism", type=int, help="the server's --parallelism")
    a = p.parse_args()
    if a.full:
        a.keys, a.budget_mb = 10_000_000, [256, 2048]
    for mb in a.budget_mb:
        run(a.keys, a.batch, mb, a.profile, a.parallelism)


if __name__ == "__main__":
    main()
