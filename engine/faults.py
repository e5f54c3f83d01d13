"""Fault injection for tests: crash (`os._exit`) or raise at named points inside a barrier.

Two environment variables, read once at import (tests in process call `configure`):

* `SWELL_CRASH_AT=<point>[:<nth>]` exits the process with status `CRASH_EXIT_CODE`
  (no cleanup, no final checkpoint: what `kill -9` does) at the nth time `point` is
  reached (default the first);
* `SWELL_FAIL_AT=<point>[:<nth>[+]]` raises `InjectedFailure` there instead, to test the
  in-process rollback; `nth+` raises at the nth and every later time (a deterministic
  failure, as a bug would be).

A third pair holds a barrier still, to test what does not wait for it:

* `SWELL_PAUSE_AT=<point>[:<nth>]` with `SWELL_PAUSE_FILE=<path>`: at the nth hit of the
  point, if the file exists, the barrier writes `SWELL_PAUSE_AT: paused at <point>` to
  stderr and waits (holding whatever the barrier holds) until the file is removed, then
  writes `SWELL_PAUSE_AT: resumed at <point>`. Tests assert the order of those lines and
  of other clients' answers, never durations.

Several specs may be given, separated by commas. `view_stepped@<name>` counts only the
steps of the materialized view `<name>` (a failure of one job, e.g. to test that dropping
it unblocks the others). The counters count hits since the
process started (DDL runs barriers too). The points, in barrier order (`POINTS`):

| point | where |
|---|---|
| `sources_taken` | every source's `take()` returned (offsets advanced in memory) |
| `tables_drained` | every table pushed its queued chunks through its MaterializeOp |
| `view_stepped` | after each materialized view's step (one hit per view per barrier) |
| `sinks_stepped` | every sink stepped and handed its delta to its writer |
| `sinks_pre_committed` | every sink's pre-commit returned (Kafka flushed, Iceberg staged) |
| `checkpoint_batch` | the checkpoint's WriteBatch is built but not yet written |
| `checkpoint_written` | the checkpoint is durable, before the sinks' post-commit |
| `post_committed` | every sink's post-commit ran (the barrier is complete) |

Outside the barrier (`OTHER_POINTS`): `recovery`, in `Runtime.recover` once the old flows
are gone and before the checkpoint is read (at startup and after a failed epoch);
`copy_queued`, in COPY FROM STDIN once its rows are in the WAL and the table's queue
(before the WAL fsync is awaited; a table with a primary key still holds its DML lock);
`backfill_sliced`, after each slice of a creating job's backfill (between barriers,
`engine.stream.backfill`); `source_backfill_read`, after a creating job's one-shot read of
a source upstream returned, before its rows are stepped (without the epoch lock);
`checkpoint_pieces`, in a checkpoint large enough to be written in pieces, once its commit
batch is durable and before the pieces are written to their keys (`engine.state.checkpoint`);
`wal_part_written`, after each part of a big write (a large COPY or INSERT) is written to
the WAL, before its commit record (`Runtime.write`).

Nothing here costs more than one dict lookup per hit when no variable is set.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass

CRASH_ENV = "SWELL_CRASH_AT"
FAIL_ENV = "SWELL_FAIL_AT"
PAUSE_ENV = "SWELL_PAUSE_AT"
PAUSE_FILE_ENV = "SWELL_PAUSE_FILE"
CRASH_EXIT_CODE = 86
"""Exit status of a process stopped by `SWELL_CRASH_AT` (tests tell it from a real crash)."""

POINTS = (
    "sources_taken",
    "tables_drained",
    "view_stepped",
    "sinks_stepped",
    "sinks_pre_committed",
    "checkpoint_batch",
    "checkpoint_written",
    "post_committed",
)

OTHER_POINTS = (
    "recovery",
    "copy_queued",
    "backfill_sliced",
    "source_backfill_read",
    "checkpoint_pieces",
    "wal_part_written",
)


class InjectedFailure(RuntimeError):
    """Raised at a point named by `SWELL_FAIL_AT` (an internal error, like a bug)."""


@dataclass
class _Spec:
    nth: int
    repeat: bool  # fire at the nth and every later hit


_crash: dict[str, _Spec] = {}
_fail: dict[str, _Spec] = {}
_pause: dict[str, _Spec] = {}
_pause_file = ""
_hits: dict[str, int] = {}


def _parse(text: str, env: str, allow_repeat: bool) -> dict[str, _Spec]:
    out: dict[str, _Spec] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, _, count = part.partition(":")
        repeat = allow_repeat and count.endswith("+")
        count = count.removesuffix("+") if repeat else count
        base, at, job = name.partition("@")
        known = (base in POINTS or base in OTHER_POINTS) and (not at or bool(job))
        if not known or (count and not count.isdigit()) or count == "0":
            raise ValueError(
                f"{env}: bad spec {part!r}; expected <point>[:<nth>] with point one of "
                + ", ".join(POINTS + OTHER_POINTS)
            )
        out[name] = _Spec(int(count or 1), repeat)
    return out


def configure(crash: str = "", fail: str = "", pause: str = "", pause_file: str = "") -> None:
    """Replace the specs (the variables' syntax) and reset the hit counters."""
    global _crash, _fail, _pause, _pause_file
    _crash = _parse(crash, CRASH_ENV, allow_repeat=False)
    _fail = _parse(fail, FAIL_ENV, allow_repeat=True)
    _pause = _parse(pause, PAUSE_ENV, allow_repeat=True)
    _pause_file = pause_file
    _hits.clear()


def hit(point: str, job: str | None = None) -> None:
    """Count one pass through `point` (of `job`, if given); crash, raise or pause if a spec
    says so."""
    if not _crash and not _fail and not _pause:
        return
    if job is not None:
        _check(f"{point}@{job}")
    _check(point)


def _check(point: str) -> None:
    n = _hits[point] = _hits.get(point, 0) + 1
    c = _crash.get(point)
    if c is not None and n == c.nth:
        sys.stderr.write(f"{CRASH_ENV}: exiting at {point} (hit {n})\n")
        sys.stderr.flush()
        os._exit(CRASH_EXIT_CODE)
    f = _fail.get(point)
    if f is not None and (n == f.nth or (f.repeat and n > f.nth)):
        raise InjectedFailure(f"{FAIL_ENV}: injected failure at {point} (hit {n})")
    p = _pause.get(point)
    if p is not None and (n == p.nth or (p.repeat and n > p.nth)) and _pause_file:
        _hold(point)


def _hold(point: str) -> None:
    if not os.path.exists(_pause_file):
        return
    sys.stderr.write(f"{PAUSE_ENV}: paused at {point}\n")
    sys.stderr.flush()
    while os.path.exists(_pause_file):
        time.sleep(0.01)
    sys.stderr.write(f"{PAUSE_ENV}: resumed at {point}\n")
    sys.stderr.flush()


configure(
    os.environ.get(CRASH_ENV, ""),
    os.environ.get(FAIL_ENV, ""),
    os.environ.get(PAUSE_ENV, ""),
    os.environ.get(PAUSE_FILE_ENV, ""),
)
