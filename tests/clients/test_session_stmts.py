"""Transaction blocks, savepoints, cursors, COPY TO/FROM and the pool-reset statements,
driven by real clients against a real server.

The psql script's expected output (tests/clients/sql/session_stmts.expected) is what
PostgreSQL 15's psql printed for the same script against PostgreSQL 15, except for
Swell's RisingWave-style DDL tags (CREATE_TABLE, DROP_TABLE) and its FLUSH statement.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import asyncpg
import psycopg
import pytest
from psycopg import pq

from harness.server import SwellServer

pytestmark = pytest.mark.clients

SQL_DIR = Path(__file__).parent / "sql"
PSQL = shutil.which("psql")
JAVA = shutil.which("java")
JAR = Path("/usr/share/java/postgresql.jar")


@pytest.mark.needs("psql")
def test_psql_script_matches_postgresql(server: SwellServer) -> None:
    assert PSQL is not None
    script = SQL_DIR / "session_stmts.sql"
    r = subprocess.run(
        [PSQL, "-X", "-v", "ON_ERROR_STOP=1", "-h", server.host, "-p", str(server.port)]
        + ["-U", "root", "-d", "dev", "-a", "-f", str(script)],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PGCONNECT_TIMEOUT": "10"},
    )
    assert r.returncode == 0, r.stdout + r.stderr
    out = (r.stdout + r.stderr).replace(str(script), "SCRIPT")
    expected = (SQL_DIR / "session_stmts.expected").read_text()
    # psql writes notices to stderr: compare everything but the notice placement
    assert sorted(out.splitlines()) == sorted(expected.splitlines())
    assert [ln for ln in out.splitlines() if "NOTICE" not in ln] == [
        ln for ln in expected.splitlines() if "NOTICE" not in ln
    ]


def test_psycopg_transaction_status_and_failed_block(server: SwellServer) -> None:
    with server.connect(autocommit=False) as c:
        notices: list[tuple[str, str]] = []
        c.add_notice_handler(lambda d: notices.append((d.sqlstate or "", d.message_primary or "")))
        pg = c.pgconn
        assert pg.transaction_status == pq.TransactionStatus.IDLE
        c.execute("SELECT 1")  # psycopg opened a block with BEGIN
        assert pg.transaction_status == pq.TransactionStatus.INTRANS
        c.execute("BEGIN")
        assert notices == [("25001", "there is already a transaction in progress")]
        with pytest.raises(psycopg.errors.UndefinedTable):
            c.execute("SELECT * FROM no_such_table_tx")
        assert pg.transaction_status == pq.TransactionStatus.INERROR
        with pytest.raises(psycopg.errors.InFailedSqlTransaction) as ei:
            c.execute("SELECT 1")
        assert str(ei.value).startswith(
            "current transaction is aborted, commands ignored until end of transaction block"
        )
        c.rollback()
        assert pg.transaction_status == pq.TransactionStatus.IDLE
        # nested transaction() blocks use SAVEPOINT / RELEASE / ROLLBACK TO
        with c.transaction():
            with pytest.raises(psycopg.errors.DivisionByZero):
                with c.transaction():
                    c.execute("SELECT 1 / 0")
            assert c.execute("SELECT 2").fetchone() == (2,)
        c.commit()
        c.autocommit = True
        notices.clear()
        c.execute("COMMIT")
        assert notices == [("25P01", "there is no transaction in progress")]
        with pytest.raises(psycopg.errors.NoActiveSqlTransaction):
            c.execute("SAVEPOINT x")
        c.execute("BEGIN")
        with pytest.raises(psycopg.errors.InvalidSavepointSpecification):
            c.execute("ROLLBACK TO SAVEPOINT nope")
        c.execute("ROLLBACK")
        c.execute("BEGIN")
        with pytest.raises(psycopg.errors.ActiveSqlTransaction):
            c.execute("DISCARD ALL")
        c.execute("ROLLBACK")


def test_psycopg_server_side_cursors_and_copy(server: SwellServer) -> None:
    with server.connect() as c:
        c.execute("DROP TABLE IF EXISTS cur_t")
        c.execute("CREATE TABLE cur_t (id INT PRIMARY KEY, name VARCHAR)")
        c.execute("INSERT INTO cur_t VALUES (1, 'a'), (2, 'b'), (3, NULL)")
        c.execute("FLUSH")
        try:
            c.autocommit = False
            cur = c.cursor(name="text_cur")
            cur.execute("SELECT id, name FROM cur_t WHERE id > %s ORDER BY id", (1,))
            assert cur.fetchone() == (2, "b")
            assert cur.fetchall() == [(3, None)]
            cur.close()
            cur = c.cursor(name="bin_cur", binary=True, scrollable=True)
            cur.execute("SELECT id FROM cur_t ORDER BY id")
            assert cur.fetchmany(2) == [(1,), (2,)]
            cur.scroll(0, "absolute")
            assert cur.fetchall() == [(1,), (2,), (3,)]
            cur.close()
            c.commit()
            c.autocommit = True
            with c.cursor(name="held", withhold=True) as held:
                held.execute("SELECT id FROM cur_t ORDER BY id")
                assert [r[0] for r in held] == [1, 2, 3]
            with c.cursor() as cu:
                with cu.copy("COPY (SELECT id, name FROM cur_t ORDER BY id) TO STDOUT") as cp:
                    assert list(cp.rows()) == [("1", "a"), ("2", "b"), ("3", None)]
                with cu.copy("COPY cur_t (name, id) TO STDOUT WITH (FORMAT csv, HEADER)") as cp:
                    data = b"".join(bytes(b) for b in cp)
                assert sorted(data.decode().splitlines()) == sorted(["name,id", "a,1", "b,2", ",3"])
        finally:
            c.autocommit = True
            c.execute("DROP TABLE cur_t")


def test_asyncpg_pool_release_transactions_and_copy(server: SwellServer, tmp_path: Path) -> None:
    async def main() -> None:
        pool = await asyncpg.create_pool(server.dsn, min_size=1, max_size=1, timeout=10)
        assert pool is not None
        try:
            async with pool.acquire() as c:
                await c.execute("DROP TABLE IF EXISTS apg_tx")
                await c.execute("CREATE TABLE apg_tx (id INT PRIMARY KEY, v VARCHAR)")
                await c.execute("SET application_name = 'before_release'")
            # release ran: SELECT pg_advisory_unlock_all(); CLOSE ALL; UNLISTEN *; RESET ALL
            async with pool.acquire() as c:
                assert await c.fetchval("SHOW application_name") == ""
                async with c.transaction():
                    await c.execute("INSERT INTO apg_tx VALUES (1, 'a'), (2, 'b')")
                    try:
                        async with c.transaction():  # SAVEPOINT ... ROLLBACK TO
                            await c.execute("SELECT 1 / 0")
                    except asyncpg.DivisionByZeroError:
                        pass
                    assert await c.fetchval("SELECT 5") == 5
                await c.execute("FLUSH")
                out = tmp_path / "out.csv"
                res = await c.copy_from_query(
                    "SELECT id, v FROM apg_tx ORDER BY id", output=str(out), format="csv"
                )
                assert res == "COPY 2"
                assert out.read_text() == "1,a\n2,b\n"
                rows: list[Any] = []
                async with c.transaction():
                    await c.execute("DECLARE k CURSOR FOR SELECT id FROM apg_tx ORDER BY id")
                    rows = await c.fetch("FETCH ALL FROM k")
                assert [r["id"] for r in rows] == [1, 2]
                await c.execute("DROP TABLE apg_tx")
        finally:
            await pool.close()

    asyncio.run(main())


@pytest.mark.needs("jdbc")
def test_jdbc_savepoints_and_copy_out(server: SwellServer, tmp_path: Path) -> None:
    assert JAVA is not None
    prog = tmp_path / "TxCheck.java"
    prog.write_text(
        """
