"""jsonb values: canonical text form and the column kernels of the jsonb operators.

jsonb columns hold canonical text (PostgreSQL's jsonb output style), so equality, grouping and
hashing work on plain strings. Every kernel here is one pass over a column: parse each value
(orjson for speed; the stdlib parser with Decimal numbers when a value has a fraction, so
`1.50` keeps its digits), compute, re-serialise. Object keys sort like Postgres jsonb (shorter
first, then bytewise) and duplicate keys keep the last value. `->`/`->>` over a column parse
it once with `_EXACT` (floats only where they print back as written) and serialise results
with orjson + msgspec in C (`dumps_parsed`); `jsonb_many` canonicalises many input texts.
"""

from __future__ import annotations

import json
import operator
import re
from decimal import Decimal, InvalidOperation
from typing import Any

import msgspec
import orjson
import pyarrow as pa

from engine.errors import InvalidParameterValue, InvalidTextRepresentation
from engine.expr.nul import check_jsonb_column

_STD = msgspec.json.Decoder(float_hook=Decimal)
"""The exact parser: numbers with a fraction or exponent become Decimal (digits kept).

msgspec's decoder gives the same values as `json.JSONDecoder(parse_float=Decimal)` on
valid JSON (duplicate keys keep the last value) at about 3x the speed."""
_STD_ERRORS = (msgspec.DecodeError, ValueError)
_odumps = orjson.dumps
_oformat = msgspec.json.format


def float_token(tok: str) -> float | Decimal:
    """msgspec float hook: a float when it prints back as written (`9199.99`, `0.5`), else
    the Decimal the exact parser makes (`1.50`, `1e3`, `-0.0`, 17+ digits).

    A value parsed with it keeps every number's digits, and floats in it are exactly those
    whose repr (which orjson's output equals when repr has no exponent) is the jsonb text."""
    f = float(tok)
    if repr(f) == tok and "e" not in tok and (f or tok[0] != "-"):
        return f
    return Decimal(tok)


_EXACT = msgspec.json.Decoder(float_hook=float_token).decode
"""Exact parser that keeps round-tripping floats as float (about 2x faster than Decimal)."""
_CONTAINERS = (dict, list)
_ORDERS: dict[tuple[str, ...], tuple[str, ...] | None] = {}
_MAX_ORDERS = 4096
_MISS = object()


def _order(keys: tuple[str, ...]) -> tuple[str, ...] | None:
    """The keys in jsonb order, or None when they already are (cached per key tuple)."""
    order = _ORDERS.get(keys, _MISS)
    if order is _MISS:
        s = tuple(sorted(keys, key=_key_order))
        order = None if s == keys else s
        if len(_ORDERS) >= _MAX_ORDERS:
            _ORDERS.clear()
        _ORDERS[keys] = order
    return order  # type: ignore[return-value]


def in_jsonb_order(v: Any) -> Any:
    """A parsed value with every object's keys in jsonb order (rebuilds only what must
    change; may reuse and modify `v`), ready for a serialiser that keeps dict order."""
    t = type(v)
    if t is dict:
        keys = tuple(v)
        order = _ORDERS.get(keys, _MISS)
        if order is _MISS:
            order = _order(keys)
        if order is not None:
            v = {k: v[k] for k in order}
        for k, x in v.items():  # replacing values (not keys) while iterating is fine
            if type(x) in _CONTAINERS:
                v[k] = in_jsonb_order(x)
    elif t is list:
        for i, x in enumerate(v):
            if type(x) in _CONTAINERS:
                v[i] = in_jsonb_order(x)
    return v


class _NeedsDecimal(Exception):
    pass


def _key_order(k: str) -> tuple[int, bytes]:
    b = k.encode()
    return (len(b), b)


def _num(v: int | Decimal) -> str:
    if isinstance(v, int):
        return str(v)
    if not v.is_finite():
        raise InvalidTextRepresentation("invalid input syntax for type json")
    if v.is_zero():
        v = abs(v)
    return format(v, "f")


def _quote(s: str) -> str:
    """A JSON string literal, as `json.dumps(s, ensure_ascii=False)` writes it.

    orjson escapes exactly the same characters (checked over every BMP code point) and is
    much faster; only lone surrogates, which orjson refuses, take the stdlib path."""
    try:
        return _odumps(s).decode()
    except TypeError:
        return json.dumps(s, ensure_ascii=False)


def _ser(v: Any, strict: bool) -> str:
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, str):
        return _quote(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if strict:
            raise _NeedsDecimal
        return _num(Decimal(repr(v)))
    if isinstance(v, Decimal):
        return _num(v)
    if isinstance(v, dict):
        items = sorted(((str(k), x) for k, x in v.items()), key=lambda kv: _key_order(kv[0]))
        return "{" + ", ".join(_quote(k) + ": " + _ser(x, strict) for k, x in items) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_ser(x, strict) for x in v) + "]"
    return json.dumps(str(v), ensure_ascii=False)


