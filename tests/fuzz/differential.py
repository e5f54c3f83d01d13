"""Run one query on Swell and on PostgreSQL 15 and decide whether they agree.

Results are compared as multisets of rows (every generated LIMIT orders by all output
columns, so that is exact): numbers of any type compare by value to 9 significant digits and
9 decimal places (a float's last digits, and the 10 fractional digits Swell's numeric
keeps against PostgreSQL's 16-20 for a quotient, are not what this test is after),
everything else by its Python value from psycopg. Errors: both failing agree (the
SQLSTATE class need not match: PostgreSQL may stop at a different error first), one
failing is a disagreement, Swell's internal error (XX000) always is, and a Swell refusal
of a feature (0A000) is counted as unsupported, not as a disagreement. A data error
(class 22: overflow, division by zero) raised by one side only is counted apart as an
evaluation-order difference: PostgreSQL short-circuits AND/OR/CASE and folds strict calls
on NULL constants at plan time, Swell evaluates whole columns, so which rows get evaluated
(and can raise) differs; the values of every row both return are still compared.

Two loops: `fuzz` runs each query ad hoc (every eighth as a materialized view created over
the loaded tables), `fuzz_streaming` keeps a few views while both engines apply the same
random inserts, updates and deletes, and compares every view after each FLUSH with
PostgreSQL running its query from scratch (incremental maintenance against recompute).
Rows that differ only beyond a relative 1e-8 agree (`_close`).

`python -m fuzz.differential --seed N --count K [--streaming]` (from tests/) prints the
disagreements of K queries without pytest; the test module runs the same loops under a
time budget.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import random
import sys
from collections import Counter
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import psycopg

from fuzz.grammar import (
    TABLES,
    QueryGen,
    change_statements,
    create_statements,
    insert_statements,
)


@dataclass
class Outcome:
    rows: Counter[tuple[Any, ...]] | None = None
    sqlstate: str | None = None
    message: str = ""

    def show(self) -> str:
        if self.rows is None:
            return f"ERROR {self.sqlstate}: {self.message}"
        rows = sorted(self.rows.elements(), key=repr)
        text = "\n".join("    " + repr(r) for r in rows[:20])
        more = f"\n    ... ({len(rows)} rows)" if len(rows) > 20 else ""
        return f"{len(rows)} rows\n{text}{more}"


@dataclass
class Report:
    queries: int = 0
    agreed: int = 0
    both_failed: int = 0
    unsupported: int = 0
    eval_order: int = 0
    disagreements: list[str] = field(default_factory=list)


def _approx(x: float) -> float:
    """9 significant digits and 9 decimal places (see module docstring)."""
    if x != x or x in (float("inf"), float("-inf")):
        return x
    return float(f"{round(x, 9):.9g}")


def _norm(v: Any) -> Any:
    if isinstance(v, bool) or v is None:
        return v
    if isinstance(v, int | Decimal):
        d = Decimal(v)
        if d.is_nan():
            return ("num", "NaN")
        return ("num", _approx(float(d)))
    if isinstance(v, float):
        return ("num", "NaN") if v != v else ("num", _approx(v))
    if isinstance(v, list):  # an array (percentile_cont(ARRAY[..]))
        return tuple(_norm(x) for x in v)
    if isinstance(v, dt.datetime | dt.date | dt.time | dt.timedelta):
        return ("time", v.isoformat() if hasattr(v, "isoformat") else str(v))
    return v


def _close(a: Counter[tuple[Any, ...]], b: Counter[tuple[Any, ...]] | None) -> bool:
    """The same rows up to a relative 1e-8 in each number: a numeric quotient multiplied
    on (`n / 3 * 100.125 / 3`) carries the error of its 10 kept fractional digits beyond
    the 9 places `_approx` keeps, so an exact comparison would flag a rounding
    boundary. Rows are paired in sorted order (the error never reorders them here)."""
    if b is None or a.total() != b.total():
        return False
    rows_a, rows_b = sorted(a.elements(), key=repr), sorted(b.elements(), key=repr)
    for ra, rb in zip(rows_a, rows_b, strict=True):
        if len(ra) != len(rb):
            return False
        for x, y in zip(ra, rb, strict=True):
            if x == y:
                continue
            num = isinstance(x, tuple) and isinstance(y, tuple) and x[:1] == y[:1] == ("num",)
            if not num or isinstance(x[1], str) or isinstance(y[1], str):
                return False
            if not math.isclose(x[1], y[1], rel_tol=1e-8, abs_tol=1e-8):
                return False
    return True


def run(conn: psycopg.Connection[Any], sql: str) -> Outcome:
    try:
        cur = conn.execute(sql)
        rows = cur.fetchall() if cur.description else []
    except psycopg.Error as e:
        return Outcome(None, e.sqlstate, str(e).splitlines()[0] if str(e) else "")
    return Outcome(Counter(tuple(_norm(v) for v in row) for row in rows))


def _data_error(o: Outcome) -> bool:
    """A data exception (class 22), or PostgreSQL's 0A000 for a numeric NaN/Infinity that
    cannot be converted to an integer type: an error of one row's value either way."""
    state = o.sqlstate or ""
    return state.startswith("22") or (state == "0A000" and o.message.startswith("cannot convert"))


