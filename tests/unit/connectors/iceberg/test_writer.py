"""IcebergWriter against real catalogs: SQL (SQLite) and the storage catalog on files and moto."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from connectors.iceberg.config import IcebergConfig, load_catalog
from connectors.iceberg.schema import to_arrow
from connectors.iceberg.writer import IcebergWriter, MemoryLog
from engine.chunk import StreamChunk
from engine.errors import DatatypeMismatch, InvalidParameterValue, UndefinedObject, UndefinedTable
from engine.types import BIGINT, DOUBLE, VARCHAR, Field
from harness.iceberg import moto_s3  # noqa: F401

FIELDS = [Field("id", BIGINT), Field("name", VARCHAR), Field("price", DOUBLE)]


def _opts(kind: str, tmp_path: Any, moto: dict[str, Any] | None, **extra: str) -> dict[str, str]:
    o: dict[str, str] = {"database.name": "ns", "table.name": "t"}
    if kind == "sql":
        o.update(
            {
                "catalog.type": "sql",
                "catalog.uri": f"sqlite:///{tmp_path}/cat.db",
                "warehouse.path": f"file://{tmp_path}/wh",
            }
        )
    elif kind == "storage":
        o.update({"catalog.type": "storage", "warehouse.path": str(tmp_path / "wh")})
    else:
        assert moto is not None
        bucket = moto["bucket"](f"wh-{abs(hash(str(tmp_path))) % 10**8}")
        o.update(
            {
                "catalog.type": "storage",
                "warehouse.path": f"s3://{bucket}/warehouse",
                "s3.endpoint": moto["endpoint"],
                "s3.region": "us-east-1",
                "s3.access.key": "test",
                "s3.secret.key": "test",
                "s3.path.style.access": "true",
            }
        )
    o.update(extra)
    return o


def _chunk(pretty: str) -> StreamChunk:
    return StreamChunk.from_pretty(pretty, FIELDS)


def _writer(opts: dict[str, str], mode: str, log: Any = None, interval: int = 1) -> IcebergWriter:
    w = IcebergWriter(
        IcebergConfig.parse(opts),
        FIELDS,
        [0],
        mode=mode,
        sink_key="s1",
        commit_interval=interval,
        create_if_not_exists=True,
        log_table=log,
    )
    w.open()
    w.recover()
    return w


def _rows(w: IcebergWriter) -> list[tuple[Any, ...]]:
    w.table.refresh()
    t = w.table.scan().to_arrow().sort_by("id")
    return list(zip(*[t.column(n).to_pylist() for n in ("id", "name", "price")], strict=True))


@pytest.mark.parametrize("kind", ["sql", "storage", "s3"])
def test_upsert_and_append(kind: str, tmp_path: Any, moto_s3: dict[str, Any]) -> None:  # noqa: F811
    w = _writer(_opts(kind, tmp_path, moto_s3), "upsert")
    w.write(1, _chunk("+ 1 a 1.5\n+ 2 b 2.5\n+ 3 c 3.5"))
    assert w.after_checkpoint(1)
    w.write(2, _chunk("U- 1 a 1.5\nU+ 1 A 9.0\n- 2 b 2.5\n+ 4 d 4.0"))
    assert w.after_checkpoint(2)
    assert _rows(w) == [(1, "A", 9.0), (3, "c", 3.5), (4, "d", 4.0)]
    assert w.committed_epoch() == 2
    a = _writer(_opts(kind, tmp_path, moto_s3, **{"table.name": "a"}), "append-only")
    a.write(5, _chunk("+ 1 a 1.0\n- 1 a 1.0\n+ 2 b 2.0"))
    a.after_checkpoint(5)
    assert _rows(a) == [(1, "a", 1.0), (2, "b", 2.0)]


def test_commit_interval_and_recovery_exactly_once(tmp_path: Any) -> None:
    log = MemoryLog()
    opts = _opts("storage", tmp_path, None)
    w = _writer(opts, "append-only", log, interval=2)
    w.write(1, _chunk("+ 1 a 1.0"))
    assert not w.after_checkpoint(1)
    w.write(2, _chunk("+ 2 b 2.0"))
    # crash after the Iceberg commit but before the checkpoint that clears the log:
    saved = dict(log._d)
    assert w.after_checkpoint(2)
    log._d.update(saved)
    w2 = _writer(opts, "append-only", log, interval=2)  # recover() drops what is committed
    assert len(log) == 0
    assert w2.committed_epoch() == 2
    # crash before the Iceberg commit: the log survives and is committed once
    w2.write(3, _chunk("+ 3 c 3.0"))
    w3 = _writer(opts, "append-only", log, interval=1)
    assert len(log) == 1
    w3.after_checkpoint(4)
    assert [r[0] for r in _rows(w3)] == [1, 2, 3]


def test_create_time_errors(tmp_path: Any) -> None:
    with pytest.raises(InvalidParameterValue, match="s3.region is missing"):
        IcebergConfig.parse(
            {
                "catalog.type": "storage",
                "warehouse.path": "s3://b/w",
                "s3.endpoint": "http://127.0.0.1:1",
                "database.name": "d",
                "table.name": "t",
            }
        )
    with pytest.raises(InvalidParameterValue, match="logical name"):
        IcebergConfig.parse(
            {
                "catalog.type": "rest",
                "catalog.uri": "http://x/catalog",
                "warehouse.path": "s3://bucket/demo",
                "database.name": "d",
                "table.name": "t",
            }
        )
    with pytest.raises(InvalidParameterValue, match="is a name"):
        IcebergConfig.parse(
            {
                "catalog.type": "storage",
                "warehouse.path": "demo",
                "database.name": "d",
                "table.name": "t",
            }
        )
    opts = _opts("sql", tmp_path, None)
    w = IcebergWriter(IcebergConfig.parse(opts), FIELDS, [0], mode="upsert", sink_key="x")
    with pytest.raises(UndefinedObject, match="namespace"):
        w.open()
    load_catalog(IcebergConfig.parse(opts)).create_namespace("ns")
    with pytest.raises(UndefinedTable, match="table.name") as ei:
        w.open()
    assert "create_table_if_not_exists" in (ei.value.hint or "")
    _writer(opts, "upsert")
    bad = [Field("id", VARCHAR), Field("nme", VARCHAR), Field("price", DOUBLE)]
    w = IcebergWriter(IcebergConfig.parse(opts), bad, [0], mode="upsert", sink_key="y")
    with pytest.raises(DatatypeMismatch, match=r"nme.*id \(character varying"):
        w.open()


def test_storage_catalog_conflict_detected(tmp_path: Any) -> None:
    from pyiceberg.exceptions import CommitFailedException

    opts = _opts("storage", tmp_path, None)
    w = _writer(opts, "append-only")
    t1 = w.table
    cat = load_catalog(IcebergConfig.parse(opts))
    t2 = cat.load_table(("ns", "t"))
    sch = t1.schema()
    t1.append(to_arrow(pa.table({"id": [1], "name": ["a"], "price": [1.0]}), sch))
    # t2 is stale: its commit is refused, pyiceberg reloads and retries, nothing is lost
    t2.append(to_arrow(pa.table({"id": [2], "name": ["b"], "price": [2.0]}), sch))
    assert len(cat.load_table(("ns", "t")).scan().to_arrow()) == 2
    # the primitive itself: creating an existing version fails
    table_dir = str(tmp_path / "wh" / "ns" / "t")
    with pytest.raises(CommitFailedException):
        cat._write_version(table_dir, 2, t1.metadata)
    assert (tmp_path / "wh/ns/t/metadata/version-hint.text").read_text() == "3"


def test_jdbc_sqlite_uri_and_partition_by(tmp_path: Any) -> None:
    from connectors.iceberg.config import jdbc_to_sqlalchemy

    assert jdbc_to_sqlalchemy("jdbc:postgresql://h:5432/db?user=u&password=p", None, None) == (
        "postgresql+psycopg://u:p@h:5432/db"
    )
    opts = {
        "catalog.type": "jdbc",
        "catalog.uri": f"jdbc:sqlite:{tmp_path}/jdbc.db",
        "warehouse.path": f"file://{tmp_path}/wh",
        "database.name": "ns",
        "table.name": "p",
    }
    w = IcebergWriter(
        IcebergConfig.parse(opts),
        FIELDS,
        [0],
        mode="upsert",
        sink_key="j",
        commit_interval=1,
        create_if_not_exists=True,
        partition_by="bucket(4, id), name",
    )
    w.open()
    w.recover()
    spec = w.table.spec()
    assert [str(f.transform) for f in spec.fields] == ["bucket[4]", "identity"]
    w.write(1, _chunk("+ 1 a 1.0\n+ 2 b 2.0\n+ 3 a 3.0"))
    assert w.after_checkpoint(1)
    w.write(2, _chunk("- 2 b 2.0"))
    assert w.after_checkpoint(2)
    assert [r[0] for r in _rows(w)] == [1, 3]
    with pytest.raises(InvalidParameterValue, match="partition_by"):
        IcebergWriter(
            IcebergConfig.parse({**opts, "table.name": "q"}),
            FIELDS,
            [0],
            mode="upsert",
            sink_key="j",
            create_if_not_exists=True,
            partition_by="bucket(4, nope)",
        ).open()
