"""Non-strict evaluation (streaming jobs): failing rows become NULL and are reported.

Checked against exact Python arithmetic: which rows fail, the values of the others, the
counts reported, and that finding the failing rows costs O(k log n) kernel calls (never one
per row of the chunk) when the function has no vectorised failure mask.
"""

from __future__ import annotations

import decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import DivisionByZero, EngineError, InternalError
from engine.expr import ColumnBinding, EvalContext, ExprBinder, Func, InputRef, Scope
from engine.expr.core import job_context
from engine.types import BIGINT, INT, SMALLINT, VARCHAR, SqlType


class Sink:
    def __init__(self) -> None:
        self.reports: list[tuple[str, str, str, int, str]] = []

    def report(self, expression: str, error: EngineError, count: int, sample: str) -> None:
        self.reports.append((expression, error.sqlstate, str(error), count, sample))

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for _, state, _, n, _ in self.reports:
            out[state] = out.get(state, 0) + n
        return out


def evaluate(sql: str, cols: dict[str, tuple[SqlType, list[Any]]]) -> tuple[list[Any], Sink]:
    scope = Scope([ColumnBinding(n, t, i, "t") for i, (n, (t, _)) in enumerate(cols.items())])
    e = ExprBinder(scope).bind(sqlglot.parse_one("SELECT " + sql, read="risingwave").expressions[0])
    batch = pa.RecordBatch.from_arrays(
        [pa.array(v, t.arrow) for t, v in cols.values()], names=list(cols)
    )
    sink = Sink()
    out = e.eval(batch, job_context(EvalContext(), sink))
    assert len(out) == batch.num_rows and out.type == e.type.arrow
    return out.to_pylist(), sink


def test_division_by_zero_is_null_and_counted() -> None:
    got, sink = evaluate("a / b", {"a": (INT, [6, 1, None, 7, 8]), "b": (INT, [3, 0, 0, 0, 2])})
    assert got == [2, None, None, None, 4]  # NULL / 0 is NULL and no error
    assert sink.reports == [("(a / b)", "22012", "division by zero", 2, "1, 0")]


def test_strict_context_still_raises() -> None:
    scope = Scope([ColumnBinding("a", INT, 0, "t")])
    e = ExprBinder(scope).bind(sqlglot.parse_one("SELECT a / 0", read="risingwave").expressions[0])
    batch = pa.RecordBatch.from_arrays([pa.array([1, 2], pa.int32())], names=["a"])
    with pytest.raises(DivisionByZero):
        e.eval(batch, EvalContext())


def test_null_replaces_the_failing_call_only() -> None:
    got, sink = evaluate("coalesce(a / b, -1) + 1", {"a": (INT, [4, 1]), "b": (INT, [2, 0])})
    assert got == [3, 0]
    assert sink.counts() == {"22012": 1}


def test_constant_failure_fails_every_row() -> None:
    got, sink = evaluate("a + 1 / 0", {"a": (INT, [1, 2, 3])})
    assert got == [None, None, None]
    assert sink.counts() == {"22012": 3}


def test_cast_errors_are_found_by_bisection() -> None:
    vals = [str(i) for i in range(1000)]
    vals[0], vals[517], vals[999] = "x", "y", "1e"
    got, sink = evaluate("s::INT", {"s": (VARCHAR, vals)})
    want = [None if i in (0, 517, 999) else i for i in range(1000)]
    assert got == want
    assert sum(r[3] for r in sink.reports) == 3
    assert {r[1] for r in sink.reports} == {"22P02"}


def _counting_func(calls: list[int]) -> Func:
    """`x` unchanged, but the kernel fails (22012) on a chunk holding a 0, like a kernel
    without a vectorised failure mask."""

    def kernel(args: list[Any], n: int, ctx: EvalContext) -> Any:
        calls.append(n)
        a = args[0]
        if pc.any(pc.equal(a, 0)).as_py():
            raise DivisionByZero("division by zero")
        return a

    return Func("probe", (InputRef(0, BIGINT, "x"),), BIGINT, kernel)


@pytest.mark.parametrize("bad", [[5], [0, 4095], [1, 2, 3, 1000, 2000]])
def test_bisection_costs_k_log_n_kernel_calls(bad: list[int]) -> None:
    n = 4096
    x = np.arange(1, n + 1, dtype=np.int64)
    x[bad] = 0
    calls: list[int] = []
    sink = Sink()
    batch = pa.RecordBatch.from_arrays([pa.array(x)], names=["x"])
    out = _counting_func(calls).eval(batch, job_context(EvalContext(), sink))
    assert out.null_count == len(bad)
    assert out.to_numpy(zero_copy_only=False)[np.setdiff1d(np.arange(n), bad)].tolist() == [
        v for v in x.tolist() if v != 0
    ]
    assert sink.counts() == {"22012": len(bad)}
    # 1 full call + at most 2 per level (12 levels) per bad row
    assert len(calls) <= 1 + 2 * 12 * len(bad)


