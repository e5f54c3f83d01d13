"""Schema changes survive kill -9: a table that gained a column (with a DEFAULT) and was
renamed keeps feeding the views planned before, which are built again from their stored
plans after the restart (a view with LIKE binds its SQL again: the rewritten SQL names
the new table), and later writes get the default."""

from __future__ import annotations

from harness.server import SwellServer


def test_add_column_and_rename_then_kill(fresh_server: SwellServer) -> None:
    with fresh_server.connect() as c:
        c.execute("CREATE TABLE t (id INT PRIMARY KEY, name VARCHAR, a INT)")
        c.execute("INSERT INTO t VALUES (1, 'apple', 10), (2, 'banana', 20)")
        c.execute("CREATE MATERIALIZED VIEW v AS SELECT id, a FROM t WHERE name LIKE 'a%'")
        c.execute("CREATE MATERIALIZED VIEW total AS SELECT sum(a) AS s, count(*) AS n FROM t")
        c.execute("ALTER TABLE t ADD COLUMN region VARCHAR DEFAULT 'eu'")
        c.execute("ALTER TABLE t RENAME TO fruit")
        c.execute("INSERT INTO fruit (id, name, a) VALUES (3, 'avocado', 30)")
        c.execute("FLUSH")
        assert c.execute("SELECT * FROM v ORDER BY id").fetchall() == [(1, 10), (3, 30)]

    fresh_server.restart(crash=True)
    with fresh_server.connect() as c:
        c.execute("INSERT INTO fruit VALUES (4, 'apricot', 40, 'us')")
        c.execute("INSERT INTO fruit (id, name, a) VALUES (5, 'cherry', 50)")
        c.execute("FLUSH")
        assert c.execute("SELECT * FROM v ORDER BY id").fetchall() == [(1, 10), (3, 30), (4, 40)]
        assert c.execute("SELECT s, n FROM total").fetchone() == (150, 5)
        assert c.execute("SELECT id, region FROM fruit ORDER BY id").fetchall() == [
            (1, "eu"),
            (2, "eu"),
            (3, "eu"),
            (4, "us"),
            (5, "eu"),
        ]
