"""Planner snapshot tests: SQL files with the expected stream plans beside them.

Each `tests/planner/<shape>.sql` holds cases separated by `-- case: <name>` lines. A case
runs its statements in order in a fresh in-process database; every `CREATE MATERIALIZED
VIEW` and `CREATE SINK` is first explained (`EXPLAIN (VERBOSE)`: the stream plan CREATE
stores, with its state tables) and then run, so later statements can build on it. The
expected text of every case is in `<shape>.plan`, one `-- case:` section per case (the
statement, then its plan or `ERROR: <message>` when the planner refuses it). An
`EXPLAIN SELECT` statement records its ad-hoc (batch) plan the same way.

`pytest tests/planner --update` (`make planner-update`) rewrites the `.plan` files from
the current planner; review the change with `git diff tests/planner`.
"""

from __future__ import annotations

import pytest
from planner.cases import RESULTS, read_cases


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update",
        action="store_true",
        default=False,
        help="rewrite tests/planner/*.plan from the current planner (review with git diff)",
    )


@pytest.fixture
def update(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--update"))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """With --update: write each .plan file whose cases all ran (in .sql order)."""
    if not session.config.getoption("--update", default=False):
        return
    for sql_file, got in RESULTS.items():
        cases = read_cases(sql_file)
        if any(c.name not in got for c in cases):
            continue  # a filtered run (-k): leave the file alone
        body = "".join(f"-- case: {c.name}\n{got[c.name]}\n\n" for c in cases)
        sql_file.with_suffix(".plan").write_text(body.rstrip("\n") + "\n")
