"""CancelRequest against the real engine: a long ad-hoc query is stopped with 57014 at the
next plan node, and the connection stays usable.

The query is a UNION ALL of many slow branches (each a 3000 x 3000 cross join, counted),
so it runs for tens of seconds unless cancelled; the cancel is sent a moment after the
query started. If cancelling did not work, the query would complete and the test fail.
"""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from harness.server import SwellServer

pytestmark = pytest.mark.clients

BRANCH = "SELECT count(*) AS n FROM generate_series(1, 3000) a, generate_series(1, 3000) b"
SLOW = " UNION ALL ".join([BRANCH] * 40)


def test_cancel_stops_a_running_query(server: SwellServer) -> None:
    with server.connect() as c:
        errors: list[BaseException] = []

        def run() -> None:
            try:
                c.execute(SLOW).fetchall()
            except BaseException as e:  # noqa: BLE001 - inspected below
                errors.append(e)

        t = threading.Thread(target=run)
        t.start()
        time.sleep(1.0)
        c.cancel_safe()
        t.join(120)
        assert not t.is_alive()
        assert len(errors) == 1 and isinstance(errors[0], psycopg.errors.QueryCanceled), errors
        assert str(errors[0]).startswith("canceling statement due to user request")
        assert c.execute("SELECT 1").fetchone() == (1,)
