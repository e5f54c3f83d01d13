"""JSON encoding of SQL types, constant values and bound expressions (stored stream plans).

Why not pickle: a stored plan must stay readable by later versions of Swell, and must
never execute code from the data directory. The encoding is explicit: every value is a
JSON scalar or a list/dict tagged with what it is.

* types: `"INT"`, `["list", <elem>]`, `{"k": "INT", "pg": "oid"}` when a PostgreSQL alias
  is kept;
* values (`value_to_json`): JSON scalars for None/bool/int/str, `{"$": tag, "v": ...}` for
  floats, decimals, bytes, dates, times, timestamps, intervals and lists;
* expressions: `{"e": "ref", ...}`, `{"e": "lit", ...}`, `{"e": "case", ...}`,
  `{"e": "func", "name", "op", "args", "type", ...}`.

A function call's kernel (the compiled code) is not stored: it is looked up again by the
call's name and argument types on decode, as a catalog looks a function up by signature
(`restore_func`). The looked-up call must come back with the same name, arguments and
result type, else the decoder asks its fallback (`FuncSource`) and finally fails with
`PlanDecodeError`. A user-defined function's call (`"udf": true`) always comes from the
fallback, which binds the job's SQL again against the catalog's functions.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import EngineError, InternalError
from engine.expr import coerce, fn_json, fn_string, ops, registry
from engine.expr.binder import _coalesce_kernel
from engine.expr.coerce import UntypedLiteral
from engine.expr.core import Case, Expr, Func, InputRef, Literal, Param
from engine.types import SqlType, TypeKind, list_of


class PlanDecodeError(InternalError):
    """A stored plan could not be decoded (unknown node, function or format version)."""


class PlanEncodeError(InternalError):
    """A plan holds something this encoding cannot store."""


# -- types ------------------------------------------------------------------------------------
def type_to_json(t: SqlType) -> Any:
    if t.kind is TypeKind.LIST:
        assert t.elem is not None
        return ["list", type_to_json(t.elem)]
    if t.pg is not None:
        return {"k": t.kind.name, "pg": t.pg}
    return t.kind.name


def type_from_json(v: Any) -> SqlType:
    if isinstance(v, list):
        return list_of(type_from_json(v[1]))
    if isinstance(v, dict):
        return SqlType(TypeKind[v["k"]], pg=v["pg"])
    return SqlType(TypeKind[v])


# -- values -----------------------------------------------------------------------------------
def value_to_json(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, float):
        return {"$": "f", "v": repr(v) if math.isfinite(v) else str(v)}
    if isinstance(v, Decimal):
        return {"$": "d", "v": str(v)}
    if isinstance(v, bytes):
        return {"$": "b", "v": v.hex()}
    if isinstance(v, dt.datetime):
        return {"$": "ts", "v": v.isoformat()}
    if isinstance(v, dt.date):
        return {"$": "date", "v": v.isoformat()}
    if isinstance(v, dt.time):
        return {"$": "time", "v": v.isoformat()}
    if isinstance(v, pa.MonthDayNano) or (hasattr(v, "months") and hasattr(v, "nanoseconds")):
        return {"$": "iv", "v": [v.months, v.days, v.nanoseconds]}
    if isinstance(v, (list, tuple)):
        return {"$": "list" if isinstance(v, list) else "tuple", "v": [value_to_json(x) for x in v]}
    raise PlanEncodeError(f"cannot store a value of type {type(v).__name__} in a stream plan")


def value_from_json(v: Any) -> Any:
    if not isinstance(v, dict):
        return v
    tag, x = v["$"], v["v"]
    if tag == "f":
        return float(x)
    if tag == "d":
        return Decimal(x)
    if tag == "b":
        return bytes.fromhex(x)
    if tag == "ts":
        return dt.datetime.fromisoformat(x)
    if tag == "date":
        return dt.date.fromisoformat(x)
    if tag == "time":
        return dt.time.fromisoformat(x)
    if tag == "iv":
        return pa.MonthDayNano(x)
    if tag == "list":
        return [value_from_json(y) for y in x]
    if tag == "tuple":
        return tuple(value_from_json(y) for y in x)
    raise PlanDecodeError(f"unknown value tag {tag!r} in a stored stream plan")


# -- expressions ------------------------------------------------------------------------------
def expr_to_json(e: Expr) -> dict[str, Any]:
    if isinstance(e, InputRef):
        return {"e": "ref", "i": e.index, "type": type_to_json(e.type), "name": e.name}
    if isinstance(e, Literal):
        d = {"e": "lit", "v": value_to_json(e.value), "type": type_to_json(e.type)}
        if isinstance(e, UntypedLiteral):
            d["untyped"] = True
        return d
    if isinstance(e, Param):
        return {"e": "param", "i": e.index, "type": type_to_json(e.type)}
    if isinstance(e, Case):
        return {
            "e": "case",
            "whens": [[expr_to_json(c), expr_to_json(t)] for c, t in e.whens],
            "default": expr_to_json(e.default),
            "type": type_to_json(e.type),
        }
    if isinstance(e, Func):
        d = {
            "e": "func",
            "name": e.name,
            "args": [expr_to_json(a) for a in e.args],
            "type": type_to_json(e.type),
        }
        if e.op is not None:
            d["op"] = e.op
        if e.volatile:
            d["volatile"] = True
        if e.uses_now:
            d["uses_now"] = True
        if getattr(e, "routine", None) is not None:
            d["udf"] = True  # a user-defined function: bound again from the catalog
        return d
    raise PlanEncodeError(f"cannot store expression {type(e).__name__} ({e}) in a stream plan")


#: fallback for calls `restore_func` cannot look up: the unkerneled call -> a bound Func
FuncSource = Callable[[Func], Func | None]


def expr_from_json(d: dict[str, Any], source: FuncSource | None = None) -> Expr:
    kind = d["e"]
    if kind == "ref":
        return InputRef(d["i"], type_from_json(d["type"]), d.get("name", ""))
    if kind == "lit":
        if d.get("untyped"):
            return UntypedLiteral(value_from_json(d["v"]), type_from_json(d["type"]))
        return Literal(value_from_json(d["v"]), type_from_json(d["type"]))
    if kind == "param":
        return Param(d["i"], type_from_json(d["type"]))
    if kind == "case":
        whens = tuple((expr_from_json(c, source), expr_from_json(t, source)) for c, t in d["whens"])
        return Case(whens, expr_from_json(d["default"], source), type_from_json(d["type"]))
    if kind == "func":
        args = tuple(expr_from_json(a, source) for a in d["args"])
        t = type_from_json(d["type"])
        name, op = d["name"], d.get("op")
        f = None if d.get("udf") else restore_func(name, op, args, t)
        if f is None and source is not None:
            bare = Func(
                name, args, t, _no_kernel, op, bool(d.get("volatile")), bool(d.get("uses_now"))
            )
            f = source(bare)
        if f is None:
            sig = ", ".join(a.type.display for a in args)
            raise PlanDecodeError(f"stored stream plan: no function {name}({sig}) -> {t.display}")
        return f
    raise PlanDecodeError(f"unknown expression kind {kind!r} in a stored stream plan")


def _no_kernel(args: list[Any], n: int, ctx: Any) -> Any:
    raise InternalError("expression without a kernel")


#: calls whose kernels keep parameters their arguments do not show
_HIDDEN_PARAMS = frozenset({"like", "ilike", "not_like", "not_ilike"})
_ARITH = ("+", "-", "*", "/", "%")
_CMP = ("=", "<>", "<", "<=", ">", ">=")


def restore_func(name: str, op: str | None, args: tuple[Expr, ...], t: SqlType) -> Func | None:
    """The bound call `name(args) -> t` with its kernel, looked up like the binder does.

    None when the lookup gives a different call (another overload, a constant-folded
    result) or none: the name of a call whose kernel holds hidden parameters (an `IN`
    list baked into a set, a LIKE's ESCAPE character) is not enough to rebuild it, so those
    are left to the fallback."""
    a = list(args)
    if (
        name in _HIDDEN_PARAMS
        or "[" in name
        or any(x.type.pg is not None for x in a)
        or t.pg is not None
    ):
        return None
    try:
        if name == "cast" and len(a) == 1:
            r: Expr = coerce._make_cast(a[0], t)
        elif op in _ARITH and len(a) == 2:
            r = ops.bind_arith(op, a[0], a[1])
        elif op == "-" and len(a) == 1:
            r = ops.bind_neg(a[0])
        elif op in _CMP and len(a) == 2:
            r = ops.bind_compare(op, a[0], a[1])
        elif name in ("and", "or") and len(a) == 2:
            r = ops.bind_and_or(name.upper(), a[0], a[1])
        elif name == "not" and len(a) == 1:
            r = ops.bind_not(a[0])
        elif name in ("is_null", "is_not_null") and len(a) == 1:
            r = ops.bind_is_null(a[0], name == "is_not_null")
        elif name in ("is_distinct_from", "is_not_distinct_from") and len(a) == 2:
            r = ops.bind_distinct(a[0], a[1], name == "is_not_distinct_from")
        elif name in ("is_true", "is_not_true", "is_false", "is_not_false") and len(a) == 1:
            r = ops.bind_is_bool(a[0], name.endswith("true"), "_not_" in name)
        elif name == "coalesce" and a and all(x.type == t for x in a):
            r = Func("coalesce", args, t, lambda v, n, c: _coalesce_kernel(v, n, t))
        elif name == "concat_op" and len(a) == 2:
            r = fn_string.bind_concat_op(a[0], a[1])
        elif name == "nullif" and len(a) == 2:
            r = _nullif(a[0], a[1])
        elif name in ("jsonb_access", "jsonb_access_text") and len(a) == 2:
            r = fn_json.bind_access(a[0], a[1], name.endswith("_text"))
        elif name in ("jsonb_path", "jsonb_path_text") and len(a) == 2:
            r = fn_json.bind_path(a[0], a[1], name.endswith("_text"))
        elif name == "jsonb_exists" and len(a) == 2:
            r = fn_json.bind_exists(a[0], a[1])
        elif name == "jsonb_contains" and len(a) == 2:
            r = fn_json.bind_contains(a[0], a[1], op == "<@")
        elif name == "jsonb_concat" and len(a) == 2:
            r = fn_json.jsonb_concat(a[0], a[1])
        elif name in registry.FUNCTIONS:
            r = registry.call(name, a)
        else:
            return None
    except (EngineError, ValueError, TypeError, KeyError, AssertionError):
        return None
    if isinstance(r, Func) and r.name == name and r.type == t and r.args == args:
        return r
    return None


def _nullif(a: Expr, b: Expr) -> Expr:
    """NULLIF(a, b) as the binder builds it (`ExprBinder._nullif`)."""
    eq = ops.bind_compare("=", a, b)
    if not isinstance(eq, Func):
        return eq
    rt, cmp = eq.args[0].type, eq.kernel

    def kernel(x: list[Any], n: int, c: Any) -> Any:
        same = cmp(x, n, c)
        return pc.if_else(pc.fill_null(same, False), pa.scalar(None, rt.arrow), x[0])

    return Func("nullif", eq.args, rt, kernel)
