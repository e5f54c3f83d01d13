"""Parameters written without spaces between them, as drivers write them.

psycopg's `%s,%s` and JDBC's `?,?` reach the server as `$1,$2`. sqlglot's tokenizer reads
`$1,$` as the start of a dollar-quoted string, so such a query failed with "syntax
error: Error tokenizing" (found by replaying the differential fuzzer's rows through
psycopg). PostgreSQL reads them as parameters.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import psycopg
import pytest

pytestmark = pytest.mark.e2e


def test_parameters_without_spaces(conn: psycopg.Connection[Any]) -> None:
    conn.autocommit = True
    conn.execute("CREATE TABLE qp_t (id INT PRIMARY KEY, n NUMERIC, f FLOAT8, s VARCHAR, d DATE)")
    try:
        row = (1, Decimal("0.001"), 100.0, "a'b,$2", dt.date(1999, 12, 31))
        conn.execute("INSERT INTO qp_t VALUES (%s,%s,%s,%s,%s)", row)
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO qp_t VALUES (%s,%s,%s,%s,%s)",
                [(2, Decimal("-2.25"), float("nan"), None, None), (3, None, 1.5, "$$", None)],
            )
        conn.execute("FLUSH")
        assert conn.execute("SELECT %s,%s::int,%s", (1, "2", "x")).fetchall() == [(1, 2, "x")]
        got = conn.execute("SELECT * FROM qp_t WHERE id IN (%s,%s) ORDER BY id", (1, 3)).fetchall()
        assert got == [row, (3, None, 1.5, "$$", None)]
        # a dollar-quoted string and a string literal keep their text
        got = conn.execute("SELECT $$a$1,$$ AS x, '$1,$2' AS y, %s,%s", (7, 8)).fetchall()
        assert got == [("a$1,", "$1,$2", 7, 8)]
    finally:
        conn.execute("DROP TABLE IF EXISTS qp_t")
