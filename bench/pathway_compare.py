"""The same GROUP BY job in Swell (through pgwire) and in Pathway, on the same CSV file.

Job: `id,k,v` rows (`--rows`, `--keys` distinct k), `SELECT k, count(*), sum(v), max(v)
GROUP BY k`, once with 10 keys and once with 100,000 keys (`--keys 10,100000`).

* Swell: a real server (bench/_server.py, pinned to CPU 0; `--parallelism 1` by default,
  so its jobs run in the server process as Pathway's run on its one thread),
  `CREATE TABLE t (id BIGINT, k BIGINT, v BIGINT) APPEND ONLY`, the view created first,
  then the CSV sent with
  `COPY t FROM STDIN WITH (FORMAT csv)` in `--batch`-row batches, FLUSH after each;
  server CPU seconds from /proc.
* Pathway: `pw.io.csv.read(..., mode="static")`, the same groupby/reduce, written with
  `pw.io.csv.write`, `pw.run()`, `PATHWAY_THREADS=1`, pinned to CPU 0; CPU seconds of
  that process (user + system, all threads) from `resource.getrusage`, import time
  excluded (it is measured from just before building the graph).

Both outputs are compared (count, sum, max per key) before any figure is printed.
Pathway is installed on first use into its own virtual environment (default
`~/.cache/swell-bench/pathway-venv`, or `$SWELL_PATHWAY_VENV`), never into Swell's.

    python bench/pathway_compare.py [--rows 1000000] [--keys 10,100000] [--batch 100000]
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import report  # noqa: E402
from _server import BenchServer, pinned  # noqa: E402

PATHWAY_VERSION = "0.33.0"
VENV = Path(
    os.environ.get("SWELL_PATHWAY_VENV", Path.home() / ".cache" / "swell-bench" / "pathway-venv")
)

PATHWAY_JOB = """
import os, resource, sys, time
import pathway as pw

def cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime

src, out = sys.argv[1], sys.argv[2]
c0, w0 = cpu(), time.perf_counter()

class S(pw.Schema):
    id: int
    k: int
    v: int

t = pw.io.csv.read(src, schema=S, mode="static")
r = t.groupby(pw.this.k).reduce(
    pw.this.k, n=pw.reducers.count(), s=pw.reducers.sum(pw.this.v), m=pw.reducers.max(pw.this.v)
)
pw.io.csv.write(r, out)
pw.run(monitoring_level=pw.MonitoringLevel.NONE)
print(f"CPU {cpu() - c0:.4f} WALL {time.perf_counter() - w0:.4f}")
"""


def pathway_python() -> Path:
    """The venv's python with Pathway installed (created on first use)."""
    py = VENV / "bin" / "python"
    ok = py.exists() and subprocess.run(
        [str(py), "-c", "import pathway"], capture_output=True
    ).returncode == 0  # fmt: skip
    if not ok:
        print(f"installing pathway {PATHWAY_VERSION} into {VENV} (first use)", flush=True)
        VENV.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run(
            [str(py), "-m", "pip", "install", "-q", f"pathway=={PATHWAY_VERSION}"], check=True
        )
    return py


def make_csv(path: Path, rows: int, keys: int) -> None:
    rng = np.random.default_rng(3)
    with open(path, "w") as f:
        f.write("id,k,v\n")
        for start in range(0, rows, 200_000):
            n = min(200_000, rows - start)
            a = np.column_stack(
                [np.arange(start, start + n), rng.integers(0, keys, n), rng.integers(0, 10**6, n)]
            )
            np.savetxt(f, a, fmt="%d", delimiter=",")


