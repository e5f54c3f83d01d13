"""Test-only helpers for operator tests: tiny expressions, chunk comparison, Z-set integration.

The expressions here stand in for `engine.expr` (built in parallel) and implement just
the `Expr` protocol the operators rely on. `DictStore`/`DictBatch` are a dict-backed
stand-in for the RocksDB store, enough to round-trip `StateTable.write_dirty`/`load`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.chunk import Op, StreamChunk
from engine.types import BOOLEAN, Field, SqlType


@dataclass
class Ctx:
    timezone: str = "UTC"


@dataclass
class ColRef:
    index: int
    type: SqlType

    def eval(self, batch: pa.RecordBatch, ctx: Any) -> pa.Array:
        return batch.column(self.index)

    def __repr__(self) -> str:
        return f"${self.index}"


@dataclass
class Gt:
    left: Any
    value: Any
    type: SqlType = BOOLEAN

    def eval(self, batch: pa.RecordBatch, ctx: Any) -> pa.Array:
        return pc.greater(self.left.eval(batch, ctx), self.value)

    def __repr__(self) -> str:
        return f"({self.left!r} > {self.value!r})"


@dataclass
class Mul:
    left: Any
    value: int
    type: SqlType

    def eval(self, batch: pa.RecordBatch, ctx: Any) -> pa.Array:
        return pc.multiply(self.left.eval(batch, ctx), self.value).cast(self.type.arrow)


def units(text: str) -> list[str]:
    """Lines of a pretty chunk grouped so a `U-` line and its `U+` line stay one unit."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    out: list[str] = []
    i = 0
    while i < len(lines):
        if lines[i].startswith("U-"):
            assert i + 1 < len(lines) and lines[i + 1].startswith("U+"), f"broken pair in {text}"
            out.append(lines[i] + " | " + lines[i + 1])
            i += 2
        else:
            out.append(lines[i])
            i += 1
    return sorted(out)


def assert_chunk(chunk: StreamChunk | None, expected: str | None) -> None:
    """Order-insensitive comparison (update pairs compared as adjacent units)."""
    if expected is None:
        assert chunk is None, f"expected no output, got\n{chunk}"
        return
    assert chunk is not None, f"expected\n{expected}\ngot no output"
    assert units(chunk.to_pretty()) == units(expected)


def chunk(text: str, fields: list[Field]) -> StreamChunk:
    return StreamChunk.from_pretty(text, fields)


def integrate(acc: Counter[tuple[Any, ...]], out: StreamChunk | None) -> None:
    """Apply a delta to a multiset; the multiset never goes negative."""
    if out is None:
        return
    rows = out.to_rows()
    for i, (op, row) in enumerate(rows):
        if op is Op.UPDATE_DELETE:
            assert i + 1 < len(rows) and rows[i + 1][0] is Op.UPDATE_INSERT, "unpaired U-"
        if op is Op.UPDATE_INSERT:
            assert i > 0 and rows[i - 1][0] is Op.UPDATE_DELETE, "unpaired U+"
        acc[row] += op.sign
        assert acc[row] >= 0, f"row {row} retracted below zero"
        if acc[row] == 0:
            del acc[row]


def make_chunk(fields: list[Field], ops: list[Op], rows: list[tuple[Any, ...]]) -> StreamChunk:
    from engine.stream.operators.frames import batch_from_rows

    return StreamChunk(pa.array([int(o) for o in ops], pa.int8()), batch_from_rows(fields, rows))


class DictBatch:
    def __init__(self) -> None:
        self.ops: list[tuple[str, bytes, bytes | None]] = []

    def put(self, key: bytes, value: bytes) -> None:
        self.ops.append(("put", key, value))

    def delete(self, key: bytes) -> None:
        self.ops.append(("del", key, None))

    def delete_range(self, start: bytes, end: bytes) -> None:
        self.ops.append(("range", start, end))


class DictStore:
    def __init__(self) -> None:
        self.data: dict[bytes, bytes] = {}

    def write(self, batch: DictBatch) -> None:
        for kind, k, v in batch.ops:
            if kind == "put":
                assert v is not None
                self.data[k] = v
            elif kind == "del":
                self.data.pop(k, None)
            else:
                assert v is not None
                for key in [x for x in self.data if k <= x < v]:
                    del self.data[key]

    def scan_prefix(self, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
        for k in sorted(self.data):
            if k.startswith(prefix):
                yield k, self.data[k]

    def checkpoint(self, tables: list[Any]) -> None:
        batch = DictBatch()
        for t in tables:
            t.write_dirty(batch)
        self.write(batch)
