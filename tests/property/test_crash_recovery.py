"""Crash at every named barrier point, restart, and compare with the acknowledged writes.

A child process (`crash_child.py`) runs random INSERT/UPDATE/DELETE batches with a FLUSH
after each against a database holding tables, views of several operator families and a
sink INTO a table, with `SWELL_CRASH_AT=<point>:<nth>` set: it exits (`os._exit`, as
`kill -9` would) inside a barrier. The test then reopens the data directory and checks:

* each table holds exactly what DuckDB computes from the statements the child saw
  acknowledged, in order (INSERT on an existing key overwrites, as in Swell);
* every view equals its query run ad hoc and by DuckDB over those tables
  (`differential.check`), and the sink's target equals the sink's query;
* the recovered dataflow keeps working: one more batch, FLUSH, the same checks.

The default run crashes once at each point (a few seconds each); `make crash` (or
`SWELL_CRASH_SEEDS=<n>`) adds n seeds per point, each at a random hit count.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from property.crash_child import random_batches
from property.differential import check, norm, op_sql, select

from engine import faults
from engine.database import Config, SwellDatabase

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]

VIEWS = {
    "agg": "SELECT k, count(*) AS n, sum(v) AS s, min(v) AS mn, max(v) AS mx FROM t GROUP BY k",
    "joined": "SELECT t.id, u.id AS uid, t.v + u.v AS w FROM t JOIN u ON t.k = u.k",
    "louter": "SELECT t.k, count(u.id) AS n FROM t LEFT JOIN u ON t.k = u.k GROUP BY t.k",
    "top3": "SELECT id, v FROM t ORDER BY v DESC NULLS LAST, id LIMIT 3",
    "agg2": "SELECT count(*) AS groups, sum(n) AS rows FROM agg",
    "semi": "SELECT id, k FROM t WHERE EXISTS (SELECT 1 FROM u WHERE u.k = t.k)",
    "uni": "SELECT k FROM t UNION SELECT k FROM u",
    "ranked": "SELECT id, k, v FROM (SELECT id, k, v, row_number() OVER "
    "(PARTITION BY k ORDER BY v DESC NULLS LAST, id) AS rn FROM t) WHERE rn <= 2",
}
DUCK = {"agg2": f"SELECT count(*), sum(n) FROM ({VIEWS['agg']})"}
SINK_QUERY = "SELECT k, sum(v) AS total FROM t WHERE k IS NOT NULL GROUP BY k"
BATCHES = 4
MORE_SEEDS = int(os.environ.get("SWELL_CRASH_SEEDS", "0"))
"""Seeds of the longer variant (each crashes at every point at a random hit): `make crash`."""


def open_db(path: Path) -> SwellDatabase:
    return SwellDatabase(Config(data_dir=path, barrier_interval_ms=3_600_000))


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory with the schema and some committed rows."""
    path = tmp_path_factory.mktemp("crash") / "template"
    db = open_db(path)
    try:
        s = db.connect("root", "dev")
        for tbl in ("t", "u"):
            s.execute_simple(f"CREATE TABLE {tbl} (id INT PRIMARY KEY, k VARCHAR, v INT)")
        s.execute_simple("CREATE TABLE totals (k VARCHAR PRIMARY KEY, total BIGINT)")
        s.execute_simple("INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 2)")
        s.execute_simple("INSERT INTO u VALUES (1, 'a', 3)")
        for name, q in VIEWS.items():
            s.execute_simple(f"CREATE MATERIALIZED VIEW {name} AS {q}")
        s.execute_simple(f"CREATE SINK into_totals INTO totals AS {SINK_QUERY}")
        s.execute_simple("CREATE MATERIALIZED VIEW tot AS SELECT count(*) AS n FROM totals")
        s.execute_simple("FLUSH")
    finally:
        db.close()
    return path


