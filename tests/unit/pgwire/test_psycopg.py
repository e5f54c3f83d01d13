"""pgwire driven by psycopg 3: simple and extended protocol, text and binary, errors."""

from __future__ import annotations

import datetime as dt
import time
from decimal import Decimal

import psycopg
import pytest
from psycopg.types.json import Jsonb


def _results(pgconn: psycopg.pq.abc.PGconn) -> list[psycopg.pq.abc.PGresult]:
    """Drain results without blocking in libpq (which holds the GIL the server thread needs)."""
    pgconn.flush()
    out = []
    while True:
        pgconn.consume_input()
        while pgconn.is_busy():
            time.sleep(0.005)
            pgconn.consume_input()
        res = pgconn.get_result()
        if res is None:
            return out
        out.append(res)


def test_connect_reports_parameters(pg) -> None:
    with psycopg.connect(pg.dsn, autocommit=True, application_name="tester") as conn:
        ps = conn.info.parameter_status
        assert ps("server_version") == "13.14.0"
        assert ps("client_encoding") == "UTF8"
        assert ps("DateStyle") == "ISO, MDY"
        assert ps("TimeZone") == "UTC"
        assert ps("integer_datetimes") == "on"
        assert ps("session_authorization") == "root"
        assert ps("application_name") == "tester"
        assert conn.info.backend_pid > 0


def test_unknown_database_is_fatal_3d000(pg) -> None:
    with pytest.raises(psycopg.OperationalError, match='database "nope" does not exist'):
        psycopg.connect(f"host=127.0.0.1 port={pg.port} user=root dbname=nope")


def test_simple_query_and_multi_statement(pg) -> None:
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        assert conn.execute("select 1").fetchall() == [(1,)]
        cur = conn.execute("insert")
        assert cur.statusmessage == "INSERT 0 1"
        assert cur.rowcount == 1
        # several statements in one Query: one result set each
        cur = conn.execute("select 1; series 3")
        assert cur.fetchall() == [(1,)]
        assert cur.nextset()
        assert cur.fetchall() == [(0,), (1,), (2,)]


def test_all_types_text_and_binary(pg) -> None:
    expected = (
        True,
        -32768,
        2147483647,
        -9223372036854775808,
        1.5,
        0.1,
        Decimal("-12345.678"),
        'héllo, "world"',
        b"\x00\xff\x10",
        dt.date(1999, 12, 31),
        dt.time(23, 59, 59, 123000),
        dt.datetime(2024, 1, 2, 3, 4, 5, 600000),
        dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC),
        # psycopg reads 1 year 2 mons 3 days as 365 + 2 * 30 + 3 days
        dt.timedelta(days=428, hours=4, minutes=5, seconds=6),
        {"a": [1, 2]},
        [1, None, 3],
        ["a b", "c", None, ""],
    )
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        for binary in (False, True):
            rows = conn.cursor(binary=binary).execute("all types").fetchall()
            got = rows[0]
            assert got == expected, binary
            assert rows[1] == (None,) * len(expected)


def test_text_output_matches_postgres(pg) -> None:
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        cur = conn.cursor()
        # raw text values as sent on the wire
        cur.execute("all types")
        raw = [cur.pgresult.get_value(0, i).decode() for i in range(cur.pgresult.nfields)]
        assert raw == [
            "t",
            "-32768",
            "2147483647",
            "-9223372036854775808",
            "1.5",
            "0.1",
            "-12345.678",
            'héllo, "world"',
            "\\x00ff10",
            "1999-12-31",
            "23:59:59.123",
            "2024-01-02 03:04:05.6",
            "2024-01-02 03:04:05+00:00",
            "1 year 2 mons 3 days 04:05:06",
            '{"a": [1, 2]}',
            "{1,NULL,3}",
            '{"a b",c,NULL,""}',
        ]


