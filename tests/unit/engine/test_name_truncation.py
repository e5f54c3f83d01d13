"""Names longer than 63 bytes are cut as PostgreSQL cuts them, with its NOTICE and code.

The NOTICE's SQLSTATE (42622 name_too_long) is what clients that log notices by code
see; sqllogictest cannot check notices, so this runs a session in process.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.database import Config, SwellDatabase


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SwellDatabase]:
    d = SwellDatabase(Config(data_dir=tmp_path / "data", barrier_interval_ms=60_000))
    try:
        yield d
    finally:
        d.close()


def test_long_name_is_truncated_with_a_42622_notice(db: SwellDatabase) -> None:
    long = "n" * 70
    (res,) = db.connect("root", "dev").execute_simple(f"CREATE TABLE {long} (x INT)")
    assert [(n.sqlstate, n.message) for n in res.notices] == [
        ("42622", f'identifier "{long}" will be truncated to "{"n" * 63}"')
    ]
    assert db.catalog.find("n" * 63) is not None