def run_child(data_dir: Path, crash: str, seed: int) -> tuple[int, list[str], str]:
    env = dict(os.environ)
    env[faults.CRASH_ENV] = crash
    env.pop(faults.FAIL_ENV, None)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests")])
    r = subprocess.run(
        [sys.executable, str(HERE / "crash_child.py"), str(data_dir), str(seed), str(BATCHES)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env=env,
    )
    acked = [line.split("\t", 1)[1] for line in r.stdout.splitlines() if line.startswith("ACK\t")]
    return r.returncode, acked, r.stdout + r.stderr


def oracle(acked: list[str]) -> duckdb.DuckDBPyConnection:
    """DuckDB tables after the acknowledged statements: the initial rows, then each one."""
    con = duckdb.connect()
    for tbl in ("t", "u"):
        con.execute(f"CREATE TABLE {tbl} (id INTEGER PRIMARY KEY, k VARCHAR, v INTEGER)")
    con.execute("INSERT INTO t VALUES (1, 'a', 1), (2, 'b', 2)")
    con.execute("INSERT INTO u VALUES (1, 'a', 3)")
    for sql in acked:
        con.execute(sql.replace("INSERT INTO", "INSERT OR REPLACE INTO", 1))
    return con


def verify(db: SwellDatabase, con: duckdb.DuckDBPyConnection | None) -> None:
    s = db.connect("root", "dev")
    s.execute_simple("FLUSH")  # applies the WAL replay, then the re-queued sink rows
    if con is not None:
        for tbl in ("t", "u"):
            got = norm(select(s, f"SELECT id, k, v FROM {tbl}"))
            want = norm(con.execute(f"SELECT id, k, v FROM {tbl}").fetchall())
            assert got == want, f"table {tbl} != acknowledged writes\n{got}\n{want}"
    check(s, VIEWS, DUCK)
    totals = norm(select(s, "SELECT k, total FROM totals"))
    assert totals == norm(select(s, SINK_QUERY)), "sink INTO totals lost or doubled rows"
    assert select(s, "SELECT n FROM tot") == [(len(totals),)]


def crash_and_recover(template: Path, tmp_path: Path, point: str, nth: int, seed: int) -> None:
    data = tmp_path / "data"
    shutil.copytree(template, data)
    rc, acked, output = run_child(data, f"{point}:{nth}", seed)
    assert rc == faults.CRASH_EXIT_CODE, f"the child did not crash at {point}:{nth}\n{output}"
    assert f"exiting at {point} (hit {nth})" in output
    db = open_db(data)
    try:
        verify(db, oracle(acked))
        s = db.connect("root", "dev")
        rng = random.Random(seed + 1)
        more = [op_sql(o) for o in random_batches(rng.randint(0, 10**6), 1)[0]]
        for sql in more:
            s.execute_simple(sql)
        verify(db, oracle(acked + more))
    finally:
        db.close()
    db = open_db(data)  # and once more after a clean restart
    try:
        verify(db, oracle(acked + more))
    finally:
        db.close()


def hits_for(point: str, barrier: int, view: int = 1) -> int:
    """The hit count of `point` in the `barrier`-th barrier of the child (view: which one)."""
    if point == "view_stepped":
        return (barrier - 1) * (len(VIEWS) + 1) + view  # + 1: the view over the sink target
    return barrier


@pytest.mark.parametrize("point", faults.POINTS)
def test_crash_at_each_barrier_point_keeps_every_acknowledged_write(
    template: Path, tmp_path: Path, point: str
) -> None:
    crash_and_recover(template, tmp_path, point, hits_for(point, 2, view=2), seed=7)


if MORE_SEEDS:  # `make crash`; nothing is collected otherwise

    @pytest.mark.slow
    @pytest.mark.parametrize("seed", range(1, 1 + MORE_SEEDS))
    @pytest.mark.parametrize("point", faults.POINTS)
    def test_crash_property_more_seeds(
        template: Path, tmp_path: Path, point: str, seed: int
    ) -> None:
        rng = random.Random(seed * 31 + len(point))
        nth = hits_for(point, rng.randint(1, 4), view=rng.randint(1, len(VIEWS) + 1))
        crash_and_recover(template, tmp_path, point, nth, seed=seed)
