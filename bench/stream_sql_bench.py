"""Join, tumble and top3 through the whole engine, driven by SQL, in events per CPU-second.

Usage: .venv/bin/python bench/stream_sql_bench.py [--events N] [--epoch N]
           [--ingest copy|wire|arrow] [--only join,tumble,top3] [--profile]

What runs: the objects the server uses (`open_database`, a `SwellSession`, the runtime),
in this process, without sockets. Each workload gets a fresh database with the tables

    CREATE TABLE orders (id INT PRIMARY KEY, user_id INT, amount DOUBLE PRECISION,
                         ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);
    CREATE TABLE users (user_id INT PRIMARY KEY, region VARCHAR);  -- 10,000 users

and one materialized view:

* `join`: `SELECT o.id, o.user_id, o.amount, u.region FROM orders o JOIN users u ON
  o.user_id = u.user_id`, with updates on both sides: from the second epoch on, 10% of
  each epoch's order events rewrite earlier orders (a COPY row on an existing primary key
  overwrites it, so the table emits U-/U+ pairs), and one `UPDATE users SET region = ...
  WHERE user_id % 100 = k` per epoch moves 1% of the users to another region;
* `tumble`: `sales_5m` (5-minute TUMBLE over orders joined to users, sum per
  window and region; event time advances 100 events per second with up to 5 s of
  disorder, so the watermark `ts - 5 s` trails the stream);
* `top3`: `top3` (row_number() per user_id ORDER BY amount DESC, rn <= 3).

Events are the order rows written (1,000,000 by default); `--epoch` of them (20,000) are
written per epoch, then `FLUSH` runs the barrier. Ingestion paths (`--ingest`):

* `copy` (default): `COPY orders FROM STDIN` + `Session.copy_in_columns(columns)` with
  the Arrow columns pgwire hands over after parsing CopyData (engine/handlers/copy_in.py:
  NOT NULL check, one WAL record, wait for its fsync);
* `wire`: the same plus pgwire's own CopyData parse (`pgwire.copy_columns.parse_copy`)
  of tab-separated text, i.e. everything but the socket;
* `arrow`: `engine.handlers.dml.write_inserts` with Arrow columns (what COPY and
  multi-row INSERT call once their values are columns; the webhook path is similar).

After the last epoch the view is compared with the same query run ad hoc (batch
executor over the committed tables); a mismatch fails the run.

CPU figures are `time.process_time()` of the whole process over the timed loop (data
generation and the final check excluded). The split: `ingest` (the COPY/UPDATE calls,
this thread), the barrier's phases from `Runtime.cpu` (engine/stream/cpu.py, thread CPU):
`tables` (DML chunks through each table's materialization), `operators` (the views'
operators except their materialization; per class below), `view mat` (the views'
ColumnarMaterializeOp), `commit` (checkpoint encode + synced RocksDB write), `gc` (the
per-epoch gc.freeze), and `other` (the rest: other threads - polars' pool, RocksDB's
background threads, the WAL writer - and FLUSH/COPY statement dispatch). The `threads`
line is CPU per thread over the run (/proc, 10 ms ticks; the main thread's figure also
holds the untimed data generation).
`op-only` is events per CPU-second of the operators alone, for comparison with the
operator benchmarks (bench/join_bench.py, bench/tumble_bench.py).

Target: at least 200,000 events/s per core on each workload.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.database import Config, open_database  # noqa: E402

N_USERS = 10_000
N_REGIONS = 7
T0 = dt.datetime(2024, 1, 1)
T0_US = int(T0.replace(tzinfo=dt.UTC).timestamp() * 1_000_000)
EVENT_GAP_US = 10_000  # 100 events per second of event time
DISORDER_US = 5_000_000

TABLES = (
    "CREATE TABLE orders (id INT PRIMARY KEY, user_id INT, amount DOUBLE PRECISION, "
    "ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)",
    "CREATE TABLE users (user_id INT PRIMARY KEY, region VARCHAR)",
)
QUERIES = {
    "join": "SELECT o.id, o.user_id, o.amount, u.region FROM orders o "
    "JOIN users u ON o.user_id = u.user_id",
    "tumble": "SELECT window_start, u.region, sum(o.amount) AS total "
    "FROM TUMBLE(orders, ts, INTERVAL '5' MINUTE) AS o JOIN users u "
    "ON o.user_id = u.user_id GROUP BY window_start, u.region",
    "top3": "SELECT * FROM (SELECT user_id, amount, row_number() OVER "
    "(PARTITION BY user_id ORDER BY amount DESC) AS rn FROM orders) WHERE rn <= 3",
}
MAT_OPS = ("ColumnarMaterializeOp", "MaterializeOp")


class Orders:
    """The order stream: new orders, and (join workload) rewrites of earlier ones."""

    def __init__(self, updates: bool, seed: int = 3) -> None:
        self.rng = np.random.default_rng(seed)
        self.updates = updates
        self.next_id = 0
        self.user = np.empty(0, np.int32)
        self.amount = np.empty(0)
        self.ts = np.empty(0, np.int64)

    def epoch(self, n: int) -> dict[str, np.ndarray]:
        rng = self.rng
        n_upd = n // 10 if self.updates and self.next_id > n else 0
        n_new = n - n_upd
        prev = self.next_id
        ids = np.arange(self.next_id, self.next_id + n_new, dtype=np.int32)
        users = rng.integers(0, N_USERS, n_new, dtype=np.int32)
        amounts = np.round(rng.random(n_new) * 100, 2)
        ts = T0_US + ids.astype(np.int64) * EVENT_GAP_US - rng.integers(0, DISORDER_US, n_new)
        self.user = np.concatenate([self.user, users])
        self.amount = np.concatenate([self.amount, amounts])
        self.ts = np.concatenate([self.ts, ts])
        self.next_id += n_new
        if n_upd:
            old = rng.choice(prev, n_upd, replace=False).astype(np.int32)
            self.user[old] = rng.integers(0, N_USERS, n_upd, dtype=np.int32)
            self.amount[old] += 1
            ids = np.concatenate([ids, old])
            users = np.concatenate([users, self.user[old]])
            amounts = np.concatenate([amounts, self.amount[old]])
            ts = np.concatenate([ts, self.ts[old]])
        return {"id": ids, "user_id": users, "amount": amounts, "ts": ts}


def as_rows(cols: dict[str, np.ndarray]) -> list[tuple[Any, ...]]:
    """The Python rows pgwire's CopyData parser would produce (timestamps as datetime)."""
    ts = [T0 + dt.timedelta(microseconds=int(u - T0_US)) for u in cols["ts"].tolist()]
    return list(zip(cols["id"].tolist(), cols["user_id"].tolist(), cols["amount"].tolist(), ts))