def compare(sql: str, swell: Outcome, pg: Outcome, report: Report) -> None:
    report.queries += 1
    if swell.sqlstate == "0A000":
        report.unsupported += 1
        return
    if swell.rows is None and pg.rows is None and swell.sqlstate != "XX000":
        report.both_failed += 1
        return
    if swell.rows is not None and (swell.rows == pg.rows or _close(swell.rows, pg.rows)):
        report.agreed += 1
        return
    failed = swell if swell.rows is None else pg if pg.rows is None else None
    if failed is not None and _data_error(failed) and swell.sqlstate != "XX000":
        # a data error (overflow, division by zero) on a row only one side evaluated:
        # PostgreSQL short-circuits AND/OR/CASE and folds strict calls on NULL constants,
        # Swell evaluates whole columns; which rows raise is plan-dependent in both
        report.eval_order += 1
        return
    report.disagreements.append(f"{sql}\n  swell: {swell.show()}\n  postgres: {pg.show()}")


def setup(conns: list[psycopg.Connection[Any]], data_seed: int) -> None:
    """Create the fuzz tables on every connection with the same rows."""
    for c in conns:
        for name in ("fz_t", "fz_u"):
            c.execute(f"DROP TABLE IF EXISTS {name} CASCADE")
        for stmt in create_statements():
            c.execute(stmt)
        for stmt in insert_statements(random.Random(data_seed)):
            c.execute(stmt)
    conns[0].execute("FLUSH")


def teardown(conns: list[psycopg.Connection[Any]]) -> None:
    for c in conns:
        for name in ("fz_t", "fz_u"):
            c.execute(f"DROP TABLE IF EXISTS {name} CASCADE")


def fuzz(
    swell: psycopg.Connection[Any],
    pg: psycopg.Connection[Any],
    seed: int,
    count: int | None = None,
    deadline: float | None = None,
    views_every: int = 8,
) -> Report:
    """Run queries from `seed` until `count` queries or the `deadline` (time.monotonic());
    every `views_every`-th query (without LIMIT) runs on Swell as a materialized view, so
    the streaming plan is compared with PostgreSQL too."""
    import time

    report = Report()
    r = random.Random(seed)
    gen = QueryGen(r)
    n = 0
    while (count is None or n < count) and (deadline is None or time.monotonic() < deadline):
        n += 1
        sql = gen.query()
        p_out = run(pg, sql)
        if views_every and n % views_every == 0 and " LIMIT " not in sql:
            s_out = run_as_view(swell, sql, f"fz_mv{seed}_{n}")
            label = f"CREATE MATERIALIZED VIEW fz_mv AS {sql}"
        else:
            s_out, label = run(swell, sql), sql
        if swell.closed:
            raise RuntimeError(f"Swell closed the connection on:\n{label}")
        compare(label, s_out, p_out, report)
    return report


#: batches of `fuzz_streaming` before the tables are created afresh
RESET_EVERY = 25


