"""examples/compose/docker-compose.yml, checked without Docker: it parses, names only files
that exist, publishes each host port once, and Swell's command line in it starts a server."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psycopg
import yaml

from harness.server import free_ports
from pgwire import metrics

COMPOSE_DIR = Path(__file__).resolve().parents[3] / "examples" / "compose"


def compose() -> dict[str, Any]:
    data = yaml.safe_load((COMPOSE_DIR / "docker-compose.yml").read_text())
    assert isinstance(data, dict)
    return data


def test_parses_with_the_expected_services() -> None:
    services = compose()["services"]
    for name in ("swell", "redpanda", "minio", "lakekeeper", "trino", "prometheus", "grafana"):
        assert name in services
    for name, svc in services.items():
        assert "image" in svc or "build" in svc, name
        for dep in svc.get("depends_on", {}):
            assert dep in services, f"{name} depends on unknown service {dep}"


def test_mounted_files_and_build_context_exist() -> None:
    data = compose()
    named = set(data.get("volumes", {}))
    for name, svc in data["services"].items():
        for vol in svc.get("volumes", []):
            src = vol.split(":", 1)[0]
            if src in named:
                continue
            assert (COMPOSE_DIR / src).exists(), f"{name} mounts {src}, which does not exist"
        build = svc.get("build")
        if build is not None:
            ctx = COMPOSE_DIR / (build["context"] if isinstance(build, dict) else build)
            assert (ctx / "Dockerfile").exists() and (ctx / "pyproject.toml").exists()


def test_host_ports_published_once() -> None:
    seen: dict[str, str] = {}
    for name, svc in compose()["services"].items():
        for port in svc.get("ports", []):
            host = str(port).split(":")[0]
            assert host not in seen, f"port {host} published by {seen.get(host)} and {name}"
            seen[host] = name
    assert {"4566", "4560", "1250", "5691"} <= set(seen)


def test_prometheus_scrapes_the_swell_metrics_port() -> None:
    prom = yaml.safe_load((COMPOSE_DIR / "prometheus.yml").read_text())
    targets = prom["scrape_configs"][0]["static_configs"][0]["targets"]
    assert targets == ["swell:1250"]
    cmd = compose()["services"]["swell"]["command"]
    assert cmd[cmd.index("--prometheus-listener-addr") + 1] == "0.0.0.0:1250"


def test_swell_command_line_starts_a_server(tmp_path: Path) -> None:
    """The compose command with its addresses moved to free loopback ports and /data to a
    temporary directory: the server starts and answers a query."""
    cmd = list(compose()["services"]["swell"]["command"])
    assert cmd[:2] == ["swell", "playground"]
    pg, webhook, metrics, dashboard = free_ports(4)
    moved = {
        "0.0.0.0:4566": pg,
        "0.0.0.0:4560": webhook,
        "0.0.0.0:1250": metrics,
        "0.0.0.0:5691": dashboard,
    }
    args = [f"127.0.0.1:{moved[a]}" if a in moved else a for a in cmd[1:]]
    args[args.index("--data-dir") + 1] = str(tmp_path / "data")
    log = open(tmp_path / "server.log", "wb")  # noqa: SIM115 (closed below)
    proc = subprocess.Popen([sys.executable, "-m", "pgwire.cli", *args], stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with psycopg.connect(host="127.0.0.1", port=pg, user="root", dbname="dev") as c:
                    assert c.execute("SELECT 1").fetchone() == (1,)
                break
            except psycopg.OperationalError:
                assert proc.poll() is None, (tmp_path / "server.log").read_text()
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.2)
    finally:
        proc.terminate()
        proc.wait(30)
        log.close()
    assert proc.returncode == 0, (tmp_path / "server.log").read_text()


def test_grafana_dashboard_graphs_metrics_swell_exports() -> None:
    """Every metric the dashboard queries is one the endpoint exports (pgwire/metrics.py)."""
    dash = json.loads((COMPOSE_DIR / "grafana" / "dashboards" / "swell.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    assert exprs
    source = Path(metrics.__file__).read_text()
    for expr in exprs:
        for name in re.findall(r"\b((?:swell|process)_[a-z_]+)", expr):
            base = re.sub(r"_(bucket|total|sum|count)$", "", name)
            assert base.startswith("process_") or f'"{base}' in source, f"{name} in {expr!r}"
