"""RisingWave-compatible JSON encoding of sink rows and message shaping per format."""

from __future__ import annotations

import datetime as dt
import decimal
import json

import pyarrow as pa
import pytest

from connectors.kafka.sink import KafkaSinkWriter
from connectors.kafka.sink_json import JsonRowEncoder
from engine.chunk import StreamChunk
from engine.errors import EngineError
from engine.stream.sink import APPEND_ONLY, DEBEZIUM, UPSERT, SinkSpec
from engine.types import (
    BIGINT,
    BOOLEAN,
    BYTEA,
    DATE,
    DOUBLE,
    INT,
    INTERVAL,
    JSONB,
    NUMERIC,
    TIME,
    TIMESTAMP,
    TIMESTAMPTZ,
    VARCHAR,
    Field,
    arrow_schema,
    list_of,
)

FIELDS = [
    Field("b", BOOLEAN),
    Field("i", INT),
    Field("big", BIGINT),
    Field("d", DOUBLE),
    Field("n", NUMERIC),
    Field("s", VARCHAR),
    Field("by", BYTEA),
    Field("dt", DATE),
    Field("t", TIME),
    Field("ts", TIMESTAMP),
    Field("tz", TIMESTAMPTZ),
    Field("iv", INTERVAL),
    Field("j", JSONB),
    Field("l", list_of(INT)),
]


def batch(rows: list[tuple]) -> pa.RecordBatch:
    schema = arrow_schema(FIELDS)
    cols = list(zip(*rows))
    return pa.RecordBatch.from_arrays(
        [pa.array(list(c), type=schema.field(i).type) for i, c in enumerate(cols)], schema=schema
    )


ROW = (
    True,
    7,
    2**62,
    1.5,
    decimal.Decimal("12.3400"),
    'a"b\n',
    b"hi",
    dt.date(2023, 11, 11),
    dt.time(1, 2, 3, 456),
    dt.datetime(2023, 11, 11, 18, 30, 9, 453000),
    dt.datetime(2023, 11, 11, 18, 30, 9, 453000, tzinfo=dt.UTC),
    pa.MonthDayNano([13, 2, 1_500_000_000]),
    '{"a": [1, {"b": null}]}',
    [1, 2],
)
NULLS = (None,) * len(FIELDS)


def test_every_type_like_risingwave() -> None:
    out = JsonRowEncoder(FIELDS).encode(batch([ROW, NULLS])).to_list()
    assert out[0] == (
        '{"b":true,"i":7,"big":4611686018427387904,"d":1.5,"n":"12.34","s":"a\\"b\\n",'
        '"by":"aGk","dt":738835,"t":3723000,"ts":"2023-11-11 18:30:09.453000",'
        '"tz":"2023-11-11T18:30:09.453000Z","iv":"P1Y1M2DT0H0M1.5S",'
        '"j":{"a": [1, {"b": null}]},"l":[1,2]}'
    )
    assert json.loads(out[0])["j"] == {"a": [1, {"b": None}]}
    assert json.loads(out[1]) == {f.name: None for f in FIELDS}
    assert list(json.loads(out[1])) == [f.name for f in FIELDS]  # column order kept


def test_handling_modes() -> None:
    enc = JsonRowEncoder(FIELDS, [10, 12], timestamptz_mode="milli", jsonb_mode="string")
    assert enc.encode(batch([ROW])).to_list() == [
        '{"tz":1699727409453,"j":"{\\"a\\": [1, {\\"b\\": null}]}"}'
    ]
    enc = JsonRowEncoder(FIELDS, [10], timestamptz_mode="utc_without_suffix")
    assert enc.encode(batch([ROW])).to_list() == ['{"tz":"2023-11-11 18:30:09.453000"}']
    with pytest.raises(EngineError, match="timestamptz.handling.mode"):
        JsonRowEncoder(FIELDS, timestamptz_mode="nope")


