"""statement_timeout as PostgreSQL has it: validated, shown with units, settable at startup,
and enforced during work (the statement stops with 57014 "canceling statement due to
statement timeout"); the connection stays usable afterwards.

The slow query is a UNION ALL of many counted 3000 x 3000 cross joins: it runs for tens of
seconds unless stopped, so a timeout that did not act would make the test fail (by the
statement answering rows instead of raising), not by a measured duration.
"""

from __future__ import annotations

import psycopg
import pytest

from harness.server import SwellServer

pytestmark = pytest.mark.clients

BRANCH = "SELECT count(*) AS n FROM generate_series(1, 3000) a, generate_series(1, 3000) b"
SLOW = " UNION ALL ".join([BRANCH] * 40)


def test_set_and_show_statement_timeout(server: SwellServer) -> None:
    with server.connect() as c:
        shown = []
        for value in ("2000", "'2s'", "'1.5s'", "'1min'", "0"):
            c.execute(f"SET statement_timeout = {value}")
            shown.append(c.execute("SHOW statement_timeout").fetchone()[0])
        assert shown == ["2s", "2s", "1500ms", "1min", "0"]
        with pytest.raises(psycopg.errors.InvalidParameterValue) as e:
            c.execute("SET statement_timeout = 'abc'")
        assert str(e.value).startswith('invalid value for parameter "statement_timeout": "abc"')
        with pytest.raises(psycopg.errors.InvalidParameterValue) as e:
            c.execute("SET statement_timeout = '5 parsecs'")
        assert e.value.diag.message_hint is not None and '"min"' in e.value.diag.message_hint
        assert c.execute("SHOW statement_timeout").fetchone() == ("0",)


def test_statement_timeout_stops_a_running_select(server: SwellServer) -> None:
    with server.connect() as c:
        c.execute("SET statement_timeout = '1s'")
        with pytest.raises(psycopg.errors.QueryCanceled) as e:
            c.execute(SLOW).fetchall()
        assert str(e.value).startswith("canceling statement due to statement timeout")
        # the limit is per statement: a quick one after it runs
        assert c.execute("SELECT 1").fetchone() == (1,)
        c.execute("SET statement_timeout = 0")
        assert c.execute("SELECT 2").fetchone() == (2,)


def test_statement_timeout_from_startup_options(server: SwellServer) -> None:
    with server.connect(options="-c statement_timeout=1s") as c:
        assert c.execute("SHOW statement_timeout").fetchone() == ("1s",)
        with pytest.raises(psycopg.errors.QueryCanceled):
            c.execute(SLOW).fetchall()
    with pytest.raises(psycopg.OperationalError, match="statement_timeout"):
        server.connect(options="-c statement_timeout=abc")
