"""User-defined aggregates (`CREATE AGGREGATE`) kept incrementally by `HashAggOp`.

A Python aggregate with a `retract` function (or any Python aggregate over an
append-only input, where nothing is ever retracted) is maintained like a built-in
aggregate: per group the operator keeps the aggregate's state, not the group's rows.
Per chunk:

1. the chunk's rows are grouped once (one polars group-by, with the row positions of each
   group in chunk order);
2. each touched group's state is read from the group state row and unpickled (a group
   seen for the first time starts from `create_state()`);
3. `accumulate(state, ...)` runs for every inserted row and `retract(state, ...)` for
   every deleted one (update pairs are a retract and an accumulate); a `WITH (batch =
   true)` aggregate gets each group's inserted rows in one call and its deleted rows in
   another, as Arrow arrays (`engine.expr.udf.PythonRoutine.fold`);
4. `finish(state)` gives the group's new value; the state is pickled back.

Slots (this call's part of the group state row, `agg_calls`): `(state, value, failing)`:
the pickled state (None before any row), the last `finish` result (so the value before
a change is read back, not recomputed) and the net count of the group's rows whose
`accumulate` raised. Such a row is not in the state; while any is in the group its value
is NULL, as the same query run from scratch shows NULL for a group where the aggregate
fails (a later `retract` of that row that raises too takes it out again). Failures are
reported to the job's event log (`engine.expr.nonstrict`), never raised.

Without `retract` over an input that retracts rows, the aggregate cannot be updated
incrementally; the planner then keeps the group's rows and recomputes touched groups
(`CollectAggOp`), as RisingWave does.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from engine.errors import ExternalRoutineException
from engine.expr.nonstrict import ErrorSink
from engine.stream.operators.agg_calls import AggCall, AggImpl, Col


class UdafImpl(AggImpl):
    """One user-defined aggregate call of a `HashAggOp`; see the module docstring."""

    init = (None, None, 0)

    def __init__(self, call: AggCall, errors: ErrorSink | None) -> None:
        udf = call.udf
        if udf is None or udf.routine is None:
            raise ValueError("a user-defined aggregate call needs its bound function")
        self.routine = udf.routine
        self.arg_cols = [r.index for r in udf.args]
        self.filter = call.filter
        self.errors = errors
        self.text = str(udf)
        self._empty: list[Any] | None = None

    def output(self, slots: list[Col]) -> list[Any]:
        states, values, failing = slots
        out: list[Any] = []
        for st, v, f in zip(states, values, failing, strict=True):
            if f:
                out.append(None)
            elif st is None:  # no row yet (the global row before any input)
                out.append(self._empty_value())
            else:
                out.append(v)
        return out

    def _empty_value(self) -> Any:
        if self._empty is None:
            self._empty = self.routine.results([None], self.errors, self.text)
        return self._empty[0]

    def step(
        self,
        old: Sequence[Col],
        groups: list[Sequence[int]],
        batch: pa.RecordBatch,
        weights: np.ndarray,
    ) -> list[list[Any]]:
        """The new slot columns of the touched groups (`groups[g]`: chunk rows of group g)."""
        blobs, _values, failing = old
        states = [None if b is None else self._load(b) for b in blobs]
        args = [batch.column(c) for c in self.arg_cols]
        counted = None
        if self.filter is not None:
            f = batch.column(self.filter)
            counted = f.fill_null(False).to_numpy(zero_copy_only=False).astype(bool)
        states, bad = self.routine.fold(
            states, groups, args, weights, counted, self.errors, self.text
        )
        values = self.routine.results(states, self.errors, self.text)
        return [
            [self._dump(s) for s in states],
            values,
            [a + b for a, b in zip(failing, bad, strict=True)],
        ]

    def _dump(self, state: Any) -> bytes:
        try:
            return pickle.dumps(state, protocol=5)
        except (pickle.PicklingError, TypeError, AttributeError) as e:
            raise ExternalRoutineException(
                f'the state of aggregate "{self.routine.name}" cannot be stored: {e}',
                hint="A state is a value Python can pickle: numbers, strings, tuples, lists, "
                "dicts, or objects of classes the function body defines.",
            ) from None

    def _load(self, blob: bytes) -> Any:
        return pickle.loads(blob)  # noqa: S301 - written by this view from its own aggregate


__all__ = ["UdafImpl"]
