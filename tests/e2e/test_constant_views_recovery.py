"""Materialized views over constant rows (VALUES, SELECT without FROM, generate_series)
receive those rows exactly once: after a clean restart and after kill -9 each view still
equals its query run ad hoc, with no row emitted again, also when the job runs with two
actors. Killed right after CREATE (before any later checkpoint) too."""

from __future__ import annotations

from harness.server import SwellServer

VIEWS = {
    "c_one": "SELECT 1 AS a, 'x' AS b",
    "c_values": "VALUES (1, 'a'), (2, 'b'), (2, 'b')",
    "c_series": "SELECT * FROM generate_series(1, 50)",
    "c_union": "SELECT k FROM t UNION ALL VALUES (0), (0)",
    "c_join": "SELECT t.k, s.n FROM t JOIN (VALUES (1, 'one'), (3, 'three')) AS s(k2, n) ON t.k = s.k2",
}
PARALLEL = {
    "c_groups": "SELECT g % 4 AS m, count(*) AS c FROM generate_series(1, 200) AS s(g) GROUP BY g % 4",
}


def check(server: SwellServer) -> None:
    with server.connect() as c:
        c.execute("FLUSH")
        for name, query in {**VIEWS, **PARALLEL}.items():
            got = sorted(c.execute(f"SELECT * FROM {name}").fetchall())
            want = sorted(c.execute(query).fetchall())
            assert got == want, name
            assert got, name


def test_constant_views_emit_once_across_restarts(fresh_server: SwellServer) -> None:
    with fresh_server.connect() as c:
        c.execute("CREATE TABLE t (k INT)")
        c.execute("INSERT INTO t VALUES (1), (2)")
        for name, query in VIEWS.items():
            c.execute(f"CREATE MATERIALIZED VIEW {name} AS {query}")
        c.execute("SET streaming_parallelism = 2")
        for name, query in PARALLEL.items():
            c.execute(f"CREATE MATERIALIZED VIEW {name} AS {query}")
    fresh_server.restart(crash=True)  # right after the CREATEs
    check(fresh_server)
    with fresh_server.connect() as c:
        c.execute("INSERT INTO t VALUES (3)")
    check(fresh_server)
    fresh_server.restart()
    check(fresh_server)
    with fresh_server.connect() as c:
        c.execute("INSERT INTO t VALUES (4)")
    fresh_server.restart(crash=True)
    check(fresh_server)
