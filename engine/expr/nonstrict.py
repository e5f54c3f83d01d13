"""Non-strict evaluation: in streaming jobs a function that fails on some rows yields NULL
for exactly those rows, and the failures are reported instead of raised.

Why: a materialized view or sink must not stop (or lose other views' rows) because one
input row divides by zero; RisingWave evaluates streaming expressions this way, while
ad-hoc queries and DML keep PostgreSQL's behaviour and raise. Which mode applies is
decided by the `EvalContext`: its `errors` sink is set only for streaming jobs.

Lifecycle: `Func._eval` evaluates its arguments and applies its kernel to the whole chunk
as usual. Only when the kernel raises a failure on its input values (`row_failure`: a
data exception, SQLSTATE class 22, or an untranslated value error) under a non-strict
context does it call `recover`, which finds the failing rows:

1. vectorised, when the function knows its failure condition (`Func.row_errors`, e.g.
   division by zero or integer overflow): one mask over the chunk, the masked rows' inputs
   set to NULL (those kernels are strict, so the output is NULL there), one more kernel call;
2. otherwise (or if errors remain) by bisection: the argument slices are re-evaluated by
   halves until single failing rows are isolated, which costs O(k log n) kernel calls for
   k failing rows among n, never a Python loop over the whole chunk.

Each failure is counted per (error message) and handed to the sink with a sample of the
failing row's argument values. The NULL replaces this function's value only, so an outer
`coalesce(a / b, 0)` still sees NULL and answers 0, as in RisingWave.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import DataError, EngineError, UnconvertibleValue

Datum: TypeAlias = pa.Array | pa.Scalar
#: the failing-rows function of a kernel: argument values and row count -> (mask, error)
#: pairs, each mask a numpy bool array of the rows that fail with that error
RowErrors = Callable[[list[Datum], int], list[tuple[np.ndarray, EngineError]]]
Apply = Callable[[list[Datum], int], Datum]

_SAMPLE_CHARS = 200


class ErrorSink(Protocol):
    """Where non-strict evaluation reports failures (one streaming job's event log)."""

    def report(self, expression: str, error: EngineError, count: int, sample: str) -> None:
        """`count` rows of `expression` failed with `error`; `sample` shows one row's
        argument values."""


def is_data_error(e: BaseException) -> bool:
    """A data exception (SQLSTATE class 22) or an exception raised inside a user-defined
    function (class 38): caused by the row's values, not by a bug of the engine."""
    return isinstance(e, EngineError) and e.sqlstate[:2] in ("22", "38")


def row_failure(e: BaseException) -> EngineError | None:
    """The error to report when `e`, raised by a kernel, is a failure on the input's
    values, else None (then it is a real failure and propagates).

    Data exceptions (class 22), a value with no image in the target type
    (`UnconvertibleValue`) and user-defined functions' exceptions (class 38) are; so
    are the value errors a kernel did not translate
    into PostgreSQL's error (Arrow's invalid-input errors, Python arithmetic and value
    errors, e.g. an out-of-range interval product or a decimal operation): in a
    streaming job they must not stop the dataflow either, so they are reported as
    SQLSTATE 22000 with their text. Other engine errors (internal errors that are not
    Arrow's, feature or catalog errors) and programming errors propagate."""
    if isinstance(e, EngineError):
        if is_data_error(e) or isinstance(e, UnconvertibleValue):
            return e
        return DataError(str(e)) if isinstance(e.__cause__, pa.ArrowInvalid) else None
    if isinstance(e, (ArithmeticError, ValueError)):  # pa.ArrowInvalid is a ValueError
        return DataError(f"{type(e).__name__}: {e}")
    return None


def recover(
    expression: str,
    out_type: pa.DataType,
    apply: Apply,
    row_errors: RowErrors | None,
    vals: list[Datum],
    n: int,
    first: EngineError,
    sink: ErrorSink,
) -> Datum:
    """The function's value over `n` rows with failing rows as NULL; `apply(vals, n)` is
    the kernel (it raised `first` over the whole chunk); failures go to `sink`."""
    vals = [v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v for v in vals]
    if all(isinstance(v, pa.Scalar) for v in vals):  # constant inputs: every row fails alike
        sink.report(expression, first, n, _sample(vals, 0))
        return pa.scalar(None, out_type)
    found: list[tuple[int, EngineError]] = []
    if row_errors is not None:
        masks = row_errors(vals, n)
        bad = np.zeros(n, dtype=bool)
        for mask, err in masks:
            mask = mask & ~bad  # a row counts once, under the first error that names it
            if mask.any():
                sink.report(expression, err, int(mask.sum()), _sample(vals, int(mask.argmax())))
                bad |= mask
        if bad.any():
            vals = [_null_rows(v, bad) for v in vals]
            try:
                return apply(vals, n)
            except Exception as e:
                if row_failure(e) is None:
                    raise
    pieces: list[pa.Array] = []
    mid = n // 2
    for lo, hi in ((0, mid), (mid, n)):
        if hi > lo:
            _bisect(apply, out_type, vals, lo, hi, pieces, found)
    _report(expression, vals, found, sink)
    return pa.concat_arrays(pieces) if len(pieces) > 1 else pieces[0]


def _bisect(
    apply: Apply,
    out_type: pa.DataType,
    vals: list[Datum],
    lo: int,
    hi: int,
    pieces: list[pa.Array],
    found: list[tuple[int, EngineError]],
) -> None:
    """Evaluate rows [lo, hi); on a data error split in halves down to single rows."""
    sub = [v if isinstance(v, pa.Scalar) else v.slice(lo, hi - lo) for v in vals]
    try:
        pieces.append(_materialise(apply(sub, hi - lo), hi - lo, out_type))
        return
    except Exception as e:
        err = row_failure(e)
        if err is None:
            raise
        if hi - lo == 1:
            found.append((lo, err))
            pieces.append(pa.nulls(1, out_type))
            return
    mid = (lo + hi) // 2
    _bisect(apply, out_type, vals, lo, mid, pieces, found)
    _bisect(apply, out_type, vals, mid, hi, pieces, found)


def _report(
    expression: str, vals: list[Datum], found: list[tuple[int, EngineError]], sink: ErrorSink
) -> None:
    by_message: dict[tuple[str, str], tuple[EngineError, int, int]] = {}
    for row, err in found:
        key = (err.sqlstate, str(err))
        seen = by_message.get(key)
        by_message[key] = (err, row, 1) if seen is None else (seen[0], seen[1], seen[2] + 1)
    for err, row, count in by_message.values():
        sink.report(expression, err, count, _sample(vals, row))


def _null_rows(v: Datum, mask: np.ndarray) -> Datum:
    if isinstance(v, pa.Scalar):
        return v
    return pc.if_else(pa.array(mask), pa.scalar(None, v.type), v)


def _materialise(d: Datum, n: int, t: pa.DataType) -> pa.Array:
    if isinstance(d, pa.ChunkedArray):
        d = d.combine_chunks()
    if isinstance(d, pa.Scalar):
        if not d.is_valid:
            return pa.nulls(n, t)
        d = pa.repeat(d, n)
    return d if d.type == t else d.cast(t)


def _sample(vals: Sequence[Datum], row: int) -> str:
    """The argument values of one row, as text for the event log."""
    parts = []
    for v in vals:
        x = v if isinstance(v, pa.Scalar) else v[row]
        py = x.as_py()
        parts.append("NULL" if py is None else repr(py) if isinstance(py, str) else str(py))
    s = ", ".join(parts)
    return s if len(s) <= _SAMPLE_CHARS else s[: _SAMPLE_CHARS - 3] + "..."
