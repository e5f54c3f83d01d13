"""Bound scalar expressions: the immutable tree the planner stores and the executor evaluates.

Lifecycle: `ExprBinder` builds these nodes once per statement; plans keep them (and `remap`
them when columns move); operators call `eval` once per chunk. Evaluation is columnar:
every node evaluates its children over the whole batch, then applies one kernel. Internally
nodes return `pa.Array | pa.Scalar` (`_eval`) so constants never get materialised until a
kernel needs a full column; the public `eval` always returns a full-length array.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import (
    DatetimeFieldOverflow,
    DivisionByZero,
    EngineError,
    InternalError,
    InvalidRegularExpression,
    NumericValueOutOfRange,
    UndefinedParameter,
)
from engine.expr.nonstrict import ErrorSink, RowErrors, recover, row_failure
from engine.numeric import is_special_value, numeric_array, py_value
from engine.types import BOOLEAN, SqlType, TypeKind

Datum: TypeAlias = pa.Array | pa.Scalar
_NULL_TYPE_ID = pa.null().id


@dataclass
class EvalContext:
    """Per-evaluation settings: session timezone and the statement's `now()` (aware UTC).

    `errors` selects the evaluation mode: None (ad-hoc queries, DML) raises data errors as
    PostgreSQL does; a sink (streaming jobs, `job_context`) makes a function that fails on
    a row yield NULL for that row and report the failure (`engine.expr.nonstrict`).
    """

    timezone: str = "UTC"
    now: datetime | None = None
    # the running session (engine.session.SwellSession) for catalog/session functions
    # (current_setting, pg_get_indexdef, ::regclass...); None outside a session
    session: Any = None
    errors: ErrorSink | None = None

    def now_utc(self) -> datetime:
        if self.now is None:
            self.now = datetime.now(UTC)
        return self.now


@dataclass
class JobEvalContext(EvalContext):
    """One streaming job's context: non-strict, with the runtime's clock (`parent`), so
    every job of a barrier sees the same `now()` and the runtime resets it in one place."""

    parent: EvalContext | None = None

    def now_utc(self) -> datetime:
        return self.parent.now_utc() if self.parent is not None else super().now_utc()


def job_context(parent: EvalContext, errors: ErrorSink) -> JobEvalContext:
    """A non-strict context for one streaming job, reporting its data errors to `errors`."""
    return JobEvalContext(timezone=parent.timezone, errors=errors, parent=parent)


class Expr(ABC):
    """An immutable, typed, bound scalar expression."""

    type: SqlType

    def eval(self, batch: pa.RecordBatch, ctx: EvalContext) -> pa.Array:
        out = self._eval(batch, ctx)
        return as_array(out, batch.num_rows, self.type)

    @abstractmethod
    def _eval(self, batch: pa.RecordBatch, ctx: EvalContext) -> Datum: ...

    @abstractmethod
    def children(self) -> list[Expr]: ...

    @abstractmethod
    def with_children(self, children: list[Expr]) -> Expr: ...

    def input_refs(self) -> set[int]:
        out: set[int] = set()
        for c in self.children():
            out |= c.input_refs()
        return out

    def remap(self, mapping: dict[int, int]) -> Expr:
        return self.with_children([c.remap(mapping) for c in self.children()])

    def is_constant(self) -> bool:
        return all(c.is_constant() for c in self.children())

    def has_now(self) -> bool:
        return any(c.has_now() for c in self.children())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self})"


@dataclass(frozen=True, eq=True, repr=False)
class InputRef(Expr):
    """Column `index` of the input batch."""

    index: int
    type: SqlType
    name: str = ""

    def _eval(self, batch: pa.RecordBatch, ctx: EvalContext) -> Datum:
        col = batch.column(self.index)
        if col.type != self.type.arrow:
            col = col.cast(self.type.arrow)
        return col

    def children(self) -> list[Expr]:
        return []

    def with_children(self, children: list[Expr]) -> Expr:
        return self

    def input_refs(self) -> set[int]:
        return {self.index}

    def remap(self, mapping: dict[int, int]) -> Expr:
        return InputRef(mapping[self.index], self.type, self.name)

    def is_constant(self) -> bool:
        return False

    def __str__(self) -> str:
        return self.name or f"${self.index}"


@dataclass(frozen=True, eq=False, repr=False)
class Literal(Expr):
    """A constant; `value` uses the Python representation documented in engine.types."""

    value: Any
    type: SqlType

    def _eval(self, batch: pa.RecordBatch, ctx: EvalContext) -> Datum:
        return self.scalar()

    def scalar(self) -> pa.Scalar:
        if self.type.kind is TypeKind.NUMERIC and is_special_value(self.value):
            return numeric_array([self.value], self.type.arrow)[0]
        return pa.scalar(self.value, self.type.arrow)

    def children(self) -> list[Expr]:
        return []

    def with_children(self, children: list[Expr]) -> Expr:
        return self

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Literal)
            and other.type == self.type
            and type(other.value) is type(self.value)
            and other.value == self.value
        )

    def __hash__(self) -> int:
        return hash((self.type, repr(self.value)))

    def __str__(self) -> str:
        if self.value is None:
            return f"null:{_tname(self.type)}"
        v = self.value
        if self.type.kind in (TypeKind.VARCHAR, TypeKind.JSONB):
            return f"'{v}':{_tname(self.type)}"
        if isinstance(v, bool):
            return f"{str(v).lower()}:{_tname(self.type)}"
        if self.type.kind is TypeKind.NUMERIC:
            s = format(v, "f")
            s = s.rstrip("0").rstrip(".") if "." in s else s
            return f"{s}:Decimal"
        if self.type.kind is TypeKind.INTERVAL:
            from engine.expr.temporal import format_interval

            return f"'{format_interval(v.months, v.days, v.nanoseconds)}':Interval"
        return f"{v}:{_tname(self.type)}"


@dataclass(frozen=True, eq=True, repr=False)
class Param(Expr):
    """A `$n` placeholder in a statement being described/prepared without values."""

    index: int  # 1-based
    type: SqlType

    def _eval(self, batch: pa.RecordBatch, ctx: EvalContext) -> Datum:
        raise UndefinedParameter(f"no value found for parameter {self.index}")

    def children(self) -> list[Expr]:
        return []

    def with_children(self, children: list[Expr]) -> Expr:
        return self

    def __str__(self) -> str:
        return f"${self.index}:{_tname(self.type)}"


Kernel = Callable[[list[Datum], int, EvalContext], Datum]


@dataclass(frozen=True, eq=False, repr=False)
class Func(Expr):
    """A function/operator call: evaluates all args, then applies `kernel` once.

    `kernel(args, num_rows, ctx)` gets each argument as an Array or a Scalar (constants)
    and returns a Datum of `type.arrow`. `op` set = infix display (`(a + b)`).
    `row_errors` (optional) tells, vectorised, which rows the kernel fails on, so
    non-strict evaluation can null them without bisecting (`engine.expr.nonstrict`).
    """

    name: str
    args: tuple[Expr, ...]
    type: SqlType
    kernel: Kernel = field(compare=False)
    op: str | None = None
    volatile: bool = False
    uses_now: bool = False
    row_errors: RowErrors | None = field(default=None, compare=False)
    # `x IN (constants)`: the constants (cast to the compared type), for index lookups
    # (engine.plan.index_scan); None for every other call
    in_items: tuple[Expr, ...] | None = field(default=None, compare=False)

    def _eval(self, batch: pa.RecordBatch, ctx: EvalContext) -> Datum:
        vals = [a._eval(batch, ctx) for a in self.args]
        try:
            return self._apply(vals, batch.num_rows, ctx)
        except Exception as e:
            sink: ErrorSink | None = getattr(ctx, "errors", None)
            err = None if sink is None else row_failure(e)
            if sink is None or err is None:
                raise
            return recover(
                str(self),
                self.type.arrow,
                lambda v, n: self._apply(v, n, ctx),
                self.row_errors,
                vals,
                batch.num_rows,
                err,
                sink,
            )

    def _apply(self, vals: list[Datum], n: int, ctx: EvalContext) -> Datum:
        try:
            out = self.kernel(vals, n, ctx)
        except EngineError:
            raise
        except pa.ArrowInvalid as e:
            raise translate_arrow_error(e, self.type) from e
        if out.type.id == _NULL_TYPE_ID and self.type.kind is not TypeKind.UNKNOWN:
            # a kernel's all-NULL answer built without its type (pa.scalar(None)): the
            # next kernel (LIKE, upper, ...) has no implementation over Arrow's null type
            return out.cast(self.type.arrow)
        return out

    def children(self) -> list[Expr]:
        return list(self.args)

    def with_children(self, children: list[Expr]) -> Expr:
        return Func(
            self.name,
            tuple(children),
            self.type,
            self.kernel,
            self.op,
            self.volatile,
            self.uses_now,
            self.row_errors,
            in_items=self.in_items,
        )

    def is_constant(self) -> bool:
        return not self.volatile and not self.uses_now and super().is_constant()

    def has_now(self) -> bool:
        return self.uses_now or super().has_now()

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Func)
            and other.name == self.name
            and other.type == self.type
            and other.args == self.args
            and other.op == self.op
        )

    def __hash__(self) -> int:
        return hash((self.name, self.args, self.type))

    def __str__(self) -> str:
        if self.op is not None:
            if len(self.args) == 1:
                return f"({self.op} {self.args[0]})"
            return "(" + f" {self.op} ".join(str(a) for a in self.args) + ")"
        if self.name == "cast":
            return f"{self.args[0]}::{_tname(self.type)}"
        return f"{self.name}(" + ", ".join(str(a) for a in self.args) + ")"


@dataclass(frozen=True, eq=True, repr=False)
class Case(Expr):
    """Searched CASE. Branches are evaluated only on the rows that reach them, as in Postgres
    (so `CASE WHEN b = 0 THEN 0 ELSE a / b END` never divides by zero)."""

    whens: tuple[tuple[Expr, Expr], ...]
    default: Expr
    type: SqlType

    def _eval(self, batch: pa.RecordBatch, ctx: EvalContext) -> Datum:
        n = batch.num_rows
        if n == 0:
            return pa.array([], self.type.arrow)
        rows = np.arange(n, dtype=np.int64)  # original row ids still undecided
        sub = batch
        pieces: list[tuple[np.ndarray, pa.Array]] = []
        for cond, then in self.whens:
            if len(rows) == 0:
                break
            c = as_array(cond._eval(sub, ctx), sub.num_rows, BOOLEAN)
            hit = pc.fill_null(c, False).to_numpy(zero_copy_only=False)
            if hit.any():
                taken = sub.filter(pa.array(hit))
                pieces.append(
                    (rows[hit], as_array(then._eval(taken, ctx), taken.num_rows, self.type))
                )
                miss = ~hit
                rows = rows[miss]
                sub = sub.filter(pa.array(miss))
        if len(rows):
            pieces.append((rows, as_array(self.default._eval(sub, ctx), sub.num_rows, self.type)))
        if len(pieces) == 1 and len(pieces[0][0]) == n:
            return pieces[0][1]
        order = np.concatenate([p[0] for p in pieces])
        values = pa.concat_arrays([p[1] for p in pieces])
        inverse = np.empty(n, dtype=np.int64)
        inverse[order] = np.arange(n, dtype=np.int64)
        return values.take(pa.array(inverse))

    def children(self) -> list[Expr]:
        out: list[Expr] = []
        for c, t in self.whens:
            out += [c, t]
        out.append(self.default)
        return out

    def with_children(self, children: list[Expr]) -> Expr:
        whens = tuple((children[2 * i], children[2 * i + 1]) for i in range(len(self.whens)))
        return Case(whens, children[-1], self.type)

    def __str__(self) -> str:
        body = " ".join(f"WHEN {c} THEN {t}" for c, t in self.whens)
        return f"CASE {body} ELSE {self.default} END"


# -- helpers -----------------------------------------------------------------------------------


def _tname(t: SqlType) -> str:
    return {
        TypeKind.BOOLEAN: "Boolean",
        TypeKind.SMALLINT: "Int16",
        TypeKind.INT: "Int32",
        TypeKind.BIGINT: "Int64",
        TypeKind.REAL: "Float32",
        TypeKind.DOUBLE: "Float64",
        TypeKind.NUMERIC: "Decimal",
        TypeKind.VARCHAR: "Varchar",
        TypeKind.BYTEA: "Bytea",
        TypeKind.DATE: "Date",
        TypeKind.TIME: "Time",
        TypeKind.TIMESTAMP: "Timestamp",
        TypeKind.TIMESTAMPTZ: "Timestamptz",
        TypeKind.INTERVAL: "Interval",
        TypeKind.JSONB: "Jsonb",
        TypeKind.UNKNOWN: "Unknown",
    }.get(t.kind, t.display)


def as_array(d: Datum, n: int, t: SqlType | None = None) -> pa.Array:
    """Materialise a Datum as an Array of length n (and of type t when given)."""
    if isinstance(d, pa.ChunkedArray):
        d = d.combine_chunks()
    if isinstance(d, pa.Scalar):
        target = t.arrow if t is not None else d.type
        if d.type != target:
            d = d.cast(target) if d.is_valid else pa.scalar(None, target)
        if not d.is_valid:
            return pa.nulls(n, target)
        if n == 0:
            return pa.array([], target)
        return pa.repeat(d, n)
    if t is not None and d.type != t.arrow:
        d = d.cast(t.arrow)
    return d


def is_scalar(d: Datum) -> bool:
    return isinstance(d, pa.Scalar)


def broadcast(args: list[Datum], n: int) -> list[pa.Array]:
    return [as_array(a, n) for a in args]


def per_row(fn: Callable[..., Any], out_type: pa.DataType) -> Kernel:
    """A kernel applying the Python function `fn` row by row; NULL in any argument -> NULL out.

    For functions Arrow has no compute kernel for (string edits, hashes, encodings). Scalar
    arguments are broadcast, so an all-constant call stays one scalar."""

    def kernel(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
        if all(is_scalar(a) for a in args):
            vals = [a.as_py() for a in args]
            return pa.scalar(None if any(v is None for v in vals) else fn(*vals), out_type)
        cols = [[a.as_py()] * n if is_scalar(a) else a.to_pylist() for a in args]
        return pa.array(
            [None if any(v is None for v in row) else fn(*row) for row in zip(*cols, strict=True)],
            out_type,
        )

    return kernel


def translate_arrow_error(e: pa.ArrowInvalid, t: SqlType) -> EngineError:
    msg = str(e).lower()
    if "divide by zero" in msg:
        return DivisionByZero("division by zero")
    if "regular expression" in msg:
        detail = str(e).split(":", 1)[-1].strip()
        return InvalidRegularExpression(f"invalid regular expression: {detail}")
    if t.kind in (TypeKind.DATE, TypeKind.TIMESTAMP, TypeKind.TIMESTAMPTZ) and (
        "overflow" in msg or "truncated" in msg or "out of bounds" in msg or "out of range" in msg
    ):
        return DatetimeFieldOverflow(
            "date out of range" if t.kind is TypeKind.DATE else "timestamp out of range"
        )
    if "overflow" in msg or "does not fit" in msg or "out of bounds" in msg:
        return out_of_range(t)
    return InternalError(f"expression evaluation failed: {e}")


def out_of_range(t: SqlType) -> NumericValueOutOfRange:
    name = {
        TypeKind.SMALLINT: "smallint",
        TypeKind.INT: "integer",
        TypeKind.BIGINT: "bigint",
        TypeKind.REAL: "real",
        TypeKind.DOUBLE: "double precision",
    }.get(t.kind)
    if name is None:
        if t.kind is TypeKind.NUMERIC:
            return NumericValueOutOfRange("numeric field overflow")
        return NumericValueOutOfRange(f"{t.display} out of range")
    return NumericValueOutOfRange(f"{name} out of range")


def evaluate_constant(expr: Expr, ctx: EvalContext | None = None) -> Any:
    """Evaluate an expression without input columns to a Python value."""
    ctx = ctx or EvalContext()
    batch = pa.RecordBatch.from_arrays([pa.nulls(1)], names=["_"])
    v = expr.eval(batch, ctx)[0].as_py()
    return py_value(v) if isinstance(v, Decimal) else v
