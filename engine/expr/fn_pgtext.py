"""PostgreSQL text forms the parser hands over in shapes of its own: SIMILAR TO, dollar
quoting and to_char.

- `x [NOT] SIMILAR TO p [ESCAPE e]`: PostgreSQL's SQL regular expressions (`%`, `_`, `|`,
  `*`, `+`, `?`, `{m,n}`, `()`, `[...]`), anchored at both ends; translated once to a RE2
  pattern and matched with Arrow's vectorised regex kernel.
- `$$...$$` / `$tag$...$tag$` (sqlglot's RawString): an ordinary string literal.
- `to_char(timestamp | timestamptz | date, format)`: the common template patterns (YYYY,
  YY, MM, DD, HH24, HH12, HH, MI, SS, MS, US, Mon, Month, Dy, Day, AM/PM, double-quoted
  text), each pattern built for the whole column with Arrow's strftime and concatenated
  (engine.sql.parser keeps sqlglot from rewriting the call into strftime terms).

Lifecycle: registered into `registry.NODE_BINDERS` / `FUNCTIONS` on import (by
engine.expr.binder); kernels run per chunk.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from engine.errors import InvalidRegularExpression
from engine.expr.coerce import UntypedLiteral, cast, implicit_cast, is_untyped
from engine.expr.core import Datum, EvalContext, Expr, Func, Literal, as_array, is_scalar
from engine.expr.nul import check_text
from engine.expr.registry import NODE_BINDERS, no_function, register
from engine.types import BOOLEAN, TIMESTAMP, VARCHAR, TypeKind

K = TypeKind


# -- dollar quoting -----------------------------------------------------------------------------
def _bind_raw_string(b: Any, node: exp.RawString) -> Expr | None:
    return UntypedLiteral(check_text(str(node.this)), VARCHAR)


# -- SIMILAR TO ---------------------------------------------------------------------------------
def similar_to_regex(pattern: str, escape: str | None = "\\") -> str:
    """PostgreSQL's similar_to_escape: the SQL pattern as an anchored regular expression."""
    out: list[str] = []
    i = 0
    in_bracket = False
    while i < len(pattern):
        ch = pattern[i]
        if escape and ch == escape:
            i += 1
            if i >= len(pattern):
                raise InvalidRegularExpression(
                    "invalid escape string",
                    hint="Escape string must be empty or one character.",
                )
            out.append(re.escape(pattern[i]))
        elif in_bracket:
            out.append(ch)
            if ch == "]":
                in_bracket = False
        elif ch == "[":
            in_bracket = True
            out.append(ch)
        elif ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        elif ch in "|*+?{}()":
            out.append(ch)
        elif ch == ".":
            out.append("\\.")
        elif ch in "^$\\":
            out.append("\\" + ch)
        else:
            out.append(ch)
        i += 1
    return "^(?:" + "".join(out) + ")$"


def _bind_similar(b: Any, node: exp.SimilarTo) -> Expr | None:
    escape: str | None = "\\"
    this, pat = node.this, node.expression
    esc = node.args.get("escape")
    if isinstance(esc, exp.Literal):
        escape = esc.this or None
    return bind_similar(b._bind(this), b._bind(pat), escape, negate=False)


def _bind_not(b: Any, node: exp.Not) -> Expr | None:
    inner = node.this
    if isinstance(inner, exp.SimilarTo):
        got = _bind_similar(b, inner)
        assert isinstance(got, Func)
        return Func("not_similar_to", got.args, BOOLEAN, _negated(got.kernel), op="NOT SIMILAR TO")
    return None


def _negated(k: Any) -> Any:
    return lambda a, n, c: pc.invert(k(a, n, c))


