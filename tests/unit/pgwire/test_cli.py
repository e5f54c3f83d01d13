"""The `swell` command: argument parsing, --version, and a playground run with clean
shutdown on SIGTERM (engine and webhook replaced by in-test modules)."""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import socket
import subprocess
import sys
import types
from pathlib import Path

import asyncpg
import pytest
from unit.pgwire.fake_engine import FakeDatabase

from pgwire import cli
from pgwire.logfmt import KeyValueFormatter, kv

ROOT = Path(__file__).resolve().parents[3]


def test_version_flag() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "pgwire.cli", "--version"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 0
    assert out.stdout.startswith("swell ")


def test_playground_defaults_and_addr_parsing() -> None:
    args = cli.build_parser().parse_args(["playground"])
    assert args.listen_addr == ("0.0.0.0", 4566)
    assert args.webhook_listen_addr == ("0.0.0.0", 4560)
    assert args.data_dir == Path("./swell-data")
    assert args.barrier_interval_ms == 1000
    assert args.parallelism == (os.cpu_count() or 1)  # every core by default
    assert cli.build_parser().parse_args(["playground", "--parallelism", "3"]).parallelism == 3
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["playground", "--parallelism", "0"])
    assert args.dashboard_listen_addr == ("127.0.0.1", 5691)  # loopback, RisingWave's port
    for off in ("", "off", "none"):
        args = cli.build_parser().parse_args(["playground", "--dashboard-listen-addr", off])
        assert args.dashboard_listen_addr is None
    help_text = cli.build_parser()._subparsers._group_actions[0].choices["playground"]  # type: ignore[union-attr]
    assert "--dashboard-listen-addr" in help_text.format_help()
    args = cli.build_parser().parse_args(
        ["playground", "--listen-addr", "[::1]:5432", "--barrier-interval-ms", "100"]
    )
    assert args.listen_addr == ("::1", 5432) and args.barrier_interval_ms == 100
    with pytest.raises(SystemExit):
        cli.build_parser().parse_args(["playground", "--listen-addr", "nohost"])


def test_log_line_format() -> None:
    rec = logging.LogRecord(
        "pgwire.conn",
        logging.INFO,
        __file__,
        1,
        "listening %s",
        (kv(addr="0.0.0.0:4566", note="a b"),),
        None,
    )
    rec.created = 1_796_040_000.0  # 2026-11-30T12:00:00Z
    line = KeyValueFormatter().format(rec)
    assert line == '2026-11-30T12:00:00Z INFO pgwire listening addr=0.0.0.0:4566 note="a b"'


def test_playground_serves_and_shuts_down_on_sigterm(monkeypatch, tmp_path) -> None:
    db = FakeDatabase()
    seen: dict[str, object] = {}

    def open_database(config: object) -> FakeDatabase:
        seen["config"] = config
        return db

    class Config:
        def __init__(self, data_dir: Path, barrier_interval_ms: int, **options: object) -> None:
            self.data_dir = data_dir
            self.barrier_interval_ms = barrier_interval_ms
            self.options = options  # e.g. the state store's, None/defaults here

    class Webhook:
        closed = False
        port = 0

        async def close(self) -> None:
            Webhook.closed = True

    async def start_webhook_server(db_: object, host: str, port: int, workers: int) -> Webhook:
        seen["webhook"] = (db_, host, port, workers)
        return Webhook()

    monkeypatch.setitem(
        sys.modules,
        "engine.database",
        types.SimpleNamespace(Config=Config, open_database=open_database),
    )
    monkeypatch.setitem(
        sys.modules,
        "connectors.webhook",
        types.SimpleNamespace(start_webhook_server=start_webhook_server),
    )
    port = _free_port()
    args = cli.build_parser().parse_args(
        [
            "playground",
            "--listen-addr",
            f"127.0.0.1:{port}",
            "--webhook-listen-addr",
            "127.0.0.1:0",
            "--data-dir",
            str(tmp_path),
            "--barrier-interval-ms",
            "50",
        ]
    )

    async def main() -> int:
        task = asyncio.create_task(cli.playground(args))
        for _ in range(500):
            await asyncio.sleep(0.01)
            if len(seen) == 2:
                break
        conn = await asyncpg.connect(host="127.0.0.1", port=port, user="root", database="dev")
        assert await conn.fetchval("select 1") == 1
        os.kill(os.getpid(), signal.SIGTERM)
        rc = await asyncio.wait_for(task, 10)
        assert conn.is_closed() or await _closed(conn)
        return rc

    assert asyncio.run(main()) == 0
    assert seen["config"].data_dir == tmp_path and seen["config"].barrier_interval_ms == 50
    assert seen["webhook"] == (db, "127.0.0.1", 0, 0)  # no acceptor processes by default
    assert Webhook.closed and db.closed
    assert [s.closed for s in db.sessions] == [True]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _closed(conn: asyncpg.Connection) -> bool:
    try:
        await conn.fetchval("select 1")
    except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError):
        return True
    return False
