"""PostgreSQL CDC benchmark: changes/s from PostgreSQL into a GROUP BY materialized view.

Setup (not measured): a private PostgreSQL 15 server with `wal_level = logical`
(tests/harness/postgres.py) holding `--rows` rows in `t (id INT PRIMARY KEY, g INT, v
BIGINT)`. Measured on a real Swell server (bench/_server.py):

1. snapshot: `CREATE SOURCE pg ...`, `CREATE TABLE t (...) FROM pg TABLE 'public.t'`,
   `CREATE MATERIALIZED VIEW agg AS SELECT g, count(*), sum(v) FROM t GROUP BY g`, until
   the view counts every row;
2. streaming: `--changes` changes committed upstream (transactions of 1000 statements:
   half inserts, half updates of existing rows), until the view shows the last one.

Reported: rows (snapshot) and changes (streaming) per Swell CPU-second, and per wall
second in the note. PostgreSQL's own processes (the walsender decoding the WAL) are not
counted.

    python bench/postgres_cdc_bench.py [--rows 200000] [--changes 100000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from _report import report  # noqa: E402
from _server import BenchServer  # noqa: E402

from harness.postgres import private_postgres  # noqa: E402


def wait_sum(conn: psycopg.Connection, want: tuple[int, int]) -> None:
    while True:
        row = conn.execute("SELECT coalesce(sum(n), 0), coalesce(sum(s), 0) FROM agg").fetchone()
        if row is not None and (int(row[0]), int(row[1])) == want:
            return
        time.sleep(0.02)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--changes", type=int, default=100_000)
    ap.add_argument("--profile", action="store_true", help="py-spy the server")
    a = ap.parse_args(argv)
    with private_postgres({"wal_level": "logical"}) as port:
        up = psycopg.connect(host="127.0.0.1", port=port, user="root", dbname="postgres",
                             autocommit=True)  # fmt: skip
        up.execute("CREATE TABLE t (id INT PRIMARY KEY, g INT, v BIGINT)")
        up.execute("INSERT INTO t SELECT i, i %% 100, i FROM generate_series(1, %s) i", (a.rows,))
        with BenchServer() as srv, srv.connect() as conn:
            spied = a.profile and srv.profile_start(srv.dir / "cdc.spy")
            c0, w0 = srv.cpu_seconds(), time.perf_counter()
            conn.execute(
                "CREATE SOURCE pg WITH (connector = 'postgres-cdc', hostname = '127.0.0.1', "
                f"port = '{port}', username = 'root', password = '', database.name = 'postgres')"
            )
            conn.execute("CREATE TABLE t (id INT, g INT, v BIGINT, PRIMARY KEY (id)) "
                         "FROM pg TABLE 'public.t'")  # fmt: skip
            conn.execute("CREATE MATERIALIZED VIEW agg AS SELECT g, count(*) AS n, "
                         "sum(v) AS s FROM t GROUP BY g")  # fmt: skip
            n, s = a.rows, a.rows * (a.rows + 1) // 2
            wait_sum(conn, (n, s))
            cpu, wall = srv.cpu_seconds() - c0, time.perf_counter() - w0
            report("postgres_cdc", "snapshot of a table into a GROUP BY view", a.rows / cpu,
                   "rows/CPU-s", mode="e2e",
                   note=f"{a.rows:,} rows, wall {a.rows / wall:,.0f} rows/s")  # fmt: skip
            c0, w0 = srv.cpu_seconds(), time.perf_counter()
            nxt, done = a.rows, 0
            with up.cursor() as cur:
                while done < a.changes:
                    k = min(1000, a.changes - done)
                    ins = k // 2
                    with up.transaction():
                        cur.execute(
                            "INSERT INTO t SELECT i, i %% 100, 1 FROM generate_series(%s, %s) i",
                            (nxt + 1, nxt + ins),
                        )
                        cur.execute(
                            "UPDATE t SET v = v + 1 WHERE id BETWEEN %s AND %s",
                            (done + 1, done + k - ins),
                        )
                    nxt += ins
                    n += ins
                    s += ins + (k - ins)
                    done += k
            wait_sum(conn, (n, s))
            cpu, wall = srv.cpu_seconds() - c0, time.perf_counter() - w0
            if spied:
                srv.profile_stop()
            report("postgres_cdc", "streamed changes (inserts, updates) into a GROUP BY view",
                   a.changes / cpu, "events/CPU-s", mode="e2e",
                   note=f"{a.changes:,} changes, wall {a.changes / wall:,.0f} changes/s "
                   "(includes committing them upstream)")  # fmt: skip
        up.close()


if __name__ == "__main__":
    main()
