"""pgoutput decoding: transactions become chunks only at their Commit, key changes become a
delete and an upsert, runs of equal ops share a chunk, text values are cast per column."""

from __future__ import annotations

import struct
from decimal import Decimal

import pyarrow as pa

from connectors.postgres_cdc.pgoutput import TxnDecoder, snapshot_csv, to_chunks
from engine.chunk import Op
from engine.sql.clauses import parse_ddl_clauses
from engine.types import BIGINT, BOOLEAN, INT, VARCHAR, Field, SqlType, TypeKind

FIELDS = [Field("id", INT), Field("v", VARCHAR), Field("ok", BOOLEAN)]


def relation(relid: int) -> bytes:
    cols = [("ok", 16), ("id", 23), ("extra", 20), ("v", 25)]  # upstream order differs
    b = b"R" + struct.pack("!i", relid) + b"public\0t\0" + b"d" + struct.pack("!h", len(cols))
    for name, oid in cols:
        b += b"\0" + name.encode() + b"\0" + struct.pack("!ii", oid, -1)
    return b


def tup(*vals: str | None) -> bytes:
    b = struct.pack("!h", len(vals))
    for v in vals:
        b += b"n" if v is None else b"t" + struct.pack("!i", len(v.encode())) + v.encode()
    return b


def begin() -> bytes:
    return b"B" + struct.pack("!qqi", 0, 0, 1)


def commit(end: int) -> bytes:
    return b"C" + b"\0" + struct.pack("!qqq", end - 8, end, 0)


def test_transactions_key_changes_and_runs() -> None:
    d = TxnDecoder(FIELDS, "public", "t")
    d.feed(relation(7))
    d.feed(b"R" + struct.pack("!i", 9) + b"public\0other\0d\0\0")
    d.feed(begin())
    d.feed(b"I" + struct.pack("!i", 7) + b"N" + tup("t", "1", "x", "a"))
    d.feed(b"I" + struct.pack("!i", 9) + b"N" + tup("zzz"))  # another table: ignored
    assert d.take_rows() == []  # nothing before the Commit
    d.feed(b"I" + struct.pack("!i", 7) + b"N" + tup("f", "2", None, "b"))
    d.feed(commit(100))
    d.feed(begin())
    d.feed(b"U" + struct.pack("!i", 7) + b"N" + tup("t", "1", None, "a2"))
    d.feed(
        b"U"
        + struct.pack("!i", 7)
        + b"K"
        + tup(None, "2", None, None)
        + b"N"
        + tup("f", "3", None, "b")
    )
    d.feed(b"D" + struct.pack("!i", 7) + b"K" + tup(None, "1", None, None))
    d.feed(commit(200))
    d.feed(begin())
    d.feed(b"I" + struct.pack("!i", 7) + b"N" + tup("t", "9", None, "open"))  # not committed
    d.feed(b"T" + struct.pack("!i", 2) + b"\0" + struct.pack("!ii", 9, 7))
    rows = d.take_rows()  # the open transaction (insert, truncate) is not handed over
    assert d.end_lsn == 200
    assert [op for op, _ in rows] == [
        Op.INSERT,
        Op.INSERT,
        Op.INSERT,
        Op.DELETE,
        Op.INSERT,
        Op.DELETE,
    ]
    chunks = to_chunks(rows, FIELDS)
    got = [(c.ops.to_pylist(), c.data.to_pylist()) for c in chunks]
    assert got == [
        (
            [Op.INSERT] * 3,
            [
                {"id": 1, "v": "a", "ok": True},
                {"id": 2, "v": "b", "ok": False},
                {"id": 1, "v": "a2", "ok": True},
            ],
        ),
        ([Op.DELETE], [{"id": 2, "v": None, "ok": None}]),
        ([Op.INSERT], [{"id": 3, "v": "b", "ok": False}]),
        ([Op.DELETE], [{"id": 1, "v": None, "ok": None}]),
    ]


def test_snapshot_csv_nulls_empty_strings_and_types() -> None:
    fields = [Field("id", BIGINT), Field("s", VARCHAR), Field("n", SqlType(TypeKind.NUMERIC))]
    import io

    data = io.BytesIO(b'1,,1.50\n2,"",-2\n3,"a,""b""",\n4,x,0.123456789051\n')
    (b,) = snapshot_csv(data, fields)
    assert b.to_pylist() == [
        {"id": 1, "s": None, "n": Decimal("1.5")},
        {"id": 2, "s": "", "n": Decimal("-2")},
        {"id": 3, "s": 'a,"b"', "n": None},
        {"id": 4, "s": "x", "n": Decimal("0.1234567891")},  # rounded to numeric's scale
    ]
    assert b.schema.field("id").type == pa.int64()


def test_from_source_table_clause() -> None:
    c = parse_ddl_clauses("CREATE TABLE t (id INT PRIMARY KEY) FROM pg TABLE 'public.t'")
    assert (c.from_source, c.from_table) == ("pg", "public.t")
    assert c.stripped.split() == ["CREATE", "TABLE", "t", "(id", "INT", "PRIMARY", "KEY)"]
    assert parse_ddl_clauses("CREATE SINK s FROM mv WITH (connector = 'x')").from_source is None


def test_truncate_is_a_marker_in_place() -> None:
    d = TxnDecoder(FIELDS, "public", "t")
    d.feed(relation(7))
    d.feed(begin())
    d.feed(b"I" + struct.pack("!i", 7) + b"N" + tup("t", "1", None, "a"))
    d.feed(b"T" + struct.pack("!i", 1) + b"\0" + struct.pack("!i", 9))  # another table
    d.feed(b"T" + struct.pack("!i", 2) + b"\0" + struct.pack("!ii", 9, 7))
    d.feed(b"I" + struct.pack("!i", 7) + b"N" + tup("t", "2", None, "b"))
    d.feed(commit(300))
    chunks = to_chunks(d.take_rows(), FIELDS)
    assert [type(c).__name__ for c in chunks] == ["StreamChunk", "TruncateChunk", "StreamChunk"]
    assert [c.data.to_pylist() for c in chunks] == [
        [{"id": 1, "v": "a", "ok": True}],
        [],
        [{"id": 2, "v": "b", "ok": True}],
    ]
