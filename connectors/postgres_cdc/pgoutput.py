"""Decoding pgoutput (logical replication protocol version 1) into Arrow chunks.

pgoutput sends one message per row change, with column values in PostgreSQL's text
output format. `TxnDecoder.feed(payload)` parses a message: Relation messages map the
upstream columns to the Swell table's fields by name; Insert/Update/Delete append
`(op, values)` to the open transaction; Commit moves the transaction to the finished rows
and records its end LSN (the position a checkpoint may store: PostgreSQL skips the
transactions that committed before the LSN a stream restarts from). `take_rows()` hands
the finished rows over; `to_chunks(rows)` turns a poll batch into as few chunks as the
order of operations allows (one run of upserts, one run of deletes, ...), with each column
converted from text by one Arrow cast for the whole run (`text_to_arrow`).

How changes map onto a table keyed by primary key: an insert and an update are upserts
(the table's MaterializeOp overwrites the row of that key); an update that changes the key
(pgoutput sends the old key) is a delete of the old key, then an upsert; a delete carries
the key columns only (others NULL), and the table deletes its stored row of that key.
A TRUNCATE of the table (pgoutput's Truncate message, also one that names several
tables) becomes a `TruncateChunk` in its place among the rows: the table deletes every
row it holds at that point, so rows inserted after it in the same transaction stay.
Unchanged TOASTed values of an update (sent as "unchanged") are not supported: the table
needs REPLICA IDENTITY FULL upstream for them; such rows are reported, not guessed.
"""

from __future__ import annotations

import logging
import struct
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine.chunk import Op, StreamChunk, TruncateChunk
from engine.types import Field, TypeKind, arrow_schema

log = logging.getLogger("swell.postgres_cdc")

_I32 = struct.Struct("!i")
_I16 = struct.Struct("!h")
_I64 = struct.Struct("!q")
Row = list[str | None]
TRUNCATE = 0  # the op of a TRUNCATE of the table in a transaction's rows (no values)


def _cstr(b: bytes, i: int) -> tuple[str, int]:
    j = b.index(b"\0", i)
    return b[i:j].decode(), j + 1


class TxnDecoder:
    """pgoutput messages of one table's stream -> finished (op, values) rows, in order."""

    def __init__(self, fields: list[Field], schema: str, table: str) -> None:
        self.names = [f.name for f in fields]
        self.schema, self.table = schema, table
        self.relid: int | None = None
        self.pos: list[int] = []  # Swell field i <- upstream column pos[i]
        self.txn: list[tuple[int, Row]] = []
        self.done: list[tuple[int, Row]] = []
        self.end_lsn = 0  # end LSN of the last commit moved to `done`
        self.unchanged_toast = 0

    def feed(self, b: bytes) -> None:
        kind = b[:1]
        if kind == b"B":
            self.txn = []
        elif kind == b"C":
            self.end_lsn = _I64.unpack_from(b, 10)[0]
            if self.txn:
                self.done.extend(self.txn)
                self.txn = []
        elif kind == b"R":
            self._relation(b)
        elif kind in (b"I", b"U", b"D"):
            if _I32.unpack_from(b, 1)[0] == self.relid:
                self._change(kind, b)
        elif kind == b"T":
            n = _I32.unpack_from(b, 1)[0]
            ids = struct.unpack_from(f"!{n}i", b, 6)
            if self.relid in ids:
                self.txn.append((TRUNCATE, []))

    def take_rows(self) -> list[tuple[int, Row]]:
        rows, self.done = self.done, []
        return rows

    def _relation(self, b: bytes) -> None:
        relid = _I32.unpack_from(b, 1)[0]
        ns, i = _cstr(b, 5)
        name, i = _cstr(b, i)
        if (ns, name) != (self.schema, self.table):
            return
        i += 1  # replica identity
        (n,) = _I16.unpack_from(b, i)
        i += 2
        cols = []
        for _ in range(n):
            i += 1  # flags
            c, i = _cstr(b, i)
            i += 8  # type oid, typmod
            cols.append(c)
        self.relid = relid
        self.pos = [cols.index(f) for f in self.names]

    def _tuple(self, b: bytes, i: int) -> tuple[Row, int]:
        (n,) = _I16.unpack_from(b, i)
        i += 2
        vals: list[str | None] = []
        for _ in range(n):
            k = b[i]
            i += 1
            if k == 116:  # 't'
                (ln,) = _I32.unpack_from(b, i)
                vals.append(b[i + 4 : i + 4 + ln].decode())
                i += 4 + ln
            else:
                if k == 117:  # 'u': unchanged TOAST value
                    self.unchanged_toast += 1
                vals.append(None)
        return [vals[p] if p < len(vals) else None for p in self.pos], i

    def _change(self, kind: bytes, b: bytes) -> None:
        i = 5
        if kind == b"I":
            row, _ = self._tuple(b, i + 1)
            self.txn.append((Op.INSERT, row))
        elif kind == b"D":
            row, _ = self._tuple(b, i + 1)
            self.txn.append((Op.DELETE, row))
        else:
            if b[i : i + 1] in (b"K", b"O"):
                old, i = self._tuple(b, i + 1)
                self.txn.append((Op.DELETE, old))
            row, _ = self._tuple(b, i + 1)
            self.txn.append((Op.INSERT, row))


