"""Credential options: which keys are credentials, redaction of statement text, and the
catalog sealing them on disk with the secret store key (and refusing another key)."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.catalog import Catalog, Relation, RelationKind
from engine.catalog.catalog import Secret
from engine.catalog.credentials import (
    is_credential,
    redact_definition,
    redact_validate,
    scrub,
)
from engine.catalog.secret_box import (
    KEY_ENV,
    SecretBox,
    SecretKeyError,
    open_secret_box,
)

CREDENTIAL_KEYS = [
    "properties.sasl.password",
    "properties.sasl.jaas.config",
    "properties.sasl.oauthbearer.config",
    "properties.sasl.oauthbearer.client.secret",
    "properties.ssl.key.password",
    "properties.ssl.key.pem",
    "s3.secret.key",
    "s3.access.key",
    "access_key_id",
    "aws.credentials.session_token",
    "catalog.credential",
    "catalog.token",
    "catalog.jdbc.password",
    "schema.registry.password",
    "gcs.service.account",
    "api_key",
    "password",
    '"Q.Token"',
]
PLAIN_KEYS = [
    "connector",
    "topic",
    "primary_key",
    "key.encode",
    "properties.bootstrap.server",
    "properties.sasl.username",
    "properties.sasl.mechanism",
    "properties.security.protocol",
    "s3.region",
    "s3.endpoint",
    "warehouse.path",
    "catalog.type",
    "message.key",
    "scan.startup.mode",
]


@pytest.mark.parametrize("key", CREDENTIAL_KEYS)
def test_credential_keys(key: str) -> None:
    assert is_credential(key)


@pytest.mark.parametrize("key", PLAIN_KEYS)
def test_plain_keys(key: str) -> None:
    assert not is_credential(key)


def test_redact_definition_replaces_only_credential_values() -> None:
    sql = (
        "CREATE SOURCE s (a INT) WITH (connector = 'kafka', topic = 't', "
        "properties.sasl.password = 'pw''1', k = SECRET s1, s3.secret.key = E'x\\'y', "
        "api_key = $$d$$, primary_key = 'id') FORMAT PLAIN ENCODE JSON "
        "(schema.registry.password = 'srpw')"
    )
    out = redact_definition(sql)
    for value in ("pw''1", "x\\'y", "$$d$$", "srpw"):
        assert value not in out
    assert out.count("'[REDACTED]'") == 4
    assert "topic = 't'" in out and "primary_key = 'id'" in out and "k = SECRET s1" in out
    assert redact_definition(out) == out  # idempotent


def test_redact_definition_leaves_queries_alone() -> None:
    sql = (
        "CREATE MATERIALIZED VIEW v AS WITH x AS (SELECT 1 AS a FROM t WHERE password = 'a') "
        "SELECT * FROM x"
    )
    assert redact_definition(sql) == sql
    sink = "CREATE SINK k AS SELECT * FROM t WHERE token = 'a' WITH (properties.sasl.password='p')"
    assert redact_definition(sink).endswith(
        "WHERE token = 'a' WITH (properties.sasl.password='[REDACTED]')"
    )


def test_redact_validate_keeps_header_names() -> None:
    sql = (
        "CREATE TABLE w (b JSONB) WITH (connector = 'webhook') VALIDATE AS "
        "secure_compare(headers->>'x-token', 'Tok3n')"
    )
    out = redact_validate(sql)
    assert "'x-token'" in out and "Tok3n" not in out


def test_scrub() -> None:
    assert scrub("bad value pw-123 for x", ["pw-123", "ab"]) == "bad value [REDACTED] for x"


def _catalog_with_credentials(box: SecretBox | None) -> Catalog:
    cat = Catalog()
    cat.box = box
    cat.add_secret(Secret("kafka_pw", "SecretValue1"))
    rel = Relation(
        id=cat.allocate_relation_id(),
        name="s",
        kind=RelationKind.SOURCE,
        fields=[],
        pk=[],
        definition="CREATE SOURCE s WITH (connector='kafka', properties.sasl.password='Inline2')",
        options={"connector": "kafka", "properties.sasl.password": "Inline2"},
        extra={"iceberg_source": {"options": {"s3.secret.key": "Nested3"}}},
    )
    cat.add(rel)
    refs = Relation(
        id=cat.allocate_relation_id(),
        name="r",
        kind=RelationKind.SOURCE,
        fields=[],
        pk=[],
        definition="CREATE SOURCE r WITH (topic = SECRET kafka_pw)",
        options={"connector": "kafka"},
    )
    cat.bind_secret_options(refs, {"topic": "kafka_pw"})
    cat.add(refs)
    cat.connections["c"] = {"schema": "public", "options": {"s3.secret.key": "Conn4"}}
    return cat


def test_catalog_seals_credentials_and_opens_them_again() -> None:
    box = SecretBox(bytes(range(32)), "test")
    cat = _catalog_with_credentials(box)
    assert "Inline2" not in cat.by_id(100).definition
    assert cat.by_id(101).options["topic"] == "SecretValue1"  # resolved for the connector
    blob = cat.to_bytes()
    for value in (b"SecretValue1", b"Inline2", b"Nested3", b"Conn4"):
        assert value not in blob
    assert Catalog.is_sealed_blob(blob)
    back = Catalog.from_bytes(blob, SecretBox(bytes(range(32)), "test"))
    assert back.secrets["kafka_pw"].value == "SecretValue1"
    assert back.by_id(100).options["properties.sasl.password"] == "Inline2"
    assert back.by_id(100).extra["iceberg_source"]["options"]["s3.secret.key"] == "Nested3"
    assert back.by_id(101).options["topic"] == "SecretValue1"
    assert back.connections["c"]["options"]["s3.secret.key"] == "Conn4"
    assert cat.to_bytes() == blob  # stable between checkpoints
    with pytest.raises(SecretKeyError, match="another secret store key"):
        Catalog.from_bytes(blob, SecretBox(bytes(32), "other"))
    with pytest.raises(SecretKeyError):
        Catalog.from_bytes(blob)


def test_old_plain_catalog_opens_and_is_redacted() -> None:
    old = _catalog_with_credentials(None)
    old.by_id(
        100
    ).definition = "CREATE SOURCE s WITH (connector='kafka', properties.sasl.password='Inline2')"
    blob = old.to_bytes()  # as written before sealing existed
    assert b"Inline2" in blob
    cat = Catalog.from_bytes(blob, SecretBox(bytes(range(32)), "test"))
    assert "Inline2" not in cat.by_id(100).definition
    assert cat.by_id(100).options["properties.sasl.password"] == "Inline2"
    assert b"Inline2" not in cat.to_bytes()


def test_key_file_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV, raising=False)
    with pytest.raises(SecretKeyError, match="missing"):
        open_secret_box(tmp_path, create=False)
    box = open_secret_box(tmp_path)
    key_file = tmp_path / "secret.key"
    assert key_file.stat().st_mode & 0o077 == 0
    assert open_secret_box(tmp_path).key_check == box.key_check
    monkeypatch.setenv(KEY_ENV, "00" * 16)
    env_box = open_secret_box(tmp_path / "other")
    assert env_box.key_check != box.key_check and not (tmp_path / "other").exists()
    monkeypatch.setenv(KEY_ENV, "not hex")
    with pytest.raises(SecretKeyError, match="not hexadecimal"):
        open_secret_box(tmp_path)
