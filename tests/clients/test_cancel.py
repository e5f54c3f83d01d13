"""CancelRequest against the real engine: a long ad-hoc query is stopped with 57014 at the
next plan node, and the connection stays usable.

The query is a UNION ALL of many slow branches (each a 3000 x 3000 cross join, counted),
so it runs for tens of seconds unless cancelled; the cancel is sent a moment after the
query started. If cancelling did not work, the query would complete and the test fail.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from pathlib import Path

import psycopg
import pytest

from harness.server import SwellServer

pytestmark = pytest.mark.clients

JAVA = shutil.which("java")
JAR = Path("/usr/share/java/postgresql.jar")

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


@pytest.mark.needs("jdbc")
def test_jdbc_query_timeout_cancels(server: SwellServer, tmp_path: Path) -> None:
    """pgjdbc's setQueryTimeout (DBeaver's cancel button uses the same CancelRequest)."""
    assert JAVA is not None
    prog = tmp_path / "CancelCheck.java"
    prog.write_text(
        """
import java.sql.*;
public class CancelCheck {
    public static void main(String[] a) throws Exception {
        try (Connection c = DriverManager.getConnection(a[0]);
             Statement st = c.createStatement()) {
            st.setQueryTimeout(1);
            try {
                st.executeQuery(a[1]);
                System.out.println("not cancelled");
            } catch (SQLException e) {
                System.out.println("cancelled " + e.getSQLState());
            }
            st.setQueryTimeout(0);
            ResultSet rs = st.executeQuery("SELECT 3");
            rs.next();
            System.out.println("then " + rs.getInt(1));
        }
    }
}
"""
    )
    r = subprocess.run(
        [JAVA, "-cp", str(JAR), str(prog), server.jdbc_url, SLOW],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout.splitlines() == ["cancelled 57014", "then 3"]
