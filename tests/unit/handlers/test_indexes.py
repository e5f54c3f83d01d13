"""Indexes across a restart, and who may create them (in process, real RocksDB)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.database import Config, SwellDatabase
from engine.errors import EngineError


def _open(path: Path) -> SwellDatabase:
    return SwellDatabase(Config(data_dir=path / "data", barrier_interval_ms=60_000))


def _rows(db: SwellDatabase, sql: str, user: str = "root") -> list[Any]:
    return list(db.connect(user, "dev").execute_simple(sql)[-1].rows)


def test_index_survives_restart_and_follows_later_writes(tmp_path: Path) -> None:
    db = _open(tmp_path)
    try:
        _rows(db, "CREATE TABLE r (k INT, v VARCHAR)")
        _rows(db, "INSERT INTO r VALUES (1, 'a'), (2, 'b'), (2, 'c')")
        _rows(db, "FLUSH")
        _rows(db, "CREATE INDEX r_k ON r (k)")
        _rows(db, "INSERT INTO r VALUES (2, 'd')")
        _rows(db, "FLUSH")
    finally:
        db.close()
    db = _open(tmp_path)
    try:
        plan = "\n".join(r[0] for r in _rows(db, "EXPLAIN SELECT v FROM r WHERE k = 2"))
        assert "BatchIndexScan { table: r, index: r_k" in plan
        assert sorted(_rows(db, "SELECT v FROM r WHERE k = 2")) == [("b",), ("c",), ("d",)]
        _rows(db, "DELETE FROM r WHERE v = 'c'")
        _rows(db, "FLUSH")
        assert sorted(_rows(db, "SELECT v FROM r WHERE k >= 2")) == [("b",), ("d",)]
        assert _rows(db, "SHOW INDEXES FROM r") == [("r_k", "r", "k", "v", "k")]
    finally:
        db.close()


def test_only_the_owner_creates_or_drops_an_index(tmp_path: Path) -> None:
    db = _open(tmp_path)
    try:
        _rows(db, "CREATE USER bob WITH PASSWORD 'pw'")
        _rows(db, "CREATE TABLE o (k INT)")
        _rows(db, "GRANT SELECT ON o TO bob")
        with pytest.raises(EngineError) as e:
            _rows(db, "CREATE INDEX o_k ON o (k)", user="bob")
        assert e.value.sqlstate == "42501"
        _rows(db, "CREATE INDEX o_k ON o (k)")
        with pytest.raises(EngineError) as e:
            _rows(db, "DROP INDEX o_k", user="bob")
        assert e.value.sqlstate == "42501"
        assert _rows(db, "SELECT count(*) FROM o WHERE k = 1", user="bob") == [(0,)]
        owners = _rows(db, "SELECT relowner = (SELECT relowner FROM pg_class WHERE relname = 'o') "
                           "FROM pg_class WHERE relname = 'o_k'")  # fmt: skip
        assert owners == [(True,)]
    finally:
        db.close()
