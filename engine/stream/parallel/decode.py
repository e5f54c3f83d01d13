"""A large COPY's text or CSV data decoded in the parallel workers, not in the server.

Why: with a parallel job the server (the coordinator) does a COPY's decoding on top of
its share of every epoch, while the workers wait for their part; decoding is a third of
what the coordinator spends on a COPY into a table with a parallel GROUP BY. Decoding is
stateless, so any worker can do any piece: `decode_in_workers` cuts the data at line
ends into one piece per running worker, sends each worker its piece (`decode` command,
`host.WorkerHost`), and concatenates the columns that come back, in order.

What it takes: only data whose lines are its rows. CSV without the quote character
(a quoted field may hold a line end), text without an escaped line end, neither with the
`\\.` end marker; at least `MIN_BYTES`; a pool with a running worker. Anything else, a piece a
worker refuses (its vectorised path did not vouch for the data: a value the exact
parser must read, or a bad one) and a lost or failing worker give None: the caller
decodes the whole COPY itself, exactly as without workers, which also reports the first
bad value with its line. A worker that died is replaced by the pool; the next barrier
finds its actors gone and the job recovers as after any loss.

Cost to the coordinator: the pieces copied into the requests and the columns out of the
responses (about 24 bytes per BIGINT row back; IPC read without conversion). The pool
serializes this with the barrier's requests (one request in flight per worker).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from engine.catalog.catalog import type_to_json
from engine.errors import EngineError
from engine.stream.copy_decode import OPTION_KEYS
from engine.stream.parallel import protocol
from engine.stream.parallel.pool import WorkerPool
from engine.types import SqlType

MIN_BYTES = 1 << 20
"""Smaller COPY data is decoded in the server: a round trip costs more than it saves."""


def cut(data: bytes, parts: int) -> list[memoryview]:
    """`data` in at most `parts` pieces of about equal size, each ending at a line end
    (the last one where the data ends); no piece is empty. The pieces are views of
    `data`, not copies (the request that carries a piece copies it once)."""
    out: list[memoryview] = []
    view = memoryview(data)
    start = 0
    n = len(data)
    for i in range(1, parts):
        at = data.find(b"\n", max(start, n * i // parts))
        if at < 0 or at + 1 >= n:
            break
        out.append(view[start : at + 1])
        start = at + 1
    out.append(view[start:])
    return [p for p in out if len(p)]


def _escapes(data: bytes, after: bytes) -> bool:
    """A backslash followed by the byte `after` occurs in `data` (what `b"\\" + after in
    data` answers). CPython's search for the two bytes scanned a 4 MB COPY batch of
    digits for 9-15 ms holding the interpreter lock; the one-byte search for a backslash
    runs at memory speed, and when there are some (text format's `\\N`), numpy checks
    the byte after each."""
    first = data.find(b"\\")
    if first < 0:
        return False
    a = np.frombuffer(data, np.uint8)
    at = np.flatnonzero(a[first:-1] == ord("\\")) + first + 1
    return bool((a[at] == after[0]).any())


def suitable(data: bytes, opts: dict[str, Any]) -> bool:
    """Whether `data`'s lines are its rows, so it may be cut at any line end."""
    fmt = opts.get("format", "text")
    if len(data) < MIN_BYTES or _escapes(data, b"."):
        return False
    if fmt == "csv":
        quote = str(opts.get("quote", '"')).encode()
        return len(quote) == 1 and quote not in data
    return fmt == "text" and not _escapes(data, b"\n")  # an escaped line end is in a value


def decode_in_workers(
    pool: WorkerPool | None,
    data: bytes,
    opts: dict[str, Any],
    types: list[SqlType],
    utc: bool,
) -> list[pa.Array] | None:
    """The COPY's columns decoded by the pool's running workers, or None (module
    docstring: the caller decodes it then). `utc`: the session's time zone is UTC."""
    if pool is None or not suitable(data, opts):
        return None
    workers = sorted(pool.workers.copy())  # started by the barrier thread meanwhile
    if not workers:
        return None
    pieces = cut(data, len(workers))
    base = {k: opts[k] for k in OPTION_KEYS if k in opts}
    jtypes = [type_to_json(t) for t in types]
    reqs: dict[int, bytes] = {}
    for i, (w, piece) in enumerate(zip(workers, pieces, strict=False)):
        o = dict(base, header=bool(base.get("header")) and i == 0)
        head = {"cmd": "decode", "opts": o, "types": jtypes, "utc": utc}
        reqs[w] = protocol.encode(head, [piece])
    try:
        res = pool.call(reqs, stateless=True)
    except EngineError:
        return None  # lost or failing: decoded here; the pool replaces a lost worker
    parts: list[list[pa.Array]] = []
    for w in sorted(reqs):
        header, bodies = res[w]
        if header.get("refused"):
            return None
        parts.append(protocol.columns_from(bodies[0]))
    if len(parts) == 1:
        return parts[0]
    return [pa.concat_arrays([p[j] for p in parts]) for j in range(len(types))]
