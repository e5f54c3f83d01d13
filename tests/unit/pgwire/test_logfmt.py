"""`setup_logging`: levels by name, and third-party warnings kept out below debug."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Iterator

import pytest

from pgwire import cli
from pgwire.logfmt import setup_logging


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    quiet = {n: logging.getLogger(n).level for n in ("sqlglot", "pyiceberg", "polars")}
    filters = warnings.filters[:]
    yield
    root.handlers[:], root.level = handlers, level
    for n, lv in quiet.items():
        logging.getLogger(n).setLevel(lv)
    warnings.filters[:] = filters
    logging.captureWarnings(False)


def test_levels_by_name_and_library_loggers(restore_logging: None) -> None:
    setup_logging("warning")
    assert logging.getLogger().level == logging.WARNING
    assert not logging.getLogger("sqlglot").isEnabledFor(logging.WARNING)
    assert logging.getLogger("sqlglot").isEnabledFor(logging.ERROR)
    assert logging.getLogger("swell.session").isEnabledFor(logging.WARNING)
    setup_logging("debug")
    assert logging.getLogger("sqlglot").isEnabledFor(logging.WARNING)


def test_library_warnings_dropped_others_logged(
    restore_logging: None, capsys: pytest.CaptureFixture[str]
) -> None:
    setup_logging("info")
    warnings.warn_explicit("noise", UserWarning, "x.py", 1, module="pyiceberg.io")
    warnings.warn_explicit("set POLARS_ICEBERG_PLANNER=pyiceberg", UserWarning, "y.py", 1)
    warnings.warn_explicit("a real one", UserWarning, "z.py", 1, module="somewhere")
    err = capsys.readouterr().err
    assert "noise" not in err and "POLARS_ICEBERG_PLANNER" not in err
    assert " WARNING py " in err and "a real one" in err


def test_log_level_flag() -> None:
    args = cli.build_parser().parse_args(["playground", "--log-level", "debug"])
    assert args.log_level == "debug"
    assert cli.build_parser().parse_args(["playground"]).log_level == "info"
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["playground", "--log-level", "loud"])
