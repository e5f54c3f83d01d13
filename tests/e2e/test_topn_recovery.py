"""Top-N views survive kill -9: after a crash the restarted server rebuilds each top-N's
cache from its stored segments, and deletes of the current top rows refill windows from
rows stored before the crash. Every view is compared with its query run ad hoc."""

from __future__ import annotations

from harness.server import SwellServer

VIEWS = {
    "top3": "SELECT * FROM (SELECT id, user_id, amount, row_number() OVER "
    "(PARTITION BY user_id ORDER BY amount DESC) AS rn FROM orders) WHERE rn <= 3",
    "page": "SELECT id, amount FROM orders ORDER BY amount, id LIMIT 5 OFFSET 2",
}


def check(server: SwellServer) -> None:
    with server.connect() as c:
        c.execute("FLUSH")
        for name, query in VIEWS.items():
            got = sorted(c.execute(f"SELECT * FROM {name}").fetchall())
            want = sorted(c.execute(query).fetchall())
            assert got == want, name
            assert got, name


def test_top_n_views_after_crash(fresh_server: SwellServer) -> None:
    with fresh_server.connect() as c:
        c.execute("CREATE TABLE orders (id INT PRIMARY KEY, user_id INT, amount DOUBLE PRECISION)")
        for name, query in VIEWS.items():
            c.execute(f"CREATE MATERIALIZED VIEW {name} AS {query}")
        values = ", ".join(f"({i}, {i % 7}, {(i * 37) % 101})" for i in range(700))
        c.execute(f"INSERT INTO orders VALUES {values}")
    check(fresh_server)
    fresh_server.restart(crash=True)
    check(fresh_server)
    with fresh_server.connect() as c:
        # every current top row and page row goes: windows come back from stored rows
        ids = [r[0] for r in c.execute("SELECT id FROM top3 UNION SELECT id FROM page")]
        c.execute(f"DELETE FROM orders WHERE id IN ({', '.join(map(str, ids))})")
        c.execute("UPDATE orders SET amount = amount + 500 WHERE id % 50 = 1")
    check(fresh_server)
    fresh_server.restart(crash=True)
    with fresh_server.connect() as c:
        c.execute("DELETE FROM orders WHERE amount > 98")
    check(fresh_server)


AO_VIEWS = {
    "ao_top2": "SELECT * FROM (SELECT id, g, v, row_number() OVER "
    "(PARTITION BY g ORDER BY v DESC, id) AS rn FROM events) WHERE rn <= 2",
    "ao_first": "SELECT g, id FROM (SELECT g, id, row_number() OVER "
    "(PARTITION BY g ORDER BY id) AS rn FROM events) WHERE rn = 1",
    "ao_page": "SELECT id, v FROM events ORDER BY v, id LIMIT 4 OFFSET 1",
}


def test_append_only_top_n_views_after_crash(fresh_server: SwellServer) -> None:
    """The append-only top-N keeps only each group's first rows in RocksDB: rows acked
    before a kill -9 (committed or only in the WAL) are in its state afterwards, and new
    rows keep moving the windows."""

    def check_ao() -> None:
        with fresh_server.connect() as c:
            c.execute("FLUSH")
            for name, query in AO_VIEWS.items():
                got = sorted(c.execute(f"SELECT * FROM {name}").fetchall())
                assert got == sorted(c.execute(query).fetchall()), name
                assert got, name

    with fresh_server.connect() as c:
        c.execute("CREATE TABLE events (id INT, g INT, v INT) APPEND ONLY")
        for name, query in AO_VIEWS.items():
            c.execute(f"CREATE MATERIALIZED VIEW {name} AS {query}")
        c.execute(
            "INSERT INTO events SELECT i, i % 9, (i * 37) % 101 FROM generate_series(1, 600) i"
        )
    check_ao()
    with fresh_server.connect() as c:  # acked, not flushed, then the crash
        c.execute("INSERT INTO events VALUES (1000, 3, 500), (1001, 4, -5), (1002, 20, 1)")
    fresh_server.restart(crash=True)
    check_ao()
    with fresh_server.connect() as c:
        c.execute(
            "INSERT INTO events SELECT i, i % 11, (i * 53) % 307 FROM generate_series(2000, 2600) i"
        )
    check_ao()
