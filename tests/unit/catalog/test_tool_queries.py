"""Grafana's and Metabase's schema queries (their SQL as their sources build it: Grafana's
postgresMetaQuery.ts, Metabase's postgres.clj via honeysql) run on Swell's catalogs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

Sql = Callable[[str], list[tuple[Any, ...]]]

SEARCH_PATH_SCHEMAS = """
          quote_ident(table_schema) IN (
          SELECT
            CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
          FROM
            generate_series(
              array_lower(string_to_array(current_setting('search_path'),','),1),
              array_upper(string_to_array(current_setting('search_path'),','),1)
            ) as i,
            string_to_array(current_setting('search_path'),',') s
          )"""

GRAFANA_TABLES = f"""SELECT
    CASE WHEN {SEARCH_PATH_SCHEMAS}
      THEN quote_ident(table_name)
      ELSE quote_ident(table_schema) || '.' || quote_ident(table_name)
    END AS "table"
    FROM information_schema.tables
    WHERE quote_ident(table_schema) NOT IN ('information_schema',
                             'pg_catalog',
                             '_timescaledb_cache',
                             '_timescaledb_catalog',
                             '_timescaledb_internal',
                             '_timescaledb_config',
                             'timescaledb_information',
                             'timescaledb_experimental')
    ORDER BY CASE WHEN {SEARCH_PATH_SCHEMAS} THEN 0 ELSE 1 END, 1"""

GRAFANA_COLUMNS = f"""SELECT quote_ident(column_name) AS "column", data_type AS "type"
    FROM information_schema.columns
    WHERE
      CASE WHEN array_length(parse_ident('tq_mv'),1) = 2
        THEN quote_ident(table_schema) = (parse_ident('tq_mv'))[1]
          AND quote_ident(table_name) = (parse_ident('tq_mv'))[2]
        ELSE quote_ident(table_name) = 'tq_mv'
          AND {SEARCH_PATH_SCHEMAS}
      END"""

METABASE_TABLES = """SELECT n.nspname AS schema, c.relname AS name, CASE c.relkind WHEN 'r' THEN 'TABLE' WHEN 'p' THEN 'PARTITIONED TABLE' WHEN 'v' THEN 'VIEW' WHEN 'f' THEN 'FOREIGN TABLE' WHEN 'm' THEN 'MATERIALIZED VIEW' ELSE NULL END AS type, d.description AS description, stat.n_live_tup AS estimated_row_count FROM pg_catalog.pg_class AS c INNER JOIN pg_catalog.pg_namespace AS n ON c.relnamespace = n.oid LEFT JOIN pg_catalog.pg_description AS d ON (c.oid = d.objoid) AND (d.objsubid = 0) AND (d.classoid = 'pg_class'::regclass) LEFT JOIN pg_stat_user_tables AS stat ON (n.nspname = stat.schemaname) AND (c.relname = stat.relname) WHERE (c.relnamespace = n.oid) AND (n.nspname !~ '^pg_') AND (n.nspname <> 'information_schema') AND c.relkind in ('r', 'p', 'v', 'f', 'm') AND (n.nspname IN ('public')) ORDER BY type ASC, schema ASC, name ASC"""

METABASE_FIELDS = """SELECT c.column_name AS name, CASE WHEN c.udt_schema IN ('public', 'pg_catalog') THEN FORMAT('%s', c.udt_name) ELSE FORMAT('"%s"."%s"', c.udt_schema, c.udt_name) END AS "database-type", c.ordinal_position - 1 AS "database-position", c.table_schema AS "table-schema", c.table_name AS "table-name", pk.column_name IS NOT NULL AS "pk?", COL_DESCRIPTION(CAST(CAST(FORMAT('%I.%I', CAST(c.table_schema AS TEXT), CAST(c.table_name AS TEXT)) AS REGCLASS) AS OID), c.ordinal_position) AS "field-comment", ((column_default IS NULL) OR (LOWER(column_default) = 'null')) AND (is_nullable = 'NO') AND NOT (((column_default IS NOT NULL) AND (column_default LIKE '%nextval(%')) OR (is_identity <> 'NO')) AS "database-required", ((column_default IS NOT NULL) AND (column_default LIKE '%nextval(%')) OR (is_identity <> 'NO') AS "database-is-auto-increment" FROM information_schema.columns AS c LEFT JOIN (SELECT tc.table_schema, tc.table_name, kc.column_name FROM information_schema.table_constraints AS tc INNER JOIN information_schema.key_column_usage AS kc ON (tc.constraint_name = kc.constraint_name) AND (tc.table_schema = kc.table_schema) AND (tc.table_name = kc.table_name) WHERE tc.constraint_type = 'PRIMARY KEY') AS pk ON (c.table_schema = pk.table_schema) AND (c.table_name = pk.table_name) AND (c.column_name = pk.column_name) WHERE c.table_schema !~ '^information_schema|catalog_history|pg_' AND c.table_schema IN ('public') ORDER BY "table-schema", "table-name", "database-position"
"""


@pytest.fixture
def objects(sql: Sql) -> None:
    sql("CREATE TABLE tq_t (id INT PRIMARY KEY, v VARCHAR)")
    sql("CREATE MATERIALIZED VIEW tq_mv AS SELECT v, count(*) AS c FROM tq_t GROUP BY v")


def test_grafana_version_and_schemas(sql: Sql) -> None:
    assert sql("SELECT current_setting('server_version_num')::int/100 as version") == [(1300,)]
    assert sql("SELECT extversion FROM pg_extension WHERE extname = 'timescaledb'") == []
    rows = sql(
        """SELECT schema_name AS "name" FROM information_schema.schemata
        WHERE schema_name NOT IN ('information_schema', 'pg_catalog', 'pg_toast')
        ORDER BY schema_name"""
    )
    assert rows == [("public",), ("rw_catalog",)]


def test_grafana_table_picker_finds_materialized_views(sql: Sql, objects: None) -> None:
    rows = [r[0] for r in sql(GRAFANA_TABLES)]
    assert rows[:2] == ["tq_mv", "tq_t"]  # the user's search path first, unqualified
    assert all(r.startswith("rw_catalog.") for r in rows[2:])


def test_grafana_column_picker(sql: Sql, objects: None) -> None:
    assert sql(GRAFANA_COLUMNS) == [("v", "character varying"), ("c", "bigint")]


def test_metabase_tables_and_fields(sql: Sql, objects: None) -> None:
    assert sql(METABASE_TABLES.replace("'public'", "'public'")) == [
        ("public", "tq_mv", "MATERIALIZED VIEW", None, 0),
        ("public", "tq_t", "TABLE", None, 0),
    ]
    rows = sql(METABASE_FIELDS)
    assert [(r[0], r[1], r[2], r[4], r[5], r[7]) for r in rows] == [
        ("v", "varchar", 0, "tq_mv", False, False),
        ("c", "int8", 1, "tq_mv", False, False),
        ("id", "int4", 0, "tq_t", True, True),
        ("v", "varchar", 1, "tq_t", False, False),
    ]
    assert sql("show timezone") == [("UTC",)]
