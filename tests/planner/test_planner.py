"""Stream plans of every streaming shape the planner supports, against tests/planner/*.plan.

See conftest.py for the file format and `make planner-update`. `EXPLAIN SELECT`
statements in a case record the ad-hoc plan (how an index answers a query). Besides the text, every
explained plan must survive the stored-plan encoding unchanged and build into operators
that ask for exactly the state tables the plan declares; the calls whose kernels recovery
cannot look up by name (and takes from the job's SQL) are listed after the plan.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import pytest
from planner.cases import Case, all_cases, read_expected, record

from engine.database import Config, SwellDatabase
from engine.errors import EngineError
from engine.expr import EvalContext
from engine.handlers.explain_stream import stream_plan_for
from engine.plan.stream_codec import decode_plan, encode_plan, funcs_of
from engine.plan.stream_plan import explain_lines
from engine.sql.parser import parse_one, split_statements
from engine.stream.build import build_plan

CASES = all_cases()


def _explain(db: SwellDatabase, session: Any, sql: str) -> list[str]:
    st = parse_one(sql)
    try:
        with db.runtime.lock:
            plan, header = stream_plan_for(session, st)
    except EngineError as e:
        return [f"ERROR: {e}"]
    data = encode_plan(plan)
    known = funcs_of(plan)
    from_sql: list[str] = []

    def source(f: Any) -> Any:
        from_sql.append(f.name)
        return known(f)

    again = decode_plan(data, source)
    assert encode_plan(again) == data, "the stored plan does not round-trip"
    build_plan(again, "planner_test", None, EvalContext())  # tables declared == tables used
    lines = explain_lines(plan, verbose=True, header=header)
    if from_sql:  # calls recovery compiles from the job's SQL (not by name): keep them rare
        lines.append(f"Calls compiled from SQL at recovery: [{', '.join(sorted(from_sql))}]")
    return lines


def run_case(case: Case, data_dir: Path) -> str:
    db = SwellDatabase(Config(data_dir=data_dir, barrier_interval_ms=3_600_000))
    out: list[str] = []
    try:
        s = db.connect("root", "dev")
        for sql, _ in split_statements(case.sql):
            sql = sql.strip().rstrip(";").strip()
            if not sql:
                continue
            head = " ".join(sql.split()[:3]).upper()
            if head.startswith("EXPLAIN SELECT"):  # an ad-hoc (batch) plan, e.g. index lookups
                out.append(" ".join(sql.split()))
                out.extend(r[0] for r in s.execute_simple(sql)[0].rows)
                continue
            if head.startswith(("CREATE MATERIALIZED VIEW", "CREATE SINK")):
                out.append(" ".join(sql.split()))
                lines = _explain(db, s, sql)
                out.extend(lines)
                if lines[0].startswith("ERROR:"):
                    continue
            s.execute_simple(sql)
    finally:
        db.close()
    return "\n".join(out)


@pytest.mark.parametrize("case", CASES, ids=[f"{c.file.stem}:{c.name}" for c in CASES])
def test_stream_plan(case: Case, tmp_path: Path, update: bool) -> None:
    got = run_case(case, tmp_path / "data")
    record(case, got)
    if update:
        return
    expected = read_expected(case.file.with_suffix(".plan")).get(case.name)
    if expected is None:
        pytest.fail(f"no expected plan for {case.name}: run `make planner-update`")
    if got != expected:
        diff = "\n".join(
            difflib.unified_diff(
                expected.splitlines(), got.splitlines(), "expected", "actual", lineterm=""
            )
        )
        pytest.fail(f"stream plan of {case.name} changed (make planner-update):\n{diff}")