def run_pathway(py: Path, src: Path, tmp: Path) -> tuple[float, float, dict[int, tuple]]:
    job = tmp / "pw_job.py"
    job.write_text(PATHWAY_JOB)
    out = tmp / "pw_out.csv"
    env = {**os.environ, "PATHWAY_THREADS": "1", "PATHWAY_PROCESSES": "1"}
    r = subprocess.run(
        pinned([str(py), str(job), str(src), str(out)], 0),
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    line = next(x for x in r.stdout.splitlines() if x.startswith("CPU "))
    cpu, wall = float(line.split()[1]), float(line.split()[3])
    result: dict[int, tuple] = {}
    with open(out) as f:
        for row in csv.DictReader(f):
            k = int(row["k"])
            diff = int(row.get("diff", 1))
            if diff > 0:
                result[k] = (int(row["n"]), int(row["s"]), int(row["m"]))
            elif result.get(k) == (int(row["n"]), int(row["s"]), int(row["m"])):
                del result[k]
    return cpu, wall, result


def run_swell(
    src: Path, batch: int, profile: bool, parallelism: int = 1
) -> tuple[float, float, dict[int, tuple]]:
    lines = src.read_bytes().split(b"\n", 1)[1].splitlines(keepends=True)
    batches = [b"".join(lines[i : i + batch]) for i in range(0, len(lines), batch)]
    with (
        BenchServer(extra_args=["--parallelism", str(parallelism)]) as srv,
        srv.connect() as conn,
    ):
        conn.execute("CREATE TABLE t (id BIGINT, k BIGINT, v BIGINT) APPEND ONLY")
        conn.execute(
            "CREATE MATERIALIZED VIEW v AS SELECT k, count(*) AS n, sum(v) AS s, max(v) AS m "
            "FROM t GROUP BY k"
        )
        spied = profile and srv.profile_start(srv.dir / "swell.spy")
        c0, w0 = srv.cpu_seconds(), time.perf_counter()
        with conn.cursor() as cur:
            for data in batches:
                with cur.copy("COPY t FROM STDIN WITH (FORMAT csv)") as cp:
                    cp.write(data)
                conn.execute("FLUSH")
        cpu, wall = srv.cpu_seconds() - c0, time.perf_counter() - w0
        if spied:
            srv.profile_stop()
        rows = conn.execute("SELECT k, n, s, m FROM v").fetchall()
    return cpu, wall, {int(k): (int(n), int(s), int(m)) for k, n, s, m in rows}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--keys", default="10,100000")
    ap.add_argument("--batch", type=int, default=100_000)
    ap.add_argument("--profile", action="store_true", help="py-spy the Swell server")
    ap.add_argument("--skip-pathway", action="store_true", help="Swell only")
    ap.add_argument("--parallelism", type=int, default=1, help="the Swell server's")
    a = ap.parse_args(argv)
    py = None if a.skip_pathway else pathway_python()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for keys in (int(k) for k in a.keys.split(",")):
            src = tmp / f"rows_{keys}.csv"
            make_csv(src, a.rows, keys)
            s_cpu, s_wall, s_res = run_swell(src, a.batch, a.profile, a.parallelism)
            note = f"{a.rows:,} rows, wall {a.rows / s_wall:,.0f} rows/s"
            report("pathway-compare", f"Swell, {keys} keys", a.rows / s_cpu, "rows/CPU-s",
                   mode="e2e", note=note)  # fmt: skip
            if py is None:
                continue
            p_cpu, p_wall, p_res = run_pathway(py, src, tmp)
            if p_res != s_res:
                diff = sorted(set(p_res.items()) ^ set(s_res.items()))[:5]
                sys.exit(f"Swell and Pathway disagree at {keys} keys: {diff}")
            note = f"{a.rows:,} rows, wall {a.rows / p_wall:,.0f} rows/s, results equal"
            report("pathway-compare", f"Pathway {PATHWAY_VERSION}, {keys} keys",
                   a.rows / p_cpu, "rows/CPU-s", mode="e2e", note=note)  # fmt: skip
            report("pathway-compare", f"Swell / Pathway, {keys} keys", p_cpu / s_cpu, "x",
                   mode="e2e", target=3, note="rows per CPU-second ratio")  # fmt: skip


if __name__ == "__main__":
    main()
