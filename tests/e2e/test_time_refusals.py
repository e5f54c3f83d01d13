"""Refusals of unsupported streaming time patterns over the wire: SQLSTATE 0A000, the
RisingWave message and a HINT saying what to write instead (psycopg's diagnostics)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from harness.refusals import assert_refused

SETUP = [
    "CREATE TABLE tr_ev (id INT PRIMARY KEY, v INT, ts TIMESTAMP, "
    "WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)",
]
CASES = [
    (
        "CREATE MATERIALIZED VIEW tr_bad AS SELECT v, count(*) FROM tr_ev GROUP BY v "
        "EMIT ON WINDOW CLOSE",
        "Not supported: Emit-On-Window-Close mode requires a watermark column in GROUP BY.",
        "Group by a column with a watermark",
    ),
    (
        "CREATE MATERIALIZED VIEW tr_bad AS SELECT id, now() AS n FROM tr_ev",
        "Not supported: General `now()` function in streaming queries",
        "Streaming `now()` is currently only supported in GenerateSeries and TemporalFilter "
        "patterns.",
    ),
    (
        "CREATE MATERIALIZED VIEW tr_bad AS SELECT id FROM tr_ev WHERE ts > now() OR v = 1",
        "Not supported: General `now()` function in streaming queries",
        "TemporalFilter",
    ),
    (
        "CREATE MATERIALIZED VIEW tr_bad AS SELECT id FROM tr_ev WHERE v > (SELECT v FROM tr_ev)",
        "Not supported: dynamic filter with a subquery that may return several rows",
        "aggregate without GROUP BY",
    ),
]


@pytest.mark.e2e
def test_time_refusals_carry_sqlstate_and_hint(conn: psycopg.Connection[Any]) -> None:
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS tr_ev")
        for s in SETUP:
            cur.execute(s)
        try:
            for sql, message, hint in CASES:
                assert_refused(cur, sql, message, hint)
        finally:
            cur.execute("DROP TABLE IF EXISTS tr_ev")