def fuzz_streaming(
    swell: psycopg.Connection[Any],
    pg: psycopg.Connection[Any],
    seed: int,
    count: int | None = None,
    deadline: float | None = None,
    views: int = 6,
    epochs: int = 4,
) -> Report:
    """Incremental maintenance against recompute: `views` materialized views are created
    over the fuzz tables, then `epochs` times both engines apply the same random inserts,
    updates and deletes (fuzz.grammar.change_statements), Swell FLUSHes and every view is
    compared with PostgreSQL running its query from scratch. A batch ends by dropping its
    views; batches repeat until `count` queries or the `deadline`. The tables keep their
    changes from batch to batch, for `RESET_EVERY` batches; then they are created afresh
    with new rows (the caller's setup() made the first ones)."""
    import time

    report = Report()
    r = random.Random(seed)
    gen = QueryGen(r, streaming=True)

    def next_ids() -> dict[str, int]:
        return {
            name: int(pg.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {name}").fetchone()[0])  # type: ignore[index]
            for name in TABLES
        }

    next_id = next_ids()
    batch = 0
    while (count is None or report.queries < count) and (
        deadline is None or time.monotonic() < deadline
    ):
        batch += 1
        if batch % RESET_EVERY == 0:
            # the tables grow by every batch's inserts; a join over their NULL-able keys
            # (IS NOT DISTINCT FROM, three ways) grows as their product: start them afresh
            setup([swell, pg], seed + batch)
            next_id = next_ids()
        made: list[tuple[str, str]] = []
        for i in range(views):
            sql = gen.query()
            name = f"fz_sv{seed}_{batch}_{i}"
            created = run(swell, f"CREATE MATERIALIZED VIEW {name} AS {sql}")
            if swell.closed:
                raise RuntimeError(f"Swell closed the connection on:\n{sql}")
            if created.rows is None:
                compare(f"CREATE MATERIALIZED VIEW v AS {sql}", created, run(pg, sql), report)
            else:
                made.append((name, sql))
        try:
            for epoch in range(epochs + 1):
                if epoch:
                    for stmt in change_statements(r, next_id):
                        a, b = run(swell, stmt), run(pg, stmt)
                        if (a.rows is None) != (b.rows is None):
                            report.disagreements.append(
                                f"{stmt}\n  swell: {a.show()}\n  postgres: {b.show()}"
                            )
                    flushed = run(swell, "FLUSH")
                    if flushed.rows is None:  # an epoch failed: the views cannot be trusted
                        report.disagreements.append(
                            f"FLUSH after epoch {epoch} with views:\n  "
                            + "\n  ".join(sql for _, sql in made)
                            + f"\n  swell: {flushed.show()}"
                        )
                        break
                for name, sql in made:
                    label = f"CREATE MATERIALIZED VIEW v AS {sql}  -- after {epoch} epochs"
                    compare(label, run(swell, f"SELECT * FROM {name}"), run(pg, sql), report)
        finally:
            for name, _ in made:
                swell.execute(f"DROP MATERIALIZED VIEW IF EXISTS {name}")
    return report


def run_as_view(conn: psycopg.Connection[Any], sql: str, name: str) -> Outcome:
    """The query's rows as a materialized view holds them (created, read, dropped; a new
    name each time, so no client-side prepared statement outlives its view)."""
    created = run(conn, f"CREATE MATERIALIZED VIEW {name} AS {sql}")
    if created.rows is None:
        return created
    try:
        return run(conn, f"SELECT * FROM {name}")
    finally:
        conn.execute(f"DROP MATERIALIZED VIEW IF EXISTS {name}")


def summary(rep: Report) -> str:
    return (
        f"{rep.queries} queries: {rep.agreed} agreed, {rep.both_failed} both failed, "
        f"{rep.eval_order} evaluation-order data errors, {rep.unsupported} unsupported, "
        f"{len(rep.disagreements)} disagreements"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="differential SQL fuzzing: Swell vs PostgreSQL")
    ap.add_argument("--swell", default="postgresql://root@127.0.0.1:4566/dev")
    ap.add_argument("--postgres", required=True, help="DSN of a scratch PostgreSQL database")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=500)
    ap.add_argument("--streaming", action="store_true", help="views through changes")
    ap.add_argument("--parallelism", type=int, default=0, help="streaming_parallelism")
    args = ap.parse_args(argv)
    s = psycopg.connect(args.swell, autocommit=True)
    p = psycopg.connect(args.postgres, autocommit=True)
    if args.parallelism:
        s.execute(f"SET streaming_parallelism = {args.parallelism}")
    setup([s, p], args.seed)
    try:
        loop = fuzz_streaming if args.streaming else fuzz
        rep = loop(s, p, args.seed, count=args.count)
    finally:
        teardown([s, p])
    for d in rep.disagreements:
        print(d, "\n")
    print(summary(rep))
    return 1 if rep.disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
