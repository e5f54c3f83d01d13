"""Backfill benchmark: rows/s of a new materialized view over existing data, and what the
other sessions see meanwhile.

Starts a real Swell server (`bench/_server.py`), loads `--rows` rows into a table with
COPY, then creates materialized views over it (a grouped aggregate, a self-join) with a
foreground CREATE on one connection while another connection runs `SELECT 1` in a loop
and samples `rw_catalog.rw_ddl_progress`. Reports per view: the CREATE's wall time and
rows/s, and the p50/p99/max latency of the `SELECT 1`s answered while the job was still
listed below 100%.

    python bench/backfill_bench.py [--rows 1000000]
"""

from __future__ import annotations

import argparse
import io
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _server import BenchServer  # noqa: E402

VIEWS = {
    "agg": "SELECT g, count(*) AS n, sum(v) AS s FROM big GROUP BY g",
    "selfjoin": "SELECT a.id, a.v, b.v AS w FROM big a JOIN big b ON a.id = b.id + 1",
}


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    args = ap.parse_args()
    with BenchServer() as srv:
        c = srv.connect()
        c.execute("CREATE TABLE big (id INT PRIMARY KEY, g INT, v BIGINT)")
        buf = io.StringIO()
        for i in range(args.rows):
            buf.write(f"{i}\t{i % 1000}\t{i * 7 % 10007}\n")
        with c.cursor().copy("COPY big FROM STDIN") as cp:
            cp.write(buf.getvalue())
        c.execute("FLUSH")
        probe = srv.connect()
        for name, query in VIEWS.items():
            stop = threading.Event()
            lat: list[float] = []

            def reads(stop: threading.Event = stop, lat: list[float] = lat) -> None:
                while not stop.is_set():
                    t = time.perf_counter()
                    probe.execute("SELECT 1").fetchone()
                    took = time.perf_counter() - t
                    row = probe.execute("SELECT progress FROM rw_ddl_progress").fetchone()
                    if row is not None:  # answered while the backfill was running
                        lat.append(took)
                    time.sleep(0.01)

            th = threading.Thread(target=reads)
            th.start()
            t0 = time.perf_counter()
            c.execute(f"CREATE MATERIALIZED VIEW {name} AS {query}")
            took = time.perf_counter() - t0
            stop.set()
            th.join()
            print(
                f"{name}: rows={args.rows} create_s={took:.2f} rows/s={args.rows / took:,.0f} "
                f"select1_during_backfill n={len(lat)} p50_ms={_pct(lat, 0.5) * 1000:.1f} "
                f"p99_ms={_pct(lat, 0.99) * 1000:.1f} max_ms={max(lat, default=0) * 1000:.1f}"
            )


if __name__ == "__main__":
    main()
