"""Canonical jsonb text for many JSON input texts at once (webhook bodies, NDJSON lines).

Why: `jsonb.canonicalize_text` walks every value in Python (`_ser`), about 19 us for a
250-byte event; at tens of thousands of events per second that was most of the webhook
server's CPU. Here the per-value work is done by C code (about 4x less CPU):

1. msgspec parses each text; its float hook keeps a float only when the float's repr is
   exactly the token as written (so the digits survive) and otherwise returns the Decimal
   the exact path would use;
2. objects are rebuilt in jsonb key order (shorter keys first, then bytewise; duplicate
   keys already collapsed last-wins by the parser), with the order of each distinct key
   tuple computed once and cached;
3. orjson serialises each value compactly (it refuses Decimals and integers beyond 64
   bits, which sends just those values to the exact path; for floats whose repr has no
   exponent its digits equal repr's), and `msgspec.json.format(indent=0)` adds the space
   jsonb output puts after `,` and `:` outside strings;
4. the Arrow string column is built from the joined bytes and their lengths.

Before that, a shape tier with no Python per event: the last few object shapes seen (key
sets per nesting level, scalars or arrays of scalars below them) are msgspec Structs
whose fields are declared in jsonb key order, decoded with unknown and missing fields
forbidden. `map(decode)`, `map(encode)` and `map(format)` then produce every text in C;
a text whose shape differs fails to decode and takes the path above (and teaches its
shape). msgspec's string escaping equals `json.dumps(ensure_ascii=False)`, duplicate keys
keep the last value, and invalid JSON fails as it does elsewhere. Numbers come back from
the float they parsed to, so the texts are also parsed by a decoder whose float hook
applies the exact parser's test (`_flag_float`) and flags a batch holding a float that
does not print back as written (`1.50`, `1e3`, `-0.0`, 17 digits); only the flagged
texts are redone by the path above. msgspec writes floats as repr's digits, positional
for the floats that pass the test.

Any text the fast path cannot vouch for (invalid JSON, lone surrogates, exponents,
`1.50`, `-0.0`, huge integers) goes through `canonicalize_text`, so results and errors are
exactly the exact path's; `tests/unit/expr/test_jsonb_many.py` checks the two agree.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any, cast

import msgspec
import numpy as np
import orjson
import pyarrow as pa

from engine.expr.jsonb import _key_order, canonicalize_text, float_token, in_jsonb_order

_DECODE = msgspec.json.Decoder(float_hook=float_token).decode
_DUMPS = orjson.dumps
_FORMAT = msgspec.json.format


def _compact(text: str | bytes) -> bytes | None:
    """orjson's compact text of `text` in jsonb key order, or None: use the exact path."""
    try:
        return _FORMAT(_DUMPS(in_jsonb_order(_DECODE(text))), indent=0)
    except (msgspec.DecodeError, TypeError, ValueError, RecursionError):
        return None


def canonicalize_many(texts: list[str]) -> pa.StringArray:
    """Canonical jsonb text of every JSON text, as one Arrow string column.

    Raises what `canonicalize_text` raises for the first text that is not valid JSON.
    """
    return utf8_column(canonical_parts(texts))


def _one(t: str) -> bytes:
    c = _compact(t)
    return c if c is not None else canonicalize_text(t).encode()


def canonical_parts(texts: list[str]) -> list[bytes]:
    """Canonical jsonb text (UTF-8) of every JSON text; `utf8_column` makes the column.

    Kept as bytes so a caller can gather the parts of many requests into one column."""
    if not texts:
        return []
    # the shape tier pays for its per-call cost (trying known shapes, learning new ones)
    # over a batch; a lone text takes the path below
    decode = _shape_decoder(texts[0]) if len(texts) >= SHAPE_MIN_TEXTS else None
    if decode is not None:
        try:
            parts: list[bytes] = list(map(_FORMAT0, map(_ENCODE, map(decode, texts))))
        except (msgspec.DecodeError, msgspec.ValidationError, UnicodeEncodeError):
            parts = [_by_shape(decode, t) for t in texts]
        # floats that might not print back as written: the exact parser's float test, in a
        # decode whose hook only raises a flag (C decode, Python per float only)
        _flags.inexact = False
        try:
            list(map(_CHECK, texts))
        except msgspec.DecodeError:  # (the texts are JSON by now; check one by one anyway)
            _flags.inexact = True
        if _flags.inexact:
            for i, t in enumerate(texts):
                _flags.inexact = False
                try:
                    _CHECK(t)
                except msgspec.DecodeError:
                    _flags.inexact = True
                if _flags.inexact:
                    parts[i] = _one(t)
        return parts
    return [_one(t) for t in texts]


