"""Point and range lookups with and without an index, in milliseconds per query.

Usage: .venv/bin/python bench/index_bench.py [--rows N] [--queries N]

What runs: the engine in this process (`open_database`, a session: parse, plan, execute
and the rows as Python tuples, as pgwire gets them), no sockets. Two identical tables

    CREATE TABLE t_scan (id BIGINT PRIMARY KEY, k BIGINT, v VARCHAR);
    CREATE TABLE t_index (...same...);  CREATE INDEX t_index_k ON t_index (k);

get `--rows` rows (1,000,000 by default; k uniform in [0, rows), so a point lookup finds
about one row) by COPY in 100,000-row epochs; then the same `--queries` random
`SELECT * FROM t WHERE k = X` (point) and `... WHERE k BETWEEN X AND Y`, Y = X + 100 (range,
about 100 rows) run against both tables, each pair checked for equal results. The first
lookups after a barrier sort the index's new segments (kept per immutable segment), so
the figures are after one warm-up query per table, as a steady reader sees them.

Figures: p50 and mean latency per query shape and table, the speedup of the index, and
the time CREATE INDEX took over the loaded table (its backfill).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _report import report  # noqa: E402

from engine.database import Config, open_database  # noqa: E402

EPOCH = 100_000


def _load(s: object, table: str, rows: int, rng: np.random.Generator) -> None:
    for lo in range(0, rows, EPOCH):
        n = min(EPOCH, rows - lo)
        ks = rng.integers(0, rows, n, dtype=np.int64)
        cols = [
            pa.array(np.arange(lo, lo + n, dtype=np.int64)),
            pa.array(ks),
            pa.array([f"v{x}" for x in ks]),
        ]
        s.execute_simple(f"COPY {table} FROM STDIN")  # type: ignore[attr-defined]
        s.copy_in_columns(cols)  # type: ignore[attr-defined]
        s.execute_simple("FLUSH")  # type: ignore[attr-defined]


def _timed(s: object, sql: str) -> tuple[float, list[tuple[object, ...]]]:
    t0 = time.perf_counter()
    res = s.execute_simple(sql)[0].rows  # type: ignore[attr-defined]
    return (time.perf_counter() - t0) * 1000.0, res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=200)
    args = ap.parse_args()
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as d:
        db = open_database(Config(data_dir=Path(d), barrier_interval_ms=3_600_000))
        try:
            s = db.connect("root", "dev")
            for t in ("t_scan", "t_index"):
                s.execute_simple(f"CREATE TABLE {t} (id BIGINT PRIMARY KEY, k BIGINT, v VARCHAR)")
            _load(s, "t_scan", args.rows, np.random.default_rng(1))
            _load(s, "t_index", args.rows, np.random.default_rng(1))
            t0 = time.perf_counter()
            s.execute_simple("CREATE INDEX t_index_k ON t_index (k)")
            created = time.perf_counter() - t0
            plan = s.execute_simple("EXPLAIN SELECT * FROM t_index WHERE k = 1")[0].rows
            if not any("IndexScan" in r[0] for r in plan):
                raise SystemExit("the index is not used")
            shapes = {
                "point": "SELECT * FROM {t} WHERE k = {x}",
                "range": "SELECT * FROM {t} WHERE k BETWEEN {x} AND {y}",
            }
            for shape, q in shapes.items():
                xs = rng.integers(0, args.rows, args.queries)
                lat: dict[str, list[float]] = {"t_scan": [], "t_index": []}
                for t in lat:  # warm-up: pins built, the index's segments sorted
                    _timed(s, q.format(t=t, x=0, y=100))
                for x in xs:
                    ms_scan, a = _timed(s, q.format(t="t_scan", x=x, y=x + 100))
                    ms_index, b = _timed(s, q.format(t="t_index", x=x, y=x + 100))
                    if sorted(a) != sorted(b):
                        raise SystemExit(f"{shape} k={x}: the index answer differs from the scan")
                    lat["t_scan"].append(ms_scan)
                    lat["t_index"].append(ms_index)
                for t, v in lat.items():
                    label = "index" if t == "t_index" else "scan"
                    note = f"mean {statistics.fmean(v):.2f} ms, {args.rows:,} rows"
                    p50 = statistics.median(v)
                    report(
                        "index", f"{shape} p50 ({label})", p50, "ms", mode="in-process", note=note
                    )
                speed = statistics.median(lat["t_scan"]) / statistics.median(lat["t_index"])
                report("index", f"{shape} lookup speedup", speed, "x", mode="in-process")
            report("index", "CREATE INDEX (backfill)", created, "s", mode="in-process",
                   note=f"{args.rows:,} rows")  # fmt: skip
        finally:
            db.close()


if __name__ == "__main__":
    main()
