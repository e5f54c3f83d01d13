"""Checkpoints on S3 (`--state-store`) and restore onto an empty data directory, end to end.

Against moto's S3 server as a separate process (`harness.moto`), real Swell servers, a real
Kafka broker and a local Iceberg warehouse outside the data directory:

* a restore after `kill -9` and the loss of the data directory brings back every table,
  view (compared with its own query), source, sink, secret and user as of the last FLUSH;
  the Kafka source resumes from its stored offsets (no loss, no duplicate) and the Iceberg
  sink holds every row exactly once; a restore without the secret store key says so;
* an S3 outage (moto paused with SIGSTOP) while FLUSH uploads: reads and DML go on, the
  status table shows the retries, FLUSH returns once S3 is back, the store restores;
* the garbage collector keeps every object a retained manifest names, and only those
  (checked after every few uploads while compaction retires files).
"""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from connectors.iceberg.config import IcebergConfig, load_catalog
from harness.moto import MotoS3, moto_server  # noqa: F401
from harness.seeds import wait_truthy as wait_for
from harness.server import ServerError, SwellServer

KEY = "ab" * 32
VIEWS = {
    "mv_agg": "SELECT k, count(*) AS n, sum(v) AS s, max(v) AS mx FROM t GROUP BY k",
    "mv_join": "SELECT t.k, t.v, d.name FROM t JOIN dim d ON t.k = d.k WHERE t.v % 7 = 0",
    "mv_top": "SELECT k, v FROM t ORDER BY v DESC LIMIT 5",
    "mv_of_mv": "SELECT n % 3 AS b, sum(s) AS total FROM mv_agg GROUP BY n % 3",
}


_MADE: list[SwellServer] = []


@pytest.fixture(autouse=True)
def _kill_servers() -> Iterator[None]:
    """A failed assertion must not leave this test's servers running."""
    yield
    while _MADE:
        srv = _MADE.pop()
        if srv.is_running:
            srv.kill9()


def _server(moto: MotoS3, data: Path, url: str, *extra: str, key: bool = True) -> SwellServer:
    env = moto.env() | ({"SWELL_SECRET_STORE_PRIVATE_KEY_HEX": KEY} if key else {})
    args = ["--state-store", url, *extra]
    srv = SwellServer(data, extra_args=args, env=env)
    _MADE.append(srv)
    return srv


def _rows(c: Any, sql: str) -> list[tuple[Any, ...]]:
    return sorted(c.execute(sql).fetchall(), key=repr)


def _check_views(c: Any) -> None:
    for name, query in VIEWS.items():
        got = _rows(c, f"SELECT * FROM {name}")
        assert got == _rows(c, query), name
        assert got, name  # the comparison is not vacuous


def _status(c: Any) -> dict[str, Any]:
    cur = c.execute("SELECT * FROM rw_catalog.rw_state_store_status")
    names = [d.name for d in cur.description]
    rows = cur.fetchall()
    assert len(rows) == 1
    return dict(zip(names, rows[0], strict=True))


def _iceberg_ids(wh: Path) -> list[int]:
    cfg = IcebergConfig.parse(
        {"catalog.type": "storage", "warehouse.path": str(wh)}, need_table=False
    )
    t = load_catalog(cfg).load_table(("ns", "t")).scan().to_arrow()
    return sorted(t.column("id").to_pylist())


