"""Writes that take no epoch lock stay exact while barriers and DDL run beside them.

Inserts into a table keyed by the hidden row id take only the runtime's queue lock, so
they run while timer barriers drain the table and while ALTER TABLE ADD COLUMN rebuilds
it: every acknowledged insert must be in the table afterwards (none queued on the flow
the ALTER replaced), and an insert computed with the old column layout is refused (55000)
rather than stored with the wrong columns. A SELECT planned with a layout the committed
rows do not have yet is refused (55000) rather than answered from the wrong columns.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

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


def test_a_select_never_reads_columns_by_a_layout_it_was_not_planned_with(
    tmp_path: Path,
) -> None:
    """ALTER TABLE changes the catalog entry before its new rows commit; a SELECT planned
    with the new columns must not read the committed rows by those positions."""
    db = SwellDatabase(Config(data_dir=tmp_path / "d", barrier_interval_ms=60_000))
    try:
        s = db.connect("root", "dev")
        s.execute_simple("CREATE TABLE lay (a INT, b INT, c INT)")
        s.execute_simple("INSERT INTO lay VALUES (1, 2, 3)")
        s.execute_simple("FLUSH")
        rel = db.catalog.find("lay")
        assert rel is not None
        dropped = rel.fields.pop(1)  # what DROP COLUMN b does first, before its rows commit
        try:
            with pytest.raises(ObjectNotInPrerequisiteState, match="altered"):
                s.execute_simple("SELECT c FROM lay")  # position 1 is b's value in the rows
        finally:
            rel.fields.insert(1, dropped)
        assert s.execute_simple("SELECT c FROM lay")[0].rows == [(3,)]
    finally:
        db.close()