def jsonb_canonical(value: Any) -> str:
    """Canonical jsonb text of a Python JSON value (dict/list/str/int/float/Decimal/bool/None)."""
    return _ser(value, strict=False)


def parse_json_text(text: str) -> Any:
    """Parse JSON input text, keeping number digits (floats come back as Decimal)."""
    try:
        v = orjson.loads(text)
        if not _has_float(v):
            return v
        return _STD.decode(text)
    except (orjson.JSONDecodeError, *_STD_ERRORS) as e:
        raise InvalidTextRepresentation(
            "invalid input syntax for type json", detail=f'Token "{text[:40]}" is invalid.'
        ) from e


def _has_float(v: Any) -> bool:
    if isinstance(v, float):
        return True
    if isinstance(v, dict):
        return any(_has_float(x) for x in v.values())
    if isinstance(v, list):
        return any(_has_float(x) for x in v)
    return False


def canonicalize_text(text: str) -> str:
    return _ser(parse_json_text(text), strict=False)


_LONG_DIGITS = re.compile(r"\d{19}")


def loads(canonical: str) -> Any:
    """Parse stored (canonical) jsonb text; numbers with a fraction become Decimal.

    orjson turns integers beyond 64 bits into floats, so text with 19+ digits in a row
    (maybe such an integer) takes the exact parser too."""
    if "." in canonical or _LONG_DIGITS.search(canonical):
        return _STD.decode(canonical)
    return orjson.loads(canonical)


def dumps(v: Any) -> str:
    return _ser(v, strict=False)


def dumps_parsed(v: Any) -> str:
    """`dumps` in C (orjson + msgspec spacing) of a value whose floats print as written
    (parsed by `_EXACT`, or none at all) and whose objects' keys are in jsonb order (parsed
    from canonical text, or `in_jsonb_order`); Decimals and huge integers take `_ser`."""
    t = type(v)
    if t is dict or t is list:
        try:
            return _oformat(_odumps(v), indent=0).decode()
        except TypeError:
            return _ser(v, strict=False)
    if t is float:
        return repr(v)
    return _ser(v, strict=False)


def type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float, Decimal)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, dict):
        return "object"
    return "array"


# -- column kernels (one pass per column) ------------------------------------------------------


def text_to_jsonb(col: pa.Array) -> pa.Array:
    check_jsonb_column(col)
    return pa.array(
        [None if s is None else canonicalize_text(s) for s in col.to_pylist()], pa.string()
    )


def _get(v: Any, key: Any) -> tuple[bool, Any]:
    """`v -> key`. PostgreSQL stores a scalar document as a one-element array, so
    `'5'::jsonb -> 0` (and `-> -1`) is 5; a path (`#>`) does not see that array."""
    if isinstance(key, str):
        if isinstance(v, dict) and key in v:
            return True, v[key]
        return False, None
    if isinstance(v, list):
        i = key if key >= 0 else len(v) + key
        if 0 <= i < len(v):
            return True, v[i]
        return False, None
    if not isinstance(v, dict) and key in (0, -1):
        return True, v
    return False, None


def _path_get(v: Any, path: list[str | None]) -> tuple[bool, Any]:
    for p in path:
        if p is None:
            return False, None
        if isinstance(v, list):
            try:
                idx = int(p)
            except ValueError:
                return False, None
            found, v = _get(v, idx)
        else:
            found, v = _get(v, p)
        if not found:
            return False, None
    return True, v


