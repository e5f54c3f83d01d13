"""jsonb operators and functions bound to column kernels in `engine.expr.jsonb`.

`->`/`->>` take a text key or an integer index, `#>`/`#>>` a text-array path ('{a,b}'),
`@>` containment, `?` key existence. Non-jsonb values become JSON through `to_jsonb` rules:
numbers stay numbers, booleans booleans, timestamps ISO strings, text strings.
"""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal
from typing import Any

import orjson
import pyarrow as pa

from engine.expr import jsonb
from engine.expr.casts import cast_datum
from engine.expr.coerce import implicit_cast, is_untyped
from engine.expr.core import Datum, EvalContext, Expr, Func, Literal, as_array, is_scalar
from engine.expr.ops import no_operator
from engine.expr.registry import coerce_to, no_function, register
from engine.numeric import format_numeric_special, has_special, py_value, py_values
from engine.types import BOOLEAN, INT, JSONB, VARCHAR, SqlType, TypeKind, list_of

K = TypeKind
TEXT_ARRAY = list_of(VARCHAR)


def _cols(args: list[Datum], n: int) -> list[list[Any]]:
    if all(is_scalar(a) for a in args):
        return [[a.as_py()] for a in args]
    return [[a.as_py()] * n if is_scalar(a) else a.to_pylist() for a in args]


def _scalar_result(args: list[Datum], out: pa.Array) -> Datum:
    return out[0] if all(is_scalar(a) for a in args) else out


def _need_jsonb(e: Expr, op: str, other: Expr) -> Expr:
    if e.type.kind is K.JSONB and not is_untyped(e):
        return e
    c = implicit_cast(e, JSONB) if is_untyped(e) else None
    if c is None:
        raise no_operator(op, e.type, other.type)
    return c


def bind_access(left: Expr, key: Expr, as_text: bool) -> Expr:
    op = "->>" if as_text else "->"
    left = _need_jsonb(left, op, key)
    if key.type.is_integer and not is_untyped(key):
        key = implicit_cast(key, INT) or key
    else:
        k = implicit_cast(key, VARCHAR)
        if k is None or k.type.kind is not K.VARCHAR:
            raise no_operator(op, left.type, key.type)
        key = k

    def kernel(a: list[Datum], n: int, c: EvalContext) -> Datum:
        col, k = a
        if isinstance(col, pa.Array) and is_scalar(k):
            key = k.as_py()
            if key is None:
                return pa.nulls(len(col), pa.string())
            return jsonb.access_column(col, key, as_text)
        cols = _cols(a, n)
        return _scalar_result(a, jsonb.access(cols[0], cols[1], as_text))

    return Func(
        "jsonb_access" + ("_text" if as_text else ""),
        (left, key),
        VARCHAR if as_text else JSONB,
        kernel,
        op=op,
    )


def bind_path(left: Expr, path: Expr, as_text: bool) -> Expr:
    op = "#>>" if as_text else "#>"
    left = _need_jsonb(left, op, path)
    p = implicit_cast(path, TEXT_ARRAY)
    if p is None:
        raise no_operator(op, left.type, path.type)

    def kernel(a: list[Datum], n: int, c: EvalContext) -> Datum:
        cols = _cols(a, n)
        return _scalar_result(a, jsonb.path_access(cols[0], cols[1], as_text))

    return Func(
        "jsonb_path" + ("_text" if as_text else ""),
        (left, p),
        VARCHAR if as_text else JSONB,
        kernel,
        op=op,
    )


def _extract_path(as_text: bool) -> None:
    name = "jsonb_extract_path" + ("_text" if as_text else "")

    def resolve(args: list[Expr]) -> Expr:
        if not args:
            raise no_function(name, args)
        a = coerce_to(name, args, [JSONB] + [VARCHAR] * (len(args) - 1))

        def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
            cols = _cols(x, n)
            paths = (
                [list(p) for p in zip(*cols[1:], strict=True)]
                if len(cols) > 1
                else [[] for _ in cols[0]]
            )
            return _scalar_result(x, jsonb.path_access(cols[0], paths, as_text))

        return Func(name, tuple(a), VARCHAR if as_text else JSONB, kernel)

    register(name)(resolve)


