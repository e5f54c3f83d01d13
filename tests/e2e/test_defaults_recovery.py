"""Column defaults are part of the table's catalog entry: after kill -9 and a restart,
INSERT and COPY that leave the columns out still get the constant and the `now()`
defaults, and pg_attrdef still shows them."""

from __future__ import annotations

from harness.server import SwellServer


def _insert(server: SwellServer, first: int) -> None:
    with server.connect() as c:
        c.execute(f"INSERT INTO dt (id) VALUES ({first})")
        with c.cursor().copy("COPY dt (id, note) FROM STDIN") as cp:
            cp.write_row((first + 1, "copied"))


def _check(server: SwellServer, n: int) -> None:
    with server.connect() as c:
        c.execute("FLUSH")
        rows = c.execute(
            "SELECT id, qty, note, at IS NOT NULL AND at <= now() FROM dt ORDER BY id"
        ).fetchall()
        want = []
        for i in range(n):
            want += [(10 * i, 1, "none", True), (10 * i + 1, 1, "copied", True)]
        assert rows == want
        shown = c.execute(
            "SELECT adnum, adbin FROM pg_attrdef WHERE adrelid = 'dt'::regclass ORDER BY adnum"
        ).fetchall()
        assert shown == [(2, "1"), (3, "'none'::character varying"), (4, "now()")]


def test_defaults_survive_kill9(fresh_server: SwellServer) -> None:
    with fresh_server.connect() as c:
        c.execute(
            "CREATE TABLE dt (id INT PRIMARY KEY, qty INT DEFAULT 1, "
            "note VARCHAR DEFAULT 'none', at TIMESTAMPTZ DEFAULT now())"
        )
    _insert(fresh_server, 0)
    _check(fresh_server, 1)
    fresh_server.restart(crash=True)
    _check(fresh_server, 1)
    _insert(fresh_server, 10)
    fresh_server.restart(crash=True)  # acknowledged but maybe not checkpointed: from the WAL
    _check(fresh_server, 2)