def as_text(rows: list[tuple[Any, ...]]) -> str:
    """COPY text format: tab-separated lines, as psql's \\copy sends them."""
    return "".join(f"{a}\t{b}\t{c!r}\t{d.isoformat(' ')}\n" for a, b, c, d in rows)


class Ingest:
    """Writes one epoch's orders through the chosen path (see the module docstring)."""

    def __init__(self, db: Any, session: Any, mode: str) -> None:
        self.db, self.s, self.mode = db, session, mode
        self.rel = db.catalog.get("orders")

    def prepare(self, cols: dict[str, np.ndarray]) -> Any:
        if self.mode in ("arrow", "copy"):
            ts = pa.array(cols["ts"]).cast(pa.timestamp("us"))
            return [pa.array(cols["id"]), pa.array(cols["user_id"]), pa.array(cols["amount"]), ts]
        return as_text(as_rows(cols)).encode()

    def write(self, payload: Any) -> None:
        if self.mode == "arrow":
            from engine.handlers.dml import write_inserts

            rt = self.db.runtime
            with rt.lock:
                seq = write_inserts(rt, self.rel, dict(enumerate(payload)), len(payload[0]))
            self.db.wal.wait_durable(seq)
            return
        res = self.s.execute_simple("COPY orders (id, user_id, amount, ts) FROM STDIN")[0]
        columns = payload
        if self.mode == "wire":
            from pgwire.copy_columns import CopyColumns, parse_copy

            names = [c.name for c in res.columns]
            target = CopyColumns("orders", names, [c.type for c in res.columns], dt.UTC)
            columns = parse_copy(payload, res.copy, target)
        self.s.copy_in_columns(columns)


