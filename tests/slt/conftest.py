"""pytest plugin: every tests/slt/**/*.slt file is one test item.

Items are marked `slt` and `e2e`, run on the session's shared Swell server (see
`harness.shared`) through `slt.runner`, and report a failing record as file:line, the SQL,
and expected versus actual output. Run one file with `pytest tests/slt/streaming/agg.slt`,
or a group with `pytest tests/slt -k streaming`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness.server import ServerError
from harness.shared import check_shared_server, shared_server
from slt.runner import SltFailure, SltParseError, header_problems, run_file


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    if file_path.suffix == ".slt":
        return SltFile.from_parent(parent, path=file_path)
    return None


class SltFile(pytest.File):
    def collect(self) -> Any:
        yield SltItem.from_parent(self, name=self.path.stem)


class SltItem(pytest.Item):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.add_marker(pytest.mark.slt)
        self.add_marker(pytest.mark.e2e)

    def runtest(self) -> None:
        text = self.path.read_text()
        problems = header_problems(text)
        if problems:
            raise SltParseError(f"{self.display_path()}: " + "; ".join(problems))
        srv = shared_server(self.config)
        try:
            run_file(self.path, srv.connect, display_path=self.display_path())
        finally:
            check_shared_server(self.config, self.nodeid)

    def display_path(self) -> str:
        try:
            return str(self.path.relative_to(self.config.rootpath))
        except ValueError:
            return str(self.path)

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> Any:
        if isinstance(excinfo.value, (SltFailure, SltParseError, ServerError)):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self) -> tuple[Path, int, str]:
        return self.path, 0, f"slt: {self.display_path()}"
