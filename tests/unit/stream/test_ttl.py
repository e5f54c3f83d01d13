"""Table TTL (engine/stream/ttl.py): rows below the watermark leave the table durably, views
keep what they counted, and a restart neither brings cleaned rows back nor loses kept ones."""

from __future__ import annotations

import tempfile
from pathlib import Path

from engine.database import Config, open_database


def test_ttl_cleanup_survives_restart() -> None:
    with tempfile.TemporaryDirectory() as d:
        db = open_database(Config(data_dir=Path(d), barrier_interval_ms=60_000))
        try:
            s = db.connect("root", "dev")
            s.execute_simple(
                "CREATE TABLE ev (id INT PRIMARY KEY, ts TIMESTAMP, "
                "WATERMARK FOR ts AS ts - INTERVAL '5' SECOND WITH TTL)"
            )
            s.execute_simple("CREATE MATERIALIZED VIEW n AS SELECT count(*) AS c FROM ev")
            s.execute_simple(
                "INSERT INTO ev VALUES (1, '2024-01-01 00:00:01'), (2, '2024-01-01 00:00:09'), "
                "(3, '2024-01-01 00:00:12')"
            )
            s.execute_simple("FLUSH")
            assert s.execute_simple("SELECT id FROM ev ORDER BY id")[0].rows == [(2,), (3,)]
        finally:
            db.close()
        db = open_database(Config(data_dir=Path(d), barrier_interval_ms=60_000))
        try:
            s = db.connect("root", "dev")
            assert s.execute_simple("SELECT id FROM ev ORDER BY id")[0].rows == [(2,), (3,)]
            assert s.execute_simple("SELECT c FROM n")[0].rows == [(3,)]
            s.execute_simple("INSERT INTO ev VALUES (4, '2024-01-01 00:00:20')")
            s.execute_simple("FLUSH")
            assert s.execute_simple("SELECT id FROM ev ORDER BY id")[0].rows == [(4,)]
            assert s.execute_simple("SELECT c FROM n")[0].rows == [(4,)]
        finally:
            db.close()