def thread_cpu() -> dict[str, float]:
    """CPU seconds of this process's threads by name (Linux /proc; 10 ms ticks): Python
    threads by their `threading` name, native ones (RocksDB, polars) by their comm."""
    import os
    import threading

    names = {t.native_id: t.name for t in threading.enumerate()}
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = {}
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/self/task/{tid}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1 : raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2 :].split()
        name = names.get(int(tid), comm.split(":")[0] if comm != "python" else "python-other")
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def normalise(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(tuple(round(v, 6) if isinstance(v, float) else v for v in r) for r in rows)


def run(workload: str, events: int, epoch: int, mode: str, profile: bool) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        db = open_database(Config(data_dir=Path(d), barrier_interval_ms=3_600_000))
        try:
            s = db.connect("root", "dev")
            for sql in TABLES:
                s.execute_simple(sql)
            s.execute_simple("COPY users FROM STDIN")
            s.copy_in_columns(
                [pa.array(range(N_USERS)), pa.array([f"r{u % N_REGIONS}" for u in range(N_USERS)])]
            )
            s.execute_simple(f"CREATE MATERIALIZED VIEW mv AS {QUERIES[workload]}")
            ingest = Ingest(db, s, mode)
            orders = Orders(updates=workload == "join")
            rt = db.runtime
            rt.cpu.reset()
            threads0 = thread_cpu()
            cpu_ingest = 0.0
            cpu_total = 0.0
            prof = cProfile.Profile() if profile else None
            n_epochs = (events + epoch - 1) // epoch
            for e in range(n_epochs):
                n = min(epoch, events - e * epoch)
                payload = ingest.prepare(orders.epoch(n))  # not timed
                c0 = time.process_time()
                if prof is not None:
                    prof.enable()
                t = time.thread_time()
                ingest.write(payload)
                if workload == "join" and e > 0:
                    k = e % 100
                    s.execute_simple(f"UPDATE users SET region = 'r{k}' WHERE user_id % 100 = {k}")
                cpu_ingest += time.thread_time() - t
                s.execute_simple("FLUSH")
                if prof is not None:
                    prof.disable()
                cpu_total += time.process_time() - c0
                if (e + 1) % max(1, n_epochs // 10) == 0 or e + 1 == n_epochs:
                    done = min(events, (e + 1) * epoch)
                    print(
                        f"    {workload}: epoch {e + 1}/{n_epochs}, {done:,} events, "
                        f"{cpu_total:.2f} CPU-s, {done / cpu_total:,.0f} events/CPU-s",
                        flush=True,
                    )
            snap = rt.cpu.snapshot()
            threads = {k: v - threads0.get(k, 0.0) for k, v in thread_cpu().items()}
            got = normalise(s.execute_simple("SELECT * FROM mv")[0].rows)
            want = normalise(s.execute_simple(QUERIES[workload])[0].rows)
            if got != want:
                raise SystemExit(
                    f"{workload}: view has {len(got)} rows, the ad-hoc query {len(want)}; "
                    "they differ"
                )
            if prof is not None:
                pstats.Stats(prof).sort_stats("tottime").print_stats(35)
            return {
                "cpu": cpu_total,
                "ingest": cpu_ingest,
                "rows": len(got),
                "threads": threads,
                **snap,
            }
        finally:
            db.close()


def report(workload: str, events: int, r: dict[str, Any]) -> None:
    ph, ops = r["phases"], r["operators"]
    mat = sum(v for k, v in ops.items() if k in MAT_OPS)
    opr = sum(v for k, v in ops.items() if k not in MAT_OPS)
    parts = {
        "ingest": r["ingest"],
        "tables": ph["tables"],
        "operators": opr,
        "view mat": mat,
        "commit": ph["commit"],
        "gc": ph["gc"],
    }
    parts["other"] = r["cpu"] - sum(parts.values())
    split = ", ".join(f"{k} {v:.2f}" for k, v in parts.items())
    per_op = ", ".join(
        f"{k} {v:.2f}" for k, v in sorted(ops.items(), key=lambda kv: -kv[1]) if k not in MAT_OPS
    )
    threads = ", ".join(
        f"{k} {v:.2f}" for k, v in sorted(r["threads"].items(), key=lambda kv: -kv[1]) if v
    )
    print(
        f"{workload:7s} {events / r['cpu']:>10,.0f} events/CPU-s  ({r['cpu']:.2f} CPU-s; "
        f"op-only {events / max(opr, 1e-9):,.0f}, engine/op {r['cpu'] / max(opr, 1e-9):.2f}x; "
        f"{r['rows']:,} view rows, checked)\n"
        f"        split: {split}\n        operators: {per_op}\n        threads: {threads}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=1_000_000)
    ap.add_argument("--epoch", type=int, default=20_000)
    ap.add_argument("--ingest", choices=("copy", "wire", "arrow"), default="copy")
    ap.add_argument("--only", default="join,tumble,top3")
    ap.add_argument("--profile", action="store_true", help="cProfile the timed loop")
    a = ap.parse_args()
    print(
        f"{a.events:,} events, {a.epoch:,} per epoch, ingest={a.ingest}, {N_USERS:,} users",
        flush=True,
    )
    runs: dict[str, Callable[[], dict[str, Any]]] = {
        w: (lambda w=w: run(w, a.events, a.epoch, a.ingest, a.profile)) for w in a.only.split(",")
    }
    for w, fn in runs.items():
        report(w, a.events, fn())


if __name__ == "__main__":
    main()