# -- the shape tier ----------------------------------------------------------------------------
_SCALAR = str | int | float | bool | None
_ENCODE = msgspec.json.encode
_PLAIN = msgspec.json.Decoder().decode
_flags = threading.local()  # `inexact`: a float of the texts being checked is not exact


def _flag_float(tok: str) -> float:
    """`float_token`'s test (a float only when it prints back as written), as a flag."""
    f = float(tok)
    if not (repr(f) == tok and "e" not in tok and (f or tok[0] != "-")):
        _flags.inexact = True
    return f


_CHECK = msgspec.json.Decoder(float_hook=_flag_float).decode
_MAX_SHAPES = 4
SHAPE_MIN_TEXTS = 8
_MAX_DEPTH = 8
_shapes: tuple[Any, ...] = ()  # Decoder.decode of recent shapes, most recent first
_shapes_lock = threading.Lock()


_FORMAT0 = cast(
    "Callable[[bytes], bytes]", partial(_FORMAT, indent=0)
)  # a C callable: no Python frame per text


class _Unsupported(Exception):
    pass


def _by_shape(decode: Any, t: str) -> bytes:
    try:
        return _FORMAT(_ENCODE(decode(t)), indent=0)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeEncodeError):
        return _one(t)


def _type_of(v: Any, depth: int) -> Any:
    t = type(v)
    if t is dict:
        if depth > _MAX_DEPTH:
            raise _Unsupported
        keys = sorted(v, key=_key_order)
        names = [f"f{i}" for i in range(len(keys))]
        struct = msgspec.defstruct(
            "JsonbShape",
            [(n, _type_of(v[k], depth + 1)) for n, k in zip(names, keys, strict=True)],
            rename=dict(zip(names, keys, strict=True)),
            forbid_unknown_fields=True,
        )
        return struct | None
    if t is list:
        if any(type(x) in (dict, list) for x in v):
            raise _Unsupported
        return list[_SCALAR] | None
    return _SCALAR


def _shape_decoder(text: str) -> Any:
    """The decode function of a known shape that `text` has (learning its shape if it is
    an object of a supported one), or None."""
    global _shapes
    shapes = _shapes
    for i, decode in enumerate(shapes):
        try:
            decode(text)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        if i:
            with _shapes_lock:
                _shapes = (decode, *(d for d in _shapes if d is not decode))
        return decode
    try:
        v = _PLAIN(text)
        if type(v) is not dict:
            return None
        typ = _type_of(v, 0).__args__[0]  # the struct itself, not Optional
        decode = msgspec.json.Decoder(typ).decode
        decode(text)
    except (_Unsupported, msgspec.DecodeError, msgspec.ValidationError, TypeError, ValueError):
        return None
    with _shapes_lock:
        _shapes = (decode, *_shapes[: _MAX_SHAPES - 1])
    return decode


def utf8_column(parts: list[bytes]) -> pa.StringArray:
    """One Arrow string column of UTF-8 texts, built from their joined bytes (no str)."""
    if len(parts) <= 64:  # numpy's fixed cost is not worth it for a few dozen
        return pa.array([p.decode() for p in parts], pa.string())
    lens = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    data = pa.py_buffer(b"".join(parts))
    if offsets[-1] < 2**31:
        return pa.StringArray.from_buffers(len(parts), pa.py_buffer(offsets.astype(np.int32)), data)
    big = pa.LargeStringArray.from_buffers(len(parts), pa.py_buffer(offsets), data)
    return big.cast(pa.string())
