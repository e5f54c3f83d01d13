"""engine.handlers.webhook and secret: DDL rules, VALIDATE styles, decoding, writes."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import engine.handlers.webhook as webhook_mod
from engine.database import Config, SwellDatabase
from engine.errors import EngineError
from engine.handlers.webhook import (
    VALIDATE_NOTICE,
    IncomingRequest,
    WebhookError,
    WebhookIngest,
)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[SwellDatabase]:
    d = SwellDatabase(Config(data_dir=tmp_path / "data", barrier_interval_ms=60_000))
    try:
        yield d
    finally:
        d.close()


def run(db: SwellDatabase, sql: str) -> list[Any]:
    return db.connect("root", "dev").execute_simple(sql)


def err(db: SwellDatabase, sql: str) -> EngineError:
    with pytest.raises(EngineError) as e:
        run(db, sql)
    return e.value


SEED = """CREATE TABLE wbhtable1 (
      data JSONB
    ) WITH (
      connector = 'webhook'
    ) VALIDATE AS secure_compare(
      headers->>'authorization',
      'TEST_WEBHOOK'
    )"""


def test_ddl_rules(db: SwellDatabase) -> None:
    r = run(db, SEED)
    assert r[0].tag == "CREATE_TABLE" and r[0].notices == []
    r = run(db, "CREATE TABLE nv (data JSONB) WITH (connector = 'webhook')")
    assert [n.message for n in r[0].notices] == [VALIDATE_NOTICE]
    e = err(db, "CREATE TABLE x (a INT) VALIDATE AS secure_compare('a', 'b')")
    assert (e.sqlstate, e.message) == (
        "42601",
        "VALIDATE is only supported for tables created with webhook source",
    )
    e = err(db, "CREATE TABLE y (data JSONB) WITH (connector = 'webhook') VALIDATE AS 'a' = 'b'")
    assert e.message == "The signature verification function must be SECURE_COMPARE()"
    e = err(db, "CREATE TABLE z (data JSONB) WITH (connector = 'webhook', foo = 'x')")
    assert e.sqlstate == "0A000" and "foo" in e.message
    e = err(db, "CREATE TABLE z (data JSONB) WITH (connector = 'webhook', is_batched = 'maybe')")
    assert e.sqlstate == "22023"
    e = err(
        db,
        "CREATE TABLE z (data JSONB) WITH (connector = 'webhook') "
        "VALIDATE SECRET nope AS secure_compare(headers->>'a', nope)",
    )
    assert e.sqlstate == "42704"
    e = err(
        db,
        "CREATE TABLE z (data JSONB) WITH (connector = 'webhook') "
        "VALIDATE AS secure_compare(headers->>'a', nosuchcol)",
    )
    assert e.sqlstate == "42703"
    show = run(db, "SHOW CREATE TABLE wbhtable1")[0].rows[0][1]
    assert show == SEED


def test_secrets_never_shown_and_drop_refused_while_used(db: SwellDatabase) -> None:
    run(db, "CREATE SECRET gh_secret WITH (backend = 'meta') AS 'hunter2'")
    assert err(db, "CREATE SECRET gh_secret AS 'x'").sqlstate == "42710"
    run(db, "CREATE SECRET IF NOT EXISTS gh_secret AS 'x'")
    run(
        db,
        "CREATE TABLE gh (data JSONB) WITH (connector = 'webhook') VALIDATE SECRET "
        "gh_secret AS secure_compare(headers->>'x-hub-signature-256', "
        "'sha256=' || encode(hmac(gh_secret, data, 'sha256'), 'hex'))",
    )
    show = run(db, "SHOW CREATE TABLE gh")[0].rows[0][1]
    assert "hunter2" not in show and "gh_secret" in show
    e = err(db, "DROP SECRET gh_secret")
    assert e.sqlstate == "2BP01" and "hunter2" not in str(e) + (e.detail or "")
    run(db, "DROP TABLE gh")
    assert run(db, "DROP SECRET gh_secret")[0].tag == "DROP_SECRET"
    assert err(db, "DROP SECRET gh_secret").sqlstate == "42704"
    assert run(db, "DROP SECRET IF EXISTS gh_secret")[0].notices


def test_resolve_statuses(db: SwellDatabase) -> None:
    run(db, SEED)
    run(db, "CREATE TABLE plain (a INT); CREATE MATERIALIZED VIEW mv AS SELECT a FROM plain")
    ing = WebhookIngest(db)
    for (dbname, table), status in {
        ("dev", "nope"): 404,
        ("other", "wbhtable1"): 404,
        ("dev", "plain"): 403,
        ("dev", "mv"): 403,
    }.items():
        with pytest.raises(WebhookError) as e:
            ing.resolve(dbname, "public", table)
        assert e.value.status == status
    assert ing.resolve("dev", "public", "wbhtable1").name == "wbhtable1"


def test_validate_token_github_segment(db: SwellDatabase) -> None:
    run(db, SEED)
    run(db, "CREATE SECRET s1 AS 'sek'")
    run(
        db,
        "CREATE TABLE gh (data JSONB) WITH (connector = 'webhook') VALIDATE SECRET s1 AS "
        "secure_compare(headers->>'x-hub-signature-256', "
        "'sha256=' || encode(hmac(s1, data, 'sha256'), 'hex'))",
    )
    run(
        db,
        "CREATE TABLE seg (data JSONB) WITH (connector = 'webhook') VALIDATE SECRET s1 AS "
        "secure_compare(headers->>'x-signature', encode(hmac(s1, data, 'sha1'), 'hex'))",
    )
    ing = WebhookIngest(db)
    body = b'{"a": 1}'
    tok = ing.resolve("dev", "public", "wbhtable1")
    assert tok.validate(
        [
            IncomingRequest({"authorization": "TEST_WEBHOOK"}, body),
            IncomingRequest({"authorization": "wrong"}, body),
            IncomingRequest({}, body),
        ]
    ) == [None, 401, 400]
    gh = ing.resolve("dev", "public", "gh")
    good = "sha256=" + hmac.new(b"sek", body, hashlib.sha256).hexdigest()
    assert gh.validate(
        [
            IncomingRequest({"x-hub-signature-256": good}, body),
            IncomingRequest({"x-hub-signature-256": good}, body + b" "),
        ]
    ) == [None, 401]
    seg = ing.resolve("dev", "public", "seg")
    sig = hmac.new(b"sek", body, hashlib.sha1).hexdigest()
    assert seg.validate([IncomingRequest({"x-signature": sig}, body)]) == [None]


def test_decode_jsonb_batched_and_typed(db: SwellDatabase) -> None:
    run(db, "CREATE TABLE j (data JSONB) WITH (connector = 'webhook')")
    run(db, "CREATE TABLE b (data JSONB) WITH (connector = 'webhook', is_batched = true)")
    run(
        db,
        "CREATE TABLE ty (id INT PRIMARY KEY, name VARCHAR, ts TIMESTAMPTZ, "
        "price DOUBLE PRECISION, amount NUMERIC, ok BOOLEAN, tags JSONB) "
        "WITH (connector = 'webhook')",
    )
    ing = WebhookIngest(db)
    j = ing.resolve("dev", "public", "j")
    assert j.decode(b'{"b": 2.50, "a": [1, {"x": null}]}').column(0).to_pylist() == [
        '{"a": [1, {"x": null}], "b": 2.50}'
    ]
    b = ing.resolve("dev", "public", "b")
    assert b.decode(b'{"n": 1}\n\n  \n{"n": 2}\n').column(0).to_pylist() == ['{"n": 1}', '{"n": 2}']
    with pytest.raises(WebhookError) as e:
        b.decode(b'{"n": 1}\n{"n": \n')
    assert e.value.status == 422
    ty = ing.resolve("dev", "public", "ty")
    row = ty.decode(
        b'{"id": 1, "name": "a", "ts": "2024-01-01T00:00:00Z", "price": 9199.99, '
        b'"amount": "12.5", "ok": true, "tags": {"k": 1.10}, "unknown": 1}'
    )
    got = row.to_pylist()[0]
    assert got["id"] == 1 and got["price"] == 9199.99 and str(got["amount"]).startswith("12.5")
    assert got["tags"] == '{"k": 1.10}' and got["ts"].year == 2024
    assert ty.decode(b'{"id": 2}').to_pylist()[0]["name"] is None
    for bad in [
        b'{"id": "x"}',
        b'{"id": 1, "name": 5}',
        b'{"id": 1, "ok": "yes!"}',
        b"[1]",
        b'{"name": "no key"}',
        b"not json",
        b"\xff\xfe",
    ]:
        with pytest.raises(WebhookError) as e:
            ty.decode(bad)
        assert e.value.status == 422, bad


def test_decode_jsonb_fast_path_edge_cases(db: SwellDatabase) -> None:
    """The batched decode (one canonicalisation pass over all lines) keeps jsonb semantics."""
    run(db, "CREATE TABLE nd (data JSONB) WITH (connector = 'webhook', is_batched = true)")
    nd = WebhookIngest(db).resolve("dev", "public", "nd")
    body = (
        '{"z": "ключ 😀", "a": {"y": [1, {"k": "v,:\\"x"}], "b": 1}}\n'
        "\r\n"
        '{"a": 1, "a": 2, "bb": 3}\n'
        "   \n"
        '{"big": 123456789012345678901234567890, "f": 1.50, "g": 9199.99, "e": 1e3, '
        '"n": -0.0}\n'
        "[1, 2.0]"
    ).encode()
    assert nd.decode(body).column(0).to_pylist() == [
        '{"a": {"b": 1, "y": [1, {"k": "v,:\\"x"}]}, "z": "ключ 😀"}',
        '{"a": 2, "bb": 3}',
        '{"e": 1000, "f": 1.50, "g": 9199.99, "n": 0.0, "big": 123456789012345678901234567890}',
        "[1, 2.0]",
    ]
    assert nd.decode(b"\n\n").num_rows == 0
    with pytest.raises(WebhookError) as e:
        nd.decode(b'{"n": 1}\n\n{"n": 2}\n{"n": \n{"n": 3}')
    assert e.value.status == 422
    assert e.value.message == "failed to parse request body: line 4 is not valid JSON"
    run(db, "CREATE TABLE one (data JSONB) WITH (connector = 'webhook')")
    one = WebhookIngest(db).resolve("dev", "public", "one")
    with pytest.raises(WebhookError) as e:
        one.decode(b'{"n": 1}\n{"n": 2}')
    assert (e.value.status, e.value.message) == (422, "failed to parse request body")


def test_write_then_recover(db: SwellDatabase, tmp_path: Path) -> None:
    run(db, SEED)
    run(db, "CREATE MATERIALIZED VIEW ev AS SELECT (data->>'id')::INT AS id FROM wbhtable1")
    t = WebhookIngest(db).resolve("dev", "public", "wbhtable1")
    seq = t.write([t.decode(b'{"id": 1}'), t.decode(b'{"id": 2}')])
    assert seq is not None
    db.wal.wait_durable(seq)
    run(db, "INSERT INTO wbhtable1 VALUES ('{\"id\": 3}')")  # SQL INSERT still works
    db.close()  # final checkpoint; the WAL path is covered by the e2e kill -9 test
    db2 = SwellDatabase(Config(data_dir=tmp_path / "data", barrier_interval_ms=60_000))
    try:
        rows = db2.connect("root", "dev").execute_simple("SELECT id FROM ev ORDER BY id")[0].rows
        assert rows == [(1,), (2,), (3,)]
    finally:
        db2.close()


def test_validate_verdicts_are_cached_by_the_header_values_read(db: SwellDatabase) -> None:
    """A VALIDATE that reads only header values is evaluated once per distinct value
    (and secret): the cached verdicts equal fresh evaluations; body-reading or volatile
    validators are never cached."""
    from engine.handlers.webhook import header_keys

    run(db, SEED)
    run(db, "CREATE SECRET s2 AS 'one'")
    run(
        db,
        "CREATE TABLE sec (data JSONB) WITH (connector = 'webhook') VALIDATE SECRET s2 AS "
        "secure_compare(headers->>'x-token', s2)",
    )
    run(
        db,
        "CREATE TABLE gh2 (data JSONB) WITH (connector = 'webhook') VALIDATE SECRET s2 AS "
        "secure_compare(headers->>'x-sig', encode(hmac(s2, data, 'sha256'), 'hex'))",
    )
    ing = WebhookIngest(db)
    tok = ing.resolve("dev", "public", "wbhtable1")
    assert tok.header_keys == ("authorization",)
    reqs = [
        IncomingRequest({"authorization": "TEST_WEBHOOK", "content-length": str(i)}, b"{}")
        for i in range(3)
    ] + [IncomingRequest({"authorization": "nope"}, b"{}"), IncomingRequest({}, b"{}")]
    for _ in range(2):  # the second round is answered from the cache
        assert tok.validate(reqs) == [None, None, None, 401, 400]
        assert tok.validate(reqs) == tok._evaluate(reqs)
    assert len(tok._verdicts) == 3
    sec = ing.resolve("dev", "public", "sec")
    assert sec.validate([IncomingRequest({"x-token": "one"}, b"{}")]) == [None]
    assert sec.validate([IncomingRequest({"x-token": "two"}, b"{}")]) == [401]
    assert ing.resolve("dev", "public", "gh2").header_keys is None  # reads the body
    tgt = ing.resolve("dev", "public", "gh2")
    assert tgt.validator is not None
    assert header_keys(tgt.validator) is None


def test_validate_on_a_header_subset_matches_all_headers(db: SwellDatabase) -> None:
    """The server passes VALIDATE only the (lower-cased) headers it reads: same verdicts."""
    run(
        db,
        "CREATE TABLE up (data JSONB) WITH (connector = 'webhook') VALIDATE AS "
        "secure_compare(headers->>'Authorization', 'x')",
    )
    t = WebhookIngest(db).resolve("dev", "public", "up")
    assert t.header_keys == ("Authorization",)
    full = IncomingRequest({"authorization": "x", "host": "h"}, b"{}")
    sub = IncomingRequest({}, b"{}")  # what the server keeps: no lower-case key matches
    assert t._evaluate([full]) == t._evaluate([sub]) == [400]


TYPED_BODIES = [
    b'{"id": 1, "name": "a", "x": 1.5, "f": true, "s": 3}',
    b'{"id": 1}\n\n  \n{"id": 2, "x": 2}\n',
    b'{"id": 1, "extra": {"nested": [1, 2]}, "name": "\\u00e9\\n"}',
    b'{"id": 1, "id": 2}',  # duplicate key: the last one wins
    b'{"id": 1, "x": NaN}',  # not JSON
    b'{"id": 1} {"id": 2}',  # two objects on one line
    b'{"id": "5", "s": "7"}',  # numbers as strings: cast like text input
    b'{"id": 1.0}',
    b'{"id": 99999999999999999999}',
    b'{"id": 1, "s": 40000}',  # SMALLINT overflow
    b'{"id": 1, "name": 5}',
    b'{"id": 1, "f": 1}',
    b'{"name": "no key"}',  # primary key missing
    b"[1, 2]",
    b'{"id": 1, "x": 1e400}',
    b'{"id": 1, "name": "\\ud800"}',
    b"",
    b'{\n  "id": 3,\n  "name": "pretty"\n}',
]


@pytest.mark.parametrize("batched", [False, True])
def test_typed_arrow_reader_agrees_with_the_per_object_path(
    db: SwellDatabase, batched: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    run(
        db,
        "CREATE TABLE ty (id BIGINT PRIMARY KEY, name VARCHAR, x DOUBLE PRECISION, f BOOLEAN, "
        f"s SMALLINT) WITH (connector = 'webhook', is_batched = {str(batched).lower()})",
    )
    monkeypatch.setattr(webhook_mod, "ARROW_JSON_MIN_ROWS", 1)
    fast = WebhookIngest(db).resolve("dev", "public", "ty")
    slow = WebhookIngest(db).resolve("dev", "public", "ty")
    assert fast._json_opts is not None
    slow._json_opts = None
    used = 0
    for body in TYPED_BODIES:
        want: Any
        try:
            want = slow.decode(body).to_pylist()
        except WebhookError as e:
            want = (e.status, e.message)
        try:
            got: Any = fast.decode(body).to_pylist()
        except WebhookError as e:
            got = (e.status, e.message)
        assert got == want, body
        n = len([ln for ln in body.decode(errors="replace").split("\n") if ln.strip()])
        used += fast._read_json(body, n if batched else 1) is not None
    assert used >= 2  # the reader did take the plain bodies


def test_decode_events_equals_decode_rows_per_body(db: SwellDatabase) -> None:
    run(db, "CREATE TABLE ev (data JSONB) WITH (connector = 'webhook')")
    t = WebhookIngest(db).resolve("dev", "public", "ev")
    good = [b'{"b": 1.50, "a": "x"}', b'{"a": "y", "b": 2}'] * 8
    assert t.decode_events(good) == [t.decode_rows(b) for b in good]
    bodies = [*good, b'{"a": ', b"\xff", b'{"b": -0.0, "a": "\\u00e9"}']
    got = t.decode_events(bodies)
    assert got[: len(good)] == [t.decode_rows(b) for b in good]
    assert [(e.status, e.message) for e in got[len(good) : -1]] == [  # type: ignore[union-attr]
        (422, "failed to parse request body"),
        (422, "failed to parse request body: invalid UTF-8"),
    ]
    assert got[-1] == t.decode_rows(bodies[-1]) == [b'{"a": "\xc3\xa9", "b": 0.0}']
