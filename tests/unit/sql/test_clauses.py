"""engine.sql.clauses: RisingWave DDL suffix clauses, CREATE/DROP SECRET, parser routing."""

from __future__ import annotations

import pytest
import sqlglot

from engine.errors import FeatureNotSupported, SqlSyntaxError
from engine.sql.clauses import (
    create_object_kind,
    parse_create_secret,
    parse_ddl_clauses,
    parse_drop_secret,
)
from engine.sql.parser import parse_one

SEED_WBH = """CREATE TABLE wbhtable1 (
      data JSONB
    ) WITH (
      connector = 'webhook'
    ) VALIDATE AS secure_compare(
      headers->>'authorization',
      'TEST_WEBHOOK'
    )"""

SEED_SINK = """CREATE SINK rest_sink FROM product_view_events
    WITH (
        connector = 'iceberg',
        type = 'upsert',
        primary_key = 'event_id',
        catalog.type = 'rest',
        s3.path.style.access = 'true',
        s3.region = 'dummy'
    )"""

SEED_KAFKA_SINK = """CREATE SINK kafka_sink2 FROM events WITH (
  connector = 'kafka',
  topic = 'query_complete',
  properties.bootstrap.server = 'broker2:29092'
) FORMAT PLAIN ENCODE JSON (force_append_only='true')"""


def test_seed_webhook_table() -> None:
    c = parse_ddl_clauses(SEED_WBH)
    assert c.options == {"connector": "webhook"}
    assert (
        c.validate
        == "secure_compare(\n      headers->>'authorization',\n      'TEST_WEBHOOK'\n    )"
    )
    assert c.validate_secret is None
    assert len(c.stripped) == len(SEED_WBH)
    assert c.stripped.count("\n") == SEED_WBH.count("\n")
    tree = sqlglot.parse_one(c.stripped, read="risingwave")
    assert isinstance(tree, sqlglot.exp.Create)
    assert SEED_WBH[c.validate_position :].startswith("secure_compare")


def test_seed_sinks_dotted_keys_and_format() -> None:
    c = parse_ddl_clauses(SEED_SINK)
    assert c.options["catalog.type"] == "rest"
    assert c.options["s3.path.style.access"] == "true"
    assert c.options["type"] == "upsert"
    k = parse_ddl_clauses(SEED_KAFKA_SINK)
    assert k.options["properties.bootstrap.server"] == "broker2:29092"
    assert (k.format, k.encode) == ("PLAIN", "JSON")
    assert k.format_options == {"force_append_only": "true"}
    assert "FORMAT" not in k.stripped and "WITH" not in k.stripped


def test_option_values() -> None:
    c = parse_ddl_clauses(
        "CREATE TABLE t (a INT) WITH (Connector = 'x', is_batched = true, b = FALSE, n = 10, "
        "m = -5, q = 'it''s', s3.secret.key = secret my_s, conn = my_conn, \"Quoted\" = 'v')"
    )
    assert c.options == {
        "connector": "x",
        "is_batched": "true",
        "b": "false",
        "n": "10",
        "m": "-5",
        "q": "it's",
        "conn": "my_conn",
        "Quoted": "v",
    }
    assert c.secret_refs == {"s3.secret.key": "my_s"}
    assert c.has_with and c.any


def test_validate_secret_and_github_style() -> None:
    sql = (
        "CREATE TABLE gh (data JSONB) WITH (connector = 'webhook', is_batched = true) "
        "VALIDATE SECRET test_secret AS secure_compare(headers->>'x-hub-signature-256', "
        "'sha256=' || encode(hmac(test_secret, data, 'sha256'), 'hex'))"
    )
    c = parse_ddl_clauses(sql)
    assert c.validate_secret == "test_secret"
    assert c.validate is not None and c.validate.startswith("secure_compare(")
    assert c.validate.endswith("'hex'))")
    assert c.options == {"connector": "webhook", "is_batched": "true"}


