"""The system-relation registry: registration, FROM resolution, search path, refusals."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from engine.catalog.system import (
    SystemContext,
    register_system_relation,
    system_relation,
)
from engine.errors import EngineError
from engine.types import INT, VARCHAR, Field

Sql = Callable[[str], list[tuple[Any, ...]]]


def test_registered_relation_is_computed_at_query_time(sql: Sql) -> None:
    calls: list[SystemContext] = []

    def provider(ctx: SystemContext) -> list[tuple[Any, ...]]:
        calls.append(ctx)
        return [(len(ctx.catalog.relations), ctx.session.user)]

    register_system_relation(
        "rw_catalog", "rw_test_probe", [Field("n", INT), Field("who", VARCHAR)], provider
    )
    assert sql("SELECT n, who FROM rw_catalog.rw_test_probe") == [(0, "root")]
    sql("CREATE TABLE probe_t (a INT)")
    # unqualified: rw_catalog comes after the user's schemas on the search path
    assert sql("SELECT n FROM rw_test_probe") == [(1,)]
    assert len(calls) == 2


def test_pg_catalog_is_implicitly_first(sql: Sql) -> None:
    rows = sql("SELECT nspname FROM pg_namespace ORDER BY nspname")
    assert [r[0] for r in rows] == ["information_schema", "pg_catalog", "public", "rw_catalog"]
    assert sql("SELECT oid FROM pg_catalog.pg_namespace WHERE nspname = 'public'") == [(2200,)]


def test_join_system_and_user_relations(sql: Sql) -> None:
    sql("CREATE TABLE jt (id INT PRIMARY KEY, v VARCHAR)")
    rows = sql(
        "SELECT t.tablename, t.hasindexes, n.oid FROM pg_tables t "
        "JOIN pg_namespace n ON n.nspname = t.schemaname WHERE t.schemaname = 'public'"
    )
    assert rows == [("jt", True, 2200)]


def test_columns_carry_postgres_types(result: Callable[[str], Any]) -> None:
    r = result("SELECT oid, nspname, nspacl FROM pg_namespace")
    assert [f.type.oid for f in r.columns] == [26, 19, 1034]


def test_materialized_view_on_system_relation_is_refused(sql: Sql) -> None:
    with pytest.raises(EngineError) as e:
        sql("CREATE MATERIALIZED VIEW bad AS SELECT * FROM pg_tables")
    assert e.value.sqlstate == "0A000"


def test_unknown_system_relation(sql: Sql) -> None:
    with pytest.raises(EngineError) as e:
        sql("SELECT * FROM pg_catalog.no_such_thing")
    assert e.value.sqlstate == "42P01"


def test_stable_oids() -> None:
    pg_class_like = system_relation("pg_catalog", "pg_namespace")
    assert pg_class_like is not None and pg_class_like.oid == 2615
