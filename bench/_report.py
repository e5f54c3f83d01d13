"""One result line per measured figure, printed and (under `bench/run.py`) collected.

Every benchmark calls `report(...)` for each headline figure. It prints a readable line,
and when `SWELL_BENCH_RESULTS` names a file (set by `bench/run.py`) it also appends the
figure as one JSON object, so the harness can write one summary table over all of them.
`mode` says how the figure was taken: `e2e` (through the real server, as a user loads
data) or `in-process` (the engine called directly; not what a user sees).
"""

from __future__ import annotations

import json
import os


def fmt(v: float) -> str:
    """Thousands separators; two decimals for small figures (ratios)."""
    return f"{v:,.2f}" if abs(v) < 100 else f"{v:,.0f}"


def report(
    bench: str,
    case: str,
    value: float,
    unit: str,
    *,
    mode: str,
    target: float | None = None,
    note: str = "",
) -> None:
    tgt = f"  (target {fmt(target)})" if target is not None else ""
    print(f"[{mode}] {bench}: {case}: {fmt(value)} {unit}{tgt}  {note}".rstrip(), flush=True)
    path = os.environ.get("SWELL_BENCH_RESULTS")
    if path:
        row = {
            "bench": bench,
            "case": case,
            "value": value,
            "unit": unit,
            "mode": mode,
            "target": target,
            "note": note,
        }
        with open(path, "a") as f:
            f.write(json.dumps(row) + "\n")
