"""Scalar expressions: binding sqlglot trees to typed `Expr`s and evaluating them on batches.

Owns the scalar type rules (casts, common types, operator/function resolution), the bound
expression tree (`Expr` and friends, immutable, evaluated a whole RecordBatch at a time with
pyarrow kernels), column/parameter name resolution inputs (`Scope`, `ParamContext`) and the
canonical text form of jsonb values. Aggregates, window functions and subqueries are bound by
the planner through `ExprBinder`'s hook.
"""

from __future__ import annotations

from engine.expr.binder import ExprBinder, node_position
from engine.expr.casts import CastLevel, can_cast
from engine.expr.coerce import (
    UntypedLiteral,
    assign_cast,
    cast,
    common_type,
    implicit_cast,
    is_untyped,
    operator_type,
    parse_data_type,
    resolve_unknown,
)
from engine.expr.core import (
    Case,
    EvalContext,
    Expr,
    Func,
    InputRef,
    Literal,
    Param,
    evaluate_constant,
)
from engine.expr.jsonb import jsonb_canonical
from engine.expr.registry import FUNCTIONS, call
from engine.expr.scope import ColumnBinding, ParamContext, Scope

__all__ = [
    "FUNCTIONS",
    "Case",
    "CastLevel",
    "ColumnBinding",
    "EvalContext",
    "Expr",
    "ExprBinder",
    "Func",
    "InputRef",
    "Literal",
    "Param",
    "ParamContext",
    "Scope",
    "UntypedLiteral",
    "assign_cast",
    "call",
    "can_cast",
    "cast",
    "common_type",
    "evaluate_constant",
    "implicit_cast",
    "is_untyped",
    "jsonb_canonical",
    "node_position",
    "operator_type",
    "parse_data_type",
    "resolve_unknown",
]