def bind_similar(arg_in: Expr, pattern_in: Expr, escape: str | None, negate: bool) -> Expr:
    arg = implicit_cast(arg_in, VARCHAR) if is_untyped(arg_in) else arg_in
    pattern = implicit_cast(pattern_in, VARCHAR) if is_untyped(pattern_in) else pattern_in
    assert arg is not None and pattern is not None
    if arg.type.kind is not K.VARCHAR or pattern.type.kind is not K.VARCHAR:
        raise no_function("similar_to", [arg, pattern])

    def kernel(a: list[Datum], n: int, c: EvalContext) -> Datum:
        s, p = as_array(a[0], n), a[1]
        if is_scalar(p):
            if not p.is_valid:
                return pa.nulls(n, pa.bool_())
            r = pc.match_substring_regex(s, similar_to_regex(p.as_py(), escape))
        else:
            r = pa.array(
                [
                    None
                    if x is None or y is None
                    else re.match(similar_to_regex(y, escape), x, re.S) is not None
                    for x, y in zip(s.to_pylist(), p.to_pylist(), strict=True)
                ],
                pa.bool_(),
            )
        return pc.invert(r) if negate else r

    return Func("similar_to", (arg, pattern), BOOLEAN, kernel, op="SIMILAR TO")


# -- to_char ------------------------------------------------------------------------------------
# longest patterns first; value: strftime code, or a callable building the column
_TOKENS = [
    ("HH24", "%H"),
    ("HH12", "%I"),
    ("YYYY", "YYYY"),
    ("BC", "BC"),
    ("AD", "BC"),
    ("bc", "bc"),
    ("ad", "bc"),
    ("B.C.", "B.C."),
    ("A.D.", "B.C."),
    ("b.c.", "b.c."),
    ("a.d.", "b.c."),
    ("MONTH", "MONTH"),
    ("Month", "Month"),
    ("month", "month"),
    ("DAY", "DAY"),
    ("Day", "Day"),
    ("day", "day"),
    ("MON", "MON"),
    ("Mon", "%b"),
    ("mon", "mon"),
    ("DY", "DY"),
    ("Dy", "%a"),
    ("dy", "dy"),
    ("HH", "%I"),
    ("MI", "%M"),
    ("SS", "%S"),
    ("MS", "MS"),
    ("US", "US"),
    ("YY", "%y"),
    ("MM", "%m"),
    ("DD", "%d"),
    ("AM", "AM"),
    ("PM", "AM"),
    ("am", "am"),
    ("pm", "am"),
    ("A.M.", "A.M."),
    ("P.M.", "A.M."),
    ("DDD", "%j"),
    ("D", "D"),
    # numeric fields computed here: "#name" (zero-padded to _WIDTHS[name])
    ("Y,YYY", "#Y,YYY"),
    ("IYYY", "#IYYY"),
    ("IYY", "#IYY"),
    ("IY", "#IY"),
    ("I", "#I"),
    ("YYY", "#YYY"),
    ("Y", "#Y"),
    ("IW", "#IW"),
    ("WW", "#WW"),
    ("W", "#W"),
    ("Q", "#Q"),
    ("J", "#J"),
    ("CC", "#CC"),
    ("ID", "#ID"),
    ("SSSSS", "#SSSS"),
    ("SSSS", "#SSSS"),
]
# the numeric fields are spelled in either case ('yyyy-mm-dd'); names and AM/PM keep theirs
_TOKENS += [
    (tok.lower(), code)
    for tok, code in list(_TOKENS)
    if tok.isupper()
    and (
        code.startswith(("#", "%"))
        and code not in ("%b", "%a")
        or code in ("YYYY", "MS", "US", "D")
    )
    and tok.lower() not in dict(_TOKENS)
]
_TOKENS.sort(key=lambda t: -len(t[0]))
#: zero-padded widths of the "#" fields (0: not padded)
_WIDTHS = {"IYYY": 4, "IYY": 3, "IY": 2, "I": 1, "YYY": 3, "Y": 1, "IW": 2, "WW": 2, "W": 1}
_WIDTHS.update({"Q": 1, "J": 0, "CC": 2, "ID": 1, "SSSS": 0, "Y,YYY": 0})
#: fields whose number FM writes without leading zeros
_ZERO_PADDED = {"%H", "%I", "%M", "%S", "%y", "%m", "%d", "%j", "YYYY", "MS", "US"}


