"""COPY FROM STDIN throughput through the real server: rows per server CPU-second.

What a user does to bulk-load: `COPY t FROM STDIN WITH (FORMAT csv)` from psycopg in
batches of `--batch` rows, into `CREATE TABLE t (id BIGINT, k BIGINT, v BIGINT) APPEND
ONLY`, with FLUSH after each batch (so the rows are in the table's state, not only in the
WAL, before the next batch). The data (`id,k,v` with `--keys` distinct k) is made by the
client before the clock starts; the server's CPU seconds (all threads, from /proc) are
read before the first and after the last batch. Formats: csv, text and binary (psycopg's
`FORMAT binary` rows built by numpy), plus a wider mixed-type table in CSV (varchar with
quotes, numeric, timestamptz, jsonb, NULLs) so the figure is not only about integers.

`--view` also creates `SELECT k, count(*), sum(v), max(v) FROM t GROUP BY k` first (the
side-by-side job); without it the figure is ingest alone.

    python bench/copy_bench.py [--rows 1000000] [--batch 100000] [--formats csv,text,binary]
                               [--view] [--profile]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import report  # noqa: E402
from _server import BenchServer  # noqa: E402

TARGET = 1_500_000  # rows per server CPU-second, COPY into an APPEND ONLY table


def csv_batches(rows: int, batch: int, keys: int, sep: str = ",") -> list[bytes]:
    rng = np.random.default_rng(7)
    out = []
    for start in range(0, rows, batch):
        n = min(batch, rows - start)
        ids = np.arange(start, start + n)
        k = rng.integers(0, keys, n)
        v = rng.integers(0, 1_000_000, n)
        lines = np.char.add(
            np.char.add(np.char.add(ids.astype(str), sep), np.char.add(k.astype(str), sep)),
            v.astype(str),
        )
        out.append(("\n".join(lines.tolist()) + "\n").encode())
    return out


_BIN_ROW = np.dtype([("n", ">i2"), ("l0", ">i4"), ("a", ">i8"), ("l1", ">i4"), ("b", ">i8"),
                     ("l2", ">i4"), ("c", ">i8")])  # fmt: skip


def binary_batches(rows: int, batch: int, keys: int) -> list[bytes]:
    """PostgreSQL binary COPY streams (signature, flags, header extension, tuples, -1)."""
    rng = np.random.default_rng(7)
    head = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"
    out = []
    for start in range(0, rows, batch):
        n = min(batch, rows - start)
        a = np.zeros(n, dtype=_BIN_ROW)
        a["n"] = 3
        a["l0"] = a["l1"] = a["l2"] = 8
        a["a"] = np.arange(start, start + n)
        a["b"] = rng.integers(0, keys, n)
        a["c"] = rng.integers(0, 1_000_000, n)
        out.append(head + a.tobytes() + b"\xff\xff")
    return out


def mixed_batches(rows: int, batch: int) -> list[bytes]:
    rng = np.random.default_rng(11)
    out = []
    for start in range(0, rows, batch):
        n = min(batch, rows - start)
        lines = []
        for i in range(start, start + n):
            r = int(rng.integers(0, 1000))
            name = '"O\'Brien, ""the"" ' + str(r) + '"' if r % 7 == 0 else f"user{r}"
            price = "" if r % 13 == 0 else f"{r}.{i % 100:02d}"
            ts = f"2024-05-{1 + i % 28:02d} 10:{i % 60:02d}:00+02"
            doc = '"{""a"": ' + str(r) + ', ""tags"": [""x"", ""y""]}"'
            lines.append(f"{i},{name},{price},{ts},{doc}")
        out.append(("\n".join(lines) + "\n").encode())
    return out


def run_case(
    srv: BenchServer, label: str, ddl: str, copy_sql: str, batches: list[bytes], rows: int,
    view: str | None, profile: bool,
) -> None:  # fmt: skip
    with srv.connect() as conn:
        conn.execute(ddl)
        if view:
            conn.execute(view)
        spied = profile and srv.profile_start(srv.dir / f"{label}.spy")
        c0, w0 = srv.cpu_seconds(), time.perf_counter()
        with conn.cursor() as cur:
            for data in batches:
                with cur.copy(copy_sql) as cp:
                    cp.write(data)
                conn.execute("FLUSH")
        cpu, wall = srv.cpu_seconds() - c0, time.perf_counter() - w0
        if spied:
            srv.profile_stop()
        table = ddl.split()[2]
        got = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        assert got is not None and got[0] == rows, (got, rows)
    report(
        "copy",
        label,
        rows / cpu,
        "rows/CPU-s",
        mode="e2e",
        target=TARGET if view is None and "id,k,v" in label else None,
        note=f"wall {rows / wall:,.0f} rows/s, server cpu {cpu:.2f}s, {rows:,} rows",
    )


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=300_000)
    ap.add_argument("--full", action="store_true", help="1M rows (3M with --rows unset)")
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--keys", type=int, default=10)
    ap.add_argument("--formats", default="csv,text,binary,mixed")
    ap.add_argument("--view", action="store_true", help="GROUP BY k view over the table")
    ap.add_argument("--profile", action="store_true", help="py-spy the server per case")
    a = ap.parse_args(argv)
    rows = 2_000_000 if a.full else a.rows
    fmts = a.formats.split(",")
    with tempfile.TemporaryDirectory():
        with BenchServer() as srv:
            for fmt in fmts:
                t = f"t_{fmt}"
                view = (
                    f"CREATE MATERIALIZED VIEW {t}_v AS SELECT k, count(*) AS n, sum(v) AS s, "
                    f"max(v) AS m FROM {t} GROUP BY k"
                    if a.view and fmt != "mixed"
                    else None
                )
                ddl = f"CREATE TABLE {t} (id BIGINT, k BIGINT, v BIGINT) APPEND ONLY"
                if fmt == "csv":
                    batches = csv_batches(rows, a.batch, a.keys)
                    sql = f"COPY {t} FROM STDIN WITH (FORMAT csv)"
                elif fmt == "text":
                    batches = csv_batches(rows, a.batch, a.keys, "\t")
                    sql = f"COPY {t} FROM STDIN"
                elif fmt == "binary":
                    batches = binary_batches(rows, a.batch, a.keys)
                    sql = f"COPY {t} FROM STDIN WITH (FORMAT binary)"
                elif fmt == "mixed":
                    n = rows // 4
                    batches = mixed_batches(n, a.batch)
                    ddl = (
                        f"CREATE TABLE {t} (id BIGINT, name VARCHAR, price NUMERIC, "
                        "ts TIMESTAMPTZ, doc JSONB) APPEND ONLY"
                    )
                    sql = f"COPY {t} FROM STDIN WITH (FORMAT csv)"
                    run_case(srv, f"{fmt} csv 5 columns, append only", ddl, sql, batches, n,
                             None, a.profile)  # fmt: skip
                    continue
                else:
                    sys.exit(f"unknown format {fmt}")
                label = f"{fmt} id,k,v, append only" + (f", GROUP BY view {a.keys} keys"
                                                        if view else "")  # fmt: skip
                run_case(srv, label, ddl, sql, batches, rows, view, a.profile)


if __name__ == "__main__":
    main()
