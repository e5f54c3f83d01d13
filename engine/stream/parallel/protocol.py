"""The coordinator <-> worker messages: a small JSON header and Arrow IPC bodies.

A message (request or response) is bytes:

    header length (4 bytes BE) | header (UTF-8 JSON) | body 0 | pad | body 1 | pad | ...

The header carries the command and its plain arguments plus `"bodies"`, the byte length
of each body. The header is padded with spaces and each body with zero bytes to a
multiple of 8 bytes, so every body starts 8-byte aligned in the message: the reader
takes its bodies as views of the message (no copy), and Arrow reads its columns from
them in place, which wants aligned buffers. Bodies are Arrow IPC streams: a stream
chunk is one record batch of its columns plus the ops column (`OPS`); key/value sets
(state shipped to an actor) and write logs (an actor's dirty writes at a checkpoint)
are record batches of binary columns. No
engine object is pickled: a worker rebuilds its operator from the stream node's stored
JSON (`engine.plan.stream_codec`), the same encoding recovery reads from the catalog.

A response is either `{"ok": true, ...}` or `{"ok": false, "error": ..., "sqlstate": ...,
"traceback": ...}` (`remote_error` turns the latter into the coordinator's exception).
A transport that loses its worker raises `WorkerLost` (an `EngineError`): raised inside
a barrier, it rolls the epoch back and recovery starts the worker again.
"""

from __future__ import annotations

import itertools
import json
import struct
from collections import deque
from collections.abc import Sequence
from itertools import compress, repeat
from operator import lt, ne
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa

from engine.chunk import StreamChunk
from engine.errors import EngineError
from engine.state.store import sst_writer

OPS = "__op"
Body = bytes | memoryview
"""A body as `decode` gives it (a view of the message) or as made (bytes)."""
_LEN = struct.Struct(">I")

# write log kinds (`RecordingBatch`)
PUT, DELETE, DELETE_RANGE = 0, 1, 2


class WorkerLost(EngineError):
    """A worker process (or Ray actor) went away: its actors' state since the last
    checkpoint is gone, so the epoch is rolled back and the worker started again."""

    sqlstate: ClassVar[str] = "58000"  # system_error
    timed_out = False  # True: it stopped answering (hung), rather than died


class WorkerFailed(EngineError):
    """An actor raised inside its worker (the worker's message and traceback are logged);
    the epoch is rolled back like any failure inside a barrier."""

    sqlstate: ClassVar[str] = "XX000"


_ALIGN = 8
_PAD = bytes(_ALIGN)


def _padded(n: int) -> int:
    return (n + _ALIGN - 1) & -_ALIGN


def _head(header: dict[str, Any]) -> bytes:
    """The length prefix and JSON of `header`, padded with spaces to a multiple of 8."""
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (_padded(_LEN.size + len(raw)) - _LEN.size - len(raw))
    return _LEN.pack(len(raw)) + raw


def encode(header: dict[str, Any], bodies: Sequence[bytes | memoryview] | None = None) -> bytes:
    """One message: `header` (JSON-serializable) and the `bodies` byte strings (or views)."""
    bodies = bodies or []
    h = dict(header)
    h["bodies"] = [len(b) for b in bodies]
    parts: list[bytes | memoryview] = [_head(h)]
    for b in bodies:
        parts.append(b)
        if len(b) % _ALIGN:
            parts.append(_PAD[: _padded(len(b)) - len(b)])
    return b"".join(parts)


def decode(msg: bytes) -> tuple[dict[str, Any], list[memoryview]]:
    """The header and bodies of a message made by `encode`. The bodies are views of
    `msg` (memoryview slices), not copies: a copy of each body held the interpreter lock
    about 10 ms per 50 MB in the coordinator, which reads every worker's responses."""
    mv = memoryview(msg)
    (n,) = _LEN.unpack_from(mv, 0)
    header: dict[str, Any] = json.loads(bytes(mv[4 : 4 + n]))
    pos = 4 + n
    bodies: list[memoryview] = []
    for size in header.get("bodies", []):
        bodies.append(mv[pos : pos + size])
        pos += _padded(size)
    return header, bodies


def with_timing(msg: bytes, cpu: float, busy: float) -> bytes:
    """`msg` with `"cpu"` (the worker's CPU seconds so far) and `"busy"` (seconds this
    request took) added to its header (the bodies are not decoded)."""
    (n,) = _LEN.unpack_from(msg, 0)
    header = json.loads(msg[4 : 4 + n])
    header["cpu"] = round(cpu, 6)
    header["busy"] = round(busy, 6)
    return b"".join([_head(header), memoryview(msg)[4 + n :]])


def _ipc(batch: pa.RecordBatch) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, batch.schema) as w:
        w.write_batch(batch)
    return sink.getvalue().to_pybytes()  # type: ignore[no-any-return]


