"""Swell's log line format: `2026-11-30T12:00:00Z INFO pgwire listening addr=0.0.0.0:4566`.

UTC timestamps, the level, the component (top-level logger name), then a message whose
details are `key=value` pairs so lines can be grepped and parsed. `setup_logging()` is
called once by the CLI; libraries only log through `logging.getLogger(<component>)`.
"""

from __future__ import annotations

import logging
import sys
import time
import warnings


class KeyValueFormatter(logging.Formatter):
    """Formats records as `<UTC time>Z LEVEL component message`, tracebacks on later lines."""

    converter = time.gmtime

    def __init__(self) -> None:
        super().__init__(
            "%(asctime)s %(levelname)s %(component)s %(message)s", datefmt="%Y-%m-%dT%H:%M:%SZ"
        )

    def format(self, record: logging.LogRecord) -> str:
        record.component = record.name.split(".", 1)[0]
        return super().format(record)


def kv(**fields: object) -> str:
    """`a=1 b="x y"`: values with spaces or quotes are quoted."""
    parts = []
    for key, value in fields.items():
        text = str(value)
        if not text or any(c in text for c in ' "='):
            text = '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
        parts.append(f"{key}={text}")
    return " ".join(parts)


LEVELS = ("debug", "info", "warning", "error")

# Libraries whose warnings are about things Swell already handles: sqlglot falls back to an
# opaque Command for statements Swell parses itself; pyiceberg and polars report choices of
# their own (a slower scan planner, a FileIO fallback). At `--log-level debug` they show.
_QUIET_LIBRARIES = ("sqlglot", "pyiceberg", "polars")
# Libraries that log routine steps at INFO (boto3 for the state store: "Found credentials in
# environment variables"); below debug only their warnings and errors show.
_CHATTY_LIBRARIES = ("botocore", "boto3", "s3transfer")


def setup_logging(level: int | str = logging.INFO) -> None:
    """Send every log line (and Python warnings) to stderr in Swell's format, at `level`.

    Below debug, third-party loggers in `_QUIET_LIBRARIES` only pass errors and the
    warnings those libraries raise through `warnings` are dropped; other Python warnings
    become `py.warnings` log lines instead of raw stderr text.
    """
    if isinstance(level, str):
        level = logging.getLevelNamesMapping()[level.upper()]
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.captureWarnings(True)
    quiet = level > logging.DEBUG
    for name in _QUIET_LIBRARIES:
        logging.getLogger(name).setLevel(logging.ERROR if quiet else logging.NOTSET)
    for name in _CHATTY_LIBRARIES:
        logging.getLogger(name).setLevel(logging.WARNING if quiet else logging.NOTSET)
    if quiet:
        for name in _QUIET_LIBRARIES:
            warnings.filterwarnings("ignore", module=rf"{name}(\..*)?$")
        # polars attributes its Iceberg planner warning to the calling thread's frame
        warnings.filterwarnings("ignore", message=r".*POLARS_ICEBERG_PLANNER")
