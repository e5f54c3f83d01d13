"""An exactly-once consumer of a Swell subscription, keeping a copy of a view in SQLite.

    python consumer.py HOST:PORT STATE.sqlite [--batch N] [--idle-polls N] [--crash-after N]
    python consumer.py --dump STATE.sqlite

It follows `balance_changes` (a subscription on the view `balances(account, total, n)`)
and applies every change to the SQLite table `balances`. Exactly once, across crashes of
the consumer and restarts of Swell, because:

* each epoch's changes carry one `rw_timestamp`; the consumer applies only whole epochs,
  each in one SQLite transaction together with that `rw_timestamp` (table `progress`);
* after a crash it declares the cursor `SINCE <stored rw_timestamp + 1>`, so the epochs it
  applied are not sent again and the one it was in the middle of comes again whole;
* Swell keeps the subscription's log in its checkpoints, so a Swell restart loses nothing
  that was committed (for the subscription's retention period).

An epoch is known to be complete when a row of a later epoch arrives, or when a FETCH
returns fewer rows than asked for (Swell publishes an epoch's rows all at once).
`--crash-after N` exits abruptly after the Nth FETCH, before applying what it fetched,
to show that nothing is lost. `--idle-polls N`: stop after N empty FETCHes in a row.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
from typing import Any

import psycopg

SUBSCRIPTION = "balance_changes"


def open_state(path: str) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("CREATE TABLE IF NOT EXISTS balances (account TEXT PRIMARY KEY, total, n)")
    db.execute("CREATE TABLE IF NOT EXISTS progress (id INTEGER PRIMARY KEY, rw_timestamp)")
    return db


def last_applied(db: sqlite3.Connection) -> int | None:
    row = db.execute("SELECT rw_timestamp FROM progress WHERE id = 1").fetchone()
    return None if row is None else int(row[0])


def apply_epoch(db: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    """One epoch's changes and its rw_timestamp, in one transaction."""
    db.execute("BEGIN")
    for account, total, n, op, _ in rows:
        if op in ("Delete", "UpdateDelete"):
            db.execute("DELETE FROM balances WHERE account = ?", (account,))
        else:  # Insert, UpdateInsert
            db.execute("INSERT OR REPLACE INTO balances VALUES (?, ?, ?)", (account, int(total), n))
    db.execute("INSERT OR REPLACE INTO progress VALUES (1, ?)", (rows[-1][4],))
    db.execute("COMMIT")


def run(dsn: str, state: str, batch: int, idle_polls: int, crash_after: int | None) -> int:
    db = open_state(state)
    since = last_applied(db)
    host, port = dsn.rsplit(":", 1)
    with psycopg.connect(host=host, port=int(port), user="root", dbname="dev") as conn:
        conn.autocommit = True
        start = "SINCE begin()" if since is None else f"SINCE {since + 1}"
        conn.execute(f"DECLARE feed SUBSCRIPTION CURSOR FOR {SUBSCRIPTION} {start}")
        print(f"consumer: resuming {start}", file=sys.stderr)
        pending: list[tuple[Any, ...]] = []  # rows of an epoch that may not be complete yet
        fetches = idle = applied = 0
        while idle < idle_polls:
            rows = conn.execute(f"FETCH {batch} FROM feed WITH (timeout = '1s')").fetchall()
            fetches += 1
            if crash_after is not None and fetches >= crash_after:
                print(f"consumer: crashing after {fetches} fetches", file=sys.stderr)
                os._exit(3)  # no cleanup, nothing of this FETCH applied
            idle = 0 if rows else idle + 1
            pending.extend(rows)
            complete = len(rows) < batch  # everything published so far was returned
            while pending:
                ts = pending[0][4]
                k = next((i for i, r in enumerate(pending) if r[4] != ts), len(pending))
                if k == len(pending) and not complete:
                    break  # the last epoch may go on in the next FETCH
                apply_epoch(db, pending[:k])
                applied += 1
                pending = pending[k:]
        print(f"consumer: applied {applied} epochs, idle; stopping", file=sys.stderr)
    return 0


def dump(state: str) -> int:
    db = open_state(state)
    for account, total, n in db.execute("SELECT * FROM balances ORDER BY account"):
        print(f"{account}|{total}|{n}")
    return 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dump", metavar="STATE")
    ap.add_argument("dsn", nargs="?")
    ap.add_argument("state", nargs="?")
    ap.add_argument("--batch", type=int, default=100)
    ap.add_argument("--idle-polls", type=int, default=2)
    ap.add_argument("--crash-after", type=int)
    a = ap.parse_args(argv)
    if a.dump:
        return dump(a.dump)
    if not a.dsn or not a.state:
        ap.error("HOST:PORT and STATE are needed")
    return run(a.dsn, a.state, a.batch, a.idle_polls, a.crash_after)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
