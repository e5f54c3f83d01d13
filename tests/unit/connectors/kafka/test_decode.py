"""Batch decoding of Kafka messages: the vectorised JSON path and the per-message fallback
give the same rows; bad messages are reported with partition/offset and never stop a batch.

Messages are real `confluent_kafka.Message` objects built in the test (value, key,
partition, offset, timestamp, headers), as a consumer hands them out.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import orjson
import pytest
from confluent_kafka import Message

from connectors.kafka.decode import Decoder
from engine.catalog import Relation, RelationKind
from engine.types import BIGINT, BYTEA, DOUBLE, INT, JSONB, TIMESTAMPTZ, VARCHAR, Field


def Msg(  # noqa: N802 - reads like the stand-in class it replaced
    v: bytes | None,
    off: int,
    part: int = 0,
    k: bytes | None = None,
    ts: int = 1_700_000_000_000,
    hdrs: list[tuple[str, bytes]] | None = None,
) -> Message:
    """A real librdkafka Message (confluent_kafka builds them outside a consumer too)."""
    return Message(value=v, key=k, partition=part, offset=off, timestamp=(1, ts), headers=hdrs)


HIDDEN = [
    Field("_rw_kafka_partition", INT, hidden=True),
    Field("_rw_kafka_offset", BIGINT, hidden=True),
    Field("_rw_kafka_timestamp", TIMESTAMPTZ, hidden=True),
]


def rel(fields: list[Field], fmt: str = "PLAIN", enc: str = "JSON", include: Any = ()) -> Relation:
    return Relation(
        id=1,
        name="s",
        kind=RelationKind.SOURCE,
        fields=fields + HIDDEN,
        pk=[len(fields), len(fields) + 1],
        definition="",
        extra={
            "source": {"connector": "kafka", "format": fmt, "encode": enc, "include": list(include)}
        },
    )


COLS = [
    Field("id", BIGINT),
    Field("name", VARCHAR),
    Field("price", DOUBLE),
    Field("at", TIMESTAMPTZ),
]


def values(batch: Any, n: int = 4) -> list[tuple[Any, ...]]:
    return [tuple(r[f] for f in batch.schema.names[:n]) for r in batch.to_pylist()]


def test_fast_path_columns_missing_and_extra_fields() -> None:
    d = Decoder(rel(COLS))
    msgs = [
        Msg(
            orjson.dumps(
                {"id": 1, "name": "a", "price": 2, "at": "2024-01-02T03:04:05Z", "x": [1]}
            ),
            0,
        ),
        Msg(orjson.dumps({"id": 2}), 1),
        Msg(None, 2),  # a PLAIN tombstone is skipped
    ]
    b, deletes, errors = d.decode(msgs)
    assert deletes is None and errors == []
    assert values(b) == [
        (1, "a", 2.0, dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)),
        (2, None, None, None),
    ]
    assert b.column("_rw_kafka_offset").to_pylist() == [0, 1]


def test_bad_messages_fall_back_per_message_and_are_reported() -> None:
    d = Decoder(rel(COLS))
    good = [Msg(orjson.dumps({"id": i, "name": f"n{i}"}), i) for i in range(5)]
    bad = [
        Msg(b"not json", 5, part=2),
        Msg(b'{"id": "seven", "name": "x"}', 6),
        Msg(b"[1, 2]", 7),
        Msg(b'{"id": 99999999999999999999999}', 8),
    ]
    b, _, errors = d.decode(good[:3] + bad + good[3:])
    assert [(p, o, k) for p, o, k, _ in errors] == [
        (2, 5, "invalid json"),
        (0, 6, "type mismatch"),
        (0, 7, "not a json object"),
        (0, 8, "type mismatch"),
    ]
    assert values(b, 2) == [
        (0, "n0"),
        (1, "n1"),
        (2, "n2"),
        (None, "x"),
        (None, None),
        (3, "n3"),
        (4, "n4"),
    ]


@pytest.mark.parametrize("pretty", [False, True])
def test_fast_and_slow_paths_agree(pretty: bool) -> None:
    """Pretty-printed JSON (raw newlines) forces the per-message path: same rows."""
    d = Decoder(rel(COLS))
    docs = [
        {"id": i, "name": f"n{i}", "price": i / 4, "at": f"2024-01-01 00:00:{i:02d}"}
        for i in range(20)
    ]
    opt = orjson.OPT_INDENT_2 if pretty else 0
    b, _, errors = d.decode([Msg(orjson.dumps(x, option=opt), i) for i, x in enumerate(docs)])
    assert errors == []
    assert values(b) == [
        (x["id"], x["name"], x["price"], dt.datetime(2024, 1, 1, 0, 0, i, tzinfo=dt.UTC))
        for i, x in enumerate(docs)
    ]


def test_jsonb_bytes_and_includes() -> None:
    d = Decoder(
        rel(
            [Field("data", JSONB), Field("k", BYTEA), Field("h", VARCHAR)],
            include=[
                {"what": "key", "inner": None, "column": "k", "type": "BYTEA"},
                {"what": "header", "inner": "trace", "column": "h", "type": "VARCHAR"},
            ],
        )
    )
    b, _, errors = d.decode(
        [Msg(b'{"data": {"b": 1, "a": [true]}}', 0, k=b"key1", hdrs=[("trace", b"t1")])]
    )
    assert errors == []
    assert b.to_pylist()[0]["k"] == b"key1"
    assert b.to_pylist()[0]["h"] == "t1"
    assert orjson.loads(b.to_pylist()[0]["data"]) == {"a": [True], "b": 1}
    raw = Decoder(rel([Field("payload", BYTEA)], enc="BYTES"))
    b, _, _ = raw.decode([Msg(b"\x00\xff", 0), Msg(None, 1)])
    assert b.column("payload").to_pylist() == [b"\x00\xff"]


def test_upsert_keeps_last_per_key_and_marks_tombstones() -> None:
    d = Decoder(
        rel(
            [Field("v", INT), Field("k", BYTEA)],
            fmt="UPSERT",
            include=[{"what": "key", "inner": None, "column": "k", "type": "BYTEA"}],
        )
    )
    msgs = [
        Msg(b'{"v": 1}', 0, k=b"a"),
        Msg(b'{"v": 2}', 1, k=b"b"),
        Msg(b'{"v": 3}', 2, k=b"a"),
        Msg(None, 3, k=b"b"),
    ]
    b, deletes, errors = d.decode(msgs)
    assert errors == []
    assert [(r["k"], r["v"]) for r in b.to_pylist()] == [(b"a", 3), (b"b", None)]
    assert deletes is not None and deletes.tolist() == [False, True]


def test_missing_timestamp_is_null() -> None:
    d = Decoder(rel([Field("id", BIGINT)]))
    b, _, _ = d.decode([Msg(b'{"id": 1}', 0, ts=-1), Msg(b'{"id": 2}', 1)])
    assert b.column("_rw_kafka_timestamp").to_pylist() == [
        None,
        dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.UTC),
    ]
