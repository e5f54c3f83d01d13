"""Type resolution: common types, implicit/assignment/explicit casts, DDL type names.

Used by the binder while building expressions and by the planner for INSERT targets,
UNION/VALUES columns and DDL. Casts of literals fold at bind time (so `'abc'::int` fails
when the statement is bound, as in Postgres), except where the session timezone matters.
"""

from __future__ import annotations

from decimal import Decimal

import numpy as np
import pyarrow as pa
from sqlglot import exp

from engine.errors import (
    DatatypeMismatch,
    EngineError,
    NumericValueOutOfRange,
    UndefinedObject,
    not_supported,
)
from engine.expr.casts import CastLevel, array_cast_fn, can_cast, cast_datum, text_syntax_errors
from engine.expr.core import (
    Datum,
    EvalContext,
    Expr,
    Func,
    Literal,
    Param,
    as_array,
    out_of_range,
)
from engine.expr.typmod import enforce, modifier_of
from engine.numeric import py_value
from engine.types import (
    BIGINT,
    BOOLEAN,
    BYTEA,
    DATE,
    DOUBLE,
    INT,
    INTERVAL,
    JSONB,
    NUMERIC,
    REAL,
    SMALLINT,
    TIME,
    TIMESTAMP,
    TIMESTAMPTZ,
    UNKNOWN,
    VARCHAR,
    SqlType,
    TypeKind,
    list_of,
)

K = TypeKind
_NUM_ORDER = [K.SMALLINT, K.INT, K.BIGINT, K.NUMERIC, K.REAL, K.DOUBLE]
_TIME_ORDER = [K.DATE, K.TIMESTAMP, K.TIMESTAMPTZ]


class UntypedLiteral(Literal):
    """A quoted string literal whose type comes from context (Postgres `unknown`)."""


class WideNumericLiteral(Literal):
    """A numeric literal with more digits before the point than Swell's numeric holds (28,
    `decimal128(38, 10)`). PostgreSQL's numeric takes it; here it is still a numeric, never
    silently a double: cast to real / double precision (or text) it is that value, used as
    a numeric it is 22003 `numeric field overflow` with PostgreSQL's detail."""

    def _eval(self, batch: pa.RecordBatch, ctx: EvalContext) -> Datum:
        raise self.overflow()

    def scalar(self) -> pa.Scalar:
        raise self.overflow()

    def overflow(self) -> NumericValueOutOfRange:
        return NumericValueOutOfRange(
            "numeric field overflow",
            detail="A field with precision 38, scale 10 must round to an absolute value less"
            " than 10^28.",
            hint="Swell's numeric holds 28 digits before the decimal point; for larger values"
            " use double precision (for example 1e40::float8).",
        )


def _cast_wide(expr: WideNumericLiteral, target: SqlType) -> Expr:
    if target.kind in (K.DOUBLE, K.REAL):
        f = float(expr.value)
        limit = 3.4028234663852886e38 if target.kind is K.REAL else float("inf")
        if abs(f) >= limit:
            what = "real" if target.kind is K.REAL else "double precision"
            raise NumericValueOutOfRange(
                f'"{format(expr.value, "f")}" is out of range for type {what}'
            )
        return Literal(f, target)
    if target.kind is K.VARCHAR:
        return Literal(format(expr.value, "f"), target)
    if target.kind is K.NUMERIC and target.mod is None:
        return expr
    if target.is_integer:
        raise out_of_range(target)
    raise expr.overflow()


def is_untyped(e: Expr) -> bool:
    return (
        isinstance(e, UntypedLiteral)
        or (isinstance(e, Literal) and e.type == UNKNOWN)
        or (isinstance(e, Param) and e.type == UNKNOWN)
    )


