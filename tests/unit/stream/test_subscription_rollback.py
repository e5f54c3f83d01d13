"""A subscription's change log follows the epoch: a barrier that fails after the log was
written (before or after the checkpoint was built) leaves no entry behind, the retried
epoch logs the rows once, and an open cursor sees them exactly once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine import faults
from engine.database import Config, open_database
from engine.errors import EpochFailed


@pytest.fixture(autouse=True)
def _no_faults() -> Iterator[None]:
    faults.configure()
    yield
    faults.configure()


@pytest.mark.parametrize("point", ["sinks_pre_committed", "checkpoint_batch"])
def test_failed_epoch_leaves_no_log_entry(tmp_path: Path, point: str) -> None:
    db = open_database(Config(data_dir=tmp_path / "d", barrier_interval_ms=600_000))
    try:
        s = db.connect("root", "dev")

        def q(sql: str) -> list[tuple[object, ...]]:
            return s.execute_simple(sql)[-1].rows

        q("CREATE TABLE t (k INT PRIMARY KEY)")
        q("CREATE SUBSCRIPTION sub FROM t WITH (retention = '1D')")
        q("DECLARE c SUBSCRIPTION CURSOR FOR sub SINCE begin()")
        q("INSERT INTO t VALUES (1)")
        q("FLUSH")
        faults.configure(fail=f"{point}:1")
        q("INSERT INTO t VALUES (2)")
        with pytest.raises(EpochFailed):
            q("FLUSH")
        assert [r[0] for r in q("FETCH 10 FROM c")] == [1]  # the failed epoch is not there
        faults.configure()
        q("FLUSH")  # the write is replayed from the WAL into the next epoch
        rows = q("FETCH 10 FROM c")
        assert [(r[0], r[1]) for r in rows] == [(2, "Insert")]
        assert q("FETCH 10 FROM c") == []
    finally:
        db.close()
