"""Writes that take no epoch lock stay exact while barriers and DDL run beside them.

Inserts into a table keyed by the hidden row id take only the runtime's queue lock, so
they run while timer barriers drain the table and while ALTER TABLE ADD COLUMN rebuilds
it: every acknowledged insert must be in the table afterwards (none queued on the flow
the ALTER replaced), and an insert computed with the old column layout is refused (55000)
rather than stored with the wrong columns. Rows that an UPDATE counts while inserts
arrive keep one total.
"""

from __future__ import annotations

import threading
from pathlib import Path

from engine.database import Config, SwellDatabase
from engine.errors import ObjectNotInPrerequisiteState


def _count(s: object, sql: str) -> int:
    return int(s.execute_simple(sql)[0].rows[0][0])  # type: ignore[attr-defined]


def test_inserts_beside_barriers_and_alter_table_are_all_kept(tmp_path: Path) -> None:
    db = SwellDatabase(Config(data_dir=tmp_path / "d", barrier_interval_ms=5))
    try:
        s = db.connect("root", "dev")
        s.execute_simple("CREATE TABLE cw (a INT)")
        s.execute_simple("CREATE MATERIALIZED VIEW cw_n AS SELECT count(*) AS n FROM cw")
        done = threading.Event()
        acked: list[int] = []
        refused: list[int] = []
        failures: list[BaseException] = []

        def insert() -> None:
            w = db.connect("root", "dev")
            i = 0
            while not done.is_set() or i < 50:
                i += 1
                try:
                    w.execute_simple(f"INSERT INTO cw (a) VALUES ({i}), ({i})")
                    acked.append(2)
                except ObjectNotInPrerequisiteState:
                    refused.append(2)
                except BaseException as e:  # reported below
                    failures.append(e)
                    return

        writer = threading.Thread(target=insert)
        writer.start()
        for j in range(3):
            s.execute_simple(f"ALTER TABLE cw ADD COLUMN c{j} INT DEFAULT {j}")
        done.set()
        writer.join(timeout=120)
        assert not failures, failures
        s.execute_simple("FLUSH")
        assert _count(s, "SELECT count(*) FROM cw") == sum(acked)
        assert _count(s, "SELECT n FROM cw_n") == sum(acked)
        assert _count(s, "SELECT count(*) FROM cw WHERE c2 = 2") == _count(
            s, "SELECT count(*) FROM cw"
        )
    finally:
        db.close()
