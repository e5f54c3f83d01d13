"""PostgreSQL's regular-expression functions: regexp_replace, regexp_count, regexp_match,
regexp_split_to_array (RisingWave has the same four), and substring(s FROM pattern).

Why this shape: the pattern is almost always a constant, so a chunk is matched by
Arrow's RE2 kernels in one call; a pattern, replacement or flag that varies per row
falls back to Python's `re`, row by row. PostgreSQL's advanced regular expressions and
RE2/`re` agree on what SQL users write (classes, groups, alternation, anchors,
quantifiers, `\\d \\s \\w`); the flags are PostgreSQL's `g` (every match, for
regexp_replace) and `i` (ignore case), others are refused with 22023.

Lifecycle: registered by name in `engine.expr.registry` at import (the binder imports
this module); sqlglot parses `regexp_replace(...)` / `regexp_count(...)` into nodes of
their own, which `NODE_BINDERS` hands to the same functions.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from engine.errors import InvalidParameterValue, InvalidRegularExpression, not_supported
from engine.expr.coerce import is_untyped
from engine.expr.core import Datum, EvalContext, Expr, Func, is_scalar
from engine.expr.registry import FUNCTIONS, NODE_BINDERS, coerce_to, no_function, register
from engine.types import INT, VARCHAR, TypeKind, list_of

K = TypeKind

TEXT_ARRAY = list_of(VARCHAR)
BACKSLASH = "\\"


def _flags(flags: str | None, allowed: str) -> tuple[bool, bool]:
    """(global, ignore case) from PostgreSQL's flag letters."""
    flags = flags or ""
    for ch in flags:
        if ch not in allowed:
            raise InvalidParameterValue(f'invalid regular expression option: "{ch}"')
    return "g" in flags, "i" in flags


# Python's words for a bad pattern -> PostgreSQL's (its regcomp error strings)
_PG_REGEX_ERRORS = (
    ("missing ), unterminated subpattern", "parentheses () not balanced"),
    ("unbalanced parenthesis", "parentheses () not balanced"),
    ("unterminated character set", "brackets [] not balanced"),
    ("nothing to repeat", "quantifier operand invalid"),
    ("multiple repeat", "quantifier operand invalid"),
    ("min repeat greater than max repeat", "invalid repetition count(s)"),
    ("bad escape", "invalid escape \\ sequence"),
)


def regex_error(e: re.error) -> InvalidRegularExpression:
    """2201B with PostgreSQL's message for the common mistakes, Python's otherwise."""
    text = str(e)
    for py, pg in _PG_REGEX_ERRORS:
        if text.startswith(py):
            text = pg
            break
    return InvalidRegularExpression(f"invalid regular expression: {text}")


def _compiled(pattern: str, icase: bool) -> re.Pattern[str]:
    try:
        return re.compile(pattern, re.I if icase else 0)
    except re.error as e:
        raise regex_error(e) from None


def _py_replacement(rep: str) -> str:
    r"""PostgreSQL's replacement (`\1`..`\9`, `\&` the whole match, `\\`) for `re.sub`."""
    out, i = [], 0
    while i < len(rep):
        ch = rep[i]
        if ch == "\\" and i + 1 < len(rep):
            nxt = rep[i + 1]
            out.append(f"\\g<{nxt}>" if nxt.isdigit() else "\\g<0>" if nxt == "&" else nxt)
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out).replace("\\", "\\\\").replace("\\\\g<", "\\g<")


def _re2_replacement(rep: str) -> str:
    r"""PostgreSQL's replacement for RE2 (PostgreSQL's \& is RE2's \0; \x is x)."""
    out, i = [], 0
    while i < len(rep):
        ch = rep[i]
        if ch == BACKSLASH and i + 1 < len(rep):
            nxt = rep[i + 1]
            if nxt.isdigit():
                out.append(BACKSLASH + nxt)
            elif nxt == "&":
                out.append(BACKSLASH + "0")
            elif nxt == BACKSLASH:
                out.append(BACKSLASH * 2)
            else:
                out.append(nxt)
            i += 2
            continue
        out.append(BACKSLASH * 2 if ch == BACKSLASH else ch)
        i += 1
    return "".join(out)


def _args(name: str, args: list[Expr], n_min: int, n_max: int) -> list[Expr]:
    if not n_min <= len(args) <= n_max:
        raise no_function(name, args)
    types = [VARCHAR] * len(args)
    if name == "regexp_count" and len(args) >= 3:
        types[2] = INT
    return coerce_to(name, args, types)


