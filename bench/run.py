"""`make bench`: run every benchmark (short sizes, or `--full`) and write one summary table.

Each benchmark is a script in bench/ run in its own process, one after the other (they
share the machine's CPUs, so never in parallel). Two kinds, labelled in the table:

* **e2e** (the headline figures): through the real server as a user loads data:
  COPY via psycopg (`copy_bench.py`), webhook POSTs driven by wrk (`webhook_bench.py`),
  a Kafka topic on a Tansu broker (`kafka_ingest_bench.py`), Nexmark q0-q5, q7, q8 over
  the nexmark generator source into blackhole sinks (`nexmark.py`), and the same GROUP BY job
  side by side with Pathway (`pathway_compare.py`); per server CPU-second from /proc;
  and the latency of reads and webhook acks while barriers carry 100k-row epochs, a COPY
  runs and a view backfills (`read_latency_bench.py`, p50/p99 in ms); the wall clock of
  a GROUP BY and a join at --parallelism 1 vs 2 (`parallel_bench.py`).
* **in-process**: the engine called directly (operators, state, SQL without pgwire);
  useful to find where time goes, not what a user sees.

Figures come from the `report()` lines the scripts emit (bench/_report.py, collected
through `SWELL_BENCH_RESULTS`); for older scripts without them, from their printed lines
that carry a per-CPU-second or per-second figure. A benchmark that fails or whose tool is
missing (wrk, the Tansu broker, Pathway's wheels) is listed with the reason; the run goes
on. The table goes to stdout and to `<out>/summary.md`, each script's output to
`<out>/<name>.log`.

    python bench/run.py [--full] [--profile] [--only copy,webhook] [--out DIR]

`--profile` adds each benchmark's profile to its log: py-spy over the server for e2e
scripts (`pip install py-spy`), cProfile (bench/_profile.py) for in-process ones.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from _report import fmt  # noqa: E402


@dataclass
class Bench:
    name: str
    script: str
    mode: str  # "e2e" or "in-process"
    short: list[str] = field(default_factory=list)
    full: list[str] = field(default_factory=list)
    own_profile: bool = False  # the script takes --profile itself (e2e: py-spy the server)
    needs: str = ""  # a program that must be on PATH
    timeout_s: int = 900


BENCHES = [
    Bench("copy", "copy_bench.py", "e2e", ["--rows", "300000"], ["--full"], own_profile=True),
    Bench(
        "copy+view",
        "copy_bench.py",
        "e2e",
        ["--rows", "300000", "--formats", "csv", "--view"],
        ["--full", "--formats", "csv", "--view"],
        own_profile=True,
    ),
    Bench(
        "webhook",
        "webhook_bench.py",
        "e2e",
        ["--seconds", "3"],
        ["--seconds", "10"],
        own_profile=True,
        needs="wrk",
    ),
    Bench(
        "kafka",
        "kafka_ingest_bench.py",
        "e2e",
        ["--events", "200000"],
        ["--events", "1000000"],
        own_profile=True,
    ),
    Bench(
        "nexmark",
        "nexmark.py",
        "e2e",
        ["--events", "1000000"],
        ["--full"],
        own_profile=True,
        timeout_s=3600,
    ),
    Bench(
        "postgres_cdc",
        "postgres_cdc_bench.py",
        "e2e",
        ["--rows", "100000", "--changes", "50000"],
        ["--rows", "1000000", "--changes", "500000"],
        own_profile=True,
    ),
    Bench(
        "pathway",
        "pathway_compare.py",
        "e2e",
        ["--rows", "200000"],
        ["--rows", "1000000"],
        own_profile=True,
        timeout_s=1800,
    ),
    Bench(
        "state_store",
        "state_store_bench.py",
        "e2e",
        ["--rows", "400000", "--steady-seconds", "60"],
        ["--rows", "4000000", "--steady-seconds", "600"],
        own_profile=True,
        timeout_s=1800,
    ),
    Bench(
        "read_latency",
        "read_latency_bench.py",
        "e2e",
        ["--seconds", "5", "--copy-rows", "300000"],
        ["--seconds", "15", "--backfill-rows", "5000000"],
        own_profile=True,
    ),
    Bench(
        "ray",
        "ray_bench.py",
        "e2e",
        ["--epochs", "20", "--rows", "100000"],
        ["--epochs", "50", "--rows", "1000000"],
        own_profile=True,
    ),
    Bench(
        "parallel",
        "parallel_bench.py",
        "e2e",
        ["--rows", "400000", "--flushes", "10"],
        ["--rows", "2000000"],
        own_profile=True,
        timeout_s=1800,
    ),
    Bench("groupby", "groupby_bench.py", "in-process", ["--rows", "200000"], []),
    Bench("agg", "agg_bench.py", "in-process", ["100000", "4"], []),
    Bench("materialize", "materialize_bench.py", "in-process", ["--rows", "200000"], []),
    Bench("join", "join_bench.py", "in-process", ["--events", "100000"], []),
    Bench("tumble", "tumble_bench.py", "in-process", ["200000"], []),
    Bench("over_window", "over_window_bench.py", "in-process", ["--events", "50000"], []),
    Bench("time_filters", "time_filters_bench.py", "in-process", ["100000"], []),
    Bench(
        "stream_sql",
        "stream_sql_bench.py",
        "in-process",
        ["--events", "100000"],
        [],
        own_profile=True,
    ),
    Bench("state", "state_bench.py", "in-process", ["--keys", "50000"], []),
    Bench("udf", "udf_bench.py", "in-process", ["--rows", "200000"], []),
    Bench("index", "index_bench.py", "in-process", ["--rows", "200000", "--queries", "50"], []),
    Bench(
        "state_scale",
        "state_scale_bench.py",
        "e2e",
        ["--keys", "500000", "--batch", "250000", "--budget-mb", "256"],
        ["--full"],
        own_profile=True,
        timeout_s=3600,
    ),
    Bench("kafka_sink", "kafka_sink_bench.py", "in-process", ["100000", "20000"], []),
    Bench("iceberg_sink", "iceberg_sink_bench.py", "in-process", ["100000"], []),
]

# a figure in a printed line: "1,234,567 events/CPU-s", "89,000 rows/s per CPU-second", ...
_FIGURE = re.compile(
    r"([\d,]+(?:\.\d+)?)\s*(k )?((?:events|rows|records|req|messages|ops)"
    r"(?:/CPU-s|/s per CPU-second|/s|/CPU s))",
    re.IGNORECASE,
)
# "events/cpu-s=   753,328" (unit first)
_UNIT_FIRST = re.compile(r"((?:events|rows)/cpu-s)=\s*([\d,]+(?:\.\d+)?)", re.IGNORECASE)
_PROGRESS = re.compile(r"epoch \d+/\d+")  # per-epoch progress lines, not results


def figures_from_output(text: str) -> list[dict[str, object]]:
    """Rows for scripts that print figures but do not call `report()`."""
    out: list[dict[str, object]] = []
    for line in text.splitlines():
        if _PROGRESS.search(line):
            continue
        u = _UNIT_FIRST.search(line)
        m = _FIGURE.search(line)
        if u is not None:
            value, unit, start = float(u.group(2).replace(",", "")), u.group(1), u.start()
        elif m is not None:
            value = float(m.group(1).replace(",", "")) * (1000 if m.group(2) else 1)
            unit, start = m.group(3), m.start()
        else:
            continue
        label = line[:start].strip(" :-") or line.strip()
        out.append({"case": label[:70], "value": value, "unit": unit, "note": ""})
    return out


def run_one(b: Bench, full: bool, profile: bool, out: Path) -> tuple[list[dict], str]:
    """Run one benchmark; its figures and a status ('ok', 'failed: ...', 'skipped: ...')."""
    if b.needs and shutil.which(b.needs) is None:
        return [], f"skipped: {b.needs} is not installed"
    results = out / f"{b.name}.jsonl"
    results.unlink(missing_ok=True)
    args = list(b.full if full else b.short)
    cmd = [sys.executable, str(HERE / b.script), *args]
    if profile:
        if b.own_profile:
            cmd.append("--profile")
        else:
            cmd = [sys.executable, str(HERE / "_profile.py"), str(HERE / b.script), *args]
    env = {**os.environ, "SWELL_BENCH_RESULTS": str(results), "PYTHONPATH": str(ROOT)}
    log = out / f"{b.name}.log"
    t0 = time.perf_counter()
    try:
        with open(log, "w") as f:
            f.write(" ".join(cmd) + "\n\n")
            f.flush()
            proc = subprocess.run(
                cmd, cwd=ROOT, env=env, stdout=f, stderr=subprocess.STDOUT, timeout=b.timeout_s
            )
        status = "ok" if proc.returncode == 0 else f"failed (exit {proc.returncode})"
    except subprocess.TimeoutExpired:
        status = f"failed: timeout after {b.timeout_s} s"
    wall = time.perf_counter() - t0
    rows: list[dict] = []
    if results.exists():
        rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    else:
        rows = figures_from_output(log.read_text(errors="replace"))
    if status != "ok":
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or [""]
        status += f": {tail[0][:100]}"
    print(f"  {b.name}: {status}, {len(rows)} figures, {wall:.0f} s (log {log})", flush=True)
    return rows, status


def summary(table: list[tuple[Bench, list[dict], str]], full: bool) -> str:
    size = "full" if full else "short"
    lines = [
        f"# Swell benchmarks ({size} sizes, {time.strftime('%Y-%m-%d %H:%M')}, "
        f"{os.cpu_count()} CPUs)",
        "",
        "e2e = through the real server (pgwire / HTTP / Kafka), per server CPU-second; "
        "in-process = the engine called directly.",
        "",
        "| mode | benchmark | case | figure | unit | target | note |",
        "|---|---|---|---:|---|---:|---|",
    ]
    for b, rows, status in sorted(table, key=lambda r: r[0].mode != "e2e"):
        if not rows:
            lines.append(f"| {b.mode} | {b.name} | ({status}) | | | | |")
        for r in rows:
            tgt = r.get("target")
            tgt_s = fmt(tgt) if isinstance(tgt, (int, float)) else ""
            lines.append(
                f"| {r.get('mode', b.mode)} | {b.name} | {r['case']} | {fmt(r['value'])} | "
                f"{r['unit']} | {tgt_s} | {r.get('note', '')} |"
            )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description="run every benchmark and summarise")
    ap.add_argument("--full", action="store_true", help="full sizes (minutes per benchmark)")
    ap.add_argument("--profile", action="store_true", help="a profile per benchmark in its log")
    ap.add_argument("--only", default="", help="comma-separated benchmark names")
    ap.add_argument("--list", action="store_true", help="list the benchmarks and exit")
    ap.add_argument("--out", default="", help="directory for logs and summary.md")
    a = ap.parse_args()
    if a.list:
        for b in BENCHES:
            print(f"{b.name:14s} {b.mode:10s} bench/{b.script} {' '.join(b.short)}")
        return
    only = {s for s in a.only.split(",") if s}
    unknown = only - {b.name for b in BENCHES}
    if unknown:
        sys.exit(f"unknown benchmarks: {', '.join(sorted(unknown))} (see --list)")
    out = Path(a.out) if a.out else Path(tempfile.mkdtemp(prefix="swell-bench-"))
    out.mkdir(parents=True, exist_ok=True)
    picked = [b for b in BENCHES if not only or b.name in only]
    print(f"running {len(picked)} benchmarks ({'full' if a.full else 'short'}), logs in {out}")
    table = []
    for b in picked:
        rows, status = run_one(b, a.full, a.profile, out)
        table.append((b, rows, status))
    text = summary(table, a.full)
    (out / "summary.md").write_text(text)
    print()
    print(text)
    print(f"summary written to {out / 'summary.md'}")


if __name__ == "__main__":
    main()
