"""An in-process database and session for catalog tests.

`db` opens a fresh database in a temporary directory (closed after the test); `sql(text)`
runs statements in one session and returns the last result's rows; `result(text)` returns
the last `QueryResult` (columns with their types).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.database import Config, SwellDatabase, open_database


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SwellDatabase]:
    d = open_database(Config(data_dir=tmp_path / "data", barrier_interval_ms=60_000))
    try:
        yield d
    finally:
        d.close()


@pytest.fixture
def session(db: SwellDatabase) -> Any:
    return db.connect("root", "dev")


@pytest.fixture
def result(session: Any) -> Callable[[str], Any]:
    def run(text: str) -> Any:
        return session.execute_simple(text)[-1]

    return run


@pytest.fixture
def sql(result: Callable[[str], Any]) -> Callable[[str], list[tuple[Any, ...]]]:
    def run(text: str) -> list[tuple[Any, ...]]:
        return list(result(text).rows)

    return run