import java.io.StringWriter;
import java.sql.*;
import org.postgresql.PGConnection;
public class TxCheck {
    public static void main(String[] a) throws Exception {
        try (Connection c = DriverManager.getConnection(a[0])) {
            Statement st = c.createStatement();
            st.execute("DROP TABLE IF EXISTS jdbc_tx");
            st.execute("CREATE TABLE jdbc_tx (id INT PRIMARY KEY)");
            c.setAutoCommit(false);
            st.execute("INSERT INTO jdbc_tx VALUES (1), (2)");
            Savepoint sp = c.setSavepoint("sp1");
            try {
                st.executeQuery("SELECT 1 / 0");
            } catch (SQLException e) {
                System.out.println("error " + e.getSQLState());
            }
            c.rollback(sp);
            ResultSet rs = st.executeQuery("SELECT 7");
            rs.next();
            System.out.println("after rollback to savepoint " + rs.getInt(1));
            c.commit();
            c.setAutoCommit(true);
            st.execute("FLUSH");
            StringWriter w = new StringWriter();
            long n = c.unwrap(PGConnection.class).getCopyAPI()
                .copyOut("COPY (SELECT id FROM jdbc_tx ORDER BY id) TO STDOUT WITH CSV HEADER", w);
            System.out.println("copied " + n + ": " + w.toString().replace("\\n", "|"));
            long m = c.unwrap(PGConnection.class).getCopyAPI()
                .copyIn("COPY jdbc_tx FROM STDIN", new java.io.StringReader("3\\n4\\n"));
            st.execute("FLUSH");
            ResultSet cnt = st.executeQuery("SELECT count(*) FROM jdbc_tx");
            cnt.next();
            System.out.println("copied in " + m + ", now " + cnt.getLong(1));
            st.execute("DROP TABLE jdbc_tx");
        }
    }
}
"""
    )
    r = subprocess.run(
        [JAVA, "-cp", str(JAR), str(prog), server.jdbc_url],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == [
        "error 22012",
        "after rollback to savepoint 7",
        "copied 2: id|1|2|",
        "copied in 2, now 4",
    ]


def test_copy_from_stdin_psycopg_and_asyncpg(server: SwellServer, tmp_path: Path) -> None:
    with server.connect() as c:
        c.execute("DROP TABLE IF EXISTS copy_in_t")
        c.execute("CREATE TABLE copy_in_t (id INT PRIMARY KEY, name VARCHAR, score DOUBLE)")
        try:
            with c.cursor() as cu:
                with cu.copy("COPY copy_in_t (id, name, score) FROM STDIN") as cp:
                    cp.write_row((1, "tab\tand\\back", 1.5))
                    cp.write_row((2, None, None))
                assert cu.statusmessage == "COPY 2"
                with pytest.raises(RuntimeError, match="client gave up"):
                    with cu.copy("COPY copy_in_t FROM STDIN") as cp:
                        cp.write_row((3, "never", 0.0))
                        raise RuntimeError("client gave up")  # psycopg sends CopyFail
                with pytest.raises(psycopg.errors.InvalidTextRepresentation):
                    with cu.copy("COPY copy_in_t FROM STDIN") as cp:
                        cp.write(b"x\ty\t1\n")

            async def via_asyncpg() -> str:
                src = tmp_path / "rows.csv"
                src.write_text('id,name,score\n4,"a,""b",2.5\n5,,\n')
                conn = await asyncpg.connect(server.dsn, timeout=10)
                try:
                    return await conn.copy_to_table(
                        "copy_in_t", source=str(src), format="csv", header=True
                    )
                finally:
                    await conn.close()

            assert asyncio.run(via_asyncpg()) == "COPY 2"
            c.execute("FLUSH")
            rows = c.execute("SELECT id, name, score FROM copy_in_t ORDER BY id").fetchall()
            assert rows == [
                (1, "tab\tand\\back", 1.5),
                (2, None, None),
                (4, 'a,"b', 2.5),
                (5, None, None),
            ]
        finally:
            c.execute("DROP TABLE copy_in_t")


def test_copy_from_stdin_binary_csv_types_and_error_context(server: SwellServer) -> None:
    """Binary COPY from psycopg, CSV into jsonb/timestamptz/numeric columns (values as a
    cast would give them), and errors with SQLSTATE and PostgreSQL's CONTEXT line."""
    with server.connect() as c:
        c.execute("DROP TABLE IF EXISTS copy_bin_t")
        c.execute(
            "CREATE TABLE copy_bin_t (id BIGINT, name VARCHAR, score DOUBLE, ok BOOLEAN, "
            "ts TIMESTAMPTZ, doc JSONB, amount NUMERIC) APPEND ONLY"
        )
        try:
            with c.cursor() as cu:
                sql = "COPY copy_bin_t (id, name, score, ok) FROM STDIN WITH (FORMAT binary)"
                with cu.copy(sql) as cp:
                    cp.set_types(["int8", "text", "float8", "bool"])
                    cp.write_row((1, "é", 1.5, True))
                    cp.write_row((2, None, None, False))
                assert cu.statusmessage == "COPY 2"
                with cu.copy("COPY copy_bin_t FROM STDIN WITH (FORMAT csv, HEADER)") as cp:
                    cp.write(
                        b"id,name,score,ok,ts,doc,amount\n"
                        b'3,"",2.5,t,2024-05-01 10:00:00+02,"{""b"": 1, ""a"": [1.50]}",1.25\n'
                        b"4,,,,,,\n"
                    )
                assert cu.statusmessage == "COPY 2"
                with pytest.raises(psycopg.errors.InvalidTextRepresentation) as e:
                    with cu.copy("COPY copy_bin_t (id, score) FROM STDIN WITH (FORMAT csv)") as cp:
                        cp.write(b"5,1.0\n6,abc\n")
                assert e.value.diag.context == 'COPY copy_bin_t, line 2, column score: "abc"'
                with pytest.raises(psycopg.errors.BadCopyFileFormat) as e2:
                    with cu.copy("COPY copy_bin_t (id, score) FROM STDIN") as cp:
                        cp.write(b"7\t1\n8\n")
                assert e2.value.diag.message_primary == 'missing data for column "score"'
            c.execute("FLUSH")
            rows = c.execute(
                "SELECT id, name, score, ok, ts::VARCHAR, doc::VARCHAR, amount FROM copy_bin_t "
                "ORDER BY id"
            ).fetchall()
            assert [r[:4] for r in rows] == [
                (1, "é", 1.5, True),
                (2, None, None, False),
                (3, "", 2.5, True),
                (4, None, None, None),
            ]
            assert rows[2][4].startswith("2024-05-01 08:00:00")
            assert rows[2][5] == '{"a": [1.50], "b": 1}'
            assert str(rows[2][6]).rstrip("0") == "1.25"
            assert rows[3][4:] == (None, None, None)
        finally:
            c.execute("DROP TABLE copy_bin_t")


