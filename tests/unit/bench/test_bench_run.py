"""`make bench`'s harness (bench/run.py): figures are found in older scripts' output, every
registered script exists, and the summary table labels e2e and in-process figures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))

import run  # noqa: E402


def test_figures_from_printed_lines() -> None:
    text = (
        "agg count+sum, 10 groups, inserts      1,234,567 events/CPU-s  (200,000 events)\n"
        "  tumble            987,654 events/s per CPU-second  (0.20 s)\n"
        "  append, wait for the last only:    239.5 k records/s\n"
        "no figure on this line\n"
        "  tumble: epoch 1/5, 20,000 events, 0.03 CPU-s, 592,310 events/CPU-s\n"
        "columnar  upsert     1,303,121 rows/cpu-s      344,521 rows/wall-s\n"
        "join-insert   events=  100,000 cpu=   0.13s events/cpu-s=   753,328 output_rows=1\n"
    )
    rows = run.figures_from_output(text)
    assert [(r["case"], r["value"], r["unit"]) for r in rows] == [
        ("agg count+sum, 10 groups, inserts", 1234567.0, "events/CPU-s"),
        ("tumble", 987654.0, "events/s per CPU-second"),
        ("append, wait for the last only", 239500.0, "records/s"),
        ("columnar  upsert", 1303121.0, "rows/cpu-s"),
        ("join-insert   events=  100,000 cpu=   0.13s", 753328.0, "events/cpu-s"),
    ]


def test_every_registered_script_exists_and_e2e_ones_can_profile() -> None:
    names = [b.name for b in run.BENCHES]
    assert len(names) == len(set(names))
    for b in run.BENCHES:
        assert (ROOT / "bench" / b.script).exists(), b.script
        if b.mode == "e2e":
            assert b.own_profile, b.name
    assert {"copy", "webhook", "kafka", "pathway"} <= {
        b.name for b in run.BENCHES if b.mode == "e2e"
    }


def test_summary_table_and_list() -> None:
    b = run.BENCHES[0]
    rows = [{"case": "csv", "value": 1.5e6, "unit": "rows/CPU-s", "mode": "e2e",
             "target": 1.5e6, "note": "n"}]  # fmt: skip
    skipped = run.Bench("w", "webhook_bench.py", "e2e")
    text = run.summary([(b, rows, "ok"), (skipped, [], "skipped: wrk is not installed")], False)
    assert "| e2e | copy | csv | 1,500,000 | rows/CPU-s | 1,500,000 | n |" in text
    assert "| e2e | w | (skipped: wrk is not installed) |" in text
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "run.py"), "--list"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "copy_bench.py" in out and "in-process" in out