def _pieces(fmt: str) -> list[tuple[bool, str, bool]]:
    """(is_pattern, text, fill mode) pieces of a to_char template; the FM prefix (fill
    mode) drops the next field's padding: leading zeros, the blanks after a name."""
    out: list[tuple[bool, str, bool]] = []
    i = 0
    fm = False
    while i < len(fmt):
        if fmt[i] == '"':
            j = fmt.find('"', i + 1)
            j = len(fmt) if j < 0 else j
            out.append((False, fmt[i + 1 : j], False))
            i = j + 1
            continue
        if fmt.startswith(("FM", "fm"), i):
            fm = True
            i += 2
            continue
        for tok, code in _TOKENS:
            if fmt.startswith(tok, i):
                out.append((True, code, fm))
                i += len(tok)
                break
        else:
            out.append((False, fmt[i], False))
            i += 1
        fm = False
    return out


def _number_field(ts: pa.Array, name: str) -> pa.Array:
    """A "#" field's number (see _TOKENS) as int64."""

    def np_(a: pa.Array) -> np.ndarray:
        out: np.ndarray = pc.fill_null(a, 0).to_numpy(zero_copy_only=False).astype(np.int64)
        return out

    if name.startswith("I") and name not in ("ID", "IW"):
        y = np_(pc.iso_year(ts))
        return pa.array(y % 10 ** len(name) if name != "IYYY" else y)
    if name in ("YYY", "Y"):
        return pa.array(np_(pc.year(ts)) % 10 ** len(name))
    if name == "Y,YYY":
        return pa.array(np_(pc.year(ts)))
    if name == "IW":
        return pc.iso_week(ts)
    if name == "WW":
        return pa.array((np_(pc.day_of_year(ts)) - 1) // 7 + 1)
    if name == "W":
        return pa.array((np_(pc.day(ts)) - 1) // 7 + 1)
    if name == "Q":
        return pc.quarter(ts)
    if name == "ID":
        return pc.day_of_week(ts, count_from_zero=False, week_start=1)
    us = np_(pc.cast(pc.cast(ts, pa.timestamp("us", tz=ts.type.tz)), pa.int64()))
    if ts.type.tz is not None:  # the local wall clock's fields
        local = pc.local_timestamp(pc.cast(ts, pa.timestamp("us", tz=ts.type.tz)))
        us = np_(pc.cast(local, pa.int64()))
    day_us = 86_400_000_000
    if name == "J":
        return pa.array(np.floor_divide(us, day_us) + 2440588)
    if name == "SSSS":
        return pa.array(np.mod(us, day_us) // 1_000_000)
    y = np_(pc.year(ts))  # CC: the century (negative BC)
    return pa.array(np.where(y > 0, (y + 99) // 100, -((99 - (y - 1)) // 100)))


def _fill_mode(out: pa.Array, code: str) -> pa.Array:
    """The field without its padding (FM)."""
    if code in _ZERO_PADDED:
        trimmed = pc.utf8_ltrim(out, "0")
        return pc.if_else(pc.equal(trimmed, ""), "0", trimmed)
    return pc.utf8_rtrim_whitespace(out)


def _piece(ts: pa.Array, code: str, fm: bool = False) -> pa.Array:
    if code.startswith("#"):
        name = code[1:]
        text = pc.cast(_number_field(ts, name), pa.string())
        if name == "Y,YYY":
            y = _number_field(ts, name).to_numpy(zero_copy_only=False)
            thousands = pa.array(y // 1000).cast(pa.string())
            rest = pc.utf8_lpad(pa.array(y % 1000).cast(pa.string()), 3, "0")
            return pc.binary_join_element_wise(thousands, rest, ",")
        width = _WIDTHS[name]
        return text if fm or not width else pc.utf8_lpad(text, width, "0")
    out = _piece_plain(ts, code)
    return _fill_mode(out, code) if fm else out


def _piece_plain(ts: pa.Array, code: str) -> pa.Array:
    secs = pc.cast(
        pc.floor_temporal(ts, unit="second"), pa.timestamp("s", tz=ts.type.tz), safe=False
    )
    if code.startswith("%"):
        return pc.strftime(secs, format=code, locale="C")
    if code == "YYYY" or code.lower() in ("bc", "b.c."):
        # the year of the era (44 for 44 BC; Arrow's years are astronomical: -43)
        y = pc.fill_null(pc.year(ts), 1).to_numpy(zero_copy_only=False).astype(np.int64)
        if code == "YYYY":
            era_year = pa.array(np.where(y <= 0, 1 - y, y)).cast(pa.string())
            return pc.utf8_lpad(era_year, 4, "0")
        bc, ad = ("BC", "AD") if code.lower() == "bc" else ("B.C.", "A.D.")
        if code.islower():
            bc, ad = bc.lower(), ad.lower()
        return pa.array(np.where(y <= 0, bc, ad))
    if code in ("MS", "US"):
        us = pc.subtract(pc.cast(ts, pa.int64()), pc.multiply(pc.cast(secs, pa.int64()), 10**6))
        if code == "MS":
            return pc.utf8_lpad(pc.cast(pc.divide(us, 1000), pa.string()), 3, "0")
        return pc.utf8_lpad(pc.cast(us, pa.string()), 6, "0")
    if code in ("AM", "am", "A.M."):
        pm = pc.greater_equal(pc.hour(ts), 12)
        words = {"AM": ("AM", "PM"), "am": ("am", "pm"), "A.M.": ("A.M.", "P.M.")}[code]
        return pc.if_else(pm, words[1], words[0])
    if code == "D":
        return pc.cast(
            pc.add(pc.day_of_week(ts, count_from_zero=False, week_start=7), 0), pa.string()
        )
    upper, long_ = code.isupper(), code.lower() in ("month", "day")
    base = {"month": "%B", "mon": "%b", "day": "%A", "dy": "%a"}[code.lower()]
    out = pc.strftime(secs, format=base, locale="C")
    if long_:  # PostgreSQL pads month and day names to 9 characters
        out = pc.utf8_rpad(out, 9, " ")
    if upper:
        return pc.utf8_upper(out)
    if code.islower():
        return pc.utf8_lower(out)
    return out


def _to_char_ts(ts: pa.Array, fmt: str) -> pa.Array:
    parts: list[Any] = []
    for is_pat, text, fm in _pieces(fmt):
        parts.append(_piece(ts, text, fm) if is_pat else text)
    if not parts:
        return pc.if_else(pc.is_valid(ts), "", pa.scalar(None, pa.string()))
    arrays = [p if isinstance(p, pa.Array) else pa.repeat(pa.scalar(p), len(ts)) for p in parts]
    joined = pc.binary_join_element_wise(*arrays, "")
    return pc.if_else(pc.is_valid(ts), joined, pa.scalar(None, pa.string()))


@register("to_char")
def _to_char(args: list[Expr]) -> Expr:
    if len(args) != 2:
        raise no_function("to_char", args)
    value, fmt_in = args
    fmt = implicit_cast(fmt_in, VARCHAR) if is_untyped(fmt_in) else fmt_in
    vt = value.type.kind
    if (
        fmt is None
        or fmt.type.kind is not K.VARCHAR
        or vt not in (K.TIMESTAMP, K.TIMESTAMPTZ, K.DATE)
    ):
        raise no_function("to_char", args)
    ts_in = value if vt is not K.DATE else cast(value, TIMESTAMP)

    def kernel(a: list[Datum], n: int, c: EvalContext) -> Datum:
        ts, f = as_array(a[0], n), a[1]
        if vt is K.TIMESTAMPTZ:  # fields in the session's time zone
            ts = ts.cast(pa.timestamp("us", tz=c.timezone or "UTC"))
        if is_scalar(f):
            if not f.is_valid:
                return pa.nulls(n, pa.string())
            return _to_char_ts(ts, f.as_py())
        outs = [
            _to_char_ts(ts.slice(i, 1), fv)[0].as_py() if fv is not None else None
            for i, fv in enumerate(f.to_pylist())
        ]
        return pa.array(outs, pa.string())

    return Func("to_char", (ts_in, fmt), VARCHAR, kernel)


NODE_BINDERS[exp.RawString] = _bind_raw_string
NODE_BINDERS[exp.SimilarTo] = _bind_similar
NODE_BINDERS[exp.Not] = _bind_not
_ = Literal
