"""Process-wide settings for a long-running server, applied once at startup.

Why: two costs measured in the server process are not the engine's own work and can be
removed before the first statement arrives:

* numpy asks the kernel for transparent huge pages (`madvise(MADV_HUGEPAGE)`) on every
  allocation of 4 MB or more. The allocator hands such blocks back to the kernel when
  they are freed, so each epoch's large temporary arrays (COPY batches, group columns,
  segment copies) faulted in fresh 2 MB pages that the kernel zeroes first: `perf`
  showed `clear_page_erms` under huge-page faults at about 7% of the server's CPU in a
  100k-group GROUP BY stream, 2% without the hint. The hint is turned off;
* modules that the engine imports lazily, and that pyarrow or numpy load on first use
  (`numpy.ma`, about 60 ms: pyarrow looks for masked arrays the first time it converts
  a numpy array; the session-statement grammar with its regular expressions, about
  20 ms), made the first COPY or INSERT after a start take 0.1 s of CPU more than the
  next. They are imported here instead.

Lifecycle: `tune_process()` is called by the server entry point (pgwire.cli) before the
database opens; embedded uses (tests, benchmarks in one process) do not call it and
behave as before. Calling it twice is harmless.
"""

from __future__ import annotations

import importlib

from numpy._core import multiarray

# imported at startup rather than at the first statement that needs them (module doc)
_PRELOAD = ("numpy.ma", "engine.sql.session_stmts")


def tune_process() -> None:
    """Apply the process-wide settings of the module docstring."""
    setter = getattr(multiarray, "_set_madvise_hugepage", None)
    if setter is not None:
        setter(False)
    for name in _PRELOAD:
        importlib.import_module(name)
