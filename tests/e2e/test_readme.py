"""The README's tour runs as written: every ```sql block, in order, against a fresh server.

The blocks are executed statement by statement in one session (as psql would run them),
and the `sh` blocks that POST to the webhook port are run with bash. The outside services
the README names are replaced by local ones, and only those strings are replaced (each
must still appear in the README, so the substitutions cannot silently stop applying):

- `broker1:29092`, `broker2:29092` -> two Tansu brokers;
- `http://minio:9000` -> moto's S3 server (the bucket `swell-demo` is created first, as the
  README says it must exist);
- `http://lakekeeper:8181/catalog` -> the lakana-server REST catalog, which also wants a
  bearer token (`catalog.token`) and only allows the namespaces bronze/silver/gold
  (`'analytics'` -> `'bronze'`);
- `http://localhost:4560` -> the test server's webhook port.

A few results the README states in comments are checked too.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.iceberg import lakana, moto_s3  # noqa: F401 (fixtures)
from harness.kafka import KafkaBroker
from harness.seeds import wait_webhook
from harness.server import SwellServer

README = Path(__file__).resolve().parents[2] / "README.md"
_FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language, body) of every fenced block, in order."""
    return [(m.group(1), m.group(2)) for m in _FENCE.finditer(text)]


def split_statements(sql: str) -> list[str]:
    """Statements of a block: split at `;` outside quotes and `--` comments."""
    out, cur, i, n = [], [], 0, len(sql)
    while i < n:
        c = sql[i]
        if c in "'\"":
            j = sql.index(c, i + 1)
            while j + 1 < n and sql[j + 1] == c:  # doubled quote inside the literal
                j = sql.index(c, j + 2)
            cur.append(sql[i : j + 1])
            i = j + 1
        elif sql.startswith("--", i):
            j = sql.find("\n", i)
            i = n if j < 0 else j
        elif c == ";":
            out.append("".join(cur).strip())
            cur, i = [], i + 1
        else:
            cur.append(c)
            i += 1
    tail = "".join(cur).strip()
    if tail:
        out.append(tail)
    return [s for s in out if s]


def test_split_statements() -> None:
    assert split_statements("SELECT ';' AS a; -- x; y\nSELECT 'it''s';\n") == [
        "SELECT ';' AS a",
        "SELECT 'it''s'",
    ]


@pytest.fixture
def brokers() -> Iterator[tuple[KafkaBroker, KafkaBroker]]:
    b1, b2 = KafkaBroker().start(), KafkaBroker().start()
    try:
        yield b1, b2
    finally:
        b1.stop()
        b2.stop()


def test_readme_sql_blocks_run_in_order(
    make_server: Any,
    brokers: tuple[KafkaBroker, KafkaBroker],
    moto_s3: dict[str, Any],  # noqa: F811
    lakana: dict[str, Any],  # noqa: F811
) -> None:
    text = README.read_text()
    srv: SwellServer = make_server()
    wait_webhook(srv)
    moto_s3["bucket"]("swell-demo")
    b1, b2 = brokers
    subs = {
        "broker1:29092": b1.bootstrap,
        "broker2:29092": b2.bootstrap,
        "http://minio:9000": moto_s3["endpoint"],
        "catalog.uri = 'http://lakekeeper:8181/catalog'": (
            f"catalog.token = '{lakana['token']}', catalog.uri = '{lakana['uri']}'"
        ),
        "'analytics'": "'bronze'",
        "http://localhost:4560": f"http://{srv.host}:{srv.webhook_port}",
    }
    for k in subs:
        assert k in text, f"the README no longer mentions {k}: update this test"
    results: dict[str, list[tuple[Any, ...]]] = {}
    ran = 0
    with srv.connect() as c:
        for lang, body in fenced_blocks(text):
            for k, v in subs.items():
                body = body.replace(k, v)
            if lang == "sh" and "/webhook/" in body:
                r = subprocess.run(["bash", "-c", body], capture_output=True, text=True, timeout=60)
                assert r.returncode == 0 and r.stdout == "", (body, r.stdout, r.stderr)
                continue
            if lang != "sql":
                continue
            for st in split_statements(body):
                try:
                    cur = c.execute(st)
                except Exception as e:
                    raise AssertionError(f"README statement failed: {st}\n{e}") from e
                ran += 1
                if cur.description is not None:
                    results[" ".join(st.split())] = cur.fetchall()
    assert ran > 60

    def res(prefix: str) -> list[tuple[Any, ...]]:
        hits = [v for k, v in results.items() if k.startswith(prefix)]
        assert hits, f"no statement starting with {prefix!r} ran"
        return hits[-1]

    assert [(k, n, s) for k, n, s, *_ in res("SELECT * FROM mv ORDER BY k")] == [
        ("a", 1, 6),
        ("b", 1, 50),
    ]
    assert [r[:2] for r in res("SELECT * FROM mv WHERE k = 'c'")] == [("c", 1)]
    assert res("SELECT event_id, category, price FROM product_views") == [("e1", "books", 12.5)]
    sales = res("SELECT * FROM sales_5m")
    assert [(n, total) for _, n, total in sales] == [(3, 55.0), (1, 40.0)]
    assert sorted(res("SELECT action, count(*) FROM kafka_src")) == [("11111", 2), ("22222", 1)]
    assert [r[0] for r in res("SELECT * FROM vip_orders")] == [1, 4]
    assert res("SELECT count(*) FROM lake_sales FOR SYSTEM_TIME") == [(0,)]
    # the lake table shows its commits (commit_checkpoint_interval = 1) once they land
    deadline = time.monotonic() + 30
    lake: list[Any] = []
    with srv.connect() as c:
        while time.monotonic() < deadline and len(lake) < 2:
            c.execute("FLUSH")
            lake = c.execute("SELECT n, total FROM lake_sales ORDER BY window_start").fetchall()
    assert lake == [(3, 55.0), (1, 40.0)]
