"""pg_catalog, information_schema and rw_catalog contents, and the catalog functions and
syntax client queries use, run through the real planner and batch executor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engine.errors import EngineError
from harness.kafka import KafkaBroker

Sql = Callable[[str], list[tuple[Any, ...]]]


@pytest.fixture
def objects(sql: Sql) -> None:
    sql("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR, ts TIMESTAMPTZ)")
    sql("CREATE TABLE nopk (a BIGINT, b JSONB)")
    sql("CREATE MATERIALIZED VIEW mv AS SELECT v, count(*) AS c FROM t GROUP BY v")
    sql("CREATE VIEW vv AS SELECT id FROM t")


def test_pg_class_relkinds_and_oids(sql: Sql, objects: None) -> None:
    rows = sql(
        "SELECT c.relname, c.relkind, c.relnatts, c.relhasindex FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' ORDER BY 1"
    )
    assert rows == [
        ("mv", "m", 2, False),
        ("nopk", "r", 2, False),
        ("t", "r", 3, True),
        ("t_pkey", "i", 1, False),
        ("vv", "v", 1, False),
    ]
    assert sql("SELECT 't'::regclass::oid = (SELECT oid FROM pg_class WHERE relname = 't')") == [
        (True,)
    ]


def test_pg_attribute_and_format_type(sql: Sql, objects: None) -> None:
    rows = sql(
        "SELECT a.attnum, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull "
        "FROM pg_attribute a WHERE a.attrelid = 't'::regclass AND a.attnum > 0 ORDER BY 1"
    )
    assert rows == [
        (1, "id", "integer", True),
        (2, "v", "character varying", False),
        (3, "ts", "timestamp with time zone", False),
    ]
    # the hidden _row_id of a table without a primary key is not a user column
    assert sql("SELECT count(*) FROM pg_attribute WHERE attrelid = 'nopk'::regclass") == [(2,)]


def test_pg_type_arrays_and_regtype(sql: Sql) -> None:
    rows = sql(
        "SELECT t.typname, e.typname, t.oid::regtype::text FROM pg_type t "
        "JOIN pg_type e ON e.oid = t.typelem WHERE t.oid = ANY (ARRAY[1007, 1015, 1028])"
        " ORDER BY 1"
    )
    assert rows == [
        ("_int4", "int4", "integer[]"),
        ("_oid", "oid", "oid[]"),
        ("_varchar", "varchar", "character varying[]"),
    ]
    assert sql("SELECT to_regtype('integer')::oid, 'pg_catalog.array_in'::regproc::oid") == [
        (23, 750)
    ]


def test_index_and_constraint_definitions(sql: Sql, objects: None) -> None:
    rows = sql(
        "SELECT pg_get_indexdef(i.indexrelid), pg_get_constraintdef(con.oid), i.indisprimary "
        "FROM pg_index i JOIN pg_constraint con ON con.conindid = i.indexrelid "
        "WHERE i.indrelid = 't'::regclass"
    )
    assert rows == [
        ("CREATE UNIQUE INDEX t_pkey ON public.t USING btree (id)", "PRIMARY KEY (id)", True)
    ]


def test_correlated_subqueries(sql: Sql, objects: None) -> None:
    rows = sql(
        "SELECT c.relname, (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = c.oid), "
        "EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid), "
        "ARRAY(SELECT a.attname FROM pg_attribute a WHERE a.attrelid = c.oid "
        "ORDER BY a.attnum) FROM pg_class c WHERE c.relnamespace = 2200 AND c.relkind = 'r' "
        "ORDER BY 1"
    )
    assert rows == [("nopk", 2, False, ["a", "b"]), ("t", 3, True, ["id", "v", "ts"])]


def test_regex_operator_collate_and_visibility(sql: Sql, objects: None) -> None:
    rows = sql(
        "SELECT c.relname FROM pg_catalog.pg_class c "
        "WHERE c.relname OPERATOR(pg_catalog.~) '^(t|mv)$' COLLATE pg_catalog.default "
        "AND pg_catalog.pg_table_is_visible(c.oid) ORDER BY 1"
    )
    assert rows == [("mv",), ("t",)]
    assert sql("SELECT 'abc' ~ 'b', 'abc' !~ 'b', 'ABC' ~* 'b'") == [(True, False, True)]


def test_session_functions(sql: Sql) -> None:
    assert sql("SELECT current_schemas(true), current_schemas(false)") == [
        (["pg_catalog", "public"], ["public"])
    ]
    assert sql("SELECT set_config('application_name', 'cat', false)") == [("cat",)]
    assert sql("SELECT current_setting('application_name')") == [("cat",)]
    assert sql("SHOW application_name") == [("cat",)]
    with pytest.raises(EngineError) as e:
        sql("SELECT current_setting('no_such_setting')")
    assert e.value.sqlstate == "42704"
    assert sql("SELECT current_setting('no_such_setting', true)") == [(None,)]


def test_table_functions_and_aggregates(sql: Sql) -> None:
    assert sql(
        "SELECT (current_schemas(true))[s.r] FROM generate_series(1, "
        "array_upper(current_schemas(true), 1)) AS s(r) ORDER BY s.r"
    ) == [("pg_catalog",), ("public",)]
    assert sql("SELECT * FROM information_schema._pg_expandarray(ARRAY[5, 7])") == [
        (5, 1),
        (7, 2),
    ]
    assert sql(
        "SELECT string_agg(x, ',' ORDER BY x DESC), array_agg(x ORDER BY x) "
        "FROM unnest(ARRAY['b', 'a', 'c']) AS x"
    ) == [("c,b,a", ["a", "b", "c"])]


def test_information_schema(sql: Sql, objects: None) -> None:
    rows = sql(
        "SELECT table_name, table_type FROM information_schema.tables "
        "WHERE table_schema = 'public' ORDER BY 1"
    )
    assert rows == [("mv", "VIEW"), ("nopk", "BASE TABLE"), ("t", "BASE TABLE"), ("vv", "VIEW")]
    rows = sql(
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
        "WHERE table_name = 'mv' ORDER BY ordinal_position"
    )
    assert rows == [("v", "character varying", "YES"), ("c", "bigint", "YES")]
    rows = sql(
        "SELECT tc.constraint_type, k.column_name FROM information_schema.table_constraints tc "
        "JOIN information_schema.key_column_usage k ON k.constraint_name = tc.constraint_name "
        "WHERE tc.table_name = 't'"
    )
    assert rows == [("PRIMARY KEY", "id")]
    with pytest.raises(EngineError):  # information_schema is not on the search path
        sql("SELECT * FROM schemata")


def test_rw_catalog(sql: Sql, objects: None) -> None:
    sql("CREATE SECRET s1 WITH (backend = 'meta') AS 'hunter2'")
    assert sql("SELECT name FROM rw_tables ORDER BY 1") == [("nopk",), ("t",)]
    assert sql("SELECT name FROM rw_catalog.rw_materialized_views") == [("mv",)]
    assert sql("SELECT name FROM rw_views") == [("vv",)]
    assert sql("SELECT * FROM rw_secrets") == [(1, "s1", 2200, 10)]
    assert sql("SELECT name, kind, status FROM rw_streaming_jobs ORDER BY 1") == [
        ("mv", "MATERIALIZED VIEW", "RUNNING"),
        ("nopk", "TABLE", "RUNNING"),
        ("t", "TABLE", "RUNNING"),
    ]
    ids = sql("SELECT r.id = c.oid FROM rw_relations r JOIN pg_class c ON c.relname = r.name")
    assert ids and all(r[0] for r in ids)
    assert sql("SHOW JOBS") == []  # only jobs still creating, as in RisingWave


def test_result_columns_carry_table_oid_and_attnum(result: Callable[[str], Any], sql: Sql) -> None:
    sql("CREATE TABLE orig (a INT PRIMARY KEY, b VARCHAR)")
    (oid,) = sql("SELECT 'orig'::regclass::oid")[0]
    r = result("SELECT b, a, a + 1 AS c FROM orig")
    assert [f.origin for f in r.columns] == [(oid, 2), (oid, 1), None]
    r = result("SELECT relname FROM pg_class")
    assert r.columns[0].origin == (1259, 2)


def test_sources_are_foreign_tables(sql: Sql, kafka_broker: KafkaBroker) -> None:
    sql(
        "CREATE SOURCE fsrc (a INT) WITH (connector = 'kafka', topic = 't1', "
        f"properties.bootstrap.server = '{kafka_broker.bootstrap}') FORMAT PLAIN ENCODE JSON"
    )
    assert sql("SELECT relkind FROM pg_class WHERE relname = 'fsrc'") == [("f",)]
    rows = sql(
        "SELECT s.srvname, array_to_string(ARRAY(SELECT quote_ident(option_name) || ' ' || "
        "quote_literal(option_value) FROM pg_options_to_table(ftoptions)), ', ') "
        "FROM pg_foreign_table f, pg_foreign_server s "
        "WHERE f.ftrelid = 'fsrc'::regclass AND s.oid = f.ftserver"
    )
    boot = kafka_broker.bootstrap
    assert rows == [("kafka", f"\"properties.bootstrap.server\" '{boot}', topic 't1'")]


def test_row_counts(sql: Sql) -> None:
    sql("CREATE TABLE cnt (a INT PRIMARY KEY)")
    sql("INSERT INTO cnt VALUES (1), (2), (3)")
    sql("FLUSH")
    assert sql("SELECT n_live_tup FROM pg_stat_user_tables WHERE relname = 'cnt'") == [(3,)]
    assert sql("SELECT reltuples FROM pg_class WHERE relname = 'cnt'") == [(3.0,)]
