"""Frames between the server process and its webhook acceptor processes.

One `socket.socketpair()` per acceptor (the child inherits its end; nothing on the file
system, so no other process can connect). A frame is `!BII` (kind, header length, payload
length), a JSON header and an opaque payload (Arrow IPC stream bytes for a write, a
pickled relation for a resolve answer). Only the server's frames carry pickles: the
acceptor is the server's own child and trusts it; the server never unpickles.

Kinds (child -> server): READY, RESOLVE, WRITE, STATS; (server -> child): RESOLVED, ACK,
CLOSE. See `pool.py` (server side) and `acceptor.py` (child side) for their fields.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import orjson
import pyarrow as pa

READY, RESOLVE, WRITE, STATS, RESOLVED, ACK, CLOSE = range(1, 8)
_HEAD = struct.Struct("!BII")
STALE = -1
"""ACK status: the acceptor's copy of the table (schema, VALIDATE, secret) is out of date."""


def frame(kind: int, header: dict[str, Any], payload: bytes = b"") -> bytes:
    h = orjson.dumps(header)
    return _HEAD.pack(kind, len(h), len(payload)) + h + payload


async def read_frame(reader: asyncio.StreamReader) -> tuple[int, dict[str, Any], bytes]:
    """The next frame; raises asyncio.IncompleteReadError at EOF."""
    kind, hl, pl = _HEAD.unpack(await reader.readexactly(_HEAD.size))
    header = orjson.loads(await reader.readexactly(hl)) if hl else {}
    payload = await reader.readexactly(pl) if pl else b""
    return kind, header, payload


def ipc_bytes(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return sink.getvalue().to_pybytes()  # type: ignore[no-any-return]


def ipc_batch(payload: bytes) -> pa.RecordBatch:
    reader = pa.ipc.open_stream(pa.py_buffer(payload))
    batches = list(reader)
    if len(batches) == 1:
        return batches[0]
    return pa.Table.from_batches(batches, schema=reader.schema).combine_chunks().to_batches()[0]
