"""jsonb editing functions: jsonb_set, jsonb_insert and jsonb_strip_nulls.

Each rebuilds a JSON document, so each is one Python pass over the column (parse the
canonical text, edit, serialise back); there is no columnar form of a document edit.
Semantics and errors follow PostgreSQL 15's jsonfuncs.c: a path through a missing key or
index leaves the document unchanged, `create_missing` (default true) adds only the last
path element, and a non-integer step into an array is 22P02.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa

from engine.errors import InvalidParameterValue, InvalidTextRepresentation
from engine.expr import jsonb
from engine.expr.core import Datum, EvalContext, Expr, Func, Literal, as_array
from engine.expr.registry import coerce_to, no_function, register
from engine.types import BOOLEAN, JSONB, VARCHAR, list_of

_TEXT_ARRAY = list_of(VARCHAR)


def _strip(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _strip(x) for k, x in v.items() if x is not None}
    if isinstance(v, list):
        return [_strip(x) for x in v]
    return v


@register("jsonb_strip_nulls")
def _jsonb_strip_nulls(args: list[Expr]) -> Expr:
    a = coerce_to("jsonb_strip_nulls", args, [JSONB])

    def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
        col = as_array(x[0], n).to_pylist()
        out = [None if s is None else jsonb.dumps(_strip(jsonb.loads(s))) for s in col]
        return pa.array(out, pa.string())

    return Func("jsonb_strip_nulls", tuple(a), JSONB, kernel)


def _index(step: str, pos: int) -> int:
    try:
        return int(step)
    except ValueError:
        raise InvalidTextRepresentation(
            f'path element at position {pos} is not an integer: "{step}"'
        ) from None


def _set(v: Any, path: list[str | None], new: Any, create: bool, level: int = 0) -> Any:
    """`v` with the value at `path` replaced by `new` (jsonfuncs.c setPath)."""
    step = path[level]
    last = level == len(path) - 1
    if step is None:
        raise InvalidParameterValue(
            f"path element at position {level + 1} is null",
        )
    if isinstance(v, dict):
        if step in v:
            out = dict(v)
            out[step] = new if last else _set(v[step], path, new, create, level + 1)
            return out
        if last and create:
            return {**v, step: new}
        return v
    if isinstance(v, list):
        i = _index(step, level + 1)
        n = len(v)
        j = i + n if i < 0 else i
        if 0 <= j < n:
            items = list(v)
            items[j] = new if last else _set(v[j], path, new, create, level + 1)
            return items
        if last and create:
            return [new, *v] if j < 0 else [*v, new]
        return v
    return v  # a scalar below the top: nothing to set


def _path_edit(name: str, args: list[Expr], flag: bool, edit: Callable[..., Any]) -> Expr:
    """`name(target, path, new_value [, flag])`: `edit(doc, path, new, flag)` per row on the
    parsed documents (jsonb_set, jsonb_insert); NULL in, NULL out; an empty path returns
    the target; a scalar target is 22023 as PostgreSQL."""
    if len(args) not in (3, 4):
        raise no_function(name, args)
    a = coerce_to(name, args, [JSONB, _TEXT_ARRAY, JSONB, BOOLEAN][: len(args)])
    if len(a) == 3:
        a.append(Literal(value=flag, type=BOOLEAN))

    def kernel(x: list[Datum], n: int, c: EvalContext) -> Datum:
        cols = [as_array(d, n).to_pylist() for d in x]
        out: list[str | None] = []
        for doc, path, new, opt in zip(*cols, strict=True):
            if doc is None or path is None or new is None or opt is None:
                out.append(None)
                continue
            v = jsonb.loads(doc)
            if not isinstance(v, (dict, list)):
                raise InvalidParameterValue("cannot set path in scalar")
            if not path:
                out.append(doc)
                continue
            out.append(jsonb.dumps(edit(v, list(path), jsonb.loads(new), bool(opt))))
        return pa.array(out, pa.string())

    return Func(name, tuple(a), JSONB, kernel)


@register("jsonb_set")
def _jsonb_set(args: list[Expr]) -> Expr:
    """jsonb_set(target, path, new_value [, create_if_missing])."""
    return _path_edit("jsonb_set", args, True, _set)


def _insert(v: Any, path: list[str | None], new: Any, after: bool, level: int = 0) -> Any:
    """`v` with `new` inserted at `path` (jsonfuncs.c setPath with JB_PATH_INSERT_*): into
    an array before (after) the element, at the start or end when the index is past it;
    into an object as a new key (an existing one is 22023)."""
    step = path[level]
    last = level == len(path) - 1
    if step is None:
        raise InvalidParameterValue(f"path element at position {level + 1} is null")
    if isinstance(v, dict):
        if step in v:
            if last:
                raise InvalidParameterValue(
                    "cannot replace existing key",
                    hint="Try using the function jsonb_set to replace key value.",
                )
            return {**v, step: _insert(v[step], path, new, after, level + 1)}
        return {**v, step: new} if last else v
    if isinstance(v, list):
        i = _index(step, level + 1)
        n = len(v)
        j = i + n if i < 0 else i
        if not last:
            if 0 <= j < n:
                return [*v[:j], _insert(v[j], path, new, after, level + 1), *v[j + 1 :]]
            return v
        if j < 0:
            return [new, *v]
        if j >= n:
            return [*v, new]
        k = j + 1 if after else j
        return [*v[:k], new, *v[k:]]
    return v


@register("jsonb_insert")
def _jsonb_insert(args: list[Expr]) -> Expr:
    """jsonb_insert(target, path, new_value [, insert_after])."""
    return _path_edit("jsonb_insert", args, False, _insert)
