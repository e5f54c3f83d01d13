"""Credentials given in WITH options are never shown again, against a real server.

Every place a user (or an attacker with a login, or with a copy of the data directory)
could read a definition or an option is searched for every credential the statements
carried: SHOW CREATE, rw_catalog, pg_catalog, SHOW CONNECTIONS, error messages, the server
log and the raw files of the data directory. Secrets are usable by reference
(`properties.sasl.password = SECRET kafka_pw`), and a restart with another secret store
key says which key is needed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from harness.kafka import KafkaBroker
from harness.server import ServerError, SwellServer

pytestmark = [pytest.mark.clients, pytest.mark.e2e]

CREDENTIALS = [
    "KafkaSaslPw555",
    "OauthTok777",
    "JaasPw888",
    "SinkPw999",
    "ConnPw222",
    "SecretVal111",
    "S3Secret000",
    "ErrPw444",
]


@pytest.fixture(scope="module")
def srv(
    tmp_path_factory: pytest.TempPathFactory, kafka_broker: KafkaBroker
) -> Iterator[SwellServer]:
    server = SwellServer(tmp_path_factory.mktemp("creds") / "data").start()
    try:
        yield server
    finally:
        server.stop()


def _kafka(broker: KafkaBroker, topic: str) -> str:
    return f"connector = 'kafka', topic = '{topic}', properties.bootstrap.server = '{broker.bootstrap}', scan.startup.mode = 'earliest'"


@pytest.fixture(scope="module")
def created(srv: SwellServer, kafka_broker: KafkaBroker) -> dict[str, str]:
    topic = f"creds_{srv.port}"
    kafka_broker.create_topic(topic, 1)
    kafka_broker.produce(topic, [{"a": i} for i in range(3)])
    k = _kafka(kafka_broker, topic)
    with srv.connect() as c:
        c.execute("CREATE SECRET kafka_pw WITH (backend = 'meta') AS 'SecretVal111'")
        c.execute(
            f"""CREATE SOURCE ks (a INT) WITH ({k},
                properties.sasl.username = 'bob',
                properties.sasl.password = 'KafkaSaslPw555',
                properties.sasl.oauthbearer.config = 'principal=bob token=OauthTok777'
            ) FORMAT PLAIN ENCODE JSON"""
        )
        c.execute(
            f"CREATE SOURCE ks_ref (a INT) WITH ({k}, "
            "properties.sasl.password = SECRET kafka_pw) FORMAT PLAIN ENCODE JSON"
        )
        c.execute(
            f"""CREATE TABLE kt (a INT) WITH ({k},
                properties.ssl.key.password = 'JaasPw888'
            ) FORMAT PLAIN ENCODE JSON"""
        )
        c.execute("CREATE TABLE plain_t (a INT)")
        c.execute(
            "CREATE SINK snk FROM plain_t WITH (connector = 'blackhole', "
            "properties.sasl.password = 'SinkPw999', type = 'append-only', force_append_only = 'true')"
        )
        c.execute(
            "CREATE CONNECTION kconn WITH (type = 'kafka', "
            "properties.bootstrap.server = 'localhost:9', properties.sasl.password = 'ConnPw222', "
            "s3.secret.key = 'S3Secret000')"
        )
        with pytest.raises(psycopg.errors.InvalidParameterValue, match="JAAS"):
            c.execute(
                f"CREATE TABLE kt_jaas (a INT) WITH ({k}, properties.sasl.jaas.config = "
                "'org.x.PlainLoginModule required password=\"JaasPw888\";') "
                "FORMAT PLAIN ENCODE JSON"
            )
        with pytest.raises(psycopg.Error) as ei:  # an error while such a statement runs
            c.execute(
                f"CREATE SOURCE ks (a INT) WITH ({k}, properties.sasl.password = 'ErrPw444') "
                "FORMAT PLAIN ENCODE JSON"
            )
        c.execute("FLUSH")
    return {"error": str(ei.value) + str(ei.value.diag.message_detail or "")}


def _everything_shown(srv: SwellServer) -> list[Any]:
    out: list[Any] = []
    with srv.connect() as c:
        for what in ("SOURCE ks", "SOURCE ks_ref", "TABLE kt", "SINK snk"):
            out += c.execute(f"SHOW CREATE {what}").fetchall()
        for q in (
            "SELECT * FROM rw_catalog.rw_sources",
            "SELECT * FROM rw_catalog.rw_tables",
            "SELECT * FROM rw_catalog.rw_sinks",
            "SELECT * FROM rw_catalog.rw_relations",
            "SELECT * FROM rw_catalog.rw_streaming_jobs",
            "SELECT * FROM rw_catalog.rw_connections",
            "SELECT * FROM rw_catalog.rw_secrets",
            "SELECT ftoptions FROM pg_catalog.pg_foreign_table",
            "SHOW CONNECTIONS",
        ):
            out += c.execute(q).fetchall()
    return out


def _leaks(text: str) -> list[str]:
    return [v for v in CREDENTIALS if v in text]


def test_nothing_shown_contains_a_credential(srv: SwellServer, created: dict[str, str]) -> None:
    shown = repr(_everything_shown(srv))
    assert _leaks(shown) == []
    assert "[REDACTED]" in shown and "SECRET kafka_pw" in shown
    assert "properties.sasl.username=bob" in shown  # other options stay visible
    assert _leaks(created["error"]) == []


def test_secret_reference_feeds_the_connector(srv: SwellServer, created: dict[str, str]) -> None:
    with srv.connect() as c:
        assert c.execute("SELECT count(*) FROM ks_ref").fetchone() == (3,)
        with pytest.raises(psycopg.errors.DependentObjectsStillExist):
            c.execute("DROP SECRET kafka_pw")
        with pytest.raises(psycopg.errors.UndefinedObject, match='secret "nope" does not exist'):
            c.execute(
                "CREATE SOURCE ks_bad (a INT) WITH (connector = 'kafka', topic = 't', "
                "properties.bootstrap.server = 'localhost:9', "
                "properties.sasl.password = SECRET nope) FORMAT PLAIN ENCODE JSON"
            )


def test_restart_keeps_working_and_disk_and_log_hold_no_credential(
    srv: SwellServer, created: dict[str, str]
) -> None:
    srv.restart()
    with srv.connect() as c:
        assert c.execute("SELECT count(*) FROM ks_ref").fetchone() == (3,)
    assert _leaks(repr(_everything_shown(srv))) == []
    assert _leaks(srv.log_text(all_runs=True)) == []
    srv.stop()
    try:
        for p in srv.data_dir.rglob("*"):
            if p.is_file() and p.name != "swell-server.log":
                data = p.read_bytes()
                assert [v for v in CREDENTIALS if v.encode() in data] == [], p
        assert (srv.data_dir / "secret.key").stat().st_mode & 0o077 == 0
    finally:
        srv.start()


def test_another_key_is_refused_with_a_clear_message(
    make_server: Callable[..., SwellServer], tmp_path: Path
) -> None:
    data = tmp_path / "data"
    key = "11" * 32
    first = make_server(data_dir=data, env={"SWELL_SECRET_STORE_PRIVATE_KEY_HEX": key})
    with first.connect() as c:
        c.execute("CREATE SECRET s1 WITH (backend = 'meta') AS 'SecretVal111'")
    first.stop()
    assert not (data / "secret.key").exists()  # the environment's key never touches disk
    other = SwellServer(data, env={"SWELL_SECRET_STORE_PRIVATE_KEY_HEX": "22" * 32})
    with pytest.raises(ServerError):
        other.start()
    assert "encrypted with another secret store key" in other.log_text()
    missing = SwellServer(data)  # neither the variable nor the key file
    with pytest.raises(ServerError):
        missing.start()
    assert "secret store key is missing" in missing.log_text()
    again = SwellServer(data, env={"SWELL_SECRET_STORE_PRIVATE_KEY_HEX": key}).start()
    try:
        with again.connect() as c:
            assert c.execute("SELECT name FROM rw_catalog.rw_secrets").fetchall() == [("s1",)]
    finally:
        again.stop()