_extract_path(False)
_extract_path(True)


def bind_contains(left: Expr, right: Expr, reverse: bool = False) -> Expr:
    op = "<@" if reverse else "@>"
    left, right = _need_jsonb(left, op, right), _need_jsonb(right, op, left)

    def kernel(a: list[Datum], n: int, c: EvalContext) -> Datum:
        cols = _cols(a, n)
        lhs, rhs = (cols[1], cols[0]) if reverse else (cols[0], cols[1])
        return _scalar_result(a, jsonb.contains(lhs, rhs))

    return Func("jsonb_contains", (left, right), BOOLEAN, kernel, op=op)


def bind_exists(left: Expr, key: Expr) -> Expr:
    left = _need_jsonb(left, "?", key)
    k = implicit_cast(key, VARCHAR)
    if k is None or k.type.kind is not K.VARCHAR:
        raise no_operator("?", left.type, key.type)

    def kernel(a: list[Datum], n: int, c: EvalContext) -> Datum:
        cols = _cols(a, n)
        return _scalar_result(a, jsonb.key_exists(cols[0], cols[1]))

    return Func("jsonb_exists", (left, k), BOOLEAN, kernel, op="?")


def jsonb_concat(left: Expr, right: Expr) -> Expr:
    def concat(x: Any, y: Any) -> Any:
        if isinstance(x, dict) and isinstance(y, dict):
            return {**x, **y}
        xl = x if isinstance(x, list) else [x]
        yl = y if isinstance(y, list) else [y]
        return xl + yl

    def kernel(a: list[Datum], n: int, c: EvalContext) -> Datum:
        cols = _cols(a, n)
        out = [
            None if x is None or y is None else jsonb.dumps(concat(jsonb.loads(x), jsonb.loads(y)))
            for x, y in zip(cols[0], cols[1], strict=True)
        ]
        return _scalar_result(a, pa.array(out, pa.string()))

    return Func("jsonb_concat", (left, right), JSONB, kernel, op="||")


@register("jsonb_typeof")
def _typeof(args: list[Expr]) -> Expr:
    a = coerce_to("jsonb_typeof", args, [JSONB])
    return Func(
        "jsonb_typeof",
        tuple(a),
        VARCHAR,
        lambda x, n, c: _scalar_result(x, jsonb.typeof(_cols(x, n)[0])),
    )


@register("jsonb_array_length")
def _array_length(args: list[Expr]) -> Expr:
    a = coerce_to("jsonb_array_length", args, [JSONB])
    return Func(
        "jsonb_array_length",
        tuple(a),
        INT,
        lambda x, n, c: _scalar_result(x, jsonb.array_length(_cols(x, n)[0])),
    )


def python_json_values(d: Datum, t: SqlType, n: int, ctx: EvalContext) -> list[Any]:
    """Column values as JSON-ready Python values (to_jsonb rules)."""
    arr = as_array(d, n)
    k = t.kind
    if k is K.JSONB:
        return [None if v is None else _Raw(v) for v in arr.to_pylist()]
    if k in (K.BOOLEAN, K.SMALLINT, K.INT, K.BIGINT, K.VARCHAR):
        return arr.to_pylist()
    if k in (K.REAL, K.DOUBLE):
        from engine.expr.casts import float_text

        return [
            None
            if v is None
            else (Decimal(float_text(v)) if v == v and abs(v) != float("inf") else float_text(v))
            for v in arr.to_pylist()
        ]
    if k is K.NUMERIC:  # NaN / Infinity / -Infinity become JSON strings, as for floats
        return [
            None if v is None else v.normalize() if v.is_finite() else format_numeric_special(v)
            for v in py_values(arr)
        ]
    if k is K.LIST:
        assert t.elem is not None
        flat = python_json_values(arr.flatten(), t.elem, len(arr.flatten()), ctx)
        offs = arr.offsets.to_pylist()
        valid = arr.is_valid().to_pylist()
        return [
            flat[offs[i] - offs[0] : offs[i + 1] - offs[0]] if valid[i] else None
            for i in range(len(arr))
        ]
    text = cast_datum(arr, t, VARCHAR, n, ctx).to_pylist()
    if k in (K.TIMESTAMP, K.TIMESTAMPTZ):
        return [None if v is None else v.replace(" ", "T", 1) for v in text]
    return text


