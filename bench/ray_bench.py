"""What Ray costs over the local worker processes: cluster start, worker start, per epoch.

Through the real server (`python -m pgwire.cli playground --parallelism 2`), the same
parallel GROUP BY view three times: in-process (`--parallelism 1`, the baseline), on
worker processes (the local transport), and on Ray actors of a two-node Ray cluster on
loopback (`--ray-address`, tests/harness/ray_cluster.py). Barriers only come from FLUSH
(a one-minute barrier interval), so each FLUSH is one epoch:

* `round trip`: the transport alone, from this process: a `ping` to both of two workers
  at once (as a barrier round does), empty and with a 1 MB body each;
* `cluster start`: a head node and a second node until both are registered;
* `create view`: CREATE MATERIALIZED VIEW over 1,000 rows, which starts the workers;
* `small epoch`: FLUSH after an INSERT of 100 rows (median of `--epochs`): the
  per-epoch cost of the round trips (step, collect, commit) to every worker;
* `large epoch`: FLUSH after an INSERT of `--rows` rows into the view's input: the
  exchange of a big epoch (Ray moves those messages through its object store).

The server is not pinned to a CPU (its workers would inherit the pin). Figures are wall
seconds on a shared machine: note its load next to them.

    python bench/ray_bench.py [--epochs 30] [--rows 200000] [--profile]

`--profile` samples each server with py-spy during its small epochs and prints the
functions with the most samples.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _report import report  # noqa: E402
from _server import print_collapsed  # noqa: E402

from engine.stream.parallel import protocol  # noqa: E402
from engine.stream.parallel.transport import ProcessLauncher, config_of  # noqa: E402
from engine.stream.parallel.transport_ray import RayLauncher  # noqa: E402
from harness.ray_cluster import LocalRayCluster  # noqa: E402
from harness.server import SwellServer  # noqa: E402

VIEW = "SELECT k, count(*) AS n, sum(v) AS s FROM t GROUP BY k"


def run(
    label: str, parallelism: int, extra: list[str], env: dict[str, str], a: argparse.Namespace
) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="swell-raybench-") as d:
        srv = SwellServer(
            Path(d) / "data",
            barrier_interval_ms=60_000,
            parallelism=parallelism,
            extra_args=extra,
            env=env,
            startup_timeout=120,
        )
        t0 = time.perf_counter()
        srv.start()
        started = time.perf_counter() - t0
        try:
            with srv.connect() as c:
                c.execute("CREATE TABLE t (id BIGINT PRIMARY KEY, k VARCHAR, v BIGINT)")
                c.execute(
                    "INSERT INTO t SELECT g, 'k' || (g % 1000)::varchar, g "
                    "FROM generate_series(1, 1000) g"
                )
                c.execute("FLUSH")
                t0 = time.perf_counter()
                c.execute(f"CREATE MATERIALIZED VIEW mv AS {VIEW}")
                create = time.perf_counter() - t0
                c.execute("FLUSH")
                spy = _spy_start(srv.pid, Path(d) / "profile.txt") if a.profile else None
                small = []
                next_id = 10_000
                for _ in range(a.epochs):
                    c.execute(
                        "INSERT INTO t SELECT g, 'k' || (g % 1000)::varchar, g "
                        f"FROM generate_series({next_id}, {next_id + 99}) g"
                    )
                    next_id += 100
                    t0 = time.perf_counter()
                    c.execute("FLUSH")
                    small.append(time.perf_counter() - t0)
                if spy is not None:
                    _spy_stop(spy, Path(d) / "profile.txt", label)
                c.execute(
                    "INSERT INTO t SELECT g, 'k' || (g % 100000)::varchar, g "
                    f"FROM generate_series({next_id}, {next_id + a.rows - 1}) g"
                )
                t0 = time.perf_counter()
                c.execute("FLUSH")
                large = time.perf_counter() - t0
                view = c.execute("SELECT sum(n) FROM mv").fetchone()
                total = c.execute("SELECT count(*) FROM t").fetchone()
                assert view is not None and total is not None and view[0] == total[0]
        finally:
            srv.stop()
    out = {
        "server start": started,
        "create view": create,
        "small epoch": statistics.median(small),
        "small epoch p90": sorted(small)[int(len(small) * 0.9) - 1],
        "large epoch": large,
    }
    for case, value in out.items():
        report("ray", f"{label}: {case}", value * 1000, "ms", mode="e2e")
    return out


def _spy_start(pid: int | None, out: Path) -> subprocess.Popen[bytes] | None:
    spy = shutil.which("py-spy")
    if spy is None or pid is None:
        print("(--profile: py-spy is not installed; `pip install py-spy`)", flush=True)
        return None
    proc = subprocess.Popen(
        [spy, "record", "-p", str(pid), "-f", "raw", "-o", str(out), "-r", "200", "--function"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(0.5)
    return proc


def _spy_stop(proc: subprocess.Popen[bytes], out: Path, label: str) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
    print(f"-- profile of the server, {label}, small epochs")
    print_collapsed(out)


def round_trips(label: str, launcher: Any, n: int) -> None:
    """`ping` to both workers at once (submit both, then read both), as a barrier does per
    round: median wall time of `n` rounds, empty and with a 1 MB body to each worker."""
    handles = [launcher.start(i, config_of(None)) for i in range(2)]
    try:
        for size in (0, 1 << 20):
            req = protocol.encode({"cmd": "ping"}, [b"x" * size] if size else None)
            times = []
            for _ in range(n + 5):
                t0 = time.perf_counter()
                for h in handles:
                    h.submit(req)
                for h in handles:
                    h.result()
                times.append(time.perf_counter() - t0)
            what = "1 MB to each" if size else "empty"
            report(
                "ray",
                f"{label}: round trip to 2 workers, {what}",
                statistics.median(times[5:]) * 1000,
                "ms",
                mode="in-process",
            )
    finally:
        launcher.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--round-trips", type=int, default=200)
    ap.add_argument("--profile", action="store_true")
    a = ap.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f}", flush=True)
    round_trips("worker processes", ProcessLauncher(), a.round_trips)
    base = run("in-process (parallelism 1)", 1, [], {}, a)
    procs = run("worker processes (parallelism 2)", 2, [], {}, a)
    cluster = LocalRayCluster()
    t0 = time.perf_counter()
    cluster.start()
    report("ray", "cluster start (2 nodes)", time.perf_counter() - t0, "s", mode="e2e")
    try:
        round_trips("ray actors", RayLauncher(cluster.address), a.round_trips)
        ray = run(
            "ray actors (parallelism 2)", 2, ["--ray-address", cluster.address], cluster.env(), a
        )
    finally:
        cluster.stop()
    for name, other in (("processes", procs), ("ray", ray)):
        report(
            "ray",
            f"per-epoch overhead of {name} over in-process",
            (other["small epoch"] - base["small epoch"]) * 1000,
            "ms",
            mode="e2e",
        )
    report(
        "ray",
        "per-epoch overhead of ray over processes",
        (ray["small epoch"] - procs["small epoch"]) * 1000,
        "ms",
        mode="e2e",
    )
    print(f"load average after: {os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
