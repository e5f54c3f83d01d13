"""A CREATE MATERIALIZED VIEW cancelled while it runs leaves no view behind.

In-process, because the other sessions' SQL view of running statements (pg_stat_activity)
waits for the runtime lock a backfill holds: the test watches the session's own record
of its running statement instead, then cancels from another thread, as pgwire does.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.database import Config, SwellDatabase, open_database
from engine.errors import QueryCanceled


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SwellDatabase]:
    d = open_database(Config(data_dir=tmp_path / "data", barrier_interval_ms=60_000))
    try:
        yield d
    finally:
        d.close()


def test_cancel_during_create_materialized_view(db: SwellDatabase) -> None:
    s: Any = db.connect("root", "dev")
    s.execute_simple(
        "CREATE TABLE t (a int, b int);"
        "INSERT INTO t SELECT g, g % 5 FROM generate_series(1, 2000) g; FLUSH"
    )
    # throttled, so the backfill is still running when the cancel arrives however fast
    # the machine (a cancel that arrives once the view is built has no effect)
    s.execute_simple("SET backfill_rate_limit = 500")
    errors: list[BaseException] = []

    def create() -> None:
        try:
            s.execute_simple(
                "CREATE MATERIALIZED VIEW mv AS SELECT x.a, y.a AS ya FROM t x JOIN t y ON x.b = y.b"
            )
        except BaseException as e:  # noqa: BLE001 - inspected below
            errors.append(e)

    th = threading.Thread(target=create)
    th.start()
    end = time.monotonic() + 60
    while not (s.active_query or "").startswith("CREATE"):
        assert time.monotonic() < end and th.is_alive(), "CREATE never ran"
        time.sleep(0.001)
    s.cancel()
    th.join(120)
    assert len(errors) == 1 and isinstance(errors[0], QueryCanceled), errors
    assert str(errors[0]) == "canceling statement due to user request"
    with pytest.raises(Exception, match="mv"):
        s.execute_simple("SELECT count(*) FROM mv")
    s.execute_simple("RESET backfill_rate_limit")
    s.execute_simple("CREATE MATERIALIZED VIEW mv AS SELECT count(*) AS n FROM t")
    assert s.execute_simple("SELECT n FROM mv")[-1].rows == [(2000,)]