def _scalar(d: Datum) -> Any:
    """The value of a constant argument; `...` when it varies per row."""
    return d.as_py() if is_scalar(d) else ...


def _rowwise(fn: Any, out_type: pa.DataType, cols: list[Datum], n: int) -> pa.Array:
    vals = [[c.as_py()] * n if is_scalar(c) else c.to_pylist() for c in cols]
    return pa.array(
        [None if any(v is None for v in row) else fn(*row) for row in zip(*vals, strict=True)],
        out_type,
    )


# -- regexp_replace(source, pattern, replacement [, flags]) --------------------------------------
@register("regexp_replace")
def _regexp_replace(args: list[Expr]) -> Expr:
    bound = _args("regexp_replace", args, 3, 4)

    def kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
        pat, rep = _scalar(a[1]), _scalar(a[2])
        flags = _scalar(a[3]) if len(a) > 3 else ""
        if None in (pat, rep, flags):
            return pa.nulls(n, pa.string()) if not is_scalar(a[0]) else pa.scalar(None, pa.string())
        if ... not in (pat, rep, flags):
            every, icase = _flags(flags, "gi")
            rx = _compiled(pat, icase)  # errors as PostgreSQL reports them, before Arrow's
            py_rep = _py_replacement(rep)
            if is_scalar(a[0]):
                s = a[0].as_py()
                return pa.scalar(
                    None if s is None else rx.sub(py_rep, s, count=0 if every else 1), pa.string()
                )
            try:  # the whole chunk in RE2
                return pc.replace_substring_regex(
                    a[0],
                    pattern=("(?i)" if icase else "") + pat,
                    replacement=_re2_replacement(rep),
                    max_replacements=None if every else 1,
                )
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):  # beyond RE2: row by row
                return _rowwise(
                    lambda s: rx.sub(py_rep, s, count=0 if every else 1), pa.string(), [a[0]], n
                )

        def one(s: str, p: str, r: str, f: str = "") -> str:
            every, icase = _flags(f, "gi")
            return _compiled(p, icase).sub(_py_replacement(r), s, count=0 if every else 1)

        return _rowwise(one, pa.string(), list(a), n)

    return Func("regexp_replace", tuple(bound), VARCHAR, kernel)


# -- regexp_count(source, pattern [, start [, flags]]) ----------------------------------------
@register("regexp_count")
def _regexp_count(args: list[Expr]) -> Expr:
    bound = _args("regexp_count", args, 2, 4)

    def one(s: str, p: str, start: int = 1, f: str = "") -> int:
        if start <= 0:
            raise InvalidParameterValue(f'invalid value for parameter "start": {start}')
        _, icase = _flags(f, "i")
        return sum(1 for _ in _compiled(p, icase).finditer(s, start - 1))

    def kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
        if len(a) == 2 and not is_scalar(a[0]) and is_scalar(a[1]) and a[1].is_valid:
            pat = a[1].as_py()
            _compiled(pat, False)
            return pc.count_substring_regex(a[0], pat).cast(pa.int32())
        out = _rowwise(one, pa.int32(), list(a), n)
        return out[0] if all(is_scalar(x) for x in a) else out

    return Func("regexp_count", tuple(bound), INT, kernel)


# -- regexp_match(source, pattern [, flags]) -------------------------------------------------
@register("regexp_match")
def _regexp_match(args: list[Expr]) -> Expr:
    bound = _args("regexp_match", args, 2, 3)

    def one(s: str, p: str, f: str = "") -> list[str | None] | None:
        _, icase = _flags(f, "i")
        m = _compiled(p, icase).search(s)
        if m is None:
            return None
        return list(m.groups()) if m.re.groups else [m.group(0)]

    def kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
        out = _rowwise(one, pa.list_(pa.string()), list(a), n)
        return out[0] if all(is_scalar(x) for x in a) else out

    return Func("regexp_match", tuple(bound), TEXT_ARRAY, kernel)


