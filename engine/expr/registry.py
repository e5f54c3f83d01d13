"""The scalar function table: name -> resolver, plus helpers to coerce call arguments.

A resolver receives the bound argument expressions, picks the overload Postgres would pick
(implicit casts only) and returns the bound `Func`. Families register themselves from their
own modules (fn_string, fn_math, fn_time, fn_json); `call` is the binder's entry point.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from engine.errors import UndefinedFunction
from engine.expr.coerce import implicit_cast, is_untyped, resolve_unknown
from engine.expr.core import Expr, Func, Kernel
from engine.types import SqlType

Resolver = Callable[[list[Expr]], Expr]
FUNCTIONS: dict[str, Resolver] = {}
# sqlglot node class -> binder for it, tried before the built-in rules: (ExprBinder, node)
# -> Expr, or None to fall through (engine.expr.fn_system registers OPERATOR(), ANY(...),
# COLLATE, casts to reg* types...)
NODE_BINDERS: dict[type, Callable[[Any, Any], Expr | None]] = {}
_HINT = (
    "No function matches the given name and argument types. "
    "You might need to add explicit type casts."
)


def register(*names: str) -> Callable[[Resolver], Resolver]:
    def deco(fn: Resolver) -> Resolver:
        for n in names:
            FUNCTIONS[n] = fn
        return fn

    return deco


def shown_type(e: Expr) -> str:
    return "unknown" if is_untyped(e) else e.type.display


def no_function(name: str, args: list[Expr]) -> UndefinedFunction:
    sig = ", ".join(shown_type(a) for a in args)
    return UndefinedFunction(f"function {name}({sig}) does not exist", hint=_HINT)


def coerce_to(name: str, args: list[Expr], types: list[SqlType]) -> list[Expr]:
    if len(args) != len(types):
        raise no_function(name, args)
    out = []
    for a, t in zip(args, types, strict=True):
        c = implicit_cast(a, t)
        if c is None:
            raise no_function(name, args)
        out.append(c)
    return out


def simple(
    name: str, args: list[Expr], types: list[SqlType], ret: SqlType, kernel: Kernel, **kw: Any
) -> Func:
    return Func(name, tuple(coerce_to(name, args, types)), ret, kernel, **kw)


def call(name: str, args: list[Expr]) -> Expr:
    fn = FUNCTIONS.get(name.lower())
    if fn is None:
        raise no_function(name.lower(), args)
    return fn(args)


def defaulted(args: list[Expr]) -> list[Expr]:
    return [resolve_unknown(a) for a in args]