def common_type(types: list[SqlType], context: str = "") -> SqlType:
    """Postgres UNION/CASE type resolution over the given types; UNKNOWN entries adapt."""
    known = [t for t in types if t.kind is not K.UNKNOWN]
    if not known:
        return VARCHAR
    first = known[0]
    if all(t == first for t in known):
        return first
    if all(t.kind in _NUM_ORDER for t in known):
        return max(known, key=lambda t: _NUM_ORDER.index(t.kind))
    if all(t.kind in _TIME_ORDER for t in known):
        return max(known, key=lambda t: _TIME_ORDER.index(t.kind))
    if all(t.kind is K.LIST for t in known):
        elems = [t.elem for t in known if t.elem is not None]
        return list_of(common_type(elems, context))
    other = next(
        t for t in known if t != first and not (t.kind in _NUM_ORDER and first.kind in _NUM_ORDER)
    )
    prefix = f"{context} " if context else ""
    raise DatatypeMismatch(f"{prefix}types {first.display} and {other.display} cannot be matched")


def operator_type(types: list[SqlType], context: str = "") -> SqlType:
    """The type both operands of a binary operator (=, <, +, ...) are cast to: the
    `common_type`, except that a real beside another numeric type is a double. PostgreSQL
    has real-op-real and real-op-double operators only, and resolution picks the double one
    (double is the numeric category's preferred type): 1::real / 3 is a double quotient,
    0.1::real = 0.1 compares as doubles (false) and a real joins an integer key exactly."""
    t = common_type(types, context)
    if t.kind is K.REAL and any(x.kind is not K.REAL for x in types if x.kind is not K.UNKNOWN):
        return DOUBLE
    return t


def _fold(expr: Literal, target: SqlType) -> Literal | None:
    """The cast of a constant as a constant; None for a date/timestamp beyond Python's
    datetime (years outside 1..9999, BC), which stays a cast evaluated on Arrow arrays."""
    ctx = EvalContext()
    src = expr.type
    if isinstance(expr, UntypedLiteral):
        src = VARCHAR
    val = cast_datum(expr.scalar(), src, target, 1, ctx)
    try:
        v = val.as_py()
        return Literal(py_value(v) if isinstance(v, Decimal) else v, target)
    except OverflowError:  # beyond Python's datetime (years 1-9999)
        return None


