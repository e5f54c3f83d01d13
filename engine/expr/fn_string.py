"""String functions (upper, substr, trim, lpad, split_part, ...) and `||` concatenation.

Kernels use pyarrow utf8 kernels when the non-string arguments are constants (the common
case); a column-valued pattern/length falls back to one Python pass over the column.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.errors import InvalidParameterValue, ProgramLimitExceeded, SubstringError
from engine.expr.coerce import cast, implicit_cast, is_untyped
from engine.expr.core import Datum, EvalContext, Expr, Func, as_array, is_scalar, per_row
from engine.expr.ops import no_operator
from engine.expr.registry import coerce_to, no_function, register, simple
from engine.types import BOOLEAN, INT, JSONB, VARCHAR, TypeKind

K = TypeKind


def _text(a: Expr) -> Expr:
    if a.type.kind is K.VARCHAR and not is_untyped(a):
        return a
    return cast(a, VARCHAR)


def bind_concat_op(left: Expr, right: Expr) -> Expr:
    """`a || b`: text concatenation (non-text operands are cast) or jsonb concatenation."""
    lj = left.type.kind is K.JSONB and not is_untyped(left)
    rj = right.type.kind is K.JSONB and not is_untyped(right)
    if (lj and (rj or is_untyped(right))) or (rj and is_untyped(left)):
        from engine.expr.fn_json import jsonb_concat

        lc, rc = implicit_cast(left, JSONB), implicit_cast(right, JSONB)
        assert lc is not None and rc is not None
        return jsonb_concat(lc, rc)
    if left.type.kind is K.LIST or right.type.kind is K.LIST:
        raise no_operator("||", left.type, right.type)
    if (
        is_untyped(left)
        and is_untyped(right)
        or left.type.kind is K.VARCHAR
        or right.type.kind is K.VARCHAR
        or is_untyped(left)
        or is_untyped(right)
    ):
        lc, rc = _text(left), _text(right)
        return Func(
            "concat_op",
            (lc, rc),
            VARCHAR,
            lambda a, n, c: pc.binary_join_element_wise(a[0], a[1], ""),
            op="||",
        )
    raise no_operator("||", left.type, right.type)


@register("upper")
def _upper(args: list[Expr]) -> Expr:
    return simple("upper", args, [VARCHAR], VARCHAR, lambda a, n, c: pc.utf8_upper(a[0]))


@register("lower")
def _lower(args: list[Expr]) -> Expr:
    return simple("lower", args, [VARCHAR], VARCHAR, lambda a, n, c: pc.utf8_lower(a[0]))


@register("length", "char_length", "character_length")
def _length(args: list[Expr]) -> Expr:
    if len(args) == 1 and args[0].type.kind is K.BYTEA:
        return Func(
            "length", (args[0],), INT, lambda a, n, c: pc.binary_length(a[0]).cast(pa.int32())
        )
    return simple(
        "length", args, [VARCHAR], INT, lambda a, n, c: pc.utf8_length(a[0]).cast(pa.int32())
    )


@register("octet_length")
def _octet_length(args: list[Expr]) -> Expr:
    return simple(
        "octet_length",
        args,
        [VARCHAR],
        INT,
        lambda a, n, c: pc.binary_length(a[0]).cast(pa.int32()),
    )


def _substr_py(s: str, start: int, length: int | None = None) -> str:
    if length is not None and length < 0:
        raise SubstringError("negative substring length not allowed")
    begin = start - 1
    end = None if length is None else begin + length
    b = max(begin, 0)
    if end is not None:
        if end <= b:
            return ""
        return s[b:end]
    return s[b:]


@register("substr")
def _substr(args: list[Expr]) -> Expr:
    types = [VARCHAR, INT] + ([INT] if len(args) == 3 else [])
    args = coerce_to("substr", args, types)

    def kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
        if all(is_scalar(x) for x in a[1:]) and not is_scalar(a[0]):
            if any(not x.is_valid for x in a[1:]):
                return pa.nulls(n, pa.string())
            start = a[1].as_py()
            length = a[2].as_py() if len(a) == 3 else None
            if length is not None and length < 0:
                raise SubstringError("negative substring length not allowed")
            b = max(start - 1, 0)
            if length is None:
                return pc.utf8_slice_codeunits(a[0], b)
            end = max(start - 1 + length, b)
            return pc.utf8_slice_codeunits(a[0], b, end)
        return per_row(_substr_py, pa.string())(a, n, ctx)

    return Func("substr", tuple(args), VARCHAR, kernel)


def _output_text(a: Expr) -> Expr:
    """An argument of concat / concat_ws as its type's output function writes it: as text,
    but a boolean stays one for `_bools_out` (PostgreSQL's concat writes `t` / `f`, where a
    cast to text gives `true` / `false`)."""
    if a.type.kind is K.BOOLEAN and not is_untyped(a):
        return a
    return _text(a)


def _bools_out(a: list[Datum]) -> list[Datum]:
    """The boolean arguments `_output_text` kept, as `t` / `f` (NULL stays NULL)."""
    return [pc.if_else(x, "t", "f") if x.type == pa.bool_() else x for x in a]


def _concat_kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
    a = [x for x in _bools_out(a) if not (is_scalar(x) and not x.is_valid)]
    if not a:
        return pa.scalar("", pa.string())
    return pc.binary_join_element_wise(*a, "", null_handling="replace", null_replacement="")


@register("concat")
def _concat(args: list[Expr]) -> Expr:
    return Func("concat", tuple(_output_text(a) for a in args), VARCHAR, _concat_kernel)


@register("concat_ws")
def _concat_ws(args: list[Expr]) -> Expr:
    if not args:
        raise no_function("concat_ws", args)
    texts = (_text(args[0]), *(_output_text(a) for a in args[1:]))

    def kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
        a = _bools_out(a)
        sep, rest = a[0], [x for x in a[1:] if not (is_scalar(x) and not x.is_valid)]
        if is_scalar(sep):
            if not sep.is_valid:
                return pa.nulls(n, pa.string())
            # a leading never-null "" keeps rows whose values are all NULL (arrow drops them
            # with null_handling="skip"); its separator is cut off again below
            lead = pa.array([""] * n, pa.string())
            out = pc.binary_join_element_wise(
                lead, *[as_array(x, n) for x in rest], sep, null_handling="skip"
            )
            return pc.utf8_slice_codeunits(out, len(sep.as_py()))

        def py(sp: str, *vals: str | None) -> str:
            return sp.join(v for v in vals if v is not None)

        cols = [as_array(x, n).to_pylist() for x in a]
        return pa.array(
            [None if row[0] is None else py(*row) for row in zip(*cols, strict=True)], pa.string()
        )

    return Func("concat_ws", texts, VARCHAR, kernel)


def _trim_fn(kind: str) -> Callable[[list[Expr]], Expr]:
    arrow = {"btrim": pc.utf8_trim, "ltrim": pc.utf8_ltrim, "rtrim": pc.utf8_rtrim}[kind]

    def resolve(args: list[Expr]) -> Expr:
        types = [VARCHAR] * len(args)
        if len(args) not in (1, 2):
            raise no_function(kind, args)
        args = coerce_to(kind, args, types)

        def kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
            chars: Any = " " if len(a) == 1 else a[1]
            if isinstance(chars, str) or is_scalar(chars):
                cv = chars if isinstance(chars, str) else chars.as_py()
                if cv is None:
                    return (
                        pa.nulls(n, pa.string())
                        if not is_scalar(a[0])
                        else pa.scalar(None, pa.string())
                    )
                if cv == "":
                    return a[0]
                return arrow(a[0], characters=cv)
            py = {"btrim": str.strip, "ltrim": str.lstrip, "rtrim": str.rstrip}[kind]
            return per_row(lambda s, ch: py(s, ch), pa.string())(a, n, ctx)

        return Func(kind, tuple(args), VARCHAR, kernel)

    return resolve


register("btrim", "trim")(_trim_fn("btrim"))
register("ltrim")(_trim_fn("ltrim"))
register("rtrim")(_trim_fn("rtrim"))


@register("replace")
def _replace(args: list[Expr]) -> Expr:
    args = coerce_to("replace", args, [VARCHAR, VARCHAR, VARCHAR])

    def kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
        if (
            is_scalar(a[1])
            and is_scalar(a[2])
            and a[1].is_valid
            and a[2].is_valid
            and a[1].as_py() != ""
        ):
            return pc.replace_substring(a[0], a[1].as_py(), a[2].as_py())
        return per_row(lambda s, f, t: s.replace(f, t) if f else s, pa.string())(a, n, ctx)

    return Func("replace", tuple(args), VARCHAR, kernel)


def _split_part_py(s: str, d: str, i: int) -> str:
    if i == 0:
        raise InvalidParameterValue("field position must not be zero")
    parts = s.split(d) if d else [s]
    if i < 0:
        i = len(parts) + i + 1
        if i <= 0:
            return ""
    return parts[i - 1] if i <= len(parts) else ""


@register("split_part")
def _split_part(args: list[Expr]) -> Expr:
    args = coerce_to("split_part", args, [VARCHAR, VARCHAR, INT])

    def kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
        s, d, i = a
        if (
            not is_scalar(s)
            and is_scalar(d)
            and is_scalar(i)
            and d.is_valid
            and i.is_valid
            and d.as_py() != ""
            and i.as_py() > 0
        ):
            lists = pc.split_pattern(s, d.as_py())
            idx = i.as_py() - 1
            lens = pc.fill_null(pc.list_value_length(lists), 0).to_numpy(zero_copy_only=False)
            offs = lists.offsets.to_numpy(zero_copy_only=False)[:-1]
            flat = lists.values
            ok = lens > idx
            pos = np.where(ok, offs + idx, 0)
            if len(flat) == 0:
                picked = pa.array([""] * n, pa.string())
            else:
                picked = flat.take(pa.array(pos))
            out = pc.if_else(pa.array(ok), picked, "")
            return pc.if_else(pc.is_null(s), pa.scalar(None, pa.string()), out)
        return per_row(_split_part_py, pa.string())(a, n, ctx)

    return Func("split_part", tuple(args), VARCHAR, kernel)


def _strpos_py(s: str, sub: str) -> int:
    return s.find(sub) + 1


@register("strpos", "position")
def _strpos(args: list[Expr]) -> Expr:
    args = coerce_to("strpos", args, [VARCHAR, VARCHAR])

    def kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
        s, sub = a
        if not is_scalar(s) and is_scalar(sub) and sub.is_valid:
            byte_idx = pc.find_substring(s, sub.as_py())
            # byte offset -> character offset: count chars in the prefix
            sv = s.cast(pa.binary())
            found = pc.greater_equal(byte_idx, 0)
            starts = pc.fill_null(byte_idx, 0).to_numpy(zero_copy_only=False)
            if (
                pa.types.is_string(s.type)
                and pc.all(pc.equal(pc.binary_length(s), pc.utf8_length(s))).as_py() is not False
            ):
                chars = pa.array(starts)
            else:
                pre = [
                    None if v is None else len(v[: max(st, 0)].decode(errors="ignore"))
                    for v, st in zip(sv.to_pylist(), starts, strict=True)
                ]
                chars = pa.array(pre, pa.int64())
            return pc.if_else(found, pc.add(chars, 1), 0).cast(pa.int32())
        return per_row(_strpos_py, pa.int32())(a, n, ctx)

    return Func("strpos", tuple(args), INT, kernel)


def _left_py(s: str, k: int) -> str:
    return s[:k] if k >= 0 else s[:k] if -k < len(s) else ""


def _right_py(s: str, k: int) -> str:
    if k >= 0:
        return s[max(len(s) - k, 0) :] if k else ""  # more than the length: the whole string
    return s[-k:]


@register("left")
def _left(args: list[Expr]) -> Expr:
    return simple("left", args, [VARCHAR, INT], VARCHAR, _per_row_vec(_left_py, "left"))


@register("right")
def _right(args: list[Expr]) -> Expr:
    return simple("right", args, [VARCHAR, INT], VARCHAR, _per_row_vec(_right_py, "right"))


def _per_row_vec(
    py: Callable[[str, int], str], which: str
) -> Callable[[list[Datum], int, EvalContext], Datum]:
    def kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
        s, k = a
        if not is_scalar(s) and is_scalar(k) and k.is_valid:
            kv = k.as_py()
            if which == "left":
                if kv >= 0:
                    return pc.utf8_slice_codeunits(s, 0, kv)
                return pc.utf8_slice_codeunits(s, 0, kv) if kv != 0 else s
            if kv > 0:
                return pc.utf8_slice_codeunits(s, -kv)
            if kv == 0:
                return pc.if_else(pc.is_null(s), pa.scalar(None, pa.string()), "")
            return pc.utf8_slice_codeunits(s, -kv)
        return per_row(py, pa.string())(a, n, ctx)

    return kernel


def _pad_fn(left: bool) -> Callable[[list[Expr]], Expr]:
    name = "lpad" if left else "rpad"

    def py(s: str, width: int, fill: str = " ") -> str:
        if width <= 0:
            return ""
        if len(s) >= width:
            return s[:width]
        if not fill:
            return s
        need = width - len(s)
        pad = (fill * (need // len(fill) + 1))[:need]
        return pad + s if left else s + pad

    def resolve(args: list[Expr]) -> Expr:
        types = [VARCHAR, INT] + ([VARCHAR] if len(args) == 3 else [])
        args = coerce_to(name, args, types)

        def kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
            fill = a[2] if len(a) == 3 else pa.scalar(" ")
            if (
                not is_scalar(a[0])
                and is_scalar(a[1])
                and is_scalar(fill)
                and a[1].is_valid
                and fill.is_valid
                and len(fill.as_py()) == 1
                and a[1].as_py() >= 0
            ):
                w = a[1].as_py()
                cut = pc.utf8_slice_codeunits(a[0], 0, w)
                f = pc.utf8_lpad if left else pc.utf8_rpad
                return f(cut, width=w, padding=fill.as_py())
            return per_row(py, pa.string())(a, n, ctx)

        return Func(name, tuple(args), VARCHAR, kernel)

    return resolve


register("lpad")(_pad_fn(True))
register("rpad")(_pad_fn(False))


@register("reverse")
def _reverse(args: list[Expr]) -> Expr:
    return simple("reverse", args, [VARCHAR], VARCHAR, lambda a, n, c: pc.utf8_reverse(a[0]))


@register("starts_with")
def _starts_with(args: list[Expr]) -> Expr:
    def kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
        if is_scalar(a[1]) and a[1].is_valid:
            return pc.starts_with(a[0], a[1].as_py())
        return per_row(lambda s, p: s.startswith(p), pa.bool_())(a, n, ctx)

    return simple("starts_with", args, [VARCHAR, VARCHAR], BOOLEAN, kernel)


@register("md5")
def _md5(args: list[Expr]) -> Expr:
    return simple(
        "md5",
        args,
        [VARCHAR],
        VARCHAR,
        per_row(lambda s: hashlib.md5(s.encode()).hexdigest(), pa.string()),
    )


@register("repeat")
def _repeat(args: list[Expr]) -> Expr:
    def kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
        times = (
            pc.max_element_wise(a[1], 0)
            if not is_scalar(a[1])
            else (pa.scalar(max(a[1].as_py(), 0), pa.int32()) if a[1].is_valid else a[1])
        )
        return pc.binary_repeat(a[0], times)

    return simple("repeat", args, [VARCHAR, INT], VARCHAR, kernel)


def _initcap_py(s: str) -> str:
    """PostgreSQL's initcap: a letter is upper case after a character that is not
    alphanumeric (or at the start), lower case after one that is."""
    out, was_alnum = [], False
    for ch in s:
        out.append(ch.lower() if was_alnum else ch.upper())
        was_alnum = ch.isalnum()
    return "".join(out)


#: a letter after an alphanumeric character without case (a digit, CJK): Arrow's title
#: case starts a word there, PostgreSQL's initcap does not ('a1f' is 'A1f')
_UNCASED_ALNUM_LETTER = r"[\pN\p{Lo}\p{Lm}]\pL"


def _initcap_kernel(a: list[Datum], n: int, ctx: EvalContext) -> Datum:
    """Arrow's title case, and PostgreSQL's rule for the (rare) strings where they differ."""
    titled = pc.utf8_title(a[0])
    if is_scalar(a[0]):
        v = a[0].as_py()
        return titled if v is None else pa.scalar(_initcap_py(v), pa.string())
    arr = as_array(a[0], n)
    differs = pc.fill_null(pc.match_substring_regex(arr, _UNCASED_ALNUM_LETTER), False)
    if not pc.any(differs).as_py():
        return titled
    fixed = pa.array([_initcap_py(v) for v in pc.filter(arr, differs).to_pylist()], pa.string())
    return pc.replace_with_mask(as_array(titled, n), differs, fixed)


@register("initcap")
def _initcap(args: list[Expr]) -> Expr:
    return simple("initcap", args, [VARCHAR], VARCHAR, _initcap_kernel)


@register("ascii")
def _ascii(args: list[Expr]) -> Expr:
    return simple(
        "ascii", args, [VARCHAR], INT, per_row(lambda s: ord(s[0]) if s else 0, pa.int32())
    )


def _chr_of(code: int) -> str:
    """PostgreSQL's chr() in UTF8: a code point, refusing NUL, negatives, surrogates."""
    if code == 0:
        raise ProgramLimitExceeded("null character not permitted")
    if code < 0:
        raise InvalidParameterValue("character number must be positive")
    if code > 0x10FFFF:
        raise ProgramLimitExceeded(f"requested character too large for encoding: {code}")
    if 0xD800 <= code <= 0xDFFF:
        raise ProgramLimitExceeded(f"requested character not valid for encoding: {code}")
    return chr(code)


