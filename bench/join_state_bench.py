"""Join state under a memory budget: RSS and rows/s of streaming joins through the server.

Through the real server (`bench/_server.py`), as a user loads data. Two workloads:

1. `selfjoin`: a 1M-row table `t (id BIGINT PRIMARY KEY, k BIGINT, v BIGINT)`, then three
   self-join views over it (`a.id = b.id`, a LEFT JOIN on `a.id = b.id + 1`, and
   `a.k = b.id` with a residual condition), each created over the loaded table
   (backfill); prints the server's RSS before and after and its peak (VmHWM).
2. `scale`: two APPEND ONLY tables joined 1:1 on a key (`SELECT ... FROM a JOIN b ON
   a.k = b.id`), the view created first, then `INSERT ... SELECT` batches into both
   tables, each followed by FLUSH, until the join's state is far above the budget;
   prints per batch the rows/s, rows per server CPU-second, RSS and peak, and the size of
   the data directory (the state is on disk).

Both check the views' row counts against their queries at the end.

    python bench/join_state_bench.py selfjoin --rows 1000000 --budget-mb 256
    python bench/join_state_bench.py scale --rows 4000000 --batch 500000 --budget-mb 32
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import report  # noqa: E402
from _server import BenchServer  # noqa: E402

SELF_VIEWS = {
    "j1": "SELECT a.id, a.v, b.v AS bv FROM t a JOIN t b ON a.id = b.id",
    "j2": "SELECT a.id, b.id AS bid FROM t a LEFT JOIN t b ON a.id = b.id + 1",
    "j3": "SELECT a.id, b.v FROM t a JOIN t b ON a.k = b.id AND a.v <> b.v",
}


def rss_mb(pid: int) -> tuple[float, float]:
    """(current RSS, peak RSS) of process `pid` in MB, from /proc."""
    cur = peak = 0.0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            cur = int(line.split()[1]) / 1024
        elif line.startswith("VmHWM:"):
            peak = int(line.split()[1]) / 1024
    return cur, peak


def du_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / (1 << 20)


def selfjoin(rows: int, budget_mb: int, profile: bool) -> None:
    with BenchServer(barrier_ms=1000, extra_args=["--state-cache-mb", str(budget_mb)]) as srv:
        c = srv.connect()
        c.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, k BIGINT, v BIGINT)")
        step = 500_000
        for lo in range(0, rows, step):
            hi = min(rows, lo + step) - 1
            c.execute(
                f"INSERT INTO t SELECT g, (g::BIGINT * 7) % {rows}, g % 13 "
                f"FROM generate_series({lo}, {hi}) AS g"
            )
        c.execute("FLUSH")
        base, _ = rss_mb(srv.pid)
        print(f"{rows:,} rows loaded: rss={base:,.0f} MB", flush=True)
        spy = profile and srv.profile_start(srv.dir / "profile-selfjoin.txt")
        for name, sql in SELF_VIEWS.items():
            t0, c0 = time.perf_counter(), srv.cpu_seconds()
            c.execute(f"CREATE MATERIALIZED VIEW {name} AS {sql}")
            c.execute("FLUSH")
            dt, dc = time.perf_counter() - t0, srv.cpu_seconds() - c0
            cur, peak = rss_mb(srv.pid)
            print(
                f"{name}: {2 * rows / dt:>10,.0f} input rows/s  {2 * rows / dc:>10,.0f} "
                f"rows/CPU-s  rss={cur:,.0f} MB  peak={peak:,.0f} MB",
                flush=True,
            )
        if spy:
            srv.profile_stop()
        for name, sql in SELF_VIEWS.items():
            if name == "j3":  # the ad-hoc engine would plan this ON as a cross product
                continue
            (got,) = c.execute(f"SELECT count(*) FROM {name}").fetchone()  # type: ignore[misc]
            (want,) = c.execute(f"SELECT count(*) FROM ({sql}) q").fetchone()  # type: ignore[misc]
            assert got == want, (name, got, want)
        cur, peak = rss_mb(srv.pid)
        case = f"3 self-join views over {rows:,} rows, budget {budget_mb} MB"
        report("join_state", case + " RSS after", cur, "MB", mode="e2e")
        report("join_state", case + " peak RSS", peak, "MB", mode="e2e")


def scale(rows: int, batch: int, budget_mb: int, profile: bool) -> None:
    with BenchServer(barrier_ms=1000, extra_args=["--state-cache-mb", str(budget_mb)]) as srv:
        c = srv.connect()
        c.execute("CREATE TABLE a (id BIGINT, k BIGINT, v BIGINT) APPEND ONLY")
        c.execute("CREATE TABLE b (id BIGINT, w BIGINT, tag VARCHAR) APPEND ONLY")
        c.execute(
            "CREATE MATERIALIZED VIEW j AS SELECT a.id, a.v, b.w, b.tag FROM a JOIN b ON a.k = b.id"
        )
        spy = profile and srv.profile_start(srv.dir / "profile-scale.txt")
        done = 0
        t_all, cpu_all = time.perf_counter(), srv.cpu_seconds()
        while done < rows:
            n = min(batch, rows - done)
            hi = done + n - 1
            t0, c0 = time.perf_counter(), srv.cpu_seconds()
            # a's keys point at b rows inserted in this or an earlier batch
            c.execute(
                f"INSERT INTO a SELECT g, (g::BIGINT * 7919) % {hi + 1}, g % 100 "
                f"FROM generate_series({done}, {hi}) AS g"
            )
            c.execute(
                f"INSERT INTO b SELECT g, g % 1000, 'tag-' || (g % 97) "
                f"FROM generate_series({done}, {hi}) AS g"
            )
            c.execute("FLUSH")
            dt, dc = time.perf_counter() - t0, srv.cpu_seconds() - c0
            done += n
            cur, peak = rss_mb(srv.pid)
            print(
                f"rows per side={done:>11,}  {2 * n / dt:>10,.0f} rows/s  "
                f"{2 * n / max(dc, 1e-9):>10,.0f} rows/CPU-s  rss={cur:,.0f} MB  "
                f"peak={peak:,.0f} MB  data dir={du_mb(srv.dir / 'data'):,.0f} MB",
                flush=True,
            )
        if spy:
            srv.profile_stop()
        total_s, total_cpu = time.perf_counter() - t_all, srv.cpu_seconds() - cpu_all
        (got,) = c.execute("SELECT count(*) FROM j").fetchone()  # type: ignore[misc]
        assert got == rows, (got, rows)
        cur, peak = rss_mb(srv.pid)
        case = f"1:1 join, {rows:,} rows per side, budget {budget_mb} MB"
        report("join_state", case, 2 * rows / total_s, "rows/s", mode="e2e")
        report("join_state", case, 2 * rows / total_cpu, "rows/CPU-s", mode="e2e")
        report("join_state", case + " peak RSS", peak, "MB", mode="e2e")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workload", choices=["selfjoin", "scale"])
    p.add_argument("--rows", type=int, default=None)
    p.add_argument("--batch", type=int, default=500_000)
    p.add_argument("--budget-mb", type=int, default=256)
    p.add_argument("--profile", action="store_true", help="py-spy the server meanwhile")
    a = p.parse_args()
    if a.workload == "selfjoin":
        selfjoin(a.rows or 1_000_000, a.budget_mb, a.profile)
    else:
        scale(a.rows or 2_000_000, a.batch, a.budget_mb, a.profile)


if __name__ == "__main__":
    main()