def to_chunks(rows: list[tuple[int, Row]], fields: list[Field]) -> list[StreamChunk]:
    """Runs of equal ops as chunks (a table applies a chunk's upserts and deletes per key
    without regard to their order, so an op change starts a new chunk)."""
    out: list[StreamChunk] = []
    start = 0
    n = len(rows)
    while start < n:
        op = rows[start][0]
        if op == TRUNCATE:
            out.append(TruncateChunk.marker(arrow_schema(fields)))
            start += 1
            continue
        end = start + 1
        while end < n and rows[end][0] == op:
            end += 1
        run = [r for _op, r in rows[start:end]]
        cols = list(zip(*run)) if run else [() for _ in fields]
        batch = text_to_arrow([pa.array(c, pa.string()) for c in cols], fields)
        out.append(StreamChunk.inserts(batch) if op == Op.INSERT else StreamChunk.deletes(batch))
        start = end
    return out


UNSUPPORTED = (TypeKind.INTERVAL, TypeKind.LIST)  # refused at CREATE (no text decoding yet)


def text_to_arrow(cols: list[pa.Array], fields: list[Field]) -> pa.RecordBatch:
    """PostgreSQL text-format columns (as Arrow strings) -> a batch of the fields' types."""
    schema = arrow_schema(fields)
    out = []
    for arr, f, af in zip(cols, fields, schema):
        kind = f.type.kind
        if kind is TypeKind.BOOLEAN:
            out.append(pc.equal(arr, "t"))
        elif kind is TypeKind.BYTEA:
            out.append(
                pa.array(
                    [None if v is None else bytes.fromhex(v[2:]) for v in arr.to_pylist()],
                    af.type,
                )
            )
        elif kind is TypeKind.TIME:  # no string -> time cast in Arrow: via a timestamp
            ts = pc.cast(pc.binary_join_element_wise("1970-01-01 ", arr, ""), pa.timestamp("us"))
            out.append(pc.cast(pc.cast(ts, pa.int64()), pa.time64("us")).cast(af.type))
        elif pa.types.is_floating(af.type):
            fixed = pc.replace_substring(arr, "Infinity", "inf")
            out.append(pc.cast(fixed, af.type))
        elif pa.types.is_decimal(af.type):
            out.append(_decimal(arr, af.type))
        else:
            out.append(pc.cast(arr, af.type))
    return pa.RecordBatch.from_arrays(out, schema=schema)


def _decimal(arr: pa.Array, t: pa.DataType) -> pa.Array:
    """numeric text -> the decimal type; values with more fractional digits than its scale
    are rounded half away from zero (as PostgreSQL rounds into numeric(p, s)), per value
    only for a batch Arrow's exact cast refuses."""
    try:
        return pc.cast(arr, t)
    except pa.ArrowInvalid:
        q = Decimal(1).scaleb(-t.scale)
        vals = [
            None if v is None else Decimal(v).quantize(q, ROUND_HALF_UP) for v in arr.to_pylist()
        ]
        return pa.array(vals, t)


def snapshot_csv(data: Any, fields: list[Field]) -> list[pa.RecordBatch]:
    """A `COPY ... TO STDOUT (FORMAT csv)` result -> batches (NULL is an unquoted empty
    field, an empty string a quoted one)."""
    import pyarrow.csv as pcsv

    names = [f.name for f in fields]
    t = pcsv.read_csv(
        data,
        read_options=pcsv.ReadOptions(column_names=names, block_size=8 << 20),
        convert_options=pcsv.ConvertOptions(
            column_types={n: pa.string() for n in names},
            null_values=[""],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,
        ),
    )
    return [text_to_arrow(list(b.columns), fields) for b in t.to_batches(max_chunksize=65536)]