# -- substring(source FROM pattern) -----------------------------------------------------------
@register("substring")
def _substring(args: list[Expr]) -> Expr:
    """substring(s FROM start [FOR count]) is substr; with a text (or quoted literal)
    pattern, substring(s FROM pattern) is the part of s matching the POSIX regular
    expression (its first parenthesized subexpression if it has one), NULL without a
    match: PostgreSQL resolves a quoted literal there to text, so substring(s FROM '2') is
    a pattern, not a position. The SQL-regular-expression form (a text FOR escape) is
    refused rather than taken for positions."""
    if len(args) == 2 and (is_untyped(args[1]) or args[1].type.kind is K.VARCHAR):
        bound = _args("substring", args, 2, 2)

        def one(s: str, p: str) -> str | None:
            m = _compiled(p, False).search(s)
            if m is None:
                return None
            return m.group(1) if m.re.groups else m.group(0)

        def kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
            out = _rowwise(one, pa.string(), list(a), n)
            return out[0] if all(is_scalar(x) for x in a) else out

        return Func("substring", tuple(bound), VARCHAR, kernel)
    text = [is_untyped(a) or a.type.kind is K.VARCHAR for a in args[1:]]
    if len(args) == 3 and all(text):
        raise not_supported("substring(text FROM pattern FOR escape)")
    return FUNCTIONS["substr"](args)


# -- regexp_split_to_array(source, pattern [, flags]) ----------------------------------------
@register("regexp_split_to_array")
def _regexp_split(args: list[Expr]) -> Expr:
    bound = _args("regexp_split_to_array", args, 2, 3)

    def one(s: str, p: str, f: str = "") -> list[str]:
        _, icase = _flags(f, "i")
        rx = _compiled(p, icase)
        if rx.pattern == "":  # PostgreSQL: split into characters
            return list(s)
        out, last = [], 0
        for m in rx.finditer(s):
            if m.end() == m.start() and (m.start() == 0 or m.start() == len(s)):
                continue  # PostgreSQL skips empty matches at either end
            out.append(s[last : m.start()])
            last = m.end()
        out.append(s[last:])
        return out

    def kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
        out = _rowwise(one, pa.list_(pa.string()), list(a), n)
        return out[0] if all(is_scalar(x) for x in a) else out

    return Func("regexp_split_to_array", tuple(bound), TEXT_ARRAY, kernel)


def _bind_node(name: str) -> Any:
    def bind(b: Any, node: exp.Expression) -> Expr | None:
        keys = ("this", "expression", "replacement", "position", "parameters", "modifiers")
        parts = [node.args.get(k) for k in keys]
        args = [b._bind(p) for p in parts if isinstance(p, exp.Expression)]
        return FUNCTIONS_BY_NAME[name](args)

    return bind


FUNCTIONS_BY_NAME = {
    "regexp_replace": _regexp_replace,
    "regexp_count": _regexp_count,
}
NODE_BINDERS[exp.RegexpReplace] = _bind_node("regexp_replace")
NODE_BINDERS[exp.RegexpCount] = _bind_node("regexp_count")


# -- regexp_matches(source, pattern [, flags]): a set-returning function ----------------------
# Planned as generate_series is (engine.plan.plan_srf in a select list, plan_tablefunc in
# FROM); `regexp_matches_args` types the call at planning time, `regexp_matches_columns`
# yields, per chunk of argument rows, each row's matches as one flat text[] column.
def regexp_matches_args(args: list[Expr]) -> list[Expr]:
    """The arguments coerced to text (42883 for another number of arguments)."""
    return _args("regexp_matches", args, 2, 3)


def regexp_matches_columns(args: list[pa.Array], n: int) -> tuple[np.ndarray, pa.Array, np.ndarray]:
    """Per argument row: the number of matches (at most one without the `g` flag, none for
    no match or a NULL argument), all matches flat (each a text[] of the pattern's groups,
    or of the whole match when it has none; a group that took no part is NULL), and each
    row's offset into them. A pattern is compiled once per distinct (pattern, flags)."""
    cols = [a.to_pylist() for a in args]
    flags_col = cols[2] if len(cols) > 2 else [""] * n
    compiled: dict[tuple[str, str], tuple[re.Pattern[str], bool]] = {}
    lens = np.zeros(n, np.int64)
    offsets = [0]
    values: list[str | None] = []
    for i, (s, p, f) in enumerate(zip(cols[0], cols[1], flags_col, strict=True)):
        if s is None or p is None or f is None:
            continue
        key = (p, f)
        hit = compiled.get(key)
        if hit is None:
            glob, icase = _flags(f, "gi")
            hit = compiled[key] = (_compiled(p, icase), glob)
        rx, glob = hit
        found = rx.finditer(s) if glob else [m] if (m := rx.search(s)) is not None else []
        k = 0
        for m in found:
            values.extend(m.groups() if rx.groups else (m.group(0),))
            offsets.append(len(values))
            k += 1
        lens[i] = k
    flat = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(values, pa.string()))
    offs = np.concatenate([[0], np.cumsum(lens)])[:-1]
    return lens, flat, offs
