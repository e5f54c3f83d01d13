"""Iceberg through SQL: sinks, connections, ENGINE = iceberg tables, reads and time travel.

Real components: pyiceberg's SQL catalog on SQLite, the storage catalog on local files and
on moto's S3 server; the database runs in-process (barriers driven by FLUSH).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connectors.iceberg.config import IcebergConfig, load_catalog
from engine.database import Config, SwellDatabase
from engine.errors import EngineError
from harness.iceberg import moto_s3  # noqa: F401


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SwellDatabase]:
    d = SwellDatabase(Config(data_dir=tmp_path / "data", barrier_interval_ms=60_000))
    try:
        yield d
    finally:
        d.close()


def run(db: SwellDatabase, sql: str, s: Any = None) -> list[Any]:
    return (s or db.connect("root", "dev")).execute_simple(sql)


def rows(db: SwellDatabase, sql: str) -> list[tuple[Any, ...]]:
    return run(db, sql)[-1].rows


def err(db: SwellDatabase, sql: str) -> EngineError:
    with pytest.raises(EngineError) as e:
        run(db, sql)
    return e.value


def sql_catalog(tmp_path: Path) -> str:
    return (
        f"catalog.type = 'sql', catalog.uri = 'sqlite:///{tmp_path}/cat.db', "
        f"warehouse.path = 'file://{tmp_path}/wh'"
    )


def iceberg_rows(tmp_path: Path, ident: tuple[str, str]) -> list[tuple[Any, ...]]:
    cfg = IcebergConfig.parse(
        {
            "catalog.type": "sql",
            "catalog.uri": f"sqlite:///{tmp_path}/cat.db",
            "warehouse.path": f"file://{tmp_path}/wh",
        },
        need_table=False,
    )
    t = load_catalog(cfg).load_table(ident).scan().to_arrow()
    t = t.sort_by(t.column_names[0])
    return list(zip(*[c.to_pylist() for c in t.columns], strict=True))


def test_upsert_sink_from_view(db: SwellDatabase, tmp_path: Path) -> None:
    run(db, "CREATE TABLE src (id INT PRIMARY KEY, name VARCHAR, price DOUBLE PRECISION)")
    run(db, "CREATE MATERIALIZED VIEW v AS SELECT id, name, price * 2 AS p2 FROM src")
    run(db, "INSERT INTO src VALUES (1, 'a', 1.0), (2, 'b', 2.0)")
    run(
        db,
        f"CREATE SINK s FROM v WITH (connector = 'iceberg', type = 'upsert', "
        f"primary_key = 'id', {sql_catalog(tmp_path)}, database.name = 'ns', "
        f"table.name = 't', create_table_if_not_exists = 'true', "
        f"commit_checkpoint_interval = 1)",
    )
    assert iceberg_rows(tmp_path, ("ns", "t")) == [(1, "a", 2.0), (2, "b", 4.0)]
    run(db, "UPDATE src SET name = 'z' WHERE id = 1; DELETE FROM src WHERE id = 2; FLUSH")
    run(db, "INSERT INTO src VALUES (3, 'c', 3.0); FLUSH")
    assert iceberg_rows(tmp_path, ("ns", "t")) == [(1, "z", 2.0), (3, "c", 6.0)]
    # schema mismatch is refused at CREATE SINK with the columns named
    e = err(
        db,
        f"CREATE SINK s2 AS SELECT id, name AS nm FROM src WITH (connector = 'iceberg', "
        f"type = 'upsert', primary_key = 'id', {sql_catalog(tmp_path)}, "
        f"database.name = 'ns', table.name = 't')",
    )
    assert "nm" in e.message and "not in the Iceberg table" in e.message
    # unknown table without create_table_if_not_exists
    e = err(
        db,
        f"CREATE SINK s3 FROM v WITH (connector = 'iceberg', type = 'upsert', "
        f"primary_key = 'id', {sql_catalog(tmp_path)}, database.name = 'ns', "
        f"table.name = 'missing')",
    )
    assert 'Iceberg table "ns.missing" does not exist' in e.message
    run(db, "DROP SINK s")


def test_connection_engine_table_and_time_travel(db: SwellDatabase, tmp_path: Path) -> None:
    run(
        db,
        f"CREATE CONNECTION conn WITH (type = 'iceberg', catalog.type = 'storage', "
        f"warehouse.path = '{tmp_path}/storage_wh')",
    )
    assert rows(db, "SHOW CONNECTIONS")[0][:2] == ("conn", "iceberg")
    s = db.connect("root", "dev")
    run(db, "SET iceberg_engine_connection = 'public.conn'", s)
    run(
        db,
        "CREATE TABLE et (event_id VARCHAR PRIMARY KEY, price DOUBLE PRECISION, "
        "ts TIMESTAMPTZ) WITH (commit_checkpoint_interval = 1) ENGINE = iceberg",
        s,
    )
    run(db, "INSERT INTO et VALUES ('a', 1.5, '2026-01-01 00:00:00+00'), ('b', 2.5, NULL)")
    run(db, "FLUSH")
    assert rows(db, "SELECT event_id, price FROM et ORDER BY event_id") == [
        ("a", 1.5),
        ("b", 2.5),
    ]
    assert rows(db, "SELECT count(*) FROM et WHERE price > 2") == [(1,)]
    run(db, "UPDATE et SET price = 9 WHERE event_id = 'a'; FLUSH")
    assert rows(db, "SELECT price FROM et WHERE event_id = 'a'") == [(9.0,)]
    # time travel to the first snapshot
    from connectors.iceberg.tables import resolve_table

    cfg = IcebergConfig.parse(
        {
            "catalog.type": "storage",
            "warehouse.path": f"{tmp_path}/storage_wh",
            "database.name": "public",
            "table.name": "et",
        }
    )
    t = resolve_table(cfg, [], [], check_schema=False)
    first = t.metadata.snapshots[0].snapshot_id
    assert rows(db, f"SELECT count(*) FROM et FOR SYSTEM_VERSION AS OF {first}") == [(2,)]
    assert rows(
        db, f"SELECT price FROM et FOR SYSTEM_VERSION AS OF {first} WHERE event_id = 'a'"
    ) == [(1.5,)]
    assert rows(db, "SELECT count(*) FROM et FOR SYSTEM_TIME AS OF '2000-01-01 00:00:00'") == [(0,)]
    # a sink INTO the engine table writes into the same Iceberg table
    run(db, "CREATE TABLE feed (event_id VARCHAR, price DOUBLE PRECISION)")
    run(db, "CREATE SINK into_et INTO et AS SELECT event_id, price FROM feed")
    run(db, "INSERT INTO feed VALUES ('c', 3.0); FLUSH")
    assert rows(db, "SELECT event_id FROM et ORDER BY event_id") == [("a",), ("b",), ("c",)]
    e = err(db, "DROP CONNECTION conn")
    assert "depend" in e.message
    run(db, "DROP SINK into_et; DROP TABLE et")
    run(db, "DROP CONNECTION conn")
    assert rows(db, "SHOW CONNECTIONS") == []


def test_playground_engine_table_without_pk(db: SwellDatabase) -> None:
    run(
        db,
        "CREATE TABLE nk (a INT, b VARCHAR) WITH (commit_checkpoint_interval = 1) ENGINE = iceberg",
    )
    run(db, "INSERT INTO nk VALUES (1, 'x'), (2, 'y'), (2, 'y'); FLUSH")
    assert rows(db, "SELECT a, b FROM nk ORDER BY a") == [(1, "x"), (2, "y"), (2, "y")]
    run(db, "DELETE FROM nk WHERE a = 2; FLUSH")
    assert rows(db, "SELECT * FROM nk") == [(1, "x")]


def test_engine_table_read_after_flush_without_iceberg_commit(
    db: SwellDatabase, tmp_path: Path
) -> None:
    """FLUSH is read-after-write for engine tables: the read takes the table's committed
    rows (Iceberg rows plus the staged ones), while Iceberg commits only every
    commit_checkpoint_interval checkpoints (60 here: no snapshot during the test)."""
    run(db, f"CREATE CONNECTION lake WITH (type = 'iceberg', {sql_catalog(tmp_path)})")
    s = db.connect("root", "dev")
    run(db, "SET iceberg_engine_connection = 'public.lake'", s)
    run(db, "CREATE TABLE rw (k INT PRIMARY KEY, v VARCHAR) ENGINE = iceberg", s)
    run(db, "INSERT INTO rw VALUES (1, 'a'), (2, 'b'); FLUSH")
    assert rows(db, "SELECT k, v FROM rw ORDER BY k") == [(1, "a"), (2, "b")]
    run(db, "UPDATE rw SET v = 'z' WHERE k = 2; DELETE FROM rw WHERE k = 1; FLUSH")
    assert rows(db, "SELECT k, v FROM rw") == [(2, "z")]
    assert iceberg_rows(tmp_path, ("public", "rw")) == []  # nothing committed to Iceberg yet
    # a sink INTO the table writes Iceberg directly: reads go to Iceberg from then on
    run(db, "CREATE TABLE feed (k INT PRIMARY KEY, v VARCHAR)")
    run(
        db,
        "CREATE SINK into_rw INTO rw AS SELECT k, v FROM feed WITH (commit_checkpoint_interval = 1)",
    )
    run(db, "INSERT INTO feed VALUES (7, 'q'); FLUSH")
    assert db.catalog.find("rw").extra["iceberg"]["reads_local"] is False  # type: ignore[union-attr]
    assert (7, "q") in rows(db, "SELECT k, v FROM rw")


def test_connection_errors(db: SwellDatabase) -> None:
    e = err(
        db,
        "CREATE CONNECTION c WITH (type = 'iceberg', catalog.type = 'storage', "
        "warehouse.path = 's3://b/w', s3.endpoint = 'http://127.0.0.1:9')",
    )
    assert e.message == "s3.region is missing"
    e = err(
        db,
        "CREATE CONNECTION c WITH (type = 'iceberg', catalog.type = 'rest', "
        "catalog.uri = 'http://127.0.0.1:9/catalog', warehouse.path = 's3://bucket/demo', "
        "s3.region = 'dummy')",
    )
    assert "logical name" in e.message
    run(
        db,
        "CREATE CONNECTION c WITH (type = 'iceberg', catalog.type = 'rest', "
        "catalog.uri = 'http://127.0.0.1:9/catalog', warehouse.path = 'demo')",
    )
    s = db.connect("root", "dev")
    run(db, "SET iceberg_engine_connection = 'public.c'", s)
    with pytest.raises(EngineError, match="does not answer"):
        run(db, "CREATE TABLE x (a INT) ENGINE = iceberg", s)
    assert rows(db, "SHOW TABLES") == []


def test_storage_catalog_on_moto(db: SwellDatabase, moto_s3: dict[str, Any]) -> None:  # noqa: F811
    bucket = moto_s3["bucket"]("swell-sql")
    run(
        db,
        f"CREATE CONNECTION s3c WITH (type = 'iceberg', catalog.type = 'storage', "
        f"warehouse.path = 's3://{bucket}/wh', s3.endpoint = '{moto_s3['endpoint']}', "
        f"s3.region = 'us-east-1', s3.access.key = 'test', s3.secret.key = 'test', "
        f"s3.path.style.access = 'true')",
    )
    run(db, "CREATE TABLE src (id INT PRIMARY KEY, v VARCHAR)")
    run(db, "INSERT INTO src VALUES (1, 'a'), (2, 'b')")
    run(
        db,
        "CREATE SINK s FROM src WITH (connector = 'iceberg', connection = 's3c', "
        "type = 'append-only', force_append_only = 'true', database.name = 'd', "
        "table.name = 't', create_table_if_not_exists = 'true', commit_checkpoint_interval = 1)",
    )
    cfg = IcebergConfig.parse(
        {
            "catalog.type": "storage",
            "warehouse.path": f"s3://{bucket}/wh",
            "s3.endpoint": moto_s3["endpoint"],
            "s3.region": "us-east-1",
            "s3.access.key": "test",
            "s3.secret.key": "test",
        },
        need_table=False,
    )
    t = load_catalog(cfg).load_table(("d", "t")).scan().to_arrow()
    assert sorted(t.column("id").to_pylist()) == [1, 2]


def test_iceberg_source_ad_hoc(db: SwellDatabase, tmp_path: Path) -> None:
    run(db, "CREATE TABLE src (id INT PRIMARY KEY, v VARCHAR)")
    run(db, "INSERT INTO src VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    run(
        db,
        f"CREATE SINK s FROM src WITH (connector = 'iceberg', type = 'upsert', "
        f"primary_key = 'id', {sql_catalog(tmp_path)}, database.name = 'ns', "
        f"table.name = 'ext', create_table_if_not_exists = 'true', "
        f"commit_checkpoint_interval = 1)",
    )
    run(
        db,
        f"CREATE SOURCE ice WITH (connector = 'iceberg', {sql_catalog(tmp_path)}, "
        f"database.name = 'ns', table.name = 'ext')",
    )
    assert rows(db, "SELECT v FROM ice WHERE id >= 2 ORDER BY v") == [("b",), ("c",)]
    assert rows(db, "SELECT count(*) FROM ice") == [(3,)]
    e = err(db, "CREATE MATERIALIZED VIEW mv_ice AS SELECT * FROM ice")
    assert "Iceberg sources" in e.message
    e = err(
        db,
        f"CREATE SOURCE ice2 WITH (connector = 'iceberg', {sql_catalog(tmp_path)}, "
        f"database.name = 'ns', table.name = 'nope')",
    )
    assert "does not exist" in e.message