def _read(body: Body) -> pa.RecordBatch:
    table = pa.ipc.open_stream(body).read_all()
    batches = table.combine_chunks().to_batches()
    if batches:
        return batches[0]
    return pa.RecordBatch.from_pylist([], schema=table.schema)


def chunk_body(chunk: StreamChunk | None) -> bytes:
    """A stream chunk as an IPC body (b"" for no chunk)."""
    if chunk is None:
        return b""
    return _ipc(chunk.data.append_column(OPS, chunk.ops))


def chunk_from(body: Body) -> StreamChunk | None:
    """The stream chunk of `chunk_body` (None for b"")."""
    if not body:
        return None
    batch = _read(body)
    i = batch.num_columns - 1
    ops = batch.column(i)
    data = pa.RecordBatch.from_arrays(
        batch.columns[:i], schema=pa.schema([batch.schema.field(j) for j in range(i)])
    )
    return StreamChunk(ops, data)


def columns_body(cols: list[pa.Array]) -> bytes:
    """Columns of equal length (decoded COPY data) as an IPC body."""
    names = [f"c{i}" for i in range(len(cols))]
    return _ipc(pa.RecordBatch.from_arrays(cols, names=names))


def columns_from(body: Body) -> list[pa.Array]:
    """The columns of `columns_body`."""
    return list(_read(body).columns)


_KV = pa.schema([pa.field("k", pa.large_binary()), pa.field("v", pa.large_binary())])
_LOG = pa.schema(
    [
        pa.field("kind", pa.uint8()),
        pa.field("a", pa.large_binary()),
        pa.field("b", pa.large_binary()),
    ]
)


def kv_body(keys: list[bytes], values: list[bytes]) -> bytes:
    """Raw store entries (a table's committed key range) as an IPC body."""
    return _ipc(
        pa.RecordBatch.from_arrays(
            [pa.array(keys, pa.large_binary()), pa.array(values, pa.large_binary())], schema=_KV
        )
    )


def kv_from(body: Body) -> tuple[list[bytes], list[bytes]]:
    b = _read(body)
    return b.column(0).to_pylist(), b.column(1).to_pylist()


class RecordingBatch:
    """A WriteBatch stand-in that records puts, deletes and range deletes in order: what
    an actor's tables' `write_dirty` would have written into the checkpoint batch.

    Recorded as Python lists; `sort` turns them into Arrow columns (kind, key, value)
    in key order, which `body` sends as they are and `apply` reads back once."""

    def __init__(self) -> None:
        self.kinds: list[int] = []
        self.a: list[bytes] = []
        self.b: list[bytes | None] = []
        self._cols: tuple[pa.Array, pa.Array, pa.Array] | None = None  # after `sort`

    def put(self, key: bytes, value: bytes) -> None:
        self.kinds.append(PUT)
        self.a.append(key)
        self.b.append(value)

    def put_many(self, keys: Sequence[bytes], values: Sequence[bytes]) -> None:
        """Puts of `keys[i]` -> `values[i]` in order (a table's rows in one call, as
        the checkpoint's `EpochChanges.put_many`)."""
        self.a.extend(keys)
        self.b.extend(values)
        self.kinds.extend(repeat(PUT, len(self.a) - len(self.kinds)))

    def delete(self, key: bytes) -> None:
        self.kinds.append(DELETE)
        self.a.append(key)
        self.b.append(None)

    def delete_range(self, begin: bytes, end: bytes) -> None:
        self.kinds.append(DELETE_RANGE)
        self.a.append(begin)
        self.b.append(end)

    def __len__(self) -> int:
        return len(self.kinds)

    def sort(self) -> None:
        """Order the log by key when it has no range delete (then every record touches one
        key, records of different keys commute, and the sort is stable, so a key's records
        keep their order). RocksDB inserts a batch's keys into its memtable several times
        faster in key order (measured 0.7-1.1 against 1.6-3.0 us per key), in the
        worker's scratch store and again in the coordinator's checkpoint: a join's heads
        come out of its tables in the order the step touched them.

        The keys are sorted as numpy fixed-width byte strings (zero-padded: a key that
        equals another but for trailing zero bytes ties with it, and two different keys'
        records commute), about five times faster than Arrow's sort of binary values."""
        if len(self.kinds) < 2 or DELETE_RANGE in self.kinds:
            return
        width = max(map(len, self.a))
        order = np.argsort(np.array(self.a, dtype=f"S{max(width, 1)}"), kind="stable")
        if (order[1:] > order[:-1]).all():
            return  # already in key order (e.g. a GROUP BY's groups)
        idx = pa.array(order.astype(np.uint32) if len(order) < 1 << 32 else order)
        self._cols = (
            pa.array(self.kinds, pa.uint8()).take(idx),
            pa.array(self.a, pa.large_binary()).take(idx),
            pa.array(self.b, pa.large_binary()).take(idx),
        )

    def columns(self) -> tuple[pa.Array, pa.Array, pa.Array]:
        if self._cols is None:
            return (
                pa.array(self.kinds, pa.uint8()),
                pa.array(self.a, pa.large_binary()),
                pa.array(self.b, pa.large_binary()),
            )
        return self._cols

    def body(self) -> bytes:
        return _ipc(pa.RecordBatch.from_arrays(list(self.columns()), schema=_LOG))

    def apply(self, batch: Any) -> None:
        """Replay the recorded writes, in order (sorted: by key), into `batch`."""
        if self._cols is None:
            replay(self.kinds, self.a, self.b, batch)
            return
        k, a, b = self._cols
        replay(k.to_numpy(zero_copy_only=False).tolist(), a.to_pylist(), b.to_pylist(), batch)


