"""The vectorised COPY parser (`pgwire.copy_columns`) against the exact per-row path.

The exact path is `pgwire.copy.parse_text` / `parse_csv` + `convert_rows` + one Arrow
array per column (what COPY FROM STDIN did before). For tricky inputs (quotes, escapes,
NULL markers, empty strings vs NULL, unicode, timestamps with zones, numerics, booleans,
jsonb) and for random ones, the new parser must produce exactly the same columns, or
fail with the same SQLSTATE; jsonb is compared with the canonical text of the old value
(the old path stored the input text unvalidated; a `'...'::jsonb` cast canonicalises).
"""

from __future__ import annotations

import math
import random
import struct
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa
import pytest

from engine.api import QueryResult
from engine.errors import EngineError
from engine.expr.jsonb import canonicalize_text
from engine.stream.copy_decode import quotes_bound_fields
from engine.types import (
    BIGINT,
    BOOLEAN,
    DATE,
    DOUBLE,
    INT,
    INTERVAL,
    JSONB,
    NUMERIC,
    REAL,
    SMALLINT,
    TIMESTAMP,
    TIMESTAMPTZ,
    VARCHAR,
    Field,
    SqlType,
    TypeKind,
)
from pgwire.copy import convert_rows, parse_csv, parse_text
from pgwire.copy_columns import CopyColumns, parse_copy


def old_path(data: bytes, opts: dict[str, Any], types: list[SqlType], tz: Any) -> list[list[Any]]:
    fields = [Field(f"c{i}", t) for i, t in enumerate(types)]
    r = QueryResult("COPY 0", fields, copy={"direction": "in", **opts})
    text = data.decode()
    raw = parse_csv(text, opts) if opts.get("format") == "csv" else parse_text(text, opts)
    rows = convert_rows(raw, r, tz)
    out = []
    for j, t in enumerate(types):
        vals = [row[j] for row in rows]
        if t.kind is TypeKind.JSONB:
            vals = [None if v is None else canonicalize_text(v) for v in vals]
        out.append(pa.array(vals, t.arrow).to_pylist())
    return out


def new_path(data: bytes, opts: dict[str, Any], types: list[SqlType], tz: Any) -> list[list[Any]]:
    target = CopyColumns("t", [f"c{i}" for i in range(len(types))], types, tz)
    cols = parse_copy(data, opts, target)
    assert [c.type for c in cols] == [t.arrow for t in types]
    return [c.to_pylist() for c in cols]


def _norm(v: Any) -> Any:
    if isinstance(v, float) and math.isnan(v):
        return "NaN"
    return v


def same(data: bytes, opts: dict[str, Any], types: list[SqlType], tz: Any = UTC) -> None:
    """Both paths give the same columns, or both fail with the same SQLSTATE."""
    try:
        want: Any = old_path(data, opts, types, tz)
    except (EngineError, pa.ArrowException) as e:
        want = getattr(e, "sqlstate", "internal")
    except UnicodeDecodeError:  # was an internal error; PostgreSQL answers 22021
        want = "22021"
    try:
        got: Any = new_path(data, opts, types, tz)
    except EngineError as e:
        got = e.sqlstate
        assert e.context is not None and e.context.startswith("COPY t, line "), e.context
    if isinstance(want, list) and isinstance(got, list):
        want = [[_norm(v) for v in c] for c in want]
        got = [[_norm(v) for v in c] for c in got]
    if want == "internal":  # the old path failed inside Arrow (numeric scale, NaN)
        return  # the new outcome is checked by test_numeric_rounds_to_the_column_scale
    assert got == want, (data, opts)


CSV = {"format": "csv"}
TEXT = {"format": "text"}


@pytest.mark.parametrize(
    "data",
    [
        b'1,"a,b"\n2,""\n3,\n4,"say ""hi"""\n',
        b'1,"multi\nline"\r\n2,"crlf\r\ninside"\r\n',
        b'1,ab"c\n',  # a quote inside an unquoted value starts a quoted section
        b'1,"ab"c\n',  # text after the closing quote
        b'1,"a"\n2,"b""\n',  # unterminated
        b"1,x\n2\n",  # missing column
        b"1,x,y\n",  # extra column
        b'1,\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\n2,"\xe6\x97\xa5\xe6\x9c\xac"\n',
        b"1,x\n\\.\n",
        b"1,x\n\n",
        b"",
        b"1,x",
        b'"1",x\n',
        b"1,\xff\n",  # not UTF-8
    ],
)
def test_csv_tricky(data: bytes) -> None:
    same(data, CSV, [INT, VARCHAR])


def test_csv_options() -> None:
    same(b"a;b\n1;NULL\n2;\n3;\"NULL\"\n", {**CSV, "delimiter": ";", "null": "NULL",
                                            "header": True}, [INT, VARCHAR])  # fmt: skip
    same(b'"h\nx",y\n1,2\n', {**CSV, "header": True}, [INT, INT])
    same(b"1,'a,b'\n2,'it''s'\n", {**CSV, "quote": "'"}, [INT, VARCHAR])
    same(b'1,"a\\"b"\n', {**CSV, "escape": "\\"}, [INT, VARCHAR])
    same(b"1|x\n", {**CSV, "delimiter": "|"}, [INT, VARCHAR])


