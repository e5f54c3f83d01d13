"""The REST catalog path against a real server (lakana-server, in its own venv)."""

from __future__ import annotations

from typing import Any

import pytest

from connectors.iceberg.config import IcebergConfig
from connectors.iceberg.writer import IcebergWriter
from engine.chunk import StreamChunk
from engine.errors import ConnectorError, UndefinedTable
from engine.types import BIGINT, VARCHAR, Field
from harness.iceberg import lakana  # noqa: F401

FIELDS = [Field("id", BIGINT), Field("v", VARCHAR)]
# the first run installs lakana-server into its own venv (about 30 s, more on a cold cache)
pytestmark = pytest.mark.timeout(900)


def _opts(lk: dict[str, Any], **kw: str) -> dict[str, str]:
    o = {
        "catalog.type": "rest",
        "catalog.uri": lk["uri"],
        "catalog.token": lk["token"],
        "warehouse.path": lk["prefix"],
        "database.name": "bronze",
        "table.name": "rest_t",
    }
    o.update(kw)
    return o


def test_rest_upsert_roundtrip(lakana: dict[str, Any]) -> None:  # noqa: F811
    cfg = IcebergConfig.parse(_opts(lakana))
    w = IcebergWriter(
        cfg, FIELDS, [0], mode="upsert", sink_key="r", create_if_not_exists=True, commit_interval=1
    )
    w.open()
    w.recover()
    w.write(1, StreamChunk.from_pretty("+ 1 a\n+ 2 b", FIELDS))
    assert w.after_checkpoint(1), w.status.last_error
    w.write(2, StreamChunk.from_pretty("U- 1 a\nU+ 1 z", FIELDS))
    assert w.after_checkpoint(2)
    t = w.table.scan().to_arrow().sort_by("id")
    assert t.column("v").to_pylist() == ["z", "b"]
    assert w.committed_epoch() == 2


def test_rest_errors(lakana: dict[str, Any]) -> None:  # noqa: F811
    cfg = IcebergConfig.parse(_opts(lakana, **{"table.name": "nope"}))
    w = IcebergWriter(cfg, FIELDS, [0], mode="upsert", sink_key="r")
    with pytest.raises(UndefinedTable, match="bronze.nope"):
        w.open()
    dead = IcebergConfig.parse(_opts(lakana, **{"catalog.uri": "http://127.0.0.1:9/catalog"}))
    with pytest.raises(ConnectorError, match="does not answer"):
        IcebergWriter(dead, FIELDS, [0], mode="upsert", sink_key="r").open()
    wrong = IcebergConfig.parse(_opts(lakana, **{"catalog.uri": lakana["uri"] + "/nothere"}))
    with pytest.raises(ConnectorError, match="REST catalog root"):
        IcebergWriter(wrong, FIELDS, [0], mode="upsert", sink_key="r").open()