@register("chr")
def _chr(args: list[Expr]) -> Expr:
    return simple("chr", args, [INT], VARCHAR, per_row(_chr_of, pa.string()))


@register("to_hex")
def _to_hex(args: list[Expr]) -> Expr:
    target = implicit_cast_target(args)
    mask = 0xFFFFFFFFFFFFFFFF if target.kind is K.BIGINT else 0xFFFFFFFF  # two's complement
    return simple(
        "to_hex",
        args,
        [target],
        VARCHAR,
        per_row(lambda v: format(v & mask if v < 0 else v, "x"), pa.string()),
    )


def implicit_cast_target(args: list[Expr]) -> Any:
    from engine.types import BIGINT

    return BIGINT if args and args[0].type.kind is K.BIGINT else INT


def _translate_py(s: str, src: str, dst: str) -> str:
    table: dict[int, int | None] = {}
    for i, ch in enumerate(src):
        if ord(ch) not in table:  # the first occurrence of a character wins
            table[ord(ch)] = ord(dst[i]) if i < len(dst) else None
    return s.translate(table)


@register("translate")
def _translate(args: list[Expr]) -> Expr:
    """translate(s, from, to): each character of `from` in s becomes the character at the
    same position of `to`, or is dropped past its end. One Python pass over the column
    (pyarrow has no translate kernel)."""
    a = coerce_to("translate", args, [VARCHAR, VARCHAR, VARCHAR])
    return Func("translate", tuple(a), VARCHAR, per_row(_translate_py, pa.string()))


def _overlay_py(s: str, r: str, start: int, count: int | None = None) -> str:
    n = len(r) if count is None else count
    if start < 1:
        raise SubstringError("negative substring length not allowed")
    end = start + n
    return s[: start - 1] + r + (s[end - 1 :] if end >= 1 else s)


@register("overlay")
def _overlay(args: list[Expr]) -> Expr:
    """overlay(s PLACING r FROM start [FOR count]): s with `count` characters (default
    length of r) from `start` replaced by r. One Python pass over the column."""
    if len(args) not in (3, 4):
        raise no_function("overlay", args)
    a = coerce_to("overlay", args, [VARCHAR, VARCHAR, INT, INT][: len(args)])
    return Func("overlay", tuple(a), VARCHAR, per_row(_overlay_py, pa.string()))
