"""The differential SQL fuzzer: random queries run by Swell and by PostgreSQL 15 must agree.

A private PostgreSQL 15 cluster (harness.postgres) and the shared Swell server get the
same random tables (fuzz.grammar); then queries from the grammar run on both until the
time budget is spent, every eighth one on Swell as a materialized view, and
fuzz.differential compares the results; a second test keeps views through random
inserts, updates and deletes and compares them after every FLUSH. The suite runs a fixed seed for
`SWELL_FUZZ_SECONDS` (default 60) so a failure reproduces; `make fuzz` runs longer with a
fresh seed each time (`SWELL_FUZZ_SEED`, printed on failure). Every disagreement found
becomes a record in tests/slt/sql/fuzz_regressions.slt (or fuzz_regressions_2.slt) once
fixed.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from fuzz.differential import fuzz, fuzz_streaming, setup, summary, teardown
from harness.postgres import private_postgres

SECONDS = float(os.environ.get("SWELL_FUZZ_SECONDS", "60"))
#: the streaming loop's budget (views kept through inserts, updates and deletes)
STREAM_SECONDS = float(os.environ.get("SWELL_FUZZ_STREAM_SECONDS", str(SECONDS / 3)))
SEED = int(os.environ.get("SWELL_FUZZ_SEED", "20261201"))

pytestmark = [pytest.mark.e2e, pytest.mark.needs("initdb")]


@pytest.fixture(scope="module")
def postgres_conn() -> Iterator[psycopg.Connection[Any]]:
    with private_postgres() as port:
        conn = psycopg.connect(
            host="127.0.0.1", port=port, user="root", dbname="postgres", autocommit=True
        )
        try:
            yield conn
        finally:
            conn.close()


@pytest.mark.timeout(SECONDS + 120)
def test_swell_agrees_with_postgres(
    conn: psycopg.Connection[Any], postgres_conn: psycopg.Connection[Any]
) -> None:
    conn.autocommit = True
    setup([conn, postgres_conn], SEED)
    try:
        report = fuzz(conn, postgres_conn, SEED, deadline=time.monotonic() + SECONDS)
    finally:
        teardown([conn, postgres_conn])
    print(f"seed {SEED}: {summary(report)}")
    assert report.queries > 50, summary(report)
    assert not report.disagreements, (
        f"seed {SEED} (SWELL_FUZZ_SEED={SEED} to reproduce): {summary(report)}\n\n"
        + "\n\n".join(report.disagreements[:10])
    )


@pytest.mark.timeout(STREAM_SECONDS + 120)
def test_views_through_changes_agree_with_postgres(
    conn: psycopg.Connection[Any], postgres_conn: psycopg.Connection[Any]
) -> None:
    conn.autocommit = True
    setup([conn, postgres_conn], SEED)
    try:
        deadline = time.monotonic() + STREAM_SECONDS
        report = fuzz_streaming(conn, postgres_conn, SEED, deadline=deadline)
    finally:
        teardown([conn, postgres_conn])
    print(f"seed {SEED} (streaming): {summary(report)}")
    assert report.queries > 20, summary(report)
    assert not report.disagreements, (
        f"seed {SEED} (SWELL_FUZZ_SEED={SEED} to reproduce): {summary(report)}\n\n"
        + "\n\n".join(report.disagreements[:10])
    )
