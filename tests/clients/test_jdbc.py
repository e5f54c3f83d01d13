"""pgjdbc (the driver behind DBeaver, Metabase and most JVM tools) against Swell.

Runs tests/clients/jdbc/JdbcCheck.java with Java's single-file launcher; see that file for
what it checks (prepared INSERTs, a parameterised SELECT past prepareThreshold so results
switch to binary, aggregates, an error's SQLSTATE).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from harness.server import SwellServer

JAR = Path("/usr/share/java/postgresql.jar")
JAVA = shutil.which("java")
CHECK = Path(__file__).parent / "jdbc" / "JdbcCheck.java"


pytestmark = [
    pytest.mark.clients,
    pytest.mark.needs("jdbc"),
]


def test_jdbc_prepared_statements_and_binary_results(server: SwellServer) -> None:
    assert JAVA is not None
    r = subprocess.run(
        [JAVA, "-cp", str(JAR), str(CHECK), server.jdbc_url],
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert r.stdout.splitlines() == [
        "created table",
        "inserted 7 rows",
        "selected 8 times with a parameter",
        "error 42P01",
        "JDBC OK",
    ]


def test_jdbc_database_metadata(server: SwellServer) -> None:
    """DatabaseMetaData as DBeaver uses it: every query pgjdbc sends runs on the catalog."""
    assert JAVA is not None
    program = Path(__file__).parent / "jdbc" / "JdbcMetadata.java"
    r = subprocess.run(
        [JAVA, "-cp", str(JAR), str(program), server.jdbc_url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    lines = r.stdout.splitlines()
    assert lines[0] == "product PostgreSQL 13"
    assert lines[1] == "schemas information_schema,pg_catalog,public,rw_catalog"
    assert lines[2:6] == [
        "table jm_t_pkey INDEX",
        "table jm_mv MATERIALIZED VIEW",
        "table jm_t TABLE",
        "table jm_v VIEW",
    ]
    assert lines[6:12] == [
        "column jm_t.id int4 4 1 NO",
        "column jm_t.name varchar 12 2 YES",
        "column jm_t.amount float8 8 3 YES",
        "column jm_mv.name varchar 12 1 YES",
        "column jm_mv.n int8 -5 2 YES",
        "column jm_v.id int4 4 1 YES",
    ]
    assert lines[12:] == [
        "pk id 1 jm_t_pkey",
        "index jm_t_pkey id unique=true",
        "typeinfo true int4=true",
        "prepared jm_mv",
    ]