def test_restore_after_losing_the_data_directory(
    moto_server: MotoS3,  # noqa: F811
    kafka_broker: Any,
    kafka_topic: Any,
    tmp_path: Path,
) -> None:
    url = f"s3://{moto_server.bucket()}/db"
    topic = kafka_topic()
    kafka_broker.produce(topic, [{"id": i} for i in range(50)])
    wh = tmp_path / "warehouse"  # stands for an S3 warehouse: it outlives the data directory
    a = _server(moto_server, tmp_path / "a", url).start()
    with a.connect() as c:
        c.execute("CREATE TABLE t (id INT PRIMARY KEY, k INT, v INT)")
        c.execute("CREATE TABLE dim (k INT PRIMARY KEY, name VARCHAR)")
        c.execute("CREATE TABLE ev (id INT) APPEND ONLY")
        c.execute(
            f"CREATE TABLE kt (id INT) WITH (connector = 'kafka', topic = '{topic}', "
            f"properties.bootstrap.server = '{kafka_broker.bootstrap}', "
            "scan.startup.mode = 'earliest') FORMAT PLAIN ENCODE JSON"
        )
        for name, query in VIEWS.items():
            c.execute(f"CREATE MATERIALIZED VIEW {name} AS {query}")
        c.execute("CREATE VIEW v_small AS SELECT * FROM t WHERE v < 100")
        c.execute(
            f"CREATE SINK sk FROM ev WITH (connector = 'iceberg', type = 'append-only', "
            f"catalog.type = 'storage', warehouse.path = '{wh}', database.name = 'ns', "
            "table.name = 't', create_table_if_not_exists = 'true', "
            "commit_checkpoint_interval = 5)"
        )
        c.execute("CREATE SECRET pw WITH (backend = 'meta') AS 'hunter2'")
        c.execute("CREATE USER alice WITH PASSWORD 'pw1'")
        c.execute("CREATE DATABASE shop")
        with a.connect(dbname="shop") as shop:  # its objects come back apart from dev's
            shop.execute("CREATE SCHEMA s")
            shop.execute("CREATE SECRET pw2 WITH (backend = 'meta') AS 'in shop'")
            shop.execute("CREATE TABLE s.t (a INT)")
            shop.execute("INSERT INTO s.t VALUES (5)")
        c.execute("INSERT INTO dim SELECT g, 'n' || g FROM generate_series(0, 9) g")
        c.execute("INSERT INTO t SELECT g, g % 10, g * 3 FROM generate_series(1, 3000) g")
        c.execute("INSERT INTO ev SELECT g FROM generate_series(1, 40) g")
        wait_for(lambda: c.execute("SELECT count(*) FROM kt").fetchone()[0] == 50, 30)
        c.execute("FLUSH")
        # change: updates, deletes, more rows; then the FLUSH that must survive
        c.execute("UPDATE t SET v = v + 1 WHERE k = 3")
        c.execute("DELETE FROM t WHERE k = 4 AND v > 3000")
        c.execute("INSERT INTO t SELECT g, g % 10, g FROM generate_series(3001, 3500) g")
        c.execute("INSERT INTO ev SELECT g FROM generate_series(41, 60) g")
        c.execute("DELETE FROM dim WHERE k = 9")
        c.execute("FLUSH")
        expected = {n: _rows(c, f"SELECT * FROM {n}") for n in [*VIEWS, "t", "dim", "v_small"]}
        st = _status(c)
        assert st["state"] in ("idle", "collecting", "uploading")
        assert st["uploaded_epoch"] >= 1 and st["consecutive_failures"] == 0
    a.kill9()
    shutil.rmtree(tmp_path / "a")  # the disk is gone

    # without the secret store key the restore stops with a clear message
    nokey = _server(moto_server, tmp_path / "nokey", url, key=False)
    with pytest.raises(ServerError):
        nokey.start()
    log = nokey.log_text()
    assert "secret store key is missing" in log and "restored from" in log, log[-2000:]

    b = _server(moto_server, tmp_path / "b", url).start()
    try:
        assert "restore progress" in b.log_text()
        with b.connect() as c:
            for n, rows in expected.items():
                assert _rows(c, f"SELECT * FROM {n}") == rows, n
            _check_views(c)
            assert _rows(c, "SELECT name FROM rw_catalog.rw_secrets") == [("pw",)]
            assert ("alice",) in _rows(c, "SELECT usename FROM pg_user")
        with b.connect(dbname="shop") as shop:
            assert _rows(shop, "SELECT name FROM rw_catalog.rw_secrets") == [("pw2",)]
            assert _rows(shop, "SELECT a FROM s.t") == [(5,)]
        with b.connect() as c:
            kinds = dict(_rows(c, "SELECT name, relation_type FROM rw_catalog.rw_relations"))
            assert {"sk", "kt", "v_small", *VIEWS} <= set(kinds)
            # the Kafka source resumes from its stored offsets
            kafka_broker.produce(topic, [{"id": i} for i in range(50, 80)])
            wait_for(lambda: c.execute("SELECT count(*) FROM kt").fetchone()[0] >= 80, 30)
            c.execute("FLUSH")
            assert c.execute("SELECT id FROM kt ORDER BY id").fetchall() == [
                (i,) for i in range(80)
            ]
            # streaming goes on after the restore
            c.execute("INSERT INTO t VALUES (9001, 3, 7)")
            c.execute("FLUSH")
            _check_views(c)
        # the Iceberg sink: every row exactly once
        wait_for(lambda: len(_iceberg_ids(wh)) >= 60, 30)
        with b.connect() as c:
            for _ in range(6):  # a few more checkpoints: nothing may be committed twice
                c.execute("FLUSH")
        assert _iceberg_ids(wh) == list(range(1, 61))
    finally:
        b.stop()


