"""Python user-defined functions in a materialized view, in rows per CPU-second.

Usage: .venv/bin/python bench/udf_bench.py [--rows N] [--epoch N]

What runs: the engine in this process (`open_database`, a session, the runtime), no
sockets. For each case a fresh database gets

    CREATE TABLE t (id BIGINT PRIMARY KEY, x INT, y DOUBLE PRECISION);

and one materialized view over it; then `--rows` rows (1,000,000 by default) are written
with COPY in epochs of `--epoch` rows (100,000), each followed by FLUSH (the barrier that
steps the view). The cases:

* `builtin`: `SELECT id, x * 2 + 1 AS r, y * 0.5 AS s FROM t` (the same arithmetic with
  built-in operators: the cost of the table, the view and its materialization);
* `per-row`: the same through a Python function called once per row
  (`def f(x, y): return x * 2 + 1, ...` as two functions `r_row(x)`, `s_row(y)`);
* `batch`: the same through functions `WITH (batch = true)`, called once per chunk with
  pyarrow arrays (`pc.add(pc.multiply(x, 2), 1)`);
* `agg builtin` / `agg per-row` / `agg batch`: a sum of squares per group (1,000 groups)
  with `sum(y * y)`, a Python aggregate (accumulate/retract per row) and one `WITH (batch
  = true)` (one accumulate per group and chunk): the aggregates keep their state per
  group, updated per chunk.

Figures: rows per CPU-second of the whole process over the timed loop
(`time.process_time()`: COPY, barrier, view, checkpoint), and for the two Python cases
also the rows per CPU-second of the function calls alone (the case's CPU minus the
builtin case's). After the last epoch the view is compared with its query run ad hoc.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _report import report  # noqa: E402

from engine.database import Config, open_database  # noqa: E402

FUNCTIONS = [
    """CREATE FUNCTION r_row(x INT) RETURNS BIGINT LANGUAGE python AS $$
def r_row(x):
    return None if x is None else x * 2 + 1
$$""",
    """CREATE FUNCTION s_row(y DOUBLE PRECISION) RETURNS DOUBLE PRECISION LANGUAGE python AS $$
def s_row(y):
    return None if y is None else y * 0.5
$$""",
    """CREATE FUNCTION r_vec(x INT) RETURNS BIGINT LANGUAGE python AS $$
import pyarrow.compute as pc

def r_vec(x):
    return pc.add(pc.multiply(x.cast("int64"), 2), 1)
$$ WITH (batch = true)""",
    """CREATE FUNCTION s_vec(y DOUBLE PRECISION) RETURNS DOUBLE PRECISION LANGUAGE python AS $$
import pyarrow.compute as pc

def s_vec(y):
    return pc.multiply(y, 0.5)
$$ WITH (batch = true)""",
]
AGGREGATES = [
    """CREATE AGGREGATE sumsq_row(y DOUBLE PRECISION) RETURNS DOUBLE PRECISION LANGUAGE python AS $$
def create_state():
    return 0.0

def accumulate(s, y):
    return s if y is None else s + y * y

def retract(s, y):
    return s if y is None else s - y * y
$$""",
    """CREATE AGGREGATE sumsq_vec(y DOUBLE PRECISION) RETURNS DOUBLE PRECISION LANGUAGE python
WITH (batch = true) AS $$
import pyarrow.compute as pc

def create_state():
    return 0.0

def accumulate(s, y):
    return s + (pc.sum(pc.multiply(y, y)).as_py() or 0.0)

def retract(s, y):
    return s - (pc.sum(pc.multiply(y, y)).as_py() or 0.0)
$$""",
]
QUERIES = {
    "builtin": "SELECT id, x::BIGINT * 2 + 1 AS r, y * 0.5 AS s FROM t",
    "per-row": "SELECT id, r_row(x) AS r, s_row(y) AS s FROM t",
    "batch": "SELECT id, r_vec(x) AS r, s_vec(y) AS s FROM t",
    # aggregates kept incrementally per group (1,000 groups): state per group, not rows
    "agg builtin": "SELECT x % 1000 AS g, sum(y * y) AS s FROM t GROUP BY x % 1000",
    "agg per-row": "SELECT x % 1000 AS g, sumsq_row(y) AS s FROM t GROUP BY x % 1000",
    "agg batch": "SELECT x % 1000 AS g, sumsq_vec(y) AS s FROM t GROUP BY x % 1000",
}


def run_case(case: str, rows: int, epoch: int) -> float:
    """CPU seconds of the timed loop for one case (fresh database)."""
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as d:
        db = open_database(Config(data_dir=Path(d), barrier_interval_ms=3_600_000))
        try:
            s = db.connect("root", "dev")
            s.execute_simple("CREATE TABLE t (id BIGINT PRIMARY KEY, x INT, y DOUBLE PRECISION)")
            for f in FUNCTIONS + AGGREGATES:
                s.execute_simple(f)
            s.execute_simple(f"CREATE MATERIALIZED VIEW mv AS {QUERIES[case]}")
            chunks = []
            for lo in range(0, rows, epoch):
                n = min(epoch, rows - lo)
                chunks.append(
                    [
                        pa.array(np.arange(lo, lo + n, dtype=np.int64)),
                        pa.array(rng.integers(-1000, 1000, n, dtype=np.int32)),
                        pa.array(rng.random(n)),
                    ]
                )
            c0 = time.process_time()
            for cols in chunks:
                s.execute_simple("COPY t FROM STDIN")
                s.copy_in_columns(cols)
                s.execute_simple("FLUSH")
            cpu = time.process_time() - c0
            base = QUERIES["agg builtin" if case.startswith("agg") else "builtin"]
            got = _rounded(s.execute_simple("SELECT * FROM mv")[0].rows)
            want = _rounded(s.execute_simple(base)[0].rows)
            if got != want:
                raise SystemExit(f"{case}: the view differs from its query")
            return cpu
        finally:
            db.close()


def _rounded(rows: list[tuple[object, ...]]) -> list[tuple[object, ...]]:
    """Rows with floats rounded (sums of squares added in another order differ in the
    last bits), sorted."""
    return sorted(tuple(round(v, 6) if isinstance(v, float) else v for v in r) for r in rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--epoch", type=int, default=100_000)
    args = ap.parse_args()
    cpu = {case: run_case(case, args.rows, args.epoch) for case in QUERIES}
    for case, c in cpu.items():
        report(
            "udf",
            f"view {case}",
            args.rows / c,
            "rows/cpu-s",
            mode="in-process",
            note=f"{args.rows:,} rows, {c:.2f} CPU-s",
        )
    for case, base in (("per-row", "builtin"), ("batch", "builtin")):
        extra = cpu[case] - cpu[base]
        if extra > 0:
            report(
                "udf",
                f"{case} calls alone",
                args.rows * 2 / extra,
                "calls/cpu-s",
                mode="in-process",
                note="two functions per row; CPU above the builtin view",
            )
    for case in ("agg per-row", "agg batch"):
        extra = cpu[case] - cpu["agg builtin"]
        if extra > 0:
            report(
                "udf",
                f"{case} aggregate alone",
                args.rows / extra,
                "rows/cpu-s",
                mode="in-process",
                note="accumulate per row (per group and chunk for batch); CPU above sum()",
            )


if __name__ == "__main__":
    main()
