"""VERIFY MATERIALIZED VIEW finds every row where a view's stored rows and its query
recomputed at the view's committed epoch disagree (the view's state is altered here by
hand, as an operator bug would), and answers ok with the row count otherwise."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa

from engine.chunk import StreamChunk
from engine.database import Config, open_database


def test_verify_reports_ok_then_each_differing_row(tmp_path: Path) -> None:
    db = open_database(Config(data_dir=tmp_path / "d", barrier_interval_ms=60_000))
    try:
        s = db.connect("root", "dev")

        def q(sql: str) -> list[tuple[object, ...]]:
            return s.execute_simple(sql)[-1].rows

        q("CREATE TABLE t (k INT PRIMARY KEY, g INT, v DOUBLE PRECISION, d INT)")
        q("INSERT INTO t SELECT i, i % 3, i * 0.1, i % 4 FROM generate_series(1, 300) i")
        q(
            "CREATE MATERIALIZED VIEW per_g AS SELECT g, sum(v) AS s, count(*) AS n FROM t GROUP BY g"
        )
        q("CREATE MATERIALIZED VIEW ratio AS SELECT k, 12 / d AS x FROM t")  # 12 / 0: NULL
        q("UPDATE t SET v = v + 1 WHERE k % 7 = 0")
        q("DELETE FROM t WHERE k % 11 = 0")
        q("FLUSH")
        assert q("VERIFY MATERIALIZED VIEW per_g") == [("ok", 3, None, None, None)]
        assert q("VERIFY MATERIALIZED VIEW ratio") == [("ok", 273, None, None)]

        # alter the view's stored rows behind its back: one row gone, one row added
        rt = db.runtime
        rel = db.catalog.find("ratio")
        assert rel is not None
        flow = rt.views[rel.id]
        schema = pa.schema([pa.field(f.name, f.type.arrow) for f in rel.fields])
        with rt.lock:
            flow.mat.step([StreamChunk.deletes(pa.table({"k": [5], "x": [12]}, schema=schema))])
            flow.mat.step([StreamChunk.inserts(pa.table({"k": [999], "x": [1]}, schema=schema))])
            rt._publish()
        assert q("VERIFY MATERIALIZED VIEW ratio") == [
            ("missing", 1, 5, 12),
            ("extra", 1, 999, 1),
        ]
        cols = [c.name for c in s.execute_simple("VERIFY MATERIALIZED VIEW ratio")[-1].columns]
        assert cols == ["verdict", "count", "k", "x"]
    finally:
        db.close()