def test_outage_during_upload_retries_and_never_blocks(
    moto_server: MotoS3,  # noqa: F811
    tmp_path: Path,
) -> None:
    url = f"s3://{moto_server.bucket()}/outage"
    a = _server(moto_server, tmp_path / "a", url, "--upload-interval", "3600").start()
    with a.connect() as c, a.connect() as c2:
        c.execute("CREATE TABLE t (id INT PRIMARY KEY, k INT, v INT)")
        c.execute("CREATE TABLE dim (k INT PRIMARY KEY, name VARCHAR)")
        for name, query in VIEWS.items():
            c.execute(f"CREATE MATERIALIZED VIEW {name} AS {query}")
        c.execute("INSERT INTO dim SELECT g, 'n' || g FROM generate_series(0, 9) g")
        c.execute("INSERT INTO t SELECT g, g % 10, g FROM generate_series(1, 5000) g")
        c.execute("FLUSH")
        c.execute("INSERT INTO t SELECT g, g % 10, g FROM generate_series(5001, 10000) g")
        events: list[str] = []
        moto_server.pause()
        try:
            flusher = threading.Thread(target=lambda: (c.execute("FLUSH"), events.append("flush")))
            flusher.start()
            wait_for(lambda: _status(c2)["consecutive_failures"] >= 1, 60)
            st = _status(c2)
            assert st["state"] == "retrying" and st["last_error"], st
            # reads and DML go on while S3 is down
            c2.execute("INSERT INTO t VALUES (50000, 1, 1)")
            count = "SELECT count(*) FROM t"  # epochs commit locally meanwhile
            wait_for(lambda: c2.execute(count).fetchone() == (10001,), 30)
            events.append("dml")
            assert flusher.is_alive()  # FLUSH waits for S3
        finally:
            moto_server.resume()
        flusher.join(60)
        assert events == ["dml", "flush"]
        st = _status(c2)
        assert st["uploaded_epoch"] >= 1 and st["failures"] >= 1
        c2.execute("FLUSH")
        expected = {n: _rows(c2, f"SELECT * FROM {n}") for n in [*VIEWS, "t"]}
    a.kill9()
    shutil.rmtree(tmp_path / "a")
    b = _server(moto_server, tmp_path / "b", url).start()
    try:
        with b.connect() as c:
            for n, rows in expected.items():
                assert _rows(c, f"SELECT * FROM {n}") == rows, n
            _check_views(c)
    finally:
        b.stop()


def test_gc_keeps_what_retained_manifests_name(
    moto_server: MotoS3,  # noqa: F811
    tmp_path: Path,
) -> None:
    bucket = moto_server.bucket()
    keep = 2
    a = _server(
        moto_server,
        tmp_path / "a",
        f"s3://{bucket}/gc",
        "--upload-interval",
        "3600",
        "--keep-manifests",
        str(keep),
    ).start()
    seen_objects: set[str] = set()
    with a.connect() as c:
        c.execute("CREATE TABLE t (id INT PRIMARY KEY, k INT, v INT)")
        c.execute("CREATE MATERIALIZED VIEW mv_agg AS " + VIEWS["mv_agg"])
        rounds = 24  # one L0 file per upload; the store compacts L0 at 20 files
        for r in range(rounds):
            lo = r * 1000
            c.execute(f"INSERT INTO t SELECT g, g % 97, g FROM generate_series({lo}, {lo + 999}) g")
            c.execute(f"DELETE FROM t WHERE id < {lo} AND id % 2 = 0")
            c.execute("FLUSH")
            if r % 4 != 3:
                continue
            wait_for(lambda: _status(c)["state"] == "idle", 30)  # its collection finished
            keys = moto_server.keys(bucket, "gc/")
            manifests = sorted(k for k in keys if k.startswith("manifests/"))
            assert 1 <= len(manifests) <= keep, manifests
            named: set[str] = set()
            for m in manifests:
                body = moto_server.client.get_object(Bucket=bucket, Key="gc/" + m)["Body"]
                doc = json.loads(body.read())
                for f in doc["files"]:
                    if "key" in f:
                        named.add(f["key"])
                        assert keys[f["key"]] == f["size"], f  # every named object is there
            objects = {k for k in keys if k.startswith("files/")}
            assert objects == named  # and nothing else is kept
            seen_objects |= objects
        st = _status(c)
        assert st["objects_deleted"] > 0 and st["uploads"] >= rounds
        assert seen_objects - objects  # older objects were collected
    a.stop()  # a restore from such a store: the two tests above
