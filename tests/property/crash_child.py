"""Child process of the crash tests: random DML + FLUSH until `SWELL_CRASH_AT` stops it.

Run as `python crash_child.py <data_dir> <seed> <batches>` with the repository root and
`tests/` on PYTHONPATH and `SWELL_CRASH_AT` set. Prints `ACK\\t<sql>` once each statement has
returned (the write is durable), `FLUSHED` after each FLUSH, `DONE` if it ran out of
batches. Not a test module (no `test_` prefix).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

from property.differential import op_sql

from engine.database import Config, open_database

TABLES = ("t", "u")
KEYS = ["a", "b", "c", None]


def random_op(rng: random.Random) -> tuple[Any, ...]:
    """One operation shaped like tests/property/differential.py's Hypothesis `op`."""
    tbl = rng.choice(TABLES)
    kind = rng.choice(["ins", "ins", "ins", "del", "upd", "updk", "delk"])
    i = rng.randint(0, 9)
    v = None if rng.random() < 0.15 else rng.randint(-3, 6)
    if kind == "ins":
        return (kind, tbl, i, rng.choice(KEYS), v)
    if kind == "del":
        return (kind, tbl, i)
    if kind == "upd":
        return (kind, tbl, i, v)
    if kind == "updk":
        return (kind, tbl, i, rng.choice(KEYS))
    return (kind, tbl, rng.choice(KEYS))


def random_batches(seed: int, n: int) -> list[list[tuple[Any, ...]]]:
    rng = random.Random(seed)
    return [[random_op(rng) for _ in range(rng.randint(1, 8))] for _ in range(n)]


def main() -> None:
    data_dir, seed, n = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    db = open_database(Config(data_dir=data_dir, barrier_interval_ms=3_600_000))
    s = db.connect("root", "dev")
    out = sys.stdout
    for batch in random_batches(seed, n):
        for o in batch:
            sql = op_sql(o)
            s.execute_simple(sql)
            out.write(f"ACK\t{sql}\n")
            out.flush()
        s.execute_simple("FLUSH")
        out.write("FLUSHED\n")
        out.flush()
    out.write("DONE\n")
    out.flush()
    db.close()


if __name__ == "__main__":
    main()
