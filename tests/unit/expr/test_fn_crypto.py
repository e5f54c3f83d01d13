"""engine.expr.fn_crypto: signature functions as webhook VALIDATE uses them."""

from __future__ import annotations

import base64
import hashlib
import hmac

import pyarrow as pa
import pytest
import sqlglot

from engine.errors import InvalidParameterValue, UndefinedFunction
from engine.expr import ColumnBinding, EvalContext, ExprBinder, Scope
from engine.expr.fn_crypto import crypto_hook
from engine.types import BYTEA, JSONB, VARCHAR

BODY = b'{"event": "push", "n": 1}'


def _eval(sql: str, body: bytes = BODY, secret: str = "sek", headers: str = "{}") -> list:
    scope = Scope(
        [
            ColumnBinding("headers", JSONB, 0),
            ColumnBinding("data", BYTEA, 1),
            ColumnBinding("s", VARCHAR, 2),
        ]
    )
    b = ExprBinder(scope)
    b.hook = crypto_hook(b)
    e = b.bind(sqlglot.parse_one(sql, read="risingwave"))
    batch = pa.RecordBatch.from_arrays(
        [pa.array([headers]), pa.array([body], pa.binary()), pa.array([secret])],
        names=["h", "d", "s"],
    )
    return e.eval(batch, EvalContext()).to_pylist()


def test_hmac_hex_and_base64() -> None:
    want = hmac.new(b"sek", BODY, hashlib.sha256).digest()
    assert _eval("encode(hmac(s, data, 'sha256'), 'hex')") == [want.hex()]
    assert _eval("encode(hmac('sek', data, 'sha256'), 'base64')") == [
        base64.b64encode(want).decode()
    ]
    sha1 = hmac.new(b"sek", BODY, hashlib.sha1).hexdigest()
    assert _eval("encode(hmac(s, data, 'sha1'), 'hex')") == [sha1]
    sha512 = hmac.new(b"sek", BODY, hashlib.sha512).digest()
    assert _eval("encode(hmac(s, data, 'sha512'), 'base64')") == [
        base64.b64encode(sha512).decode()  # one line, no 76-column wrapping
    ]


def test_secure_compare_true_false_null() -> None:
    sig = "sha256=" + hmac.new(b"sek", BODY, hashlib.sha256).hexdigest()
    expr = (
        "secure_compare(headers->>'x-hub-signature-256', "
        "'sha256=' || encode(hmac(s, data, 'sha256'), 'hex'))"
    )
    assert _eval(expr, headers=f'{{"x-hub-signature-256": "{sig}"}}') == [True]
    assert _eval(expr, headers='{"x-hub-signature-256": "sha256=00"}') == [False]
    assert _eval(expr, headers="{}") == [None]
    assert _eval(expr, secret="other", headers=f'{{"x-hub-signature-256": "{sig}"}}') == [False]


def test_digests_md5_concat_convert() -> None:
    assert _eval("encode(sha256(data), 'hex')") == [hashlib.sha256(BODY).hexdigest()]
    assert _eval("md5(data)") == [hashlib.md5(BODY).hexdigest()]
    assert _eval("md5('abc')") == [hashlib.md5(b"abc").hexdigest()]
    assert _eval("encode(data || '\\x00ff', 'hex')") == [(BODY + b"\x00\xff").hex()]
    assert _eval("convert_from(data, 'utf8')") == [BODY.decode()]
    hub = _eval(
        "encode(sha256(convert_to(s || 'POST' || 'http://h/x' || convert_from(data, 'utf8'),"
        " 'UTF8')), 'hex')"
    )
    assert hub == [hashlib.sha256(b"sekPOSThttp://h/x" + BODY).hexdigest()]
    assert _eval("decode('00ff', 'hex')") == [b"\x00\xff"]


def test_errors() -> None:
    with pytest.raises(InvalidParameterValue):
        _eval("hmac(s, data, 'sha3')")
    with pytest.raises(InvalidParameterValue):
        _eval("encode(data, 'rot13')")
    with pytest.raises(UndefinedFunction):
        _eval("secure_compare(s)")


def test_general_binder_routes_crypto_nodes_without_a_hook() -> None:
    """Ordinary SQL (not only VALIDATE) binds encode/decode/sha256/md5/bytea || the same way."""
    scope = Scope([ColumnBinding("data", BYTEA, 0), ColumnBinding("s", VARCHAR, 1)])
    batch = pa.RecordBatch.from_arrays(
        [pa.array([BODY], pa.binary()), pa.array(["sek"])], names=["d", "s"]
    )

    def ev(sql: str) -> list:
        e = ExprBinder(scope).bind(sqlglot.parse_one(sql, read="risingwave"))
        return e.eval(batch, EvalContext()).to_pylist()

    assert ev("encode(sha256(data), 'hex')") == [hashlib.sha256(BODY).hexdigest()]
    assert ev("md5(data)") == [hashlib.md5(BODY).hexdigest()]
    assert ev("md5(s)") == [hashlib.md5(b"sek").hexdigest()]
    assert ev("decode(encode(data, 'base64'), 'base64')") == [BODY]
    assert ev("data || '\\x00'::bytea") == [BODY + b"\x00"]
    assert ev("s || 'x'") == ["sekx"]
    want = hmac.new(b"sek", BODY, hashlib.sha256).hexdigest()
    assert ev("encode(hmac(s, data, 'sha256'), 'hex')") == [want]