def json_text_column(d: Datum, t: SqlType, n: int, ctx: EvalContext) -> pa.Array:
    """Each value's jsonb text ('null' for NULL), vectorised where a kernel exists."""
    import pyarrow.compute as pc

    from engine.expr.casts import numeric_text

    arr = as_array(d, n)
    k = t.kind
    if k is K.BOOLEAN:
        out = pc.if_else(arr, "true", "false")
    elif t.is_integer:
        out = arr.cast(pa.string())
    elif k is K.NUMERIC:
        out = numeric_text(arr, t.scale)
        if has_special(arr):  # NaN / Infinity are JSON strings
            out = pc.replace_substring_regex(out, r"^(NaN|-?Infinity)$", r'"\1"')
    elif k is K.JSONB:
        out = arr.cast(pa.string())
    elif k is K.VARCHAR:
        out = pa.array(
            [None if v is None else orjson.dumps(v).decode() for v in arr.to_pylist()], pa.string()
        )
    elif k is K.LIST or t.is_float:
        vals = python_json_values(arr, t, n, ctx)
        out = pa.array([None if v is None else _serialize(v) for v in vals], pa.string())
    else:
        text = cast_datum(arr, t, VARCHAR, n, ctx)
        if k in (K.TIMESTAMP, K.TIMESTAMPTZ):
            text = pc.replace_substring(text, " ", "T", max_replacements=1)
        out = pa.array(
            [None if v is None else orjson.dumps(v).decode() for v in text.to_pylist()], pa.string()
        )
    return pc.fill_null(out, "null")


class _Raw(str):
    """Already-canonical jsonb text embedded in a larger value."""


def _serialize(v: Any) -> str:
    if isinstance(v, _Raw):
        return str(v)
    if isinstance(v, dict):
        inner = {k: _Raw(_serialize(x)) for k, x in v.items()}
        items = sorted(inner.items(), key=lambda kv: (len(kv[0].encode()), kv[0].encode()))
        import json

        return (
            "{"
            + ", ".join(json.dumps(k, ensure_ascii=False) + ": " + str(x) for k, x in items)
            + "}"
        )
    if isinstance(v, list):
        return "[" + ", ".join(_serialize(x) for x in v) + "]"
    if isinstance(v, Decimal):
        v = py_value(v)
        assert v is not None
        return jsonb.dumps(v.normalize() if v.is_finite() else format_numeric_special(v))
    return jsonb.dumps(v)


@register("to_jsonb")
def _to_jsonb(args: list[Expr]) -> Expr:
    if len(args) != 1:
        raise no_function("to_jsonb", args)
    a = args[0]
    if is_untyped(a):
        a = implicit_cast(a, VARCHAR) or a
    t = a.type

    def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
        import pyarrow.compute as pc

        v = as_array(x[0], n)
        text = json_text_column(v, t, n, c)
        return pc.if_else(pc.is_null(v), pa.scalar(None, pa.string()), text)

    return Func("to_jsonb", (a,), JSONB, kernel)


