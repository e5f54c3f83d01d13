"""Byte encodings for state keys and values (placeholder: pickle; the state owner may replace).

Key layout in the store: `table_prefix(table_id) + encode_key(key_tuple)`. The prefix is
the 4-byte big-endian table id, so one table is one contiguous key range and
`table_prefix(id + 1)` is its exclusive upper bound. Key bytes must be deterministic
(equal tuples give equal bytes); ordering inside a table is not relied upon.
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

_PROTO = pickle.HIGHEST_PROTOCOL


def table_prefix(table_id: int) -> bytes:
    return struct.pack(">I", table_id)


def encode_key(key: tuple[Any, ...]) -> bytes:
    return pickle.dumps(key, _PROTO)


def decode_key(data: bytes) -> tuple[Any, ...]:
    return pickle.loads(data)


def encode_value(value: tuple[Any, ...]) -> bytes:
    return pickle.dumps(value, _PROTO)


def decode_value(data: bytes) -> tuple[Any, ...]:
    return pickle.loads(data)