def test_internal_errors_are_not_swallowed() -> None:
    def kernel(args: list[Any], n: int, ctx: EvalContext) -> Any:
        raise InternalError("bug")

    f = Func("bug", (InputRef(0, BIGINT, "x"),), BIGINT, kernel)
    batch = pa.RecordBatch.from_arrays([pa.array([1, 2], pa.int64())], names=["x"])
    with pytest.raises(InternalError):
        f.eval(batch, job_context(EvalContext(), Sink()))


_BOUNDS = {"smallint": (SMALLINT, 15), "int": (INT, 31), "bigint": (BIGINT, 63)}


def _ints(bits: int) -> st.SearchStrategy[int | None]:
    lo, hi = -(2**bits), 2**bits - 1
    edge = st.sampled_from(
        [lo, lo + 1, -1, 0, 1, hi - 1, hi, 2 ** (bits // 2), -(2 ** (bits // 2))]
    )
    return st.one_of(st.none(), edge, st.integers(lo, hi))


def _exact(op: str, a: int, b: int) -> int | None:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0:
        return None
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


@settings(max_examples=60, deadline=None)
@given(
    data=st.data(),
    type_name=st.sampled_from(sorted(_BOUNDS)),
    op=st.sampled_from(["+", "-", "*", "/"]),
)
def test_integer_arithmetic_masks_match_exact_results(
    data: st.DataObject, type_name: str, op: str
) -> None:
    t, bits = _BOUNDS[type_name]
    pairs = data.draw(st.lists(st.tuples(_ints(bits), _ints(bits)), min_size=1, max_size=30))
    a = [p[0] for p in pairs]
    b = [p[1] for p in pairs]
    got, sink = evaluate(f"a {op} b", {"a": (t, a), "b": (t, b)})
    lo, hi = -(2**bits), 2**bits - 1
    want: list[int | None] = []
    zero = over = 0
    for x, y in pairs:
        if x is None or y is None:
            want.append(None)
            continue
        r = _exact(op, x, y)
        if r is None:
            zero += 1
        elif not lo <= r <= hi:
            over += 1
            r = None
        want.append(r)
    assert got == want
    expected = {k: v for k, v in (("22012", zero), ("22003", over)) if v}
    assert sink.counts() == expected
    # the vectorised masks alone find every failing row (no bisection fallback needed)
    scope = Scope([ColumnBinding("a", t, 0, "t"), ColumnBinding("b", t, 1, "t")])
    f = ExprBinder(scope).bind(sqlglot.parse_one(f"SELECT a {op} b").expressions[0])
    assert isinstance(f, Func) and f.row_errors is not None
    masks = f.row_errors([pa.array(a, t.arrow), pa.array(b, t.arrow)], len(pairs))
    failing = np.zeros(len(pairs), dtype=bool)
    for m, _ in masks:
        failing |= m
    assert int(failing.sum()) == zero + over


def _raising(exc: Exception, bad: int) -> Func:
    def kernel(args: list[Any], n: int, ctx: EvalContext) -> Any:
        if pc.any(pc.equal(args[0], bad)).as_py():
            raise exc
        return args[0]

    return Func("probe", (InputRef(0, BIGINT, "x"),), BIGINT, kernel)


def test_untranslated_value_errors_are_row_failures() -> None:
    """A kernel's Python arithmetic/value error or Arrow invalid-input error on some rows is
    a row failure too (SQLSTATE 22000); a programming error still propagates."""
    batch = pa.RecordBatch.from_arrays([pa.array([1, 7, 3], pa.int64())], names=["x"])
    for exc in (decimal.InvalidOperation(), OverflowError("big"), pa.ArrowInvalid("bad")):
        sink = Sink()
        out = _raising(exc, 7).eval(batch, job_context(EvalContext(), sink))
        assert out.to_pylist() == [1, None, 3]
        assert [(r[1], r[3]) for r in sink.reports] == [("22000", 1)]
    with pytest.raises(TypeError):
        _raising(TypeError("bug"), 7).eval(batch, job_context(EvalContext(), Sink()))
    with pytest.raises(OverflowError):  # ad hoc: unchanged
        _raising(OverflowError("big"), 7).eval(batch, EvalContext())


def test_guarded_division_reports_only_rows_postgres_would_evaluate() -> None:
    """`b <> 0 AND a / b > 1` never divides by zero in PostgreSQL: no failure is reported;
    an unguarded row is (NULL, counted once)."""
    cols = {"a": (INT, [6, 1, 4, 8]), "b": (INT, [3, 0, 0, None])}
    got, sink = evaluate("b <> 0 AND a / b > 1", cols)
    assert got == [True, False, False, None] and sink.reports == []
    got, sink = evaluate("b = 0 OR a / b > 1", cols)
    assert got == [True, True, True, None] and sink.reports == []
    got, sink = evaluate("a > 3 AND a / b > 1", cols)
    assert got == [True, False, None, None] and sink.counts() == {"22012": 1}
