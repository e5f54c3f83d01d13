"""GROUP BY benchmark: rows/s through a GROUP BY materialized view, and FLUSH-to-visible time.

Engine mode: the table's change chunks are queued straight into the runtime (the same call
INSERT makes after evaluating its VALUES), so the figure is the dataflow's own cost:
WAL append, table storage, aggregation, view storage, and the RocksDB checkpoint.

    python bench/groupby_bench.py [--rows 1000000] [--keys 10 100000] [--batch 100000]

Prints wall and process-CPU seconds per phase and rows/s (by CPU and by wall).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.chunk import StreamChunk  # noqa: E402
from engine.database import Config, open_database  # noqa: E402
from engine.types import arrow_schema  # noqa: E402


def run(rows: int, keys: int, batch: int, aggs: str, append_only: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        db = open_database(Config(data_dir=Path(d), barrier_interval_ms=3_600_000))
        try:
            s = db.connect("root", "dev")
            ao = " APPEND ONLY" if append_only else ""
            s.execute_simple(f"CREATE TABLE t (k INT, v INT){ao}")
            s.execute_simple(f"CREATE MATERIALIZED VIEW mv AS SELECT k, {aggs} FROM t GROUP BY k")
            rel = db.catalog.get("t")
            rt = db.runtime
            schema = arrow_schema(rel.fields)
            rng = np.random.default_rng(7)
            chunks = []
            for start in range(0, rows, batch):
                n = min(batch, rows - start)
                arrays = [
                    pa.array(rng.integers(0, keys, n, dtype=np.int32)),
                    pa.array(rng.integers(0, 1000, n, dtype=np.int32)),
                    pa.array(rt.row_ids.take(n)),
                ]
                chunks.append(
                    StreamChunk.inserts(pa.RecordBatch.from_arrays(arrays, schema=schema))
                )
            c0, w0 = time.process_time(), time.perf_counter()
            for ch in chunks:
                rt.write(rel.id, ch)
                rt.barrier()
            db.wal.wait_durable(db.wal.last_seq)
            c1, w1 = time.process_time(), time.perf_counter()
            # freshness: one more small insert, then FLUSH until visible
            small = pa.RecordBatch.from_arrays(
                [
                    pa.array([1], pa.int32()),
                    pa.array([1], pa.int32()),
                    pa.array(rt.row_ids.take(1)),
                ],
                schema=schema,
            )
            rt.write(rel.id, StreamChunk.inserts(small))
            f0 = time.perf_counter()
            s.execute_simple("FLUSH")
            f1 = time.perf_counter()
            got = s.execute_simple("SELECT count(*), sum(c) FROM mv")[0].rows[0]
            assert got[1] == rows + 1, got
        finally:
            db.close()
    cpu, wall = c1 - c0, w1 - w0
    return {
        "cpu_s": cpu,
        "wall_s": wall,
        "rows_per_cpu_s": rows / cpu,
        "rows_per_wall_s": rows / wall,
        "flush_ms": (f1 - f0) * 1000,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--keys", type=int, nargs="+", default=[10, 100_000])
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--aggs", default="count(*) AS c, sum(v) AS s")
    ap.add_argument("--append-only", action="store_true")
    a = ap.parse_args()
    for k in a.keys:
        r = run(a.rows, k, a.batch, a.aggs, a.append_only)
        print(
            f"keys={k:>7} rows={a.rows} aggs=[{a.aggs}] append_only={a.append_only}: "
            f"{r['rows_per_cpu_s']:,.0f} rows/CPU-s, {r['rows_per_wall_s']:,.0f} rows/s wall, "
            f"cpu={r['cpu_s']:.2f}s wall={r['wall_s']:.2f}s, FLUSH->visible {r['flush_ms']:.1f} ms",
            flush=True,
        )


if __name__ == "__main__":
    main()
