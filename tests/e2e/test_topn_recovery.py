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