@pytest.mark.parametrize(
    "data",
    [
        b'1\ttab\\tand\\\\back\n2\t\\N\n3\tq"uote,comma\n4\t\n5\tline\\nbreak\n',
        b"1\t\\x41\\101\\q\n",  # hex, octal, unknown escapes
        b"1\ta\\\tb\n",  # escaped delimiter
        b"1\ta\\\\\tb\n",  # escaped backslash then a delimiter: 3 columns
        b"1\tx\r\n",
        b"1\t\\N\n\\.\n2\tafter\n",
        b"1\tx\n2\n",
        b"1\tN\\N\n",
        b"0\\1701F\tx\n",  # an octal escape spells 0x1F: still not an integer
        b"",
        b"\n",
    ],
)
def test_text_tricky(data: bytes) -> None:
    same(data, TEXT, [INT, VARCHAR])


def test_text_one_column_empty_lines() -> None:
    same(b"a\n\nb\n\n", TEXT, [VARCHAR])
    same(b"a\n\\N\n", TEXT, [VARCHAR])
    same(b"h\n1;x\\;y\n", {**TEXT, "delimiter": ";", "header": True}, [INT, VARCHAR])
    same(b"1\t-\n", {**TEXT, "null": "-"}, [INT, VARCHAR])


TYPED = [
    (SMALLINT, ["1", "-32768", "32768", " 7 ", "+5", "0x1F", "007", "1_0", "x", ""]),
    (INT, ["2147483647", "2147483648", "-0", "12345678901234567890", "1e3"]),
    (BIGINT, ["9223372036854775807", "9223372036854775808", "-9223372036854775808"]),
    (DOUBLE, ["1.5", "-0.0", "1e308", "1e400", "inf", "-Infinity", "NaN", ".5", "5.", "1_0"]),
    (REAL, ["3.4028235e38", "1e39", "0.1", "16777217", "1.00000005960464477539"]),
    (NUMERIC, ["1.5", "-0.0", "12345678901234567890.123", "1.12345678901", "1e3", "NaN", "x"]),
    (BOOLEAN, ["t", "TRUE", " yes ", "off", "0", "1", "maybe", "T"]),
    (DATE, ["2024-05-01", "2024-02-30", "0000-01-01", "0001-01-01", "2024-1-1", "May 1 2024"]),
    (
        TIMESTAMP,
        [
            "2024-05-01 10:00:00",
            "2024-05-01T10:00:00.5",
            "2024-05-01 10:00:00.1234567",
            "2024-05-01 10:00:00+02",
            "2024-05-01",
            "2024-05-01 24:00:00",
            "infinity",
        ],
    ),  # fmt: skip
    (
        TIMESTAMPTZ,
        [
            "2024-05-01 10:00:00+02",
            "2024-05-01 10:00:00Z",
            "2024-05-01 10:00:00-05:30",
            "2024-05-01 10:00:00",
            "2024-03-31 02:30:00",
            "2024-05-01T10:00:00.123456+00",
        ],
    ),  # fmt: skip
    (JSONB, ['{"b": 1, "a": [1.50, "x"]}', "[]", "not json", '"\\u00e9"', "1e2", "{}"]),
    (INTERVAL, ["1 day", "01:02:03", "P1D"]),
    (VARCHAR, ["", " padded ", "é", "\\"]),
]


@pytest.mark.parametrize(("t", "values"), TYPED, ids=[t.kind.value for t, _ in TYPED])
@pytest.mark.parametrize("tz", [UTC, ZoneInfo("Europe/Berlin")], ids=["utc", "berlin"])
def test_typed_values_one_by_one_and_together(t: SqlType, values: list[str], tz: Any) -> None:
    def csv_field(v: str) -> str:
        return '"' + v.replace('"', '""') + '"'

    for v in values:
        same(f"1,{csv_field(v)}\n2,\n".encode(), CSV, [INT, t], tz)
    good = []
    for v in values:
        try:
            old_path(f"1,{csv_field(v)}\n".encode(), CSV, [INT, t], tz)
            good.append(v)
        except (EngineError, pa.ArrowException):
            pass
    lines = "".join(f"{i},{csv_field(v)}\n" for i, v in enumerate(good * 3))
    same(lines.encode(), CSV, [INT, t], tz)
    same((lines + "9,\n").encode(), CSV, [INT, t], tz)


def test_first_error_is_reported_with_its_line_and_column() -> None:
    target = CopyColumns("t", ["a", "b"], [INT, INT], UTC)
    data = b"a,b\n1,2\n3,x\ny,4\n"
    with pytest.raises(EngineError) as e:
        parse_copy(data, {**CSV, "header": True}, target)
    assert e.value.sqlstate == "22P02"
    assert e.value.context == 'COPY t, line 3, column b: "x"'
    with pytest.raises(EngineError) as e:
        parse_copy(b"1,2\n3\n", CSV, target)
    assert e.value.sqlstate == "22P04"
    assert e.value.message == 'missing data for column "b"'
    assert e.value.context == 'COPY t, line 2: "3"'
    with pytest.raises(EngineError) as e:
        parse_copy(b"1\t2\t3\n", TEXT, target)
    assert e.value.message == "extra data after last expected column"
    with pytest.raises(EngineError) as e:
        parse_copy(b"1,99999999999\n", CSV, target)
    assert e.value.sqlstate == "22003"


