"""Stream chunks: the unit of data that moves between operators.

A `StreamChunk` is an Arrow `RecordBatch` of rows plus a parallel `ops` array (int8).
The op says what the row means to the relation downstream:

* `Op.INSERT` (+)  the row is added
* `Op.DELETE` (-)  the row is removed
* `Op.UPDATE_DELETE` (U-) / `Op.UPDATE_INSERT` (U+)  an update, old then new row. The pair
  is adjacent and shares the stream key. An operator that drops one half of a pair
  (a filter) must turn the surviving half into a plain DELETE or INSERT.

Operators read chunks in the Z-set view: each row carries a weight, `+1` for INSERT/U+ and
`-1` for DELETE/U-. Within one epoch the order of rows never changes the net result
downstream, so operators may consolidate a whole epoch's input before touching state.

Tests write chunks as text, one row per line: `+ 1 a`, `- 1 a`, `U- 1 a`, `U+ 1 b`, with
`.` for NULL (see `StreamChunk.from_pretty`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.types import Field, SqlType, TypeKind, arrow_schema


class Op(IntEnum):
    INSERT = 1
    DELETE = 2
    UPDATE_DELETE = 3
    UPDATE_INSERT = 4

    @property
    def sign(self) -> int:
        return 1 if self in (Op.INSERT, Op.UPDATE_INSERT) else -1


_PRETTY_OPS = {"+": Op.INSERT, "-": Op.DELETE, "U-": Op.UPDATE_DELETE, "U+": Op.UPDATE_INSERT}
_OP_PRETTY = {v: k for k, v in _PRETTY_OPS.items()}

# ops -> weights lookup: index by op value
_SIGN_TABLE = np.array([0, 1, -1, -1, 1], dtype=np.int8)


@dataclass(frozen=True, slots=True)
class StreamChunk:
    """Rows with ops. `data`'s columns follow the producing operator's schema."""

    ops: pa.Array  # int8, one per row
    data: pa.RecordBatch

    def __len__(self) -> int:
        return self.data.num_rows

    @property
    def num_rows(self) -> int:
        return self.data.num_rows

    # -- construction --------------------------------------------------------------
    @classmethod
    def inserts(cls, data: pa.RecordBatch | pa.Table) -> StreamChunk:
        batch = _as_batch(data)
        return cls(pa.array(np.full(batch.num_rows, Op.INSERT, dtype=np.int8)), batch)

    @classmethod
    def deletes(cls, data: pa.RecordBatch | pa.Table) -> StreamChunk:
        batch = _as_batch(data)
        return cls(pa.array(np.full(batch.num_rows, Op.DELETE, dtype=np.int8)), batch)

    @classmethod
    def from_weights(cls, data: pa.RecordBatch | pa.Table, weights: np.ndarray) -> StreamChunk:
        """Rows with weights +1/-1 become INSERT/DELETE."""
        batch = _as_batch(data)
        ops = np.where(np.asarray(weights) > 0, Op.INSERT, Op.DELETE).astype(np.int8)
        return cls(pa.array(ops), batch)

    @classmethod
    def empty(cls, schema: pa.Schema) -> StreamChunk:
        return cls(pa.array([], pa.int8()), pa.RecordBatch.from_pylist([], schema=schema))

    @staticmethod
    def concat(chunks: list[StreamChunk]) -> StreamChunk | None:
        chunks = [c for c in chunks if c is not None and len(c) > 0]
        if not chunks:
            return None
        if len(chunks) == 1:
            return chunks[0]
        schema = chunks[0].data.schema
        for c in chunks[1:]:
            if not c.data.schema.equals(schema):
                raise pa.ArrowInvalid(f"schema mismatch: {c.data.schema} vs {schema}")
        # column by column: each is one native call that holds the interpreter lock, so
        # the other threads get it between columns (one call over a 3M-row COPY backlog
        # held it for 100+ ms)
        cols = [pa.concat_arrays([c.data.column(i) for c in chunks]) for i in range(len(schema))]
        ops = pa.concat_arrays([c.ops for c in chunks])
        return StreamChunk(ops, pa.RecordBatch.from_arrays(cols, schema=schema))

    # -- views ---------------------------------------------------------------------
    def weights(self) -> np.ndarray:
        """+1/-1 per row (Z-set weights)."""
        return _SIGN_TABLE[self.ops.to_numpy(zero_copy_only=False)]

    def filter(self, mask: pa.Array) -> StreamChunk:
        """Keep rows where mask is true; a lone half of an update pair becomes a plain op."""
        mask = pc.fill_null(mask, False)
        ops = self.ops.to_numpy(zero_copy_only=False).copy()
        keep = mask.to_numpy(zero_copy_only=False)
        if (ops >= Op.UPDATE_DELETE).any():
            _fix_broken_pairs(ops, keep)
        return StreamChunk(pa.array(ops[keep]), self.data.filter(mask))

    def with_data(self, data: pa.RecordBatch) -> StreamChunk:
        return StreamChunk(self.ops, data)

    def to_rows(self) -> list[tuple[Op, tuple[Any, ...]]]:
        """Python rows (tests, small results); never in a hot path."""
        cols = [c.to_pylist() for c in self.data.columns]
        ops = self.ops.to_pylist()
        return [(Op(ops[i]), tuple(c[i] for c in cols)) for i in range(len(ops))]

    # -- text form -----------------------------------------------------------------
    @classmethod
    def from_pretty(cls, text: str, fields: list[Field]) -> StreamChunk:
        """Parse `+ 1 a` lines into a chunk with the given fields; `.` is NULL.

        Values are parsed by their field type: integers, floats, `t`/`f` booleans,
        strings as written (no spaces). Blank lines and `#` comments are skipped.
        """
        ops: list[int] = []
        cols: list[list[Any]] = [[] for _ in fields]
        for raw in text.strip().splitlines():
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            ops.append(_PRETTY_OPS[parts[0]])
            vals = parts[1:]
            if len(vals) != len(fields):
                raise ValueError(f"row {line!r} has {len(vals)} values, schema has {len(fields)}")
            for i, (v, f) in enumerate(zip(vals, fields, strict=True)):
                cols[i].append(_parse_pretty(v, f.type))
        schema = arrow_schema(fields)
        arrays = [pa.array(c, type=schema.field(i).type) for i, c in enumerate(cols)]
        return cls(pa.array(ops, pa.int8()), pa.RecordBatch.from_arrays(arrays, schema=schema))

    def to_pretty(self) -> str:
        """One line per row, `+ 1 a`; NULL prints `.`."""
        lines = []
        for op, row in self.to_rows():
            vals = ["." if v is None else _fmt_pretty(v) for v in row]
            lines.append(" ".join([_OP_PRETTY[op], *vals]))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"StreamChunk(\n{self.to_pretty()}\n)"


@dataclass(frozen=True, slots=True)
class TruncateChunk(StreamChunk):
    """A marker without rows, queued into a table between ordinary chunks: "delete every
    row the table holds at this point" (an upstream TRUNCATE replicated by a CDC source).
    Only `engine.stream.graph.TableFlow` interprets it (it becomes deletes of the stored
    rows when the barrier drains the table); no other operator ever sees one."""

    @classmethod
    def marker(cls, schema: pa.Schema) -> TruncateChunk:
        return cls(pa.array([], pa.int8()), pa.RecordBatch.from_pylist([], schema=schema))


def _as_batch(data: pa.RecordBatch | pa.Table) -> pa.RecordBatch:
    if isinstance(data, pa.RecordBatch):
        return data
    data = data.combine_chunks()
    batches = data.to_batches()
    if not batches:
        return pa.RecordBatch.from_pylist([], schema=data.schema)
    return batches[0]


def _fix_broken_pairs(ops: np.ndarray, keep: np.ndarray) -> None:
    """Turn surviving halves of U-/U+ pairs whose partner is filtered out into D/I."""
    n = len(ops)
    ud = np.nonzero(ops == Op.UPDATE_DELETE)[0]
    for i in ud:  # pairs are rare relative to rows; loop over pairs only
        j = i + 1
        if j >= n:
            ops[i] = Op.DELETE
            continue
        if keep[i] and not keep[j]:
            ops[i] = Op.DELETE
        elif keep[j] and not keep[i]:
            ops[j] = Op.INSERT


def _parse_pretty(v: str, t: SqlType) -> Any:
    if v == ".":
        return None
    k = t.kind
    if t.is_integer:
        return int(v)
    if t.is_float:
        return float(v)
    if k is TypeKind.NUMERIC:
        from decimal import Decimal

        return Decimal(v)
    if k is TypeKind.BOOLEAN:
        return v in ("t", "true")
    return v


def _fmt_pretty(v: Any) -> str:
    if isinstance(v, bool):
        return "t" if v else "f"
    return str(v)
