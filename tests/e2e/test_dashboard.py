"""The web dashboard as a user sees it: a real server, a table, a materialized view and a
view created over pgwire, and the page rendered by a real headless Chromium after its
script polled the JSON API. The rendered DOM shows the relations and the view's dataflow
picture with its operators. A taken or disabled dashboard port leaves the server up."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from pathlib import Path

import pytest

from harness.server import SwellServer, free_port
from harness.tools import require


def render(url: str, profile: Path) -> str:
    """The DOM after the page's script ran (virtual time lets its polling timers fire)."""
    exe = require("chromium")
    proc = subprocess.run(
        [
            exe,
            "--headless",
            "--no-sandbox",  # CI runs as root
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--virtual-time-budget=6000",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.needs("chromium")
def test_dashboard_page_shows_the_view_and_its_dataflow(tmp_path: Path) -> None:
    port = free_port()
    srv = SwellServer(
        tmp_path / "data", extra_args=["--dashboard-listen-addr", f"127.0.0.1:{port}"]
    )
    srv.start()
    try:
        with srv.connect() as c:
            c.execute("CREATE TABLE dash_orders (id INT PRIMARY KEY, customer VARCHAR, amount INT)")
            c.execute(
                "CREATE MATERIALIZED VIEW dash_totals AS SELECT customer, count(*) AS n, "
                "sum(amount) AS total FROM dash_orders WHERE amount > 0 GROUP BY customer"
            )
            c.execute("CREATE VIEW dash_big AS SELECT * FROM dash_totals WHERE total > 100")
            c.execute(
                "INSERT INTO dash_orders VALUES (1, 'ann', 50), (2, 'bob', 70), (3, 'ann', 90)"
            )
            c.execute("FLUSH")
        assert "dashboard listening" in srv.log_tail(200)
        dom = render(f"http://127.0.0.1:{port}/", tmp_path / "chromium")
    finally:
        srv.stop()
    polls = re.search(r'<body[^>]*data-polls="(\d+)"', dom)
    assert polls is not None and int(polls.group(1)) >= 1, dom[:2000]
    # the relations table, filled by the script from the JSON API
    for name in ("dash_orders", "dash_totals", "dash_big"):
        assert f'data-relation="{name}"' in dom
    row = re.search(r'<tr data-relation="dash_totals">(.*?)</tr>', dom, re.S)
    assert row is not None and "materialized view" in row.group(1)
    assert re.search(r'<td class="num">2</td>', row.group(1))  # two customers stored
    link = re.search(r'href="#job-(\d+)"', row.group(1))  # the view's name links its picture
    assert link is not None
    mv_id = link.group(1)
    # the view's dataflow picture: one SVG with the operators of its stream plan
    svg = re.search(rf'<svg[^>]*class="dataflow" data-job="{mv_id}".*?</svg>', dom, re.S)
    assert svg is not None, dom[:3000]
    ops = re.findall(r'data-operator="(\w+)"', svg.group(0))
    assert {"FilterOp", "HashAggOp", "ColumnarMaterializeOp"} <= set(ops), ops
    assert ">dash_orders<" in svg.group(0)  # the upstream table's box
    assert "StreamHashAgg" in svg.group(0)
    assert 'class="latency"' in dom
    lineage = re.search(r'<svg[^>]*class="lineage".*?</svg>', dom, re.S)
    assert lineage is not None
    for name in ("dash_orders", "dash_totals", "dash_big"):
        assert f'data-relation="{name}"' in lineage.group(0)


def test_dashboard_disabled_or_port_taken_keeps_the_server_up(tmp_path: Path) -> None:
    off = SwellServer(tmp_path / "off", extra_args=["--dashboard-listen-addr", ""])
    off.start()
    try:
        with off.connect() as c:
            assert c.execute("SELECT 1").fetchone() == (1,)
        assert "dashboard listening" not in off.log_tail(200)
    finally:
        off.stop()
    port = free_port()
    first = SwellServer(tmp_path / "a", extra_args=["--dashboard-listen-addr", f"127.0.0.1:{port}"])
    first.start()
    second = SwellServer(
        tmp_path / "b", extra_args=["--dashboard-listen-addr", f"127.0.0.1:{port}"]
    )
    try:
        second.start()
        with second.connect() as c:
            assert c.execute("SELECT 1").fetchone() == (1,)
        assert "dashboard disabled" in second.log_tail(200)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/overview", timeout=10) as r:
            assert json.loads(r.read())["relations"] == []
    finally:
        second.stop()
        first.stop()
