"""Reading the planner test files (format: see conftest.py) and collecting results."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).parent
CASE = re.compile(r"^-- case: *(\S+) *$", re.M)


@dataclass
class Case:
    file: Path
    name: str
    sql: str


def read_cases(path: Path) -> list[Case]:
    text = path.read_text()
    parts = CASE.split(text)
    out = [Case(path, parts[i], parts[i + 1].strip()) for i in range(1, len(parts), 2)]
    names = [c.name for c in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"{path.name}: duplicate case names {sorted(dup)}")
    return out


def read_expected(path: Path) -> dict[str, str]:
    if not path.exists():
        return {}
    parts = CASE.split(path.read_text())
    return {parts[i]: parts[i + 1].strip("\n") for i in range(1, len(parts), 2)}


def all_cases() -> list[Case]:
    return [c for f in sorted(HERE.glob("*.sql")) for c in read_cases(f)]


RESULTS: dict[Path, dict[str, str]] = {}


def record(case: Case, text: str) -> None:
    RESULTS.setdefault(case.file, {})[case.name] = text