@pytest.mark.parametrize("binary", [False, True])
def test_extended_params_of_each_type(pg, binary: bool) -> None:
    values = [
        True,
        7,
        2**40,
        2.25,
        Decimal("1.5"),
        "text ü",
        b"\x01\x02",
        dt.date(2024, 2, 29),
        dt.time(1, 2, 3),
        dt.datetime(2024, 1, 2, 3, 4, 5, 6),
        dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=5))),
        dt.timedelta(days=-1, seconds=5),
        Jsonb({"k": "v"}),
        [1, 2, None],
    ]
    placeholders = ", ".join(["%s"] * len(values))
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        cur = conn.cursor(binary=binary)
        cur.execute(f"echo {placeholders}", values)
        row = cur.fetchone()
    assert row is not None
    assert row[0] is True and row[1] == 7 and row[2] == 2**40 and row[3] == 2.25
    assert row[4] == Decimal("1.5") and row[5] == "text ü" and row[6] == b"\x01\x02"
    assert row[7:10] == (
        dt.date(2024, 2, 29),
        dt.time(1, 2, 3),
        dt.datetime(2024, 1, 2, 3, 4, 5, 6),
    )
    assert row[10] == dt.datetime(2024, 1, 1, 22, 4, 5, tzinfo=dt.UTC)
    assert row[11] == dt.timedelta(days=-1, seconds=5)
    assert row[12] == {"k": "v"}
    assert row[13] == [1, 2, None]


def test_prepared_statement_reused(pg) -> None:
    with psycopg.connect(pg.dsn, autocommit=True, prepare_threshold=0) as conn:
        for i in range(6):
            assert conn.execute("echo %s::int", [i]).fetchone() == (i,)
        assert conn.execute("echo %s::int", [None]).fetchone() == (None,)


def test_error_fields_and_recovery(pg) -> None:
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        with pytest.raises(psycopg.errors.SyntaxError) as info:
            conn.execute("fail")
        diag = info.value.diag
        assert diag.sqlstate == "42601"
        assert diag.message_primary == 'syntax error at or near "fail"'
        assert diag.message_hint == "Try again."
        assert diag.statement_position == "1"
        assert diag.severity == "ERROR"
        with pytest.raises(psycopg.errors.InternalError_) as info2:
            conn.execute("crash")
        assert info2.value.diag.message_primary == "internal error"
        assert "secret" not in str(info2.value)
        # extended protocol error, then the connection still works
        with pytest.raises(psycopg.errors.SyntaxError):
            conn.execute("fail", prepare=True)
        assert conn.execute("select 1").fetchone() == (1,)


def test_transaction_status_tracking(pg) -> None:
    with psycopg.connect(pg.dsn) as conn:  # not autocommit: psycopg sends BEGIN
        conn.execute("select 1")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        with pytest.raises(psycopg.errors.SyntaxError):
            conn.execute("fail")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INERROR
        with pytest.raises(psycopg.errors.InFailedSqlTransaction):
            conn.execute("select 1")
        conn.rollback()
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.execute("select 1").fetchone() == (1,)
        conn.commit()
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_commit_of_failed_block_reports_rollback(pg) -> None:
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        conn.execute("begin")
        with pytest.raises(psycopg.errors.SyntaxError):
            conn.execute("fail")
        cur = conn.execute("commit")
        assert cur.statusmessage == "ROLLBACK"
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_partial_results_before_error(pg) -> None:
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        conn.pgconn.send_query(b"series 2; fail; select 1")
        results = _results(conn.pgconn)
        assert [r.status for r in results] == [
            psycopg.pq.ExecStatus.TUPLES_OK,
            psycopg.pq.ExecStatus.FATAL_ERROR,
        ]
        assert results[0].ntuples == 2


def test_timezone_set_updates_status_and_output(pg) -> None:
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        conn.execute("set timezone to 'Asia/Shanghai'")
        assert conn.info.parameter_status("TimeZone") == "Asia/Shanghai"
        cur = conn.cursor()
        cur.execute("all types")
        assert cur.pgresult.get_value(0, 12) == b"2024-01-02 11:04:05+08:00"
        row = cur.fetchone()
        assert row[12] == dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)


def test_notice_and_empty_query(pg) -> None:
    notices: list[str] = []
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
        conn.execute("notice")
        assert notices == ["hello from the engine"]
        conn.pgconn.send_query(b"-- nothing")
        results = _results(conn.pgconn)
        assert [r.status for r in results] == [psycopg.pq.ExecStatus.EMPTY_QUERY]


def test_pipeline_mode(pg) -> None:
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        with conn.pipeline():
            curs = [conn.execute("echo %s::int", [i]) for i in range(5)]
            fail = conn.cursor()
        assert [c.fetchone() for c in curs] == [(i,) for i in range(5)]
        del fail
