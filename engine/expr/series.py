"""generate_series: argument typing and the series themselves, for every row at once.

One place for the function wherever it is called: in FROM (`engine.batch.table_functions`,
one row of arguments, also the constant views of `engine.stream.operators.values`) and in
a select list (a ProjectSet, one series per input row). As PostgreSQL:

* `generate_series(start, stop [, step])` over integers (int, or bigint when an argument
  is bigint), step 1 by default, a negative step counting down;
* over timestamps with an interval step (`generate_series(ts, ts, interval '1 day')`):
  timestamp when an argument is a timestamp and none a timestamptz, else timestamptz
  (dates and quoted literals resolve to it, as PostgreSQL's preferred type); steps with
  months are added one after another, so the day of the month is clamped as
  PostgreSQL's repeated `+ step` does (Jan 31, Feb 29, Mar 29, ...);
* a step of zero is 22023 "step size cannot equal zero"; a NULL argument gives no rows.

Lifecycle: `series_args` runs at planning time (the output type, the arguments cast to
it); `series_columns` runs per chunk of argument rows and returns, per row, the number of
values and their offset into one flat array of all values.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InvalidParameterValue, ProgramLimitExceeded, not_supported
from engine.expr import temporal
from engine.expr.coerce import implicit_cast, is_untyped
from engine.expr.core import Expr
from engine.types import BIGINT, INT, TIMESTAMP, TIMESTAMPTZ, SqlType, TypeKind

_INTS = {TypeKind.INT, TypeKind.BIGINT, TypeKind.SMALLINT}
_TIMES = {TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ, TypeKind.DATE}
MAX_SERIES_ROWS = 100_000_000
"""Values one call may produce (a bigger series is an error, not an allocation)."""


def series_args(args: list[Expr]) -> tuple[list[Expr], SqlType]:
    """The arguments cast to the series' type, and that type (the output column's)."""
    if len(args) not in (2, 3):
        raise not_supported("generate_series with these arguments")
    kinds = {a.type.kind for a in args[:2] if not is_untyped(a)}
    step_kind = None if len(args) < 3 or is_untyped(args[2]) else args[2].type.kind
    if step_kind is TypeKind.INTERVAL or kinds & _TIMES:
        if step_kind is not TypeKind.INTERVAL or kinds - _TIMES:
            raise not_supported(
                "generate_series over timestamps without an interval step",
                hint="Write generate_series(start, stop, interval '1 day').",
            )
        t = (
            TIMESTAMP
            if TypeKind.TIMESTAMP in kinds - {TypeKind.TIMESTAMPTZ}
            and TypeKind.TIMESTAMPTZ not in kinds
            else TIMESTAMPTZ
        )
        return _cast(args[:2], t) + [args[2]], t
    kinds |= {step_kind} if step_kind is not None else set()
    if kinds - _INTS:
        raise not_supported(
            "generate_series over non-integer values",
            hint="Integers, or timestamps with an interval step, are supported.",
        )
    t = BIGINT if TypeKind.BIGINT in kinds else INT
    return _cast(args, t), t


def _cast(args: list[Expr], t: SqlType) -> list[Expr]:
    out = []
    for a in args:
        c = implicit_cast(a, t)
        if c is None:
            raise not_supported(f"generate_series over {a.type.display}")
        out.append(c)
    return out


def _ints(a: pa.Array, default: int) -> np.ndarray:
    return np.asarray(pc.fill_null(a.cast(pa.int64()), default).to_numpy(zero_copy_only=False))


def series_columns(
    args: list[pa.Array], t: SqlType, n: int
) -> tuple[np.ndarray, pa.Array, np.ndarray]:
    """Per argument row: the number of values, all values flat, and each row's offset."""
    start, stop = args[0], args[1]
    valid = pc.and_(pc.is_valid(start), pc.is_valid(stop))
    if len(args) > 2:
        valid = pc.and_(valid, pc.is_valid(args[2]))
    ok = np.asarray(valid.to_numpy(zero_copy_only=False), dtype=bool)
    s, e = _ints(start, 0), _ints(stop, 0)
    months = np.zeros(n, np.int64)
    if t.kind in (TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ):
        months, days, nanos = temporal.interval_parts(args[2])
        step = days * temporal.US_PER_DAY + nanos // 1000
        zero = (months == 0) & (step == 0)
    else:
        step = _ints(args[2], 1) if len(args) > 2 else np.ones(n, np.int64)
        zero = step == 0
    if (zero & ok).any():
        raise InvalidParameterValue("step size cannot equal zero")
    ok &= ~zero
    calendar = ok & (months != 0)
    fixed = ok & ~calendar
    lens = np.zeros(n, np.int64)
    safe = np.where(fixed, step, 1)
    lens[fixed] = np.maximum((e[fixed] - s[fixed]) // safe[fixed] + 1, 0)
    if int(lens.sum()) > MAX_SERIES_ROWS:
        raise _too_long()
    offs = np.concatenate([[0], np.cumsum(lens)])[:-1]
    within = np.arange(int(lens.sum())) - np.repeat(offs, lens)
    flat = np.repeat(s, lens) + within * np.repeat(safe, lens)
    if calendar.any():
        lens, flat, offs = _calendar(s, e, months, days, nanos, calendar, lens, flat, offs)
    return lens, pa.array(flat, pa.int64()).cast(t.arrow), offs


def _calendar(
    s: np.ndarray,
    e: np.ndarray,
    months: np.ndarray,
    days: np.ndarray,
    nanos: np.ndarray,
    rows: np.ndarray,
    lens: np.ndarray,
    flat: np.ndarray,
    offs: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Series whose step has months: `cur + step` repeated over every such row at once
    (one numpy pass per value of the longest series), merged after the fixed-step ones."""
    idx = np.flatnonzero(rows)
    cur, stop = s[idx], e[idx]
    m, d, ns = months[idx], days[idx], nanos[idx]
    up = (m * 31 + d) * temporal.US_PER_DAY + ns // 1000 > 0  # the step's direction
    values: list[np.ndarray] = []
    owners: list[np.ndarray] = []
    live = np.ones(len(idx), dtype=bool)
    total = int(lens.sum())
    while True:
        live &= np.where(up, cur <= stop, cur >= stop)
        if not live.any():
            break
        values.append(cur[live])
        owners.append(idx[live])
        total += int(live.sum())
        if total > MAX_SERIES_ROWS:
            raise _too_long()
        cur = temporal.add_interval_us(cur, m, d, ns)
    if not values:
        return lens, flat, offs
    cal_rows = np.concatenate(owners)
    cal_vals = np.concatenate(values)
    fixed_rows = np.repeat(np.arange(len(lens)), lens)
    all_rows = np.concatenate([fixed_rows, cal_rows])
    order = np.argsort(all_rows, kind="stable")  # by row, each row's values in order
    lens = np.bincount(all_rows, minlength=len(lens)).astype(np.int64)
    offs = np.concatenate([[0], np.cumsum(lens)])[:-1]
    return lens, np.concatenate([flat, cal_vals])[order], offs


def _too_long() -> Exception:
    return ProgramLimitExceeded(f"generate_series would produce more than {MAX_SERIES_ROWS:,} rows")
