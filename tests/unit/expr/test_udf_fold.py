"""PythonRoutine.fold: a Python aggregate's states folded over one chunk's rows per group
(what a view's GROUP BY calls), per row and WITH (batch = true), with failing rows."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from engine.errors import EngineError, ExternalRoutineException
from engine.expr.udf import PythonRoutine
from engine.types import BIGINT, INT, Field, SqlType

BODY_ROWS = """
def create_state():
    return []

def accumulate(s, v):
    if v == 13:
        raise ValueError("unlucky")
    return s + [v]

def retract(s, v):
    if v == 13:
        raise ValueError("unlucky")
    s = list(s)
    s.remove(v)
    return s

def finish(s):
    return sum(s)
"""
BODY_BATCH = """
def create_state():
    return []

def accumulate(s, v):
    if 13 in v.to_pylist():
        raise ValueError("unlucky")
    return s + v.to_pylist()

def retract(s, v):
    if 13 in v.to_pylist():
        raise ValueError("unlucky")
    s = list(s)
    for x in v.to_pylist():
        s.remove(x)
    return s

def finish(s):
    return sum(s)
"""


@dataclass
class _Fn:
    body: str
    batch: bool
    name: str = "agg"
    kind: str = "aggregate"
    strict: bool = True
    arg_types: list[SqlType] = field(default_factory=lambda: [INT])
    return_type: SqlType = BIGINT
    return_columns: list[Field] = field(default_factory=list)


class _Sink:
    def __init__(self) -> None:
        self.reports: list[tuple[str, int]] = []

    def report(self, expression: str, error: EngineError, count: int, sample: str) -> None:
        self.reports.append((str(error), count))


@pytest.mark.parametrize("batch", [False, True])
def test_fold_accumulates_retracts_and_counts_failing_rows(batch: bool) -> None:
    r = PythonRoutine(_Fn(BODY_BATCH if batch else BODY_ROWS, batch))
    v = pa.array([1, 2, 13, None, 5, 2], pa.int32())
    w = np.array([1, 1, 1, 1, 1, -1])
    groups: list[Any] = [[0, 1, 5], [2, 3, 4]]  # group 0: +1 +2 -2; group 1: +13 +NULL +5
    sink = _Sink()
    states, bad = r.fold([None, None], groups, [v], w, None, sink, "agg(v)")
    assert bad == [0, 1]  # the 13 is not in group 1's state
    assert r.results(states, sink, "agg(v)") == [1, 5]  # NULL skipped (STRICT)
    assert sink.reports == [("ValueError: unlucky", 1)]
    # the next chunk deletes the 13 (its retract raises too: the count goes back to 0)
    one = pa.array([13], pa.int32())
    states, bad = r.fold(states[1:], [[0]], [one], np.array([-1]), None, sink, "agg(v)")
    assert bad == [-1] and r.results(states, sink, "agg(v)") == [5]


def test_fold_raises_without_a_sink() -> None:
    r = PythonRoutine(_Fn(BODY_ROWS, False))
    with pytest.raises(ExternalRoutineException, match="unlucky"):
        r.fold([None], [[0]], [pa.array([13], pa.int32())], np.array([1]), None, None, "agg(v)")
