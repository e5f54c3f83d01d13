"""A tiny stand-in for `psql -At` used by the examples' scripts (so they need no psql).

    python examples/swellsql.py HOST:PORT "SQL; SQL"     or     ... HOST:PORT -f file.sql

Runs the statements in one session (simple query protocol, as psql does) and prints the
rows of every statement that returns rows, columns joined by `|`, NULL as empty. Server
notices and warnings go to stderr. Exits 1 on the first error, printing it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import psycopg


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    host, port = argv[0].rsplit(":", 1)
    text = Path(argv[2]).read_text() if argv[1] == "-f" else " ".join(argv[1:])
    try:
        with psycopg.connect(host=host, port=int(port), user="root", dbname="dev") as conn:
            conn.autocommit = True
            conn.add_notice_handler(
                lambda d: print(f"{d.severity}: {d.message_primary}", file=sys.stderr)
            )
            cur = conn.execute(text)
            while True:
                if cur.description is not None:
                    for row in cur.fetchall():
                        print("|".join("" if v is None else str(v) for v in row))
                if not cur.nextset():
                    break
    except psycopg.Error as e:
        print(f"ERROR: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
