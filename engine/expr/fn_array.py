"""Array functions: array_append, array_prepend, array_remove, array_replace,
array_position, array_positions.

Every kernel works on whole columns: the list column is flattened once
(`pc.list_flatten`, `pc.list_parent_indices`), the element comparison runs on the flat
values against the per-row argument spread over them, and the result lists are rebuilt
from offsets with numpy; there is no Python loop over rows or elements. Element matching
is `IS NOT DISTINCT FROM`, as PostgreSQL's (a NULL argument finds NULL elements).

NULL handling follows PostgreSQL: array_append / array_prepend treat a NULL array as
empty (`array_append(NULL, 1)` is `{1}`); the others return NULL for a NULL array.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import EngineError, NullValueNotAllowed
from engine.expr.coerce import cast, common_type, implicit_cast, is_untyped
from engine.expr.core import Datum, EvalContext, Expr, Func, as_array
from engine.expr.registry import no_function, register
from engine.types import INT, SqlType, TypeKind, list_of

K = TypeKind


def _array_and_elem(name: str, arr: Expr, elem: Expr, args: list[Expr]) -> tuple[Expr, Expr]:
    """The array argument and the element argument cast to its element type (an untyped
    array literal takes the element's type)."""
    if is_untyped(arr) and not is_untyped(elem):
        arr = cast(arr, list_of(elem.type))
    if arr.type.kind is not K.LIST or is_untyped(arr):
        raise no_function(name, args)
    assert arr.type.elem is not None
    et = arr.type.elem
    if not is_untyped(elem) and elem.type != et and et.kind is not K.LIST:
        # anycompatible (PostgreSQL 14+): array and element meet at their common type,
        # array_remove(ARRAY[1, 2], sign(1.0::float8)) is over double precision
        try:
            t = common_type([et, elem.type])
        except EngineError:
            raise no_function(name, args) from None
        if t != et:
            arr = cast(arr, list_of(t))
            et = t
    e = implicit_cast(elem, et)
    if e is None:
        raise no_function(name, args)
    return arr, e


def _flat(lists: pa.Array) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """(flat values, parent row of each value, start offset of each row's values)."""
    flat = pc.list_flatten(lists)
    parents = pc.list_parent_indices(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    lengths = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
    starts = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)])
    return flat, parents, starts


def _matches(flat: pa.Array, parents: np.ndarray, value: pa.Array) -> np.ndarray:
    """Which flat values are not distinct from their row's `value`."""
    v = value.take(pa.array(parents, pa.int64()))
    eq = pc.fill_null(pc.equal(flat, v), False)
    both_null = pc.and_(pc.is_null(flat), pc.is_null(v))
    out: np.ndarray = pc.or_(eq, both_null).to_numpy(zero_copy_only=False)
    return out


def _lists(lengths: np.ndarray, values: pa.Array, valid: pa.Array | None, t: SqlType) -> pa.Array:
    offsets = pa.array(np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]), pa.int32())
    mask = None if valid is None else pc.invert(valid)
    out = pa.ListArray.from_arrays(offsets, values, mask=mask)
    return out.cast(t.arrow)


def _add_kernel(t: SqlType, at_end: bool) -> Any:
    def kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
        lists = as_array(a[0], n, t)
        elems = as_array(a[1], n, t.elem)
        flat, _parents, starts = _flat(lists)
        lengths = np.diff(starts) + 1
        ends = np.cumsum(lengths, dtype=np.int64)
        slot = ends - 1 if at_end else ends - lengths  # where each row's element goes
        idx = np.empty(int(ends[-1]) if n else 0, dtype=np.int64)
        is_new = np.zeros(idx.size, dtype=bool)
        is_new[slot] = True
        idx[slot] = len(flat) + np.arange(n, dtype=np.int64)
        idx[~is_new] = np.arange(len(flat), dtype=np.int64)
        values = pa.concat_arrays([flat.cast(elems.type), elems]).take(pa.array(idx))
        return _lists(lengths, values, None, t)

    return kernel


@register("array_append")
def _array_append(args: list[Expr]) -> Expr:
    if len(args) != 2:
        raise no_function("array_append", args)
    arr, e = _array_and_elem("array_append", args[0], args[1], args)
    return Func("array_append", (arr, e), arr.type, _add_kernel(arr.type, True))


