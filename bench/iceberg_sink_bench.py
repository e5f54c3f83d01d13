"""Iceberg sinks: rows/s from a view into append-only and upsert sinks, files and snapshots.

Usage: .venv/bin/python bench/iceberg_sink_bench.py [rows] [rows_per_epoch] [--strategies]

The whole engine runs in process (SwellDatabase over a temporary data directory): a table
`src (id bigint primary key, name varchar, price double)`, a materialized view
`v = SELECT id, name, price * 2 AS p2 FROM src`, and an Iceberg sink from `v` into
pyiceberg's SQL catalog (SQLite) with a local warehouse. Chunks are written through the
runtime (WAL, table, view, sink staging, RocksDB checkpoint per epoch); the clock runs
from the first write until the last row is committed to Iceberg (wall time).

Workloads, 1,000,000 rows by default in epochs of 10,000:
* append-only: every epoch inserts new ids;
* upsert: every epoch inserts 80% new ids and updates 20% of the ids of the previous
  epoch (an UPDATE reaches the sink as U-/U+, i.e. a delete plus an insert by key).
Each at commit_checkpoint_interval 1 and 10. Reported: rows/s, data files and snapshots
in the table per 1,000,000 rows.

`--strategies` compares, on the same upsert batches written straight to a table, the
writer's strategy (delete the keys the batch retracted or that already exist, then
append; one transaction) with pyiceberg's own `Table.upsert` (join against the table,
overwrite matched rows, append the rest). pyiceberg can neither write nor read equality
deletes, so merge-on-read is not an option with it.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.chunk import Op, StreamChunk  # noqa: E402
from engine.database import Config, SwellDatabase  # noqa: E402


def batches(rows: int, per_epoch: int, upsert: bool) -> list[StreamChunk]:
    out: list[StreamChunk] = []
    next_id = 0
    prev: np.ndarray = np.array([], dtype=np.int64)
    rng = np.random.default_rng(7)
    done = 0
    while done < rows:
        n = min(per_epoch, rows - done)
        n_upd = int(n * 0.2) if upsert and len(prev) else 0
        n_new = n - n_upd
        new_ids = np.arange(next_id, next_id + n_new, dtype=np.int64)
        next_id += n_new
        upd_ids = rng.choice(prev, n_upd, replace=False) if n_upd else np.array([], np.int64)
        ids = np.concatenate([new_ids, upd_ids])
        names = pa.array([f"n{i % 1000}" for i in range(len(ids))])
        price = pa.array(rng.random(len(ids)) * 100)
        batch = pa.RecordBatch.from_arrays([pa.array(ids), names, price], ["id", "name", "price"])
        out.append(StreamChunk(pa.array(np.full(len(ids), Op.INSERT, np.int8)), batch))
        prev = new_ids
        done += n
    return out


def run_engine(rows: int, per_epoch: int, mode: str, interval: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        db = SwellDatabase(Config(data_dir=Path(d) / "data", barrier_interval_ms=3_600_000))
        s = db.connect("root", "dev")
        s.execute_simple("CREATE TABLE src (id BIGINT PRIMARY KEY, name VARCHAR, price DOUBLE)")
        s.execute_simple("CREATE MATERIALIZED VIEW v AS SELECT id, name, price * 2 AS p2 FROM src")
        extra = "type = 'upsert', primary_key = 'id'"
        if mode == "append-only":
            extra = "type = 'append-only', force_append_only = 'true'"
        s.execute_simple(
            f"CREATE SINK s FROM v WITH (connector = 'iceberg', {extra}, catalog.type = 'sql', "
            f"catalog.uri = 'sqlite:///{d}/cat.db', warehouse.path = 'file://{d}/wh', "
            f"database.name = 'ns', table.name = 't', create_table_if_not_exists = 'true', "
            f"commit_checkpoint_interval = {interval})"
        )
        rel = db.catalog.get("src")
        chunks = batches(rows, per_epoch, mode == "upsert")
        rt = db.runtime
        t0 = time.perf_counter()
        for c in chunks:
            rt.write(rel.id, c)
            rt.barrier(force=True)
        for _ in range(interval):  # until the last staged rows are committed
            rt.barrier(force=True)
        dt = time.perf_counter() - t0
        from connectors.iceberg.config import IcebergConfig, load_catalog

        cfg = IcebergConfig.parse(
            {
                "catalog.type": "sql",
                "catalog.uri": f"sqlite:///{d}/cat.db",
                "warehouse.path": f"file://{d}/wh",
            },
            need_table=False,
        )
        t = load_catalog(cfg).load_table(("ns", "t"))
        n_rows = t.scan().to_arrow().num_rows
        files = len(list(t.inspect.files().column("file_path")))
        snaps = len(t.metadata.snapshots)
        db.close()
    scale = 1_000_000 / rows
    return {
        "rows_s": rows / dt,
        "files": files * scale,
        "snapshots": snaps * scale,
        "table_rows": n_rows,
        "seconds": dt,
    }


def run_strategies(rows: int, per_epoch: int) -> None:
    from pyiceberg.catalog.sql import SqlCatalog

    from connectors.iceberg.config import IcebergConfig
    from connectors.iceberg.writer import IcebergWriter
    from engine.types import BIGINT, DOUBLE, VARCHAR, Field

    fields = [Field("id", BIGINT), Field("name", VARCHAR), Field("price", DOUBLE)]
    chunks = batches(rows, per_epoch, True)
    with tempfile.TemporaryDirectory() as d:
        # ours: the writer turns each key's changes into delete-by-key + append
        cfg = IcebergConfig.parse(
            {
                "catalog.type": "sql",
                "catalog.uri": f"sqlite:///{d}/a.db",
                "warehouse.path": f"file://{d}/wa",
                "database.name": "ns",
                "table.name": "t",
            }
        )
        w = IcebergWriter(
            cfg,
            fields,
            [0],
            mode="upsert",
            sink_key="b",
            commit_interval=1,
            create_if_not_exists=True,
        )
        w.open()
        t0 = time.perf_counter()
        for e, c in enumerate(chunks, 1):
            w.write(e, c)
            w.after_checkpoint(e)
        ours = time.perf_counter() - t0
        n_ours = w.table.scan().to_arrow().num_rows
        # pyiceberg's Table.upsert on the same batches
        cat = SqlCatalog("p", uri=f"sqlite:///{d}/b.db", warehouse=f"file://{d}/wb")
        cat.create_namespace("ns")
        from connectors.iceberg.schema import iceberg_schema, to_arrow

        schema = iceberg_schema(fields, [0])
        tbl = cat.create_table(("ns", "t"), schema)
        t0 = time.perf_counter()
        for c in chunks:
            tbl.upsert(to_arrow(c.data, tbl.schema()), join_cols=["id"])
        theirs = time.perf_counter() - t0
        n_theirs = tbl.scan().to_arrow().num_rows
    print(f"upsert strategy, {rows:,} rows in {len(chunks)} commits (20% updates):")
    print(f"  delete-by-key + append : {rows / ours:>10,.0f} rows/s ({n_ours:,} rows)")
    print(f"  pyiceberg Table.upsert : {rows / theirs:>10,.0f} rows/s ({n_theirs:,} rows)")


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    rows = int(args[0]) if args else 1_000_000
    per_epoch = int(args[1]) if len(args) > 1 else 10_000
    if "--strategies" in sys.argv:
        run_strategies(rows, per_epoch)
        return
    print(f"{rows:,} rows, {per_epoch:,} rows per epoch, SQL catalog on SQLite, local files")
    for mode in ("append-only", "upsert"):
        for interval in (1, 10):
            r = run_engine(rows, per_epoch, mode, interval)
            print(
                f"{mode:12s} interval={interval:<3d} {r['rows_s']:>10,.0f} rows/s  "
                f"files/1M rows={r['files']:>7,.0f}  snapshots/1M rows={r['snapshots']:>6,.0f}  "
                f"({r['seconds']:.1f} s, {r['table_rows']:,} rows in table)"
            )


if __name__ == "__main__":
    main()
