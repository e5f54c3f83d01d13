"""Refusals and binder errors of streaming SQL over the wire (psycopg's diagnostics).

Unsupported view patterns answer SQLSTATE 0A000 `Not supported: ...` with a HINT saying what
to write instead; binder errors (in CREATE MATERIALIZED VIEW, DML, TUMBLE/HOP) carry the position (ErrorResponse
'P' field, 1-based) of the offending name in the statement the user sent, although views
are planned from their regenerated query text.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from harness.refusals import assert_refused

SETUP = [
    "CREATE TABLE sr_t (id INT PRIMARY KEY, k VARCHAR, v INT)",
    "CREATE TABLE sr_u (id INT PRIMARY KEY, k VARCHAR, v INT)",
]
REFUSALS = [
    (
        "CREATE MATERIALIZED VIEW sr_bad AS SELECT sr_t.id FROM sr_t JOIN sr_u ON sr_t.v < sr_u.v",
        "Not supported: streaming nested-loop join",
        "dynamic filter",
    ),
    (
        "CREATE MATERIALIZED VIEW sr_bad AS SELECT id FROM sr_t WHERE v NOT IN "
        "(SELECT v FROM sr_u)",
        "Not supported: NOT IN (subquery) in a materialized view",
        "NOT EXISTS",
    ),
    (
        "CREATE MATERIALIZED VIEW sr_bad AS SELECT id FROM sr_t WHERE EXISTS "
        "(SELECT count(*) FROM sr_u WHERE sr_u.k = sr_t.k)",
        "Not supported: correlated EXISTS / IN subquery over an aggregate",
        "always true",
    ),
    (
        "CREATE MATERIALIZED VIEW sr_bad AS SELECT id, (SELECT v FROM sr_u WHERE sr_u.k = sr_t.k) "
        "FROM sr_t",
        "Not supported: a correlated scalar subquery that may return several rows",
        "Aggregate it",
    ),
    (
        "CREATE MATERIALIZED VIEW sr_bad AS SELECT id FROM sr_t LIMIT 3",
        "Not supported: LIMIT / OFFSET without ORDER BY in a materialized view",
        "Add ORDER BY",
    ),
]
BINDER = [
    ("CREATE MATERIALIZED VIEW sr_bad AS SELECT nope FROM sr_t", "42703", "nope"),
    ("CREATE MATERIALIZED VIEW sr_bad AS SELECT id FROM no_table", "42P01", "no_table"),
    (
        "CREATE MATERIALIZED VIEW sr_bad AS SELECT a.id FROM sr_t a JOIN sr_u b ON a.nope = b.id",
        "42703",
        "a.nope",
    ),
    ("CREATE MATERIALIZED VIEW sr_bad AS SELECT id FROM sr_t JOIN sr_u USING (k)", "42702", "id"),
    ("CREATE SINK sr_bad AS SELECT nope FROM sr_t WITH (connector = 'blackhole')", "42703", "nope"),
    (
        "CREATE SINK sr_bad AS SELECT id FROM no_table WITH (connector = 'blackhole')",
        "42P01",
        "no_table",
    ),
    ("CREATE SINK sr_bad AS SELECT id + FROM sr_t WITH (connector = 'blackhole')", "42601", "FROM"),
    ("SELEC * FROM sr_t", "42601", "SELEC"),
    ("INSERT INTO no_table VALUES (1)", "42P01", "no_table"),
    ("DELETE FROM no_table", "42P01", "no_table"),
    (
        "CREATE MATERIALIZED VIEW sr_bad AS SELECT window_start FROM "
        "TUMBLE(no_table, ts, INTERVAL '1' MINUTE)",
        "42P01",
        "no_table",
    ),
    ("SELECT 1::nosuchtype", "42704", "nosuchtype"),
    ("SELECT CAST(1 AS nosuchtype)", "42704", "nosuchtype"),
    ("SELECT '1'::int[]::nosuchtype", "42704", "nosuchtype"),
    ("CREATE TABLE sr_bad (id INT, a nosuchtype)", "42704", "nosuchtype"),
    ("CREATE MATERIALIZED VIEW sr_bad AS SELECT v::nosuchtype FROM sr_t", "42704", "nosuchtype"),
    # abs(1, 2, 3) is re-read qualified as pg_catalog.abs: positions still count the text as sent
    ("SELECT abs(1, 2, 3)", "42883", "abs"),
    ("SELECT k, abs(1, 2, 3) + abs(1, 2) FROM sr_t", "42883", "abs"),
]


@pytest.mark.e2e
def test_refusals_and_binder_positions(conn: psycopg.Connection[Any]) -> None:
    conn.autocommit = True
    with conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS sr_t CASCADE")
        cur.execute("DROP TABLE IF EXISTS sr_u CASCADE")
        for s in SETUP:
            cur.execute(s)
        try:
            for sql, message, hint in REFUSALS:
                assert_refused(cur, sql, message, hint)
            for sql, code, name in BINDER:
                with pytest.raises(psycopg.Error) as ei:
                    cur.execute(sql)
                diag = ei.value.diag
                assert diag.sqlstate == code, sql
                assert diag.statement_position == str(sql.index(name) + 1), sql
        finally:
            cur.execute("DROP TABLE IF EXISTS sr_t CASCADE")
            cur.execute("DROP TABLE IF EXISTS sr_u CASCADE")
