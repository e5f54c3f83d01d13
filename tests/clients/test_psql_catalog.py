"""psql's meta-commands against Swell's system catalogs, with ON_ERROR_STOP=1.

Every query psql sends behind `\\l \\dn \\dt \\dv \\dm \\di \\du \\d t \\d+ mv \\df` must run
on the real engine (pg_catalog relations, correlated subqueries, OPERATOR(pg_catalog.~),
format_type, pg_get_indexdef...). The expected lines are what PostgreSQL 15's psql prints
for the same objects, where Swell's objects map onto PostgreSQL's.
"""

from __future__ import annotations

import pytest

from harness.server import SwellServer
from tests.clients.test_psql import PSQL, psql

pytestmark = [pytest.mark.clients, pytest.mark.needs("psql")]


@pytest.fixture
def objects(server: SwellServer) -> None:
    r = psql(
        server,
        "-c",
        "CREATE TABLE IF NOT EXISTS cat_t (id INT PRIMARY KEY, v VARCHAR, ts TIMESTAMPTZ)",
        "-c",
        "CREATE MATERIALIZED VIEW IF NOT EXISTS cat_mv AS SELECT v, count(*) AS c FROM cat_t "
        "GROUP BY v",
        "-c",
        "CREATE VIEW IF NOT EXISTS cat_v AS SELECT id FROM cat_t",
    )
    assert r.returncode == 0, r.stderr


def meta(server: SwellServer, command: str) -> list[str]:
    assert PSQL is not None
    r = psql(server, "-c", command)
    assert r.returncode == 0, f"{command}: {r.stderr}"
    return [ln.rstrip() for ln in r.stdout.splitlines()]


def test_list_databases_schemas_roles(server: SwellServer) -> None:
    out = meta(server, r"\l")
    assert any(ln.split("|")[0].strip() == "dev" for ln in out)
    out = meta(server, r"\dn")
    rows = [[c.strip() for c in ln.split("|")] for ln in out if "|" in ln]
    assert ["public", "root"] in rows
    out = meta(server, r"\du")
    assert any(ln.startswith(" root ") and "Superuser" in ln for ln in out)


def test_list_relations(server: SwellServer, objects: None) -> None:
    assert " public | cat_t | table | root" in meta(server, r"\dt cat_*")
    assert " public | cat_v | view | root" in meta(server, r"\dv cat_*")
    assert " public | cat_mv | materialized view | root" in meta(server, r"\dm cat_*")
    assert " public | cat_t_pkey | index | root  | cat_t" in meta(server, r"\di cat_*")


def test_describe_table(server: SwellServer, objects: None) -> None:
    out = meta(server, r"\d cat_t")
    assert out[0].strip() == 'Table "public.cat_t"'
    assert out[3:6] == [
        " id     | integer                  |           | not null |",
        " v      | character varying        |           |          |",
        " ts     | timestamp with time zone |           |          |",
    ]
    assert out[6:8] == ["Indexes:", '    "cat_t_pkey" PRIMARY KEY, btree (id)']


def test_describe_materialized_view_verbose(server: SwellServer, objects: None) -> None:
    out = meta(server, r"\d+ cat_mv")
    assert out[0].strip() == 'Materialized view "public.cat_mv"'
    assert out[3].startswith(" v      | character varying |")
    assert out[4].startswith(" c      | bigint            |")
    assert "View definition:" in out


def test_describe_view_and_system_relation(server: SwellServer, objects: None) -> None:
    out = meta(server, r"\d cat_v")
    assert out[0].strip() == 'View "public.cat_v"'
    out = meta(server, r"\d pg_catalog.pg_class")
    assert out[0].strip() == 'Table "pg_catalog.pg_class"'
    assert " relname             | name         |           |          |" in out


def test_list_functions(server: SwellServer) -> None:
    out = meta(server, r"\df")
    assert out[-2] == "(0 rows)"
    out = meta(server, r"\df pg_catalog.format_type")
    assert " pg_catalog | format_type | text             | oid, integer        | func" in out


def test_more_meta_commands(server: SwellServer, objects: None) -> None:
    for command in (r"\l+", r"\dt+", r"\dm+", r"\di+", r"\dn+", r"\du+", r"\dx+", r"\dL", r"\db",
                    r"\dE", r"\dT"):  # fmt: skip
        meta(server, command)
    assert meta(server, r"\db")[3].startswith(" pg_default | root")


def test_list_user_functions_and_comments(server: SwellServer) -> None:
    r = psql(
        server,
        "-c",
        "CREATE FUNCTION cat_f(a INT, b VARCHAR) RETURNS VARCHAR LANGUAGE sql AS 'select b'",
        "-c",
        "CREATE TABLE cat_c (id INT PRIMARY KEY, note VARCHAR)",
        "-c",
        "COMMENT ON TABLE cat_c IS 'commented table'",
        "-c",
        "COMMENT ON COLUMN cat_c.note IS 'free text'",
    )
    assert r.returncode == 0, r.stderr
    try:
        rows = [
            [c.strip() for c in ln.split("|")] for ln in meta(server, r"\df cat_f") if "|" in ln
        ]
        assert [
            "public",
            "cat_f",
            "character varying",
            "a integer, b character varying",
            "func",
        ] in rows
        assert any("select b" in ln for ln in meta(server, r"\df+ cat_f"))  # its source
        out = meta(server, r"\d+ cat_c")
        note = next(ln for ln in out if ln.startswith(" note "))
        assert note.rstrip().endswith("| free text")
        dt = [[c.strip() for c in ln.split("|")] for ln in meta(server, r"\dt+ cat_c") if "|" in ln]
        assert dt[-1][0:2] == ["public", "cat_c"] and dt[-1][-1] == "commented table"
    finally:
        psql(server, "-c", "DROP FUNCTION cat_f", "-c", "DROP TABLE cat_c")


def test_list_and_describe_created_indexes(server: SwellServer) -> None:
    r = psql(
        server,
        "-c",
        "CREATE TABLE IF NOT EXISTS cat_ix (id INT PRIMARY KEY, k INT, v VARCHAR)",
        "-c",
        "CREATE INDEX IF NOT EXISTS cat_ix_k ON cat_ix (k) INCLUDE (v)",
    )
    assert r.returncode == 0, r.stderr
    out = meta(server, r"\di cat_ix*")
    assert " public | cat_ix_k    | index | root  | cat_ix" in out, out
    assert " public | cat_ix_pkey | index | root  | cat_ix" in out, out
    described = meta(server, r"\d cat_ix")
    assert '    "cat_ix_k" btree (k)' in described, described
    assert psql(server, "-c", "DROP TABLE cat_ix").returncode == 0
    assert not any("cat_ix_k" in ln for ln in meta(server, r"\di"))
