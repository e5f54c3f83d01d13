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
sets per nesting level) are msgspec Structs whose fields are declared in jsonb key order,
decoded with unknown and missing fields forbidden. A string, boolean or null value is
decoded as such (a field may also be null), so it is written back as jsonb writes it
(msgspec's string escaping equals `json.dumps(ensure_ascii=False)`); a number or an array
is a `msgspec.Raw`, its token exactly as written (msgspec still checks it is valid JSON),
so `1.50` keeps its digits without Python per number. `map(decode)`, `map(encode)` and
`map(format)` then produce every text in C. A copied token is not canonical only when it
holds an exponent or a negative zero (`1e3` is 1000, `-0.0` is 0.0), an object (in an
array, or where the shape has a number) or an escape: one regex over the joined tokens
of each Raw field finds the texts to redo by the path above. A text of another shape
fails to decode and takes that path too (the first text of a batch teaches its shape).

Any text the fast path cannot vouch for (invalid JSON, escapes, lone surrogates,
exponents, `-0.0`) goes through `canonicalize_text`, so results and errors are
exactly the exact path's; `tests/unit/expr/test_jsonb_many.py` checks the two agree.
"""

from __future__ import annotations

import operator
import re
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
    shape = _shape_decoder(texts[0]) if len(texts) >= SHAPE_MIN_TEXTS else None
    if shape is None:
        return [_one(t) for t in texts]
    decode, raw_fields = shape
    try:
        objs = list(map(decode, texts))
        parts: list[bytes] = list(map(_FORMAT0, map(_ENCODE, objs)))
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeEncodeError):
        return [_by_shape(decode, raw_fields, t) for t in texts]
    # tokens copied as written: redo the texts where one of them may not be canonical
    for get in raw_fields:
        if _ODD.search(b"\x00".join(map(get, objs))) is not None:
            for i, o in enumerate(objs):
                if _ODD.search(get(o)) is not None:
                    parts[i] = _one(texts[i])
    return parts


# -- the shape tier ----------------------------------------------------------------------------
_ENCODE = msgspec.json.encode
_PLAIN = msgspec.json.Decoder().decode
_ODD = re.compile(rb"[0-9][eE]|-0(?:\.0+)?(?![0-9.])|[{\\]")
"""In a token copied as written, what makes it differ from its jsonb text: a number in
exponent form (`1e3` is 1000) or negative zero (`-0.0` is 0.0), an object (keys in
another order), an escape (`\\u00e9` is `é`). Such text inside a string in an array
matches too: only slower."""
_MAX_SHAPES = 4
SHAPE_MIN_TEXTS = 8
_MAX_DEPTH = 8
_shapes: tuple[tuple[Any, tuple[Any, ...]], ...] = ()  # (decode, Raw field getters), recent first
_shapes_lock = threading.Lock()


_FORMAT0 = cast(
    "Callable[[bytes], bytes]", partial(_FORMAT, indent=0)
)  # a C callable: no Python frame per text


class _Unsupported(Exception):
    pass


def _by_shape(decode: Any, raw_fields: tuple[Any, ...], t: str) -> bytes:
    """One text of a batch that could not be done at once: by its shape, else exactly."""
    try:
        o = decode(t)
        out = _FORMAT(_ENCODE(o), indent=0)
    except (msgspec.DecodeError, msgspec.ValidationError, UnicodeEncodeError):
        return _one(t)
    if any(_ODD.search(get(o)) is not None for get in raw_fields):
        return _one(t)
    return out


def _type_of(v: Any, depth: int, path: str, raw: list[str]) -> Any:
    """The msgspec type of a value's shape (see the module docstring); the dotted paths of
    its `Raw` fields are added to `raw`."""
    t = type(v)
    if t is dict:
        if depth > _MAX_DEPTH:
            raise _Unsupported
        keys = sorted(v, key=_key_order)
        names = [f"f{i}" for i in range(len(keys))]
        fields = [
            (n, _type_of(v[k], depth + 1, f"{path}{n}.", raw))
            for n, k in zip(names, keys, strict=True)
        ]
        return msgspec.defstruct(
            "JsonbShape",
            fields,
            rename=dict(zip(names, keys, strict=True)),
            forbid_unknown_fields=True,
        )
    if t is str:
        return str | None
    if t is bool:
        return bool | None
    if v is None:
        return str | bool | None
    raw.append(path[:-1])  # a number or an array: its token as written
    return msgspec.Raw


def _shape_decoder(text: str) -> tuple[Any, tuple[Any, ...]] | None:
    """(decode, getters of its Raw fields) of a known shape that `text` has (learning its
    shape if it is an object), or None."""
    global _shapes
    shapes = _shapes
    for i, shape in enumerate(shapes):
        try:
            shape[0](text)
        except (msgspec.DecodeError, msgspec.ValidationError):
            continue
        if i:
            with _shapes_lock:
                _shapes = (shape, *(d for d in _shapes if d is not shape))
        return shape
    try:
        v = _PLAIN(text)
        if type(v) is not dict:
            return None
        raw: list[str] = []
        decode = msgspec.json.Decoder(_type_of(v, 0, "", raw)).decode
        decode(text)
    except (_Unsupported, msgspec.DecodeError, msgspec.ValidationError, TypeError, ValueError):
        return None
    shape = (decode, tuple(operator.attrgetter(p) for p in raw))
    with _shapes_lock:
        _shapes = (shape, *_shapes[: _MAX_SHAPES - 1])
    return shape


def utf8_column(parts: list[bytes]) -> pa.StringArray:
    """One Arrow string column of UTF-8 texts, built from their joined bytes (no str)."""
    if len(parts) <= 64:  # numpy's fixed cost is not worth it for a few dozen
        return pa.array([p.decode() for p in parts], pa.string())
    lens = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    data = pa.py_buffer(b"".join(parts))
    if offsets[-1] < 2**31:
        return pa.StringArray.from_buffers(len(parts), pa.py_buffer(offsets.astype(np.int32)), data)
    big = pa.LargeStringArray.from_buffers(len(parts), pa.py_buffer(offsets), data)
    return big.cast(pa.string())
