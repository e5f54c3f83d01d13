"""A prepared statement whose relation changed shape is refused, as in PostgreSQL.

psycopg prepares a query it runs often; when the relation it reads is dropped and
re-created with other columns, rows sent under the old row description would be decoded
wrongly by the client ("unexpected field count"), so PostgreSQL answers 0A000 "cached
plan must not change result type". Found by the differential fuzzer (tests/fuzz).
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

pytestmark = pytest.mark.e2e


def test_changed_result_type_is_refused(conn: psycopg.Connection[Any]) -> None:
    conn.autocommit = True
    conn.execute("CREATE TABLE ps_t (a INT)")
    try:
        conn.execute("INSERT INTO ps_t VALUES (1)")
        conn.execute("FLUSH")
        assert conn.execute("SELECT * FROM ps_t", prepare=True).fetchall() == [(1,)]
        conn.execute("DROP TABLE ps_t")
        conn.execute("CREATE TABLE ps_t (a VARCHAR, b INT)")
        with pytest.raises(psycopg.errors.FeatureNotSupported, match="cached plan"):
            conn.execute("SELECT * FROM ps_t", prepare=True).fetchall()
        assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        conn.execute("DROP TABLE IF EXISTS ps_t")