@register("array_prepend")
def _array_prepend(args: list[Expr]) -> Expr:
    if len(args) != 2:
        raise no_function("array_prepend", args)
    if args[0].type.kind is K.LIST and args[1].type.kind is not K.LIST:
        args = [args[1], args[0]]  # sqlglot's ArrayPrepend node holds (array, element)
    arr, e = _array_and_elem("array_prepend", args[1], args[0], args)
    # arguments keep PostgreSQL's order (element, array) for display; the kernel swaps
    kernel = _add_kernel(arr.type, False)
    return Func("array_prepend", (e, arr), arr.type, lambda a, n, c: kernel([a[1], a[0]], n, c))


def _remove_kernel(t: SqlType) -> Any:
    def kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
        lists = as_array(a[0], n, t)
        flat, parents, starts = _flat(lists)
        keep = ~_matches(flat, parents, as_array(a[1], n, t.elem))
        lengths = np.bincount(parents[keep], minlength=n).astype(np.int64)
        return _lists(lengths, flat.filter(pa.array(keep)), pc.is_valid(lists), t)

    return kernel


@register("array_remove")
def _array_remove(args: list[Expr]) -> Expr:
    if len(args) != 2:
        raise no_function("array_remove", args)
    arr, e = _array_and_elem("array_remove", args[0], args[1], args)
    return Func("array_remove", (arr, e), arr.type, _remove_kernel(arr.type))


def _replace_kernel(t: SqlType) -> Any:
    def kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
        lists = as_array(a[0], n, t)
        flat, parents, starts = _flat(lists)
        hit = _matches(flat, parents, as_array(a[1], n, t.elem))
        new = as_array(a[2], n, t.elem).take(pa.array(parents, pa.int64()))
        values = pc.if_else(pa.array(hit), new, flat.cast(new.type))
        return _lists(np.diff(starts), values, pc.is_valid(lists), t)

    return kernel


@register("array_replace")
def _array_replace(args: list[Expr]) -> Expr:
    if len(args) != 3:
        raise no_function("array_replace", args)
    arr, old = _array_and_elem("array_replace", args[0], args[1], args)
    arr, new = _array_and_elem("array_replace", arr, args[2], args)
    arr, old = _array_and_elem("array_replace", arr, old, args)
    return Func("array_replace", (arr, old, new), arr.type, _replace_kernel(arr.type))


def _position_kernel(t: SqlType, every: bool) -> Any:
    ret = list_of(INT) if every else INT

    def kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
        lists = as_array(a[0], n, t)
        flat, parents, starts = _flat(lists)
        hit = _matches(flat, parents, as_array(a[1], n, t.elem))
        pos = np.arange(len(flat), dtype=np.int64) - starts[parents] + 1  # 1-based
        if len(a) > 2:
            start = as_array(a[2], n, INT)
            if start.null_count:
                raise NullValueNotAllowed("initial position must not be null")
            first = start.to_numpy(zero_copy_only=False).astype(np.int64)
            hit &= pos >= first[parents]
        valid = pc.is_valid(lists)
        if every:
            lengths = np.bincount(parents[hit], minlength=n).astype(np.int64)
            return _lists(lengths, pa.array(pos[hit], pa.int32()), valid, ret)
        rows, at = np.unique(parents[hit], return_index=True)
        out = np.zeros(n, dtype=np.int32)
        found = np.zeros(n, dtype=bool)
        out[rows] = pos[hit][at]
        found[rows] = True
        return pa.array(out, pa.int32(), mask=~found)

    return kernel


@register("array_position")
def _array_position(args: list[Expr]) -> Expr:
    if len(args) not in (2, 3):
        raise no_function("array_position", args)
    arr, e = _array_and_elem("array_position", args[0], args[1], args)
    bound = [arr, e]
    if len(args) == 3:
        s = implicit_cast(args[2], INT)
        if s is None:
            raise no_function("array_position", args)
        bound.append(s)
    return Func("array_position", tuple(bound), INT, _position_kernel(arr.type, False))


@register("array_positions")
def _array_positions(args: list[Expr]) -> Expr:
    if len(args) != 2:
        raise no_function("array_positions", args)
    arr, e = _array_and_elem("array_positions", args[0], args[1], args)
    return Func("array_positions", (arr, e), list_of(INT), _position_kernel(arr.type, True))