def _as_text(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v
    return dumps(v)


_NO_FAST = object()
_CACHE_COLUMNS = 4
_MIN_CACHED_ROWS = 64
"""Smaller columns (VALIDATE's headers, one request's rows) are cheap to parse again and
are not cached: they would evict a barrier's big columns between its expressions."""
_column_cache: dict[tuple[int, ...], tuple[Any, ...]] = {}
"""Recently used jsonb columns: key -> (array, texts, fast-parsed values, results).

Guarded by the GIL only: entries are replaced whole, so a reader sees an old or a new
entry, never a torn one (the barrier thread and ad-hoc queries may both evaluate)."""


def _column_entry(arr: pa.Array) -> tuple[Any, ...]:
    """The cache entry of a canonical jsonb column, parsing it on a miss.

    A view usually applies several `->`/`->>` to one jsonb column of one batch (and to
    the results of those, e.g. `data->'properties'->>'price'`); each would otherwise
    convert and parse the whole column again. The parse is `_EXACT` (numbers keep their
    digits: floats only where repr prints them as written, else Decimal), so results are
    serialised without a re-parse (`dumps_parsed`); `_NO_FAST` marks text it cannot
    read (not canonical jsonb; `loads` decides). The key is the
    column's buffer addresses, offset and length; the entry keeps the array alive, so
    no other array can reuse those addresses while it is cached.
    """
    key = (arr.offset, len(arr), *(0 if b is None else b.address for b in arr.buffers()))
    entry = _column_cache.get(key)
    if entry is not None:
        return entry
    texts = arr.to_pylist()
    fast = _EXACT
    parsed: list[Any] = []
    for s in texts:
        if s is None:
            parsed.append(None)
            continue
        try:
            parsed.append(fast(s))
        except _STD_ERRORS:
            parsed.append(_NO_FAST)
    return _cache_entry(key, arr, texts, parsed)


def _cache_entry(
    key: tuple[int, ...], arr: pa.Array, texts: list[Any], parsed: list[Any]
) -> tuple[Any, ...]:
    entry = (arr, texts, parsed, {})
    if len(texts) < _MIN_CACHED_ROWS:
        return entry
    while len(_column_cache) >= _CACHE_COLUMNS:
        _column_cache.pop(next(iter(_column_cache)), None)
    _column_cache[key] = entry
    return entry


def access_column(arr: pa.Array, key: Any, as_text: bool) -> pa.Array:
    """`j -> k` / `j ->> k` over a jsonb column with one constant key (same as `access`).

    A `->` result is cached with its parsed values, so `j -> k ->> k2` does not parse the
    intermediate column again."""
    _, texts, parsed, results = _column_entry(arr)
    rkey = (type(key), key, as_text)
    res = results.get(rkey)
    if res is None:
        sub: list[Any] | None = None if as_text else []
        out = _access_parsed(texts, parsed, key, as_text, sub)
        res = results[rkey] = pa.array(out, pa.string())
        if sub is not None:
            ck = (res.offset, len(res), *(0 if b is None else b.address for b in res.buffers()))
            _cache_entry(ck, res, out, sub)
    return res


def _access_parsed(
    texts: list[Any], parsed: list[Any], key: Any, as_text: bool, sub: list[Any] | None
) -> list[str | None]:
    """The results' texts; `sub` (if given) gets each result's parsed value."""
    if type(key) is str and parsed:
        # the usual case: every row an object holding the key, the values all of one type;
        # anything else (NULL, missing key, mixed types) takes the loop below
        try:
            vals = list(map(operator.itemgetter(key), parsed))
        except (KeyError, TypeError, IndexError):
            vals = None
        if vals is not None:
            types = set(map(type, vals))
            t0 = types.pop() if len(types) == 1 else None
            if t0 is str or t0 is dict or t0 is float or t0 is int:
                if sub is not None:
                    sub.extend(vals)
                if t0 is str:
                    return vals if as_text else list(map(_quote, vals))
                if t0 is float:  # parsed by `_EXACT`: repr is the jsonb text
                    return list(map(repr, vals))
                if t0 is int:
                    return list(map(str, vals))
                return list(map(dumps_parsed, vals))
    out: list[str | None] = []
    append = out.append
    keep = sub.append if sub is not None else None
    is_str = isinstance(key, str)
    for s, p in zip(texts, parsed, strict=True):
        if s is None:
            append(None)
            if keep:
                keep(None)
            continue
        if p is _NO_FAST:
            found, v = _get(loads(s), key)
        elif is_str and type(p) is dict:
            found = key in p
            v = p[key] if found else None
        else:
            found, v = _get(p, key)
        if keep:
            keep(v)
        if not found:
            append(None)
            continue
        if type(v) is str:
            append(v if as_text else _quote(v))
            continue
        if v is None:
            append(None if as_text else "null")
            continue
        append(dumps_parsed(v))
    return out


def access(col: list[Any], keys: list[Any], as_text: bool) -> pa.Array:
    """`j -> k` / `j ->> k` (k text key or integer index)."""
    out: list[str | None] = []
    for s, k in zip(col, keys, strict=True):
        if s is None or k is None:
            out.append(None)
            continue
        found, v = _get(loads(s), k)
        if not found:
            out.append(None)
        else:
            out.append(_as_text(v) if as_text else dumps(v))
    return pa.array(out, pa.string())


def path_access(col: list[Any], paths: list[Any], as_text: bool) -> pa.Array:
    """`j #> path` / `j #>> path` / jsonb_extract_path(_text) (path: list of text)."""
    out: list[str | None] = []
    for s, p in zip(col, paths, strict=True):
        if s is None or p is None:
            out.append(None)
            continue
        found, v = _path_get(loads(s), p)
        if not found:
            out.append(None)
        else:
            out.append(_as_text(v) if as_text else dumps(v))
    return pa.array(out, pa.string())


def typeof(col: list[Any]) -> pa.Array:
    return pa.array([None if s is None else type_name(loads(s)) for s in col], pa.string())


def array_length(col: list[Any]) -> pa.Array:
    out: list[int | None] = []
    for s in col:
        if s is None:
            out.append(None)
            continue
        v = loads(s)
        if not isinstance(v, list):
            what = "scalar" if not isinstance(v, dict) else "non-array"
            raise InvalidParameterValue(f"cannot get array length of a {what}")
        out.append(len(v))
    return pa.array(out, pa.int32())


def _contains(a: Any, b: Any, top: bool = True) -> bool:
    if isinstance(a, dict):
        if not isinstance(b, dict):
            return False
        return all(k in a and _contains(a[k], x, False) for k, x in b.items())
    if isinstance(a, list):
        if isinstance(b, list):
            return all(any(_contains(x, y, False) for x in a) for y in b)
        if top and not isinstance(b, dict):
            return any(not isinstance(x, (dict, list)) and _scalar_eq(x, b) for x in a)
        return False
    if isinstance(b, (dict, list)):
        return False
    return _scalar_eq(a, b)


def _scalar_eq(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float, Decimal)) and isinstance(b, (int, float, Decimal)):
        return Decimal(str(a)) == Decimal(str(b))
    return bool(a == b)


