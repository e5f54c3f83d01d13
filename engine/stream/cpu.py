"""CPU accounting of the barrier: where the stream runtime spends its CPU seconds.

Why: users feel the whole engine (table materialization, every operator per barrier, the
view's materialization, the RocksDB checkpoint, the garbage collector), and an operator
benchmark alone cannot say which of these dominates. The runtime therefore keeps two
cumulative tables of CPU seconds of the thread that runs the barrier:

* `phases`: one entry per barrier phase (`sources`, `tables` - DML chunks through each
  table's materialization, `views` - every view's operators, `sinks`, `commit` - sink
  pre/post-commit plus the checkpoint's encode and synced write, `gc` - the collector
  freeze after each epoch);
* `operators`: the `views` phase split by operator class name (`HashJoinOp`,
  `ColumnarMaterializeOp`, ...), summed over every view.

Cost: one `time.thread_time()` call per phase and per stepped operator node per barrier
(well under a microsecond each), so it is always on. The counters are exported by the
Prometheus endpoint (`swell_stream_cpu_seconds{phase}`, `swell_operator_cpu_seconds
{operator}`) and read by `bench/stream_sql_bench.py`.

Lifecycle: one `StreamCpu` per runtime, created with it; `lap` after each phase; ViewFlow
calls `add_operator` per stepped node; `reset()` zeroes both tables (benchmarks).
Thread CPU time (not process time) keeps background threads (the WAL writer) out of the
barrier's figures.
"""

from __future__ import annotations

import time
from collections import defaultdict

PHASES = ("sources", "tables", "views", "sinks", "commit", "gc")


class StreamCpu:
    """Cumulative barrier CPU seconds by phase and by operator class; see module doc."""

    __slots__ = ("phases", "operators")

    def __init__(self) -> None:
        self.phases: dict[str, float] = dict.fromkeys(PHASES, 0.0)
        self.operators: defaultdict[str, float] = defaultdict(float)

    @staticmethod
    def now() -> float:
        return time.thread_time()

    def lap(self, phase: str, since: float) -> float:
        """Charge the CPU time since `since` to `phase`; returns the new start time."""
        t = time.thread_time()
        self.phases[phase] = self.phases.get(phase, 0.0) + (t - since)
        return t

    def add_operator(self, name: str, seconds: float) -> None:
        self.operators[name] += seconds

    def reset(self) -> None:
        for k in self.phases:
            self.phases[k] = 0.0
        self.operators.clear()

    def snapshot(self) -> dict[str, dict[str, float]]:
        return {"phases": dict(self.phases), "operators": dict(self.operators)}
