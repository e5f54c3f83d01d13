"""`to_date(text, template)` and `to_timestamp(text, template)` (PostgreSQL, RisingWave).

sqlglot parses them as `StrToDate` / `StrToTime` and, for a literal template, already
translates the PostgreSQL patterns it knows into strptime codes (`YYYY-MM-DD` becomes
`%Y-%m-%d`); `_strptime` translates the rest (and a template that comes from a column,
which sqlglot leaves as written) with the same longest-match rules as to_char. The text is
parsed by Arrow's `strptime`, one kernel call per chunk; a value that does not match the
template is 22007 (in a materialized view: NULL, reported), like PostgreSQL's
`invalid value ... for "YYYY"`. `to_timestamp` gives a timestamptz read in the session's
time zone, `to_date` a date. Years beyond 9999 cannot be represented (22008 elsewhere).
"""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from engine.errors import InvalidDatetimeFormat
from engine.expr.coerce import implicit_cast, is_untyped
from engine.expr.core import Datum, EvalContext, Expr, Func, as_array, is_scalar
from engine.expr.registry import NODE_BINDERS, no_function
from engine.types import DATE, TIMESTAMPTZ, VARCHAR, TypeKind

# PostgreSQL template patterns -> strptime codes, longest first
_CODES = sorted(
    [
        ("YYYY", "%Y"),
        ("YY", "%y"),
        ("MM", "%m"),
        ("DD", "%d"),
        ("DDD", "%j"),
        ("HH24", "%H"),
        ("HH12", "%I"),
        ("HH", "%I"),
        ("MI", "%M"),
        ("SS", "%S"),
        ("MONTH", "%B"),
        ("Month", "%B"),
        ("month", "%B"),
        ("MON", "%b"),
        ("Mon", "%b"),
        ("mon", "%b"),
        ("DAY", "%A"),
        ("Day", "%A"),
        ("day", "%A"),
        ("DY", "%a"),
        ("Dy", "%a"),
        ("dy", "%a"),
        ("AM", "%p"),
        ("PM", "%p"),
        ("am", "%p"),
        ("pm", "%p"),
    ],
    key=lambda t: -len(t[0]),
)
_UNSUPPORTED = re.compile(r"MS|US|TZ|OF|FF\d|IY|WW|IW|CC|J|Q|RM|SSSS", re.I)


def _strptime(template: str) -> str:
    """A PostgreSQL template (possibly half translated by sqlglot) as a strptime format."""
    out: list[str] = []
    i = 0
    while i < len(template):
        ch = template[i]
        if ch == "%" and i + 1 < len(template):  # already a strptime code
            out.append(template[i : i + 2])
            i += 2
            continue
        if ch == '"':
            j = template.find('"', i + 1)
            j = len(template) if j < 0 else j
            out.append(template[i + 1 : j].replace("%", "%%"))
            i = j + 1
            continue
        for tok, code in _CODES:
            if template.startswith(tok, i):
                out.append(code)
                i += len(tok)
                break
        else:
            m = _UNSUPPORTED.match(template, i)
            if m is not None and template[i].isalpha():
                raise InvalidDatetimeFormat(
                    f'template pattern "{m.group(0)}" is not supported in to_date/to_timestamp'
                )
            out.append("%%" if ch == "%" else ch)
            i += 1
    return "".join(out)


def _parse(text: pa.Array, fmt: str, what: str, tz: str) -> pa.Array:
    code = _strptime(fmt)
    try:
        ts = pc.strptime(text, format=code, unit="us", error_is_null=False)
    except (pa.ArrowInvalid, ValueError) as e:
        bad = _first_bad(text, code)
        raise InvalidDatetimeFormat(
            f'invalid value "{bad}" for {what} template "{fmt}"'
            if bad is not None
            else f"invalid input for {what}: {e}"
        ) from None
    if what == "to_date":
        return pc.cast(ts, pa.date32())
    return pc.assume_timezone(ts, tz).cast(pa.timestamp("us", tz="UTC"))


def _first_bad(text: pa.Array, code: str) -> str | None:
    parsed = pc.strptime(text, format=code, unit="us", error_is_null=True)
    bad = pc.and_(pc.is_valid(text), pc.is_null(parsed))
    idx = pc.index(bad, True).as_py()
    return None if idx is None or idx < 0 else str(text[idx].as_py())


def _bind(name: str, b: Any, node: exp.Expression) -> Expr | None:
    fmt_node = node.args.get("format")
    if fmt_node is None:
        return None
    args = [b._bind(node.this), b._bind(fmt_node)]
    text, fmt = (implicit_cast(a, VARCHAR) if is_untyped(a) else a for a in args)
    if text is None or fmt is None or {text.type.kind, fmt.type.kind} != {TypeKind.VARCHAR}:
        raise no_function(name, args)
    out = DATE if name == "to_date" else TIMESTAMPTZ

    def kernel(a: list[Datum], n: int, c: EvalContext) -> Datum:
        t, f = as_array(a[0], n), a[1]
        tz = c.timezone or "UTC"
        if is_scalar(f):
            if not f.is_valid:
                return pa.nulls(n, out.arrow)
            return _parse(t, f.as_py(), name, tz)
        vals = [
            None if fv is None else _parse(t.slice(i, 1), fv, name, tz)[0].as_py()
            for i, fv in enumerate(f.to_pylist())
        ]
        return pa.array(vals, out.arrow)

    return Func(name, (text, fmt), out, kernel)


NODE_BINDERS[exp.StrToDate] = lambda b, node: _bind("to_date", b, node)
NODE_BINDERS[exp.StrToTime] = lambda b, node: _bind("to_timestamp", b, node)
