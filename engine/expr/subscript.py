"""Subscripts: `arr[i]`, array slices `arr[lo:hi]` / `arr[lo:]` / `arr[:hi]`, and jsonb
subscripts `j['key']` / `j[0]`, as PostgreSQL evaluates them.

Arrays are 1-based; an element out of range, a NULL array or a NULL subscript is NULL. A
slice keeps the elements from `lo` to `hi` inclusive, clamped to the array (an omitted bound
is the array's end), so a slice past the end is the empty array, and a NULL bound makes the
whole slice NULL. A single slice of a multi-dimensional array slices the first dimension and
keeps the inner arrays whole, as PostgreSQL does when the other dimensions are omitted.

A jsonb subscript is the `#>` path operator over the subscripts as text: a key of an
object, an index (0-based, negative from the end) of an array, and the result is jsonb;
chained subscripts `j['a']['b']` walk the path. jsonb does not support slices (42804).

Kernels work on whole columns: the list column's flat values are gathered with one `take`
over indices computed with numpy from the offsets, the subscripts either a constant or a
column; no Python loop over rows.

Subscripts arrive as written: engine.sql.parser sets the dialects' index offset to 0, so
sqlglot does not rewrite them 0-based (it would subtract 1 from literals and wrap integer
expressions in `+ -1`, folded by its simplifier).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
from sqlglot import exp

from engine.errors import DatatypeMismatch
from engine.expr.coerce import cast, implicit_cast, is_untyped
from engine.expr.core import Datum, EvalContext, Expr, Func, Literal, as_array, is_scalar
from engine.expr.fn_json import bind_path
from engine.expr.registry import NODE_BINDERS, no_function
from engine.types import INT, VARCHAR, TypeKind, list_of

K = TypeKind


#: subscript types PostgreSQL coerces to integer by assignment (rounding, out of range an
#: error): `arr[sign(x)]` (sign of an integer is double precision), `arr[1.6]`, `arr[n::bigint]`
_ASSIGNABLE = (K.SMALLINT, K.BIGINT, K.NUMERIC, K.REAL, K.DOUBLE)


def _int_bound(arr: Expr, e: Expr) -> Expr:
    c = cast(e, INT) if e.type.kind in _ASSIGNABLE else implicit_cast(e, INT)
    if c is None:
        raise no_function("array subscript", [arr, e])
    return c


def _ints(d: Datum, n: int) -> tuple[np.ndarray, np.ndarray]:
    """A subscript column as int64 values and a validity mask (NULL: invalid)."""
    a = as_array(d, n)
    valid = np.asarray(a.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    vals = np.asarray(a.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
    return vals, valid


def _list_parts(d: Datum, n: int) -> tuple[pa.ListArray, np.ndarray, np.ndarray, np.ndarray]:
    a = as_array(d, n)
    if isinstance(a, pa.ChunkedArray):
        a = a.combine_chunks()
    offsets = np.asarray(a.offsets.to_numpy(zero_copy_only=False), dtype=np.int64)
    starts, lens = offsets[:-1], np.diff(offsets)
    valid = np.asarray(a.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    return a, starts, lens, valid


def _element_kernel(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
    scalar = all(is_scalar(x) for x in args)
    m = 1 if scalar else n
    arr, starts, lens, valid = _list_parts(args[0], m)
    idx, ivalid = _ints(args[1], m)
    ok = valid & ivalid & (idx >= 1) & (idx <= lens)
    pos = pa.array(np.where(ok, starts + idx - 1, 0), pa.int64(), mask=~ok)
    out = arr.values.take(pos) if len(arr.values) else pa.nulls(m, arr.type.value_type)
    return out[0] if scalar else out


def _slice_kernel(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
    scalar = all(is_scalar(x) for x in args)
    m = 1 if scalar else n
    arr, starts, lens, valid = _list_parts(args[0], m)
    lo, lo_ok = _ints(args[1], m)
    hi, hi_ok = _ints(args[2], m)
    ok = valid & lo_ok & hi_ok
    first = np.clip(lo, 1, None)
    last = np.minimum(hi, lens)
    count = np.where(ok, np.clip(last - first + 1, 0, None), 0)
    offsets = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(count, out=offsets[1:])
    total = int(offsets[-1])
    take = np.repeat(starts + first - 1 - offsets[:-1], count) + np.arange(total, dtype=np.int64)
    values = arr.values.take(pa.array(take, pa.int64()))
    out = pa.ListArray.from_arrays(
        pa.array(offsets.astype(np.int32), pa.int32()),
        values,
        type=arr.type,
        mask=pa.array(~ok),
    )
    return out[0] if scalar else out


def _bind_slice(b: Any, arr: Expr, node: exp.Slice) -> Expr:
    if arr.type.kind is K.JSONB:
        raise DatatypeMismatch("jsonb subscript does not support slices")
    lo_node, hi_node = node.this, node.expression
    lo = Literal(1, INT) if lo_node is None else _int_bound(arr, b._bind(lo_node))
    # an omitted upper bound: the end of any array
    hi = Literal(2**31 - 1, INT) if hi_node is None else _int_bound(arr, b._bind(hi_node))
    return Func("array_slice", (arr, lo, hi), arr.type, _slice_kernel)


def _bind_jsonb(b: Any, j: Expr, sub: exp.Expression) -> Expr:
    if isinstance(sub, exp.Slice):
        raise DatatypeMismatch("jsonb subscript does not support slices")
    key = b._bind(sub)
    if not (key.type.is_integer or key.type.kind is K.VARCHAR or is_untyped(key)):
        raise DatatypeMismatch(
            f"subscript type {key.type} is not supported",
            hint="jsonb subscript must be coercible to either integer or text.",
        )
    text = cast(key, VARCHAR)

    def one_path(args: list[Datum], n: int, ctx: EvalContext) -> Datum:
        k = args[0]
        if is_scalar(k):
            return pa.scalar(None if k.as_py() is None else [k.as_py()], pa.list_(pa.string()))
        flat = as_array(k, n)
        offsets = pa.array(np.arange(len(flat) + 1, dtype=np.int32), pa.int32())
        return pa.ListArray.from_arrays(offsets, flat.fill_null(""), mask=flat.is_null())

    path = Func("jsonb_subscript_path", (text,), list_of(VARCHAR), one_path)
    return bind_path(j, path, False)


def bind_bracket(b: Any, node: exp.Bracket) -> Expr | None:
    """`x[...]` with one subscript on an array or jsonb; None leaves other shapes (and
    other types) to the binder's refusal."""
    if len(node.expressions) != 1:
        return None
    sub = node.expressions[0]
    base = b._bind(node.this)
    if base.type.kind is K.JSONB and not is_untyped(base):
        return _bind_jsonb(b, base, sub)
    if base.type.kind is not K.LIST:
        if is_untyped(base):
            return None
        raise DatatypeMismatch(
            f"cannot subscript type {base.type} because it does not support subscripting"
        )
    if isinstance(sub, exp.Slice):
        return _bind_slice(b, base, sub)
    assert base.type.elem is not None
    idx = _int_bound(base, b._bind(sub))
    return Func("subscript", (base, idx), base.type.elem, _element_kernel)


NODE_BINDERS[exp.Bracket] = bind_bracket