def contains(left: list[Any], right: list[Any]) -> pa.Array:
    return pa.array(
        [
            None if a is None or b is None else _contains(loads(a), loads(b))
            for a, b in zip(left, right, strict=True)
        ],
        pa.bool_(),
    )


def key_exists(col: list[Any], keys: list[Any]) -> pa.Array:
    out: list[bool | None] = []
    for s, k in zip(col, keys, strict=True):
        if s is None or k is None:
            out.append(None)
            continue
        v = loads(s)
        if isinstance(v, dict):
            out.append(k in v)
        elif isinstance(v, list):
            out.append(any(isinstance(x, str) and x == k for x in v))
        else:
            out.append(isinstance(v, str) and v == k)
    return pa.array(out, pa.bool_())


_CAST_NAMES = {
    "boolean": "boolean",
    "integer": "integer",
    "bigint": "bigint",
    "smallint": "smallint",
    "numeric": "numeric",
    "double precision": "double precision",
    "real": "real",
}


def cast_scalar(col: list[Any], target: str) -> list[Any]:
    """jsonb -> bool / number: the JSON value must already be of that JSON type."""
    out: list[Any] = []
    want_bool = target == "boolean"
    for s in col:
        if s is None:
            out.append(None)
            continue
        v = loads(s)
        if v is None:
            out.append(None)
            continue
        ok = (
            isinstance(v, bool)
            if want_bool
            else (isinstance(v, (int, float, Decimal)) and not isinstance(v, bool))
        )
        if not ok:
            raise InvalidParameterValue(f"cannot cast jsonb {type_name(v)} to type {target}")
        out.append(v)
    return out


def to_numeric_values(vals: list[Any]) -> list[Decimal | None]:
    out: list[Decimal | None] = []
    for v in vals:
        if v is None:
            out.append(None)
        else:
            try:
                out.append(Decimal(str(v)))
            except InvalidOperation:
                out.append(None)
    return out


def parse_text_array(s: str) -> list[str | None]:
    """Postgres text[] literal '{a,b,"c d"}' -> ['a', 'b', 'c d'] (NULL -> None)."""
    body = s.strip()
    if not (body.startswith("{") and body.endswith("}")):
        raise InvalidTextRepresentation(f'malformed array literal: "{s}"')
    body = body[1:-1]
    out: list[str | None] = []
    if not body.strip():
        return out
    cur: list[str] = []
    quoted = False
    in_q = False
    i = 0
    while i < len(body):
        c = body[i]
        if in_q:
            if c == "\\" and i + 1 < len(body):
                cur.append(body[i + 1])
                i += 1
            elif c == '"':
                in_q = False
            else:
                cur.append(c)
        elif c == '"':
            in_q = quoted = True
        elif c == ",":
            out.append(_elem(cur, quoted))
            cur, quoted = [], False
        else:
            cur.append(c)
        i += 1
    out.append(_elem(cur, quoted))
    return out


def _elem(cur: list[str], quoted: bool) -> str | None:
    text = "".join(cur)
    if not quoted:
        text = text.strip()
        if text.upper() == "NULL":
            return None
    return text