def _make_cast(expr: Expr, target: SqlType) -> Expr:
    if isinstance(expr, WideNumericLiteral):
        return _cast_wide(expr, target)
    if expr.type == target and not isinstance(expr, UntypedLiteral):
        return expr
    if isinstance(expr, Literal):
        if expr.value is None:
            return Literal(None, target)
        if K.TIMESTAMPTZ not in (expr.type.kind, target.kind):
            folded = _fold(expr, target)
            if folded is not None:
                return folded
    if isinstance(expr, Param) and expr.type == UNKNOWN:
        return Param(expr.index, target)
    src = VARCHAR if isinstance(expr, UntypedLiteral) else expr.type
    array_cast_fn(src, target)  # fails early if the pair has no kernel

    def kernel(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
        return cast_datum(args[0], src, target, n, ctx)

    def syntax_errors(args: list[Datum], n: int) -> list[tuple[np.ndarray, EngineError]]:
        found = text_syntax_errors(as_array(args[0], n).cast(pa.string()), target)
        return [] if found is None else [found]

    return Func(
        "cast", (expr,), target, kernel, row_errors=syntax_errors if src.kind is K.VARCHAR else None
    )


def cast(expr: Expr, target: SqlType) -> Expr:
    """Explicit cast (CAST / ::); 42846-style refusal as 42804 when no cast exists."""
    src = VARCHAR if isinstance(expr, UntypedLiteral) else expr.type
    if not can_cast(src, target, CastLevel.EXPLICIT) and not is_untyped(expr):
        err = DatatypeMismatch(f"cannot cast type {src.display} to {target.display}")
        err.sqlstate = "42846"  # type: ignore[misc]
        raise err
    out = _make_cast(expr, target)
    return enforce(out, target, explicit=True) if target.mod is not None else out


def implicit_cast(expr: Expr, target: SqlType) -> Expr | None:
    """The implicitly cast expression, or None when Postgres would not cast implicitly."""
    if expr.type == target and not isinstance(expr, UntypedLiteral):
        return expr
    if is_untyped(expr):
        return _make_cast(expr, target)
    if can_cast(expr.type, target, CastLevel.IMPLICIT):
        return _make_cast(expr, target)
    return None


def assign_cast(expr: Expr, target: SqlType, column: str | None = None) -> Expr:
    """Assignment cast (INSERT/UPDATE into a column of type `target`); 42804 if not allowed.
    varchar(n) / numeric(p, s) columns refuse values that do not fit (22001 / 22003)."""
    if not is_untyped(expr) and not can_cast(expr.type, target, CastLevel.ASSIGN):
        what = f'column "{column}"' if column else "target"
        raise DatatypeMismatch(
            f"{what} is of type {target.display} but expression is of type {expr.type.display}",
            hint="You will need to rewrite or cast the expression.",
        )
    out = _make_cast(expr, target)
    return enforce(out, target, explicit=False) if target.mod is not None else out


def resolve_unknown(expr: Expr) -> Expr:
    """Give still-untyped literals/params their default type (varchar)."""
    if is_untyped(expr):
        if isinstance(expr, Literal) and expr.value is None:
            return Literal(None, VARCHAR) if expr.type == UNKNOWN else expr
        return _make_cast(expr, VARCHAR)
    return expr


_DT = exp.DataType.Type
_SIMPLE: dict[object, SqlType] = {
    _DT.BOOLEAN: BOOLEAN,
    _DT.SMALLINT: SMALLINT,
    _DT.TINYINT: SMALLINT,
    _DT.INT: INT,
    _DT.MEDIUMINT: INT,
    _DT.BIGINT: BIGINT,
    _DT.FLOAT: REAL,
    _DT.DOUBLE: DOUBLE,
    _DT.DECIMAL: NUMERIC,
    _DT.BIGDECIMAL: NUMERIC,
    _DT.VARCHAR: VARCHAR,
    _DT.NVARCHAR: VARCHAR,
    _DT.TEXT: VARCHAR,
    _DT.CHAR: VARCHAR,
    _DT.NCHAR: VARCHAR,
    _DT.VARBINARY: BYTEA,
    _DT.BINARY: BYTEA,
    _DT.DATE: DATE,
    _DT.TIME: TIME,
    _DT.TIMESTAMP: TIMESTAMP,
    _DT.DATETIME: TIMESTAMP,
    _DT.TIMESTAMPTZ: TIMESTAMPTZ,
    _DT.TIMESTAMPLTZ: TIMESTAMPTZ,
    _DT.INTERVAL: INTERVAL,
    _DT.JSONB: JSONB,
    _DT.JSON: JSONB,
    _DT.SERIAL: INT,
    _DT.BIGSERIAL: BIGINT,
    _DT.SMALLSERIAL: SMALLINT,
}


def parse_data_type(dt: exp.DataType) -> SqlType:
    """SqlType for a DDL/cast type name, including arrays (`int[]`, `varchar[][]`)."""
    t = dt.this
    if t == _DT.ARRAY:
        inner = dt.expressions[0] if dt.expressions else None
        if not isinstance(inner, exp.DataType):
            raise not_supported(f"type {dt.sql('postgres')}")
        return list_of(parse_data_type(inner))
    if t in _SIMPLE:
        return modifier_of(dt, _SIMPLE[t]) if dt.expressions else _SIMPLE[t]
    if t == _DT.USERDEFINED:
        from engine.types import TYPE_NAMES

        kind = dt.args.get("kind")
        name = kind.name if isinstance(kind, exp.Expression) else kind or dt.sql("postgres")
        name = name.lower()
        if name in TYPE_NAMES:
            return TYPE_NAMES[name]
        start = kind.meta.get("start") if isinstance(kind, exp.Expression) else None
        raise UndefinedObject(
            f'type "{name}" does not exist',
            position=start + 1 if isinstance(start, int) else None,
        )
    raise not_supported(f"type {dt.sql('postgres')}")
