"""External programs some tests drive, and the one way those tests skip when one is missing.

A test (or a whole module, via `pytestmark`) that needs a program outside Python declares it
with the `needs` marker; a fixture or helper that finds out late calls `require(tool)`:

    pytestmark = [pytest.mark.needs("psql")]
    @pytest.mark.needs("jdbc")
    def test_...(...): ...
    exe = require("openssl")

Where the program is missing, the test is skipped with a reason naming the Debian package
that provides it. Under CI (`CI` set: `.ci/run` installs every one of them) a missing program
fails the test instead, so a broken install step cannot hide behind skips.

Tools: `psql` (postgresql-client), `initdb` (postgresql, PostgreSQL's server binaries, which
are not on PATH), `jdbc` (a JDK with java and javac, default-jdk-headless, plus the pgjdbc
jar, libpostgresql-jdbc-java), `openssl`, `curl`, `chromium` (the headless browser the
dashboard test renders the page in).
"""

from __future__ import annotations

import glob
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

IN_CI = bool(os.environ.get("CI"))
PGJDBC_JAR = Path("/usr/share/java/postgresql.jar")


@dataclass(frozen=True)
class Tool:
    name: str
    package: str  # the Debian package(s) that provide it

    def find(self) -> str | None:
        """The program's path (the jar's for `jdbc`), or None when missing."""
        if self.name == "initdb":
            found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
            return found[-1] if found else None
        if self.name == "jdbc":
            ok = shutil.which("java") and shutil.which("javac") and PGJDBC_JAR.exists()
            return str(PGJDBC_JAR) if ok else None
        return shutil.which(self.name)


TOOLS = {
    t.name: t
    for t in (
        Tool("psql", "postgresql-client"),
        Tool("initdb", "postgresql"),
        Tool("jdbc", "default-jdk-headless and libpostgresql-jdbc-java"),
        Tool("openssl", "openssl"),
        Tool("curl", "curl"),
        Tool("chromium", "chromium"),
    )
}


def which(name: str) -> str | None:
    """Path of a known tool, or None (no skipping: for tests that adapt)."""
    return TOOLS[name].find()


def require(name: str) -> str:
    """Path of the tool; skip the current test where it is missing (fail under CI)."""
    tool = TOOLS[name]
    path = tool.find()
    if path is None:
        if IN_CI:
            pytest.fail(
                f"{name} is required in CI (.ci/run installs Debian package {tool.package})"
            )
        pytest.skip(f"{name} not installed (Debian package {tool.package})")
    return path


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "needs(*tools): external programs the test drives (harness/tools.py); skipped where "
        "missing, failed under CI",
    )


@pytest.hookimpl(tryfirst=True)  # before fixtures start servers or compile programs
def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("needs"):
        for name in mark.args:
            require(name)