def test_include_append_only_on_conflict() -> None:
    c = parse_ddl_clauses(
        "CREATE TABLE t (k BYTEA, v INT, PRIMARY KEY (k)) INCLUDE key AS k "
        "INCLUDE header 'trace' varchar AS tr INCLUDE partition WITH (connector = 'kafka') "
        "FORMAT UPSERT ENCODE JSON APPEND ONLY ON CONFLICT DO UPDATE IF NOT NULL "
        "WITH VERSION COLUMN (v)"
    )
    assert [(i.what, i.inner, i.type_sql, i.alias) for i in c.include] == [
        ("key", None, None, "k"),
        ("header", "trace", "varchar", "tr"),
        ("partition", None, None, None),
    ]
    assert c.append_only
    assert c.on_conflict == "DO UPDATE IF NOT NULL"
    assert c.version_column == "v"
    assert (c.format, c.encode) == ("UPSERT", "JSON")
    assert sqlglot.parse_one(c.stripped, read="risingwave") is not None


@pytest.mark.parametrize("action", ["DO NOTHING", "OVERWRITE"])
def test_on_conflict_actions(action: str) -> None:
    c = parse_ddl_clauses(f"CREATE TABLE t (a INT PRIMARY KEY) ON CONFLICT {action}")
    assert c.on_conflict == action


def test_functions_named_like_clauses_are_left_alone() -> None:
    sql = "CREATE SINK s AS SELECT format('%s', a) AS f, encode(b, 'hex') FROM t WITH (x = '1')"
    c = parse_ddl_clauses(sql)
    assert c.format is None and c.options == {"x": "1"}
    assert "format('%s', a)" in c.stripped


def test_nothing_to_strip() -> None:
    sql = "CREATE TABLE t (a INT, b VARCHAR)"
    c = parse_ddl_clauses(sql)
    assert c.stripped == sql and not c.any


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE TABLE t (a INT) WITH (connector = )",
        "CREATE TABLE t (a INT) WITH (connector 'x')",
        "CREATE TABLE t (a INT) WITH (a = '1' b = '2')",
        "CREATE TABLE t (a INT) WITH (a = '1', a = '2')",
        "CREATE TABLE t (a INT) WITH (a = '1') WITH (b = '2')",
        "CREATE TABLE t (a INT) ON CONFLICT DO SOMETHING",
        "CREATE TABLE t (data JSONB) VALIDATE AS",
    ],
)
def test_syntax_errors(sql: str) -> None:
    with pytest.raises(SqlSyntaxError) as e:
        parse_ddl_clauses(sql)
    assert e.value.sqlstate == "42601"


def test_create_secret() -> None:
    d = parse_create_secret("CREATE SECRET test_secret WITH (backend = 'meta') AS 'sEcReT'")
    assert (d.name, d.value, d.if_not_exists) == ("test_secret", "sEcReT", False)
    d2 = parse_create_secret("create secret if not exists \"S\" as 'x'")
    assert (d2.name, d2.if_not_exists) == ("S", True)


def test_create_secret_errors_never_show_the_value() -> None:
    with pytest.raises(SqlSyntaxError) as e:
        parse_create_secret("CREATE SECRET s WITH (backend = 'meta') 'hunter2'")
    assert "hunter2" not in str(e.value) and e.value.position is not None
    with pytest.raises(FeatureNotSupported):
        parse_create_secret("CREATE SECRET s WITH (backend = 'hashicorp_vault') AS 'v'")


def test_drop_secret() -> None:
    assert parse_drop_secret("DROP SECRET s") == ("s", False)
    assert parse_drop_secret("drop secret if exists public.s") == ("s", True)
    with pytest.raises(SqlSyntaxError):
        parse_drop_secret("DROP SECRET s t")


def test_create_object_kind() -> None:
    assert create_object_kind("CREATE TABLE t (a int)") == "TABLE"
    assert create_object_kind("create or replace temp view v as select 1") == "VIEW"
    assert create_object_kind("CREATE MATERIALIZED VIEW m AS SELECT 1") == "MATERIALIZED"
    assert create_object_kind("SELECT 1") is None


def test_parser_routes_statements() -> None:
    st = parse_one(SEED_WBH)
    assert st.kind == "create_table"
    assert st.args["clauses"].validate is not None
    assert st.sql == SEED_WBH  # SHOW CREATE prints what the user wrote
    assert parse_one("CREATE SECRET s WITH (backend = 'meta') AS 'v'").kind == "create_secret"
    assert parse_one("DROP SECRET IF EXISTS s").kind == "drop_secret"
    assert parse_one("CREATE TABLE t (a int) APPEND ONLY").args["append_only"] is True
