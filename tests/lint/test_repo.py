"""Repository-wide checks that run with the suite, so a red one never lands.

- ruff: `ruff check` and `ruff format --check` over the whole tree (pyproject.toml's
  [tool.ruff] settings), the same as `make lint`.
- hygiene: the repository speaks to its users; tracked text files carry no paths of a
  development machine and no references to an outside tracker's ticket numbers.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _ruff(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_ruff_check_is_clean() -> None:
    done = _ruff("check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_format_is_clean() -> None:
    done = _ruff("format", "--check", "--no-cache", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def _tracked_text_files() -> list[Path]:
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True, timeout=60
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    files = []
    for name in out.decode().split("\0"):
        p = ROOT / name
        if name and p.is_file() and p.stat().st_size < 2_000_000:
            files.append(p)
    return files


#: a development machine's home or work folders, and tracker references (the word issue or
#: ticket, a hash sign and a number)
_FORBIDDEN = re.compile(
    r"(?<![\w.])/(?:work|home/[a-z_][\w-]*|Users/[\w-]+)/(?=\w)|\b(?:issue|ticket) #\d+",
    re.IGNORECASE,
)


def test_tracked_files_carry_no_machine_paths_or_ticket_numbers() -> None:
    found = []
    for p in _tracked_text_files():
        try:
            text = p.read_text()
        except UnicodeDecodeError:
            continue
        if p.resolve() == Path(__file__).resolve():
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            if _FORBIDDEN.search(line):
                found.append(f"{p.relative_to(ROOT)}:{lineno}: {line.strip()[:120]}")
    assert not found, "\n".join(found)