def write_sst(rec: RecordingBatch, path: str) -> bool:
    """The sorted log `rec` (`RecordingBatch.sort`) as an SST file at `path`: each key's
    last put or delete, in strictly increasing key order. False (nothing written) when
    that is not possible: a range delete, or a key order the sort left ambiguous (keys
    equal but for trailing zero bytes); the caller sends the log instead."""
    if not len(rec) or DELETE_RANGE in rec.kinds:
        return False
    k, a, b = rec.columns()
    keys: list[bytes] = a.to_pylist()
    vals: list[bytes | None] = b.to_pylist()
    kinds = k.to_numpy(zero_copy_only=False)
    if len(keys) > 1:
        last = [*map(ne, keys[:-1], keys[1:]), True]  # a key's last record wins
        if not all(last):
            keep = list(compress(range(len(keys)), last))
            keys, vals = [keys[i] for i in keep], [vals[i] for i in keep]
            kinds = kinds[keep]
        if not all(map(lt, keys[:-1], keys[1:])):
            return False
    w = sst_writer(path)
    is_put = kinds == PUT
    if is_put.all():
        deque(map(w.__setitem__, keys, vals), 0)
    else:
        for put, key, val in zip(is_put.tolist(), keys, vals, strict=True):
            if put:
                w[key] = val
            else:
                del w[key]
    w.finish()
    return True


def replay(kinds: list[int], a: list[bytes], b: list[bytes | None], batch: Any) -> int:
    """Apply a write log to `batch`; returns the number of written keys."""
    put, delete, drange = batch.put, batch.delete, batch.delete_range
    for k, x, y in zip(kinds, a, b, strict=True):
        if k == PUT:
            put(x, y)
        elif k == DELETE:
            delete(x)
        else:
            drange(x, y)
    return len(kinds)


def replay_body(body: Body, batch: Any) -> int:
    """Apply the write log of `RecordingBatch.body` to `batch`, in order; runs of puts
    go in one `put_many` call when the batch has one (the checkpoint's `EpochChanges`)."""
    log = _read(body)
    kinds = log.column(0).to_numpy(zero_copy_only=False)
    a, b = log.column(1).to_pylist(), log.column(2).to_pylist()
    put_many = getattr(batch, "put_many", None)
    if put_many is None:
        return replay(kinds.tolist(), a, b, batch)
    is_put = kinds == PUT
    edges = np.flatnonzero(is_put[1:] != is_put[:-1]) + 1
    bounds = [0, *edges.tolist(), len(kinds)]
    for s, e in itertools.pairwise(bounds):
        if s == e:
            continue
        if is_put[s]:
            put_many(a[s:e], b[s:e])
        else:
            replay(kinds[s:e].tolist(), a[s:e], b[s:e], batch)
    return len(kinds)


def log_from(body: Body) -> tuple[list[int], list[bytes], list[bytes | None]]:
    """The write log of `RecordingBatch.body`."""
    b = _read(body)
    return b.column(0).to_pylist(), b.column(1).to_pylist(), b.column(2).to_pylist()


def error_response(e: BaseException, tb: str) -> bytes:
    sqlstate = e.sqlstate if isinstance(e, EngineError) else "XX000"
    message = e.message if isinstance(e, EngineError) else f"{type(e).__name__}: {e}"
    return encode({"ok": False, "error": message, "sqlstate": sqlstate, "traceback": tb})


def remote_error(header: dict[str, Any], worker: str) -> EngineError:
    """The coordinator's exception for a worker's error response."""
    err = WorkerFailed(f"{worker}: {header.get('error', 'failed')}")
    err.sqlstate = str(header.get("sqlstate") or "XX000")  # type: ignore[misc]
    err.detail = header.get("traceback") or None
    return err
