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

Any text the fast path cannot vouch for (invalid JSON, lone surrogates, exponents,
`1.50`, `-0.0`, huge integers) goes through `canonicalize_text`, so results and errors are
exactly the exact path's; `tests/unit/expr/test_jsonb_many.py` checks the two agree.
"""

from __future__ import annotations

import msgspec
import numpy as np
import orjson
import pyarrow as pa

from engine.expr.jsonb import canonicalize_text, float_token, in_jsonb_order

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


def canonical_parts(texts: list[str]) -> list[bytes]:
    """Canonical jsonb text (UTF-8) of every JSON text; `utf8_column` makes the column.

    Kept as bytes so a caller can gather the parts of many requests into one column."""
    parts: list[bytes] = []
    for t in texts:
        c = _compact(t)
        parts.append(c if c is not None else canonicalize_text(t).encode())
    return parts


def utf8_column(parts: list[bytes]) -> pa.StringArray:
    """One Arrow string column of UTF-8 texts, built from their joined bytes (no str)."""
    if len(parts) <= 64:  # numpy's fixed cost is not worth it for a few dozen
        return pa.array([p.decode() for p in parts], pa.string())  # type: ignore[return-value]
    lens = np.fromiter((len(p) for p in parts), dtype=np.int64, count=len(parts))
    offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    data = pa.py_buffer(b"".join(parts))
    if offsets[-1] < 2**31:
        return pa.StringArray.from_buffers(  # type: ignore[no-any-return]
            len(parts), pa.py_buffer(offsets.astype(np.int32)), data
        )
    big = pa.LargeStringArray.from_buffers(len(parts), pa.py_buffer(offsets), data)
    return big.cast(pa.string())  # type: ignore[no-any-return]