@register("jsonb_build_object")
def _build_object(args: list[Expr]) -> Expr:
    if len(args) % 2:
        from engine.errors import InvalidParameterValue

        raise InvalidParameterValue(
            "argument list must have even number of elements",
            hint="The arguments of jsonb_build_object() must consist of alternating keys "
            "and values.",
        )
    bound = [implicit_cast(a, VARCHAR) or a if is_untyped(a) else a for a in args]
    keys = [bound[i] for i in range(0, len(bound), 2)]
    if all(isinstance(k, Literal) and isinstance(k.value, str) for k in keys):
        return _build_object_const_keys(bound)

    def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
        cols = [python_json_values(v, e.type, n, c) for v, e in zip(x, bound, strict=True)]
        out = []
        for i in range(n):
            obj: dict[str, Any] = {}
            for j in range(0, len(cols), 2):
                key = cols[j][i]
                if key is None:
                    from engine.errors import InvalidParameterValue

                    raise InvalidParameterValue("argument 1: key must not be null")
                obj[str(key) if not isinstance(key, bool) else str(key).lower()] = cols[j + 1][i]
            out.append(
                _serialize({k: v if v is not None else _Raw("null") for k, v in obj.items()})
            )
        return pa.array(out, pa.string())

    return Func("jsonb_build_object", tuple(bound), JSONB, kernel)


def _build_object_const_keys(bound: list[Expr]) -> Expr:
    """Constant keys: order/dedupe them once, then join per-column JSON text vectorised."""
    import json

    import pyarrow.compute as pc

    last: dict[str, int] = {}
    for i in range(0, len(bound), 2):
        key = bound[i]
        assert isinstance(key, Literal)
        last[str(key.value)] = i + 1
    order = sorted(last, key=lambda k: (len(k.encode()), k.encode()))

    def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
        if not order:
            return pa.scalar("{}", pa.string())
        pieces: list[Any] = []
        for j, key in enumerate(order):
            vi = last[key]
            prefix = ("{" if j == 0 else ", ") + json.dumps(key, ensure_ascii=False) + ": "
            pieces += [prefix, json_text_column(x[vi], bound[vi].type, n, c)]
        pieces.append("}")
        cols = [pa.array([p] * n, pa.string()) if isinstance(p, str) else p for p in pieces]
        return pc.binary_join_element_wise(*cols, "")

    return Func("jsonb_build_object", tuple(bound), JSONB, kernel)


@register("jsonb_build_array")
def _build_array(args: list[Expr]) -> Expr:
    bound = [implicit_cast(a, VARCHAR) or a if is_untyped(a) else a for a in args]

    def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
        import pyarrow.compute as pc

        if not x:
            return pa.scalar("[]", pa.string())
        cols = [json_text_column(v, e.type, n, c) for v, e in zip(x, bound, strict=True)]
        joined = pc.binary_join_element_wise(*cols, ", ")
        return pc.binary_join_element_wise(pa.array(["["] * n, pa.string()), joined, "]", "")

    return Func("jsonb_build_array", tuple(bound), JSONB, kernel)


def _operator_form(name: str, arity: int, bind: Callable[..., Expr]) -> None:
    """The function spelling of a jsonb operator (jsonb_object_field(j, k) is j -> k)."""

    def resolve(args: list[Expr]) -> Expr:
        if len(args) != arity:
            raise no_function(name, args)
        return bind(*args)

    register(name)(resolve)


def _typed(e: Expr, t: SqlType, name: str, args: list[Expr]) -> Expr:
    c = implicit_cast(e, t)
    if c is None or c.type.kind is not t.kind:
        raise no_function(name, args)
    return c


for _name, _text in (("jsonb_object_field", False), ("jsonb_object_field_text", True)):
    _operator_form(
        _name,
        2,
        lambda j, k, _t=_text, _n=_name: bind_access(j, _typed(k, VARCHAR, _n, [j, k]), _t),
    )
for _name, _text in (("jsonb_array_element", False), ("jsonb_array_element_text", True)):
    _operator_form(
        _name,
        2,
        lambda j, i, _t=_text, _n=_name: bind_access(j, _typed(i, INT, _n, [j, i]), _t),
    )
_operator_form("jsonb_contained", 2, lambda a, b: bind_contains(a, b, reverse=True))
_operator_form(
    "jsonb_concat",
    2,
    lambda a, b: jsonb_concat(
        _typed(a, JSONB, "jsonb_concat", [a, b]), _typed(b, JSONB, "jsonb_concat", [a, b])
    ),
)
