"""Rows per CPU-second into a per-group top-N view over many groups, under a state budget.

`--retracting`: the table has a primary key (so it can delete and update), which plans the
retracting top-N (every row kept in RocksDB in window order, a few per group cached);
after the load, one DELETE of the rows with the highest values (the windows' first rows
in most groups) makes those groups refill their windows from the store.

Through the real server (`bench/_server.py`), as a user loads data: an APPEND ONLY table,
`CREATE MATERIALIZED VIEW top AS SELECT g, v, id FROM (SELECT ..., row_number() OVER
(PARTITION BY g ORDER BY v DESC, id) AS rn FROM t) WHERE rn <= 3` first, then
`INSERT INTO t SELECT ... FROM generate_series(...)` batches that spread over every
group, each followed by FLUSH. After every batch it prints the rows so far, the batch's
rows/s (wall clock) and per server CPU-second, the server's RSS and its peak (VmHWM). At
the end (after the figures are taken) it checks the view against its query.

    python bench/topn_state_bench.py --groups 1000000 --rows 3000000 --budget-mb 256
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import report  # noqa: E402
from _server import BenchServer  # noqa: E402
from state_scale_bench import rss_mb  # noqa: E402

LIMIT = 3
QUERY = (
    "SELECT g, v, id FROM (SELECT g, v, id, row_number() OVER "
    "(PARTITION BY g ORDER BY v DESC, id) AS rn FROM t) AS r WHERE rn <= {n}"
)


def run(groups: int, rows: int, batch: int, budget_mb: int, retracting: bool = False) -> None:
    args = ["--state-cache-mb", str(budget_mb)]
    with BenchServer(barrier_ms=1000, extra_args=args) as srv:
        c = srv.connect()
        if retracting:
            c.execute("CREATE TABLE t (g BIGINT, v BIGINT, id BIGINT PRIMARY KEY)")
        else:
            c.execute("CREATE TABLE t (g BIGINT, v BIGINT, id BIGINT) APPEND ONLY")
        c.execute(f"CREATE MATERIALIZED VIEW top AS {QUERY.format(n=LIMIT)}")
        done = 0
        t_all = time.perf_counter()
        cpu_all = srv.cpu_seconds()
        while done < rows:
            n = min(batch, rows - done)
            t0, c0 = time.perf_counter(), srv.cpu_seconds()
            c.execute(
                f"INSERT INTO t SELECT x % {groups}, (x::bigint * 7919) % 100003, x "
                f"FROM generate_series({done}, {done + n - 1}) AS x"
            )
            c.execute("FLUSH")
            dt, dc = time.perf_counter() - t0, srv.cpu_seconds() - c0
            done += n
            cur, peak = rss_mb(srv.pid)
            print(
                f"rows={done:>11,}  {n / dt:>10,.0f} rows/s  {n / max(dc, 1e-9):>10,.0f} "
                f"rows/CPU-s  rss={cur:,.0f} MB  peak={peak:,.0f} MB",
                flush=True,
            )
        total_s = time.perf_counter() - t_all
        total_cpu = srv.cpu_seconds() - cpu_all
        if retracting:  # most groups lose window rows: windows refill from the store
            t0, c0 = time.perf_counter(), srv.cpu_seconds()
            c.execute("DELETE FROM t WHERE v >= 95000")
            c.execute("FLUSH")
            dt, dc = time.perf_counter() - t0, srv.cpu_seconds() - c0
            print(f"delete of the top 5% of rows: {dt:.1f} s wall, {dc:.1f} CPU-s", flush=True)
        cur, peak = rss_mb(srv.pid)
        got = c.execute("SELECT count(*), sum(v), sum(id) FROM top").fetchone()
        want = c.execute(
            f"SELECT count(*), sum(v), sum(id) FROM ({QUERY.format(n=LIMIT)}) AS q"
        ).fetchone()
        assert got == want, (got, want)
        kind = "retracting" if retracting else "append-only"
        case = f"{kind}, {groups:,} groups, {rows:,} rows, top {LIMIT}, budget {budget_mb} MB"
        report("topn_state", case, rows / total_s, "rows/s", mode="e2e")
        report("topn_state", case, rows / total_cpu, "rows/CPU-s", mode="e2e")
        report("topn_state", case + " peak RSS", peak, "MB", mode="e2e")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--groups", type=int, default=1_000_000)
    p.add_argument("--rows", type=int, default=3_000_000)
    p.add_argument("--batch", type=int, default=500_000)
    p.add_argument("--budget-mb", type=int, nargs="+", default=[256])
    p.add_argument("--retracting", action="store_true", help="a primary-key table")
    a = p.parse_args()
    for mb in a.budget_mb:
        run(a.groups, a.rows, a.batch, mb, a.retracting)


if __name__ == "__main__":
    main()