def test_close_frees_a_prepared_statement_name(server: SwellServer) -> None:
    with server.connect() as c:
        pg = c.pgconn
        assert pg.prepare(b"stmt_a", b"SELECT 1").status == pq.ExecStatus.COMMAND_OK
        dup = pg.prepare(b"stmt_a", b"SELECT 1")
        assert dup.status == pq.ExecStatus.FATAL_ERROR
        assert dup.error_field(pq.DiagnosticField.SQLSTATE) == b"42P05"
        assert pg.close_prepared(b"stmt_a").status == pq.ExecStatus.COMMAND_OK
        assert pg.prepare(b"stmt_a", b"SELECT 2").status == pq.ExecStatus.COMMAND_OK
        res = pg.exec_prepared(b"stmt_a", [])
        assert res.get_value(0, 0) == b"2"


def test_sqlalchemy_nested_transactions(server: SwellServer) -> None:
    sqlalchemy = pytest.importorskip("sqlalchemy")
    engine = sqlalchemy.create_engine(f"postgresql+psycopg://root@{server.host}:{server.port}/dev")
    text = sqlalchemy.text
    try:
        with engine.connect() as conn:
            conn.execute(text("DROP TABLE IF EXISTS sa_tx"))
            conn.execute(text("CREATE TABLE sa_tx (id INT PRIMARY KEY)"))
            conn.commit()
            with conn.begin_nested():  # SAVEPOINT ... RELEASE
                conn.execute(text("INSERT INTO sa_tx VALUES (1)"))
            nested = conn.begin_nested()
            with pytest.raises(sqlalchemy.exc.DataError):
                conn.execute(text("SELECT 1 / 0"))
            nested.rollback()  # ROLLBACK TO SAVEPOINT leaves the block usable
            assert conn.execute(text("SELECT 9")).scalar() == 9
            conn.commit()
            conn.execute(text("FLUSH"))
            assert conn.execute(text("SELECT count(*) FROM sa_tx")).scalar() == 1
            conn.execute(text("DROP TABLE sa_tx"))
            conn.commit()
    finally:
        engine.dispose()