def test_seed_message_shape() -> None:
    enc = JsonRowEncoder([Field("action", VARCHAR)])
    b = pa.RecordBatch.from_pydict({"action": ["99999"]})
    assert enc.encode(b).to_list() == ['{"action":"99999"}']


def _writer(kind: str, pk: list[int], fmt: str | None) -> KafkaSinkWriter:
    spec = SinkSpec(
        sink_id=1,
        name="s",
        connector="kafka",
        fields=[Field("k", INT), Field("v", VARCHAR)],
        pk=pk,
        sink_type=kind,
        options={"topic": "t", "properties.bootstrap.server": "127.0.0.1:1"},
        format=fmt,
        encode="JSON",
    )
    return KafkaSinkWriter(spec)


FIELDS2 = [Field("k", INT), Field("v", VARCHAR)]


def test_upsert_messages_keys_and_tombstones() -> None:
    w = _writer(UPSERT, [0], "UPSERT")
    c = StreamChunk.from_pretty("+ 1 a\nU- 1 a\nU+ 1 b\n- 2 x", FIELDS2)
    assert w.encode(c) == (
        ['{"k":1}', '{"k":1}', '{"k":2}'],
        ['{"k":1,"v":"a"}', '{"k":1,"v":"b"}', None],
    )


def test_plain_messages_without_and_with_key() -> None:
    c = StreamChunk.from_pretty("+ 1 a\n+ 2 b", FIELDS2)
    assert _writer(APPEND_ONLY, [], "PLAIN").encode(c) == (
        [None, None],
        ['{"k":1,"v":"a"}', '{"k":2,"v":"b"}'],
    )
    assert _writer(APPEND_ONLY, [0], "PLAIN").encode(c)[0] == ['{"k":1}', '{"k":2}']


def test_debezium_envelope() -> None:
    w = _writer(DEBEZIUM, [0], "DEBEZIUM")
    c = StreamChunk.from_pretty("+ 1 a\nU- 1 a\nU+ 1 b\n- 1 b", FIELDS2)
    keys, vals = w.encode(c)
    assert keys == ['{"k":1}'] * 4
    assert vals[3] is None  # tombstone after the delete
    msgs = [json.loads(v) for v in vals[:3]]
    assert [m["payload"]["op"] for m in msgs] == ["c", "u", "d"]
    assert msgs[0]["payload"]["before"] is None and msgs[0]["payload"]["after"] == {
        "k": 1,
        "v": "a",
    }
    assert msgs[1]["payload"]["before"] == {"k": 1, "v": "a"}
    assert msgs[1]["payload"]["after"] == {"k": 1, "v": "b"}
    assert (
        msgs[2]["payload"]["before"] == {"k": 1, "v": "b"} and msgs[2]["payload"]["after"] is None
    )
    assert msgs[0]["schema"]["name"] == "RisingWave.dev.s.Envelope"


def test_option_errors() -> None:
    with pytest.raises(EngineError, match="primary key not defined for upsert kafka sink"):
        _writer(UPSERT, [], "UPSERT")
    spec = SinkSpec(1, "s", "kafka", FIELDS2, [], APPEND_ONLY, {"topic": "t"})
    with pytest.raises(EngineError, match="properties.bootstrap.server not specified"):
        KafkaSinkWriter(spec)


def test_array_elements_use_the_element_encoding() -> None:
    f = [Field("lt", list_of(TIMESTAMPTZ)), Field("ln", list_of(NUMERIC))]
    b = pa.RecordBatch.from_arrays(
        [
            pa.array(
                [[dt.datetime(2020, 1, 1, tzinfo=dt.UTC)]], pa.list_(pa.timestamp("us", "UTC"))
            ),
            pa.array([[decimal.Decimal("1.50"), None]], pa.list_(pa.decimal128(38, 10))),
        ],
        names=["lt", "ln"],
    )
    assert JsonRowEncoder(f).encode(b).to_list() == [
        '{"lt":["2020-01-01T00:00:00.000000Z"],"ln":["1.5",null]}'
    ]