def test_numeric_rounds_to_the_column_scale() -> None:
    target = CopyColumns("t", ["n"], [NUMERIC], UTC)
    got = parse_copy(b"1.12345678905\n-2.000000000049\n", CSV, target)
    assert got[0].to_pylist() == [Decimal("1.1234567891"), Decimal("-2.0000000000")]
    with pytest.raises(EngineError) as e:
        parse_copy(b"NaN\n", CSV, target)
    assert e.value.sqlstate == "22000"


def test_quotes_bound_fields() -> None:
    ok = [b'"a",b\n', b'a,"b"', b'"a""b",""\n', b'"""",x', b'"x\ny",z\r\n', b"plain"]
    bad = [b'a"b",c', b'"a"b,c', b'"open', b'x,"a"\x20\n']
    for d in ok:
        assert quotes_bound_fields(d, b",", b'"'), d
    for d in bad:
        assert not quotes_bound_fields(d, b",", b'"'), d


ALPHABET = ['"', ",", "\n", "\r\n", "\\", "\t", "a", "é", "N", " ", "1", "\\N", '""', "\\."]


@pytest.mark.parametrize("seed", range(40))
def test_random_inputs_agree(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(60):
        data = "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 30))).encode()
        same(data, CSV, [VARCHAR, VARCHAR])
        same(data, TEXT, [VARCHAR, VARCHAR])
        same(data, CSV, [VARCHAR])
        same(data, TEXT, [VARCHAR])
        same(data, {**CSV, "header": True, "null": "N"}, [VARCHAR, VARCHAR])


# -- binary -------------------------------------------------------------------------------
HEAD = b"PGCOPY\n\xff\r\n\x00" + b"\x00" * 8


def _tuple(fields: list[bytes | None]) -> bytes:
    out = struct.pack(">h", len(fields))
    for f in fields:
        out += struct.pack(">i", -1) if f is None else struct.pack(">i", len(f)) + f
    return out


def test_binary_fixed_width_and_variable() -> None:
    types = [BIGINT, DOUBLE, BOOLEAN, DATE, TIMESTAMPTZ]
    target = CopyColumns("t", ["a", "b", "c", "d", "e"], types, UTC)
    us = 86_400_000_000
    rows = [
        [struct.pack(">q", i), struct.pack(">d", i / 2), b"\x01" if i % 2 else b"\x00",
         struct.pack(">i", i), struct.pack(">q", i * us + 5)]
        for i in range(5)
    ]  # fmt: skip
    data = HEAD + b"".join(_tuple(r) for r in rows) + b"\xff\xff"
    cols = parse_copy(data, {"format": "binary"}, target)
    assert cols[0].to_pylist() == list(range(5))
    assert cols[1].to_pylist() == [i / 2 for i in range(5)]
    assert cols[2].to_pylist() == [bool(i % 2) for i in range(5)]
    assert str(cols[3][1]) == "2000-01-02"
    assert cols[4][1].as_py() == datetime(2000, 1, 2, 0, 0, 0, 5, tzinfo=UTC)
    # a NULL sends the same data through the field-by-field decoders: same values
    rows[2][1] = None
    data = HEAD + b"".join(_tuple(r) for r in rows) + b"\xff\xff"
    slow = parse_copy(data, {"format": "binary"}, target)
    assert slow[1].to_pylist() == [0.0, 0.5, None, 1.5, 2.0]
    for j in (0, 2, 3, 4):
        assert slow[j].equals(cols[j])
    mixed = CopyColumns("t", ["n", "s", "j"], [NUMERIC, VARCHAR, JSONB], UTC)
    data = HEAD + _tuple([None, "é".encode(), b'\x01{"b":1,"a":2}']) + b"\xff\xff"
    got = parse_copy(data, {"format": "binary"}, mixed)
    assert [c.to_pylist() for c in got] == [[None], ["é"], ['{"a": 2, "b": 1}']]
    num = parse_copy(HEAD + _tuple([b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x07", None, None])
                     + b"\xff\xff", {"format": "binary"}, mixed)  # fmt: skip
    assert num[0].to_pylist() == [Decimal(7)]


def test_binary_errors() -> None:
    target = CopyColumns("t", ["a"], [INT], UTC)
    with pytest.raises(EngineError, match="signature"):
        parse_copy(b"nope", {"format": "binary"}, target)
    with pytest.raises(EngineError) as e:
        parse_copy(HEAD + _tuple([b"\x00\x00\x00\x01", b"x"]) + b"\xff\xff",
                   {"format": "binary"}, target)  # fmt: skip
    assert e.value.sqlstate == "22P04"
