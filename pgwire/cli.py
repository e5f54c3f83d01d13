"""The `swell` command: `swell playground` runs a single-node Swell; `swell --version`.

Lifecycle of `playground`: restrict the umask and the data directory's permissions (0700,
files 0600), connect to the Ray cluster of `--ray-address` if given (its launcher starts
the stream workers as Ray actors), open the database (recovering the data directory), apply
`SWELL_ROOT_PASSWORD` to `root`, check that `--auth password` leaves a superuser able to
log in, start the Prometheus /metrics listener (pgwire/metrics.py; a taken port only
disables metrics), the pgwire listener with its `Limits`, the webhook listener if the
webhook connector is installed, the web dashboard (pgwire/dashboard; a taken port only
disables it), log where everything listens (a WARNING when trust
authentication is reachable from other machines), then wait for SIGTERM/SIGINT.
Shutdown runs in reverse: close the dashboard and metrics listeners, stop accepting and
close client connections, close the webhook server, then `db.close()` (which takes a
final checkpoint), then the Ray launcher (kills its actors, disconnects). The engine
module is imported lazily inside the command so
`swell --version` works even when the engine cannot load.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import signal
import ssl
import sys
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from engine.errors import EngineError
from engine.latency import answer_thread
from engine.process_tuning import tune_process
from engine.state.files import restrict_umask, secure_data_dir
from pgwire.dashboard import DEFAULT_ADDR as DEFAULT_DASHBOARD_ADDR
from pgwire.limits import (
    AUTH_MODES,
    DEFAULT_AUTH_FAILURE_DELAY_S,
    DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_MESSAGE_BYTES,
    Limits,
    is_loopback,
)
from pgwire.logfmt import LEVELS, kv, setup_logging
from pgwire.metrics import DEFAULT_ADDR as DEFAULT_METRICS_ADDR
from pgwire.metrics import MetricsSources, start_metrics_server
from pgwire.server import serve

log = logging.getLogger("swell")

ROOT_PASSWORD_ENV = "SWELL_ROOT_PASSWORD"


def version() -> str:
    try:
        return metadata.version("swell")
    except metadata.PackageNotFoundError:
        return "0.1.0"


def parse_addr(text: str) -> tuple[str, int]:
    """`HOST:PORT` (or `[v6]:PORT`) into (host, port)."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    host = host.strip("[]") or "0.0.0.0"
    return host, int(port)


def parse_optional_addr(text: str) -> tuple[str, int] | None:
    """`HOST:PORT`, or None for '' / 'off' / 'none' (the listener is disabled)."""
    if text.strip().lower() in ("", "off", "none"):
        return None
    return parse_addr(text)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="swell", description="Swell: a streaming SQL database speaking PostgreSQL."
    )
    parser.add_argument("--version", action="version", version=f"swell {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    play = sub.add_parser("playground", help="run a single-node Swell server")
    play.add_argument(
        "--listen-addr",
        type=parse_addr,
        default=parse_addr("0.0.0.0:4566"),
        help="pgwire address HOST:PORT (default 0.0.0.0:4566)",
    )
    play.add_argument(
        "--webhook-listen-addr",
        type=parse_addr,
        default=parse_addr("0.0.0.0:4560"),
        help="webhook source address HOST:PORT (default 0.0.0.0:4560)",
    )
    play.add_argument(
        "--webhook-workers",
        type=int,
        default=0,
        metavar="N",
        help="webhook acceptor processes sharing the webhook port (SO_REUSEPORT); they "
        "parse, validate and decode requests, the server writes and fsyncs (default 0: "
        "the server process answers webhooks itself)",
    )
    play.add_argument(
        "--data-dir",
        type=Path,
        default=Path("./swell-data"),
        help="directory for the catalog, state and WAL (default ./swell-data)",
    )
    play.add_argument(
        "--barrier-interval-ms",
        type=int,
        default=1000,
        help="milliseconds between checkpoint barriers (default 1000)",
    )
    play.add_argument(
        "--parallelism",
        type=_positive_int,
        default=os.cpu_count() or 1,
        help="worker processes for parallel streaming jobs and the default parallelism "
        "of new materialized views (default: the number of cores; 1 runs every job in "
        "the server process)",
    )
    play.add_argument(
        "--max-heartbeat-interval-secs",
        type=float,
        default=60.0,
        help="seconds a worker of a parallel job may take to answer before it is declared "
        "lost and the job recovers without it, e.g. a hung or stopped worker (default 60; "
        "0: wait for ever)",
    )
    play.add_argument(
        "--state-store",
        default=os.environ.get("SWELL_STATE_STORE") or None,
        metavar="s3://BUCKET/PREFIX",
        help="upload checkpoints there and restore an empty --data-dir from it (endpoint, "
        "keys and region from the AWS_* variables; or set SWELL_STATE_STORE)",
    )
    play.add_argument(
        "--upload-interval",
        type=_positive_float,
        default=5.0,
        metavar="SECONDS",
        help="seconds between checkpoint uploads to --state-store (default 5; FLUSH "
        "uploads at once)",
    )
    play.add_argument(
        "--keep-manifests",
        type=_positive_int,
        default=3,
        metavar="N",
        help="remote checkpoints kept by the state store's garbage collector (default 3)",
    )
    play.add_argument(
        "--ray-address",
        default=None,
        metavar="HOST:PORT",
        help="run the stream workers as Ray actors spread over the nodes of the Ray cluster "
        "whose head node listens there (or 'auto'); needs swell[ray] on every node; "
        "state stays in this server's data directory (and --state-store)",
    )
    play.add_argument(
        "--state-cache-mb",
        type=_positive_int,
        default=None,
        help="memory budget for state in MB: RocksDB's block cache and memtables and the "
        "operators' caches of hot rows; state beyond it lives on disk (default: a quarter "
        "of the machine's memory, 256 MB to 8 GB)",
    )
    play.add_argument(
        "--prometheus-listener-addr",
        type=parse_addr,
        default=parse_addr(DEFAULT_METRICS_ADDR),
        help=f"Prometheus /metrics address HOST:PORT (default {DEFAULT_METRICS_ADDR})",
    )
    play.add_argument(
        "--dashboard-listen-addr",
        type=parse_optional_addr,
        default=parse_addr(DEFAULT_DASHBOARD_ADDR),
        help=f"web dashboard address HOST:PORT (default {DEFAULT_DASHBOARD_ADDR}); '' or "
        "'off' disables it; with --auth password it asks for a superuser's name and password",
    )
    play.add_argument(
        "--log-level",
        choices=LEVELS,
        default=os.environ.get("SWELL_LOG_LEVEL", "info").lower(),
        help="least severe log lines printed: debug (also each connection and the "
        "libraries' own warnings), info (default: DDL, sources, sinks, startup), warning, "
        "error; or set SWELL_LOG_LEVEL",
    )
    play.add_argument(
        "--ssl-cert",
        type=Path,
        default=None,
        help="PEM certificate (chain) for TLS on the pgwire port; needs --ssl-key",
    )
    play.add_argument(
        "--ssl-key",
        type=Path,
        default=None,
        help="PEM private key for --ssl-cert",
    )
    play.add_argument(
        "--auth",
        choices=AUTH_MODES,
        default=None,
        help="trust: users without a password log in without one; password: every user "
        f"proves a password (default: password when ${ROOT_PASSWORD_ENV} is set, else trust)",
    )
    play.add_argument(
        "--max-connections",
        type=_positive_int,
        default=DEFAULT_MAX_CONNECTIONS,
        help=f"client connections at once; more are refused with 53300 "
        f"(default {DEFAULT_MAX_CONNECTIONS})",
    )
    play.add_argument(
        "--max-message-bytes",
        type=_positive_int,
        default=DEFAULT_MAX_MESSAGE_BYTES,
        help=f"largest protocol message after login (default {DEFAULT_MAX_MESSAGE_BYTES}; "
        "before login the limit is a few KB)",
    )
    play.add_argument(
        "--auth-failure-delay-ms",
        type=int,
        default=int(DEFAULT_AUTH_FAILURE_DELAY_S * 1000),
        help="pause before answering a failed login "
        f"(default {int(DEFAULT_AUTH_FAILURE_DELAY_S * 1000)})",
    )
    return parser


def _positive_int(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return n


def _positive_float(text: str) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not x > 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return x


def limits_from_args(args: argparse.Namespace) -> Limits:
    """The pgwire `Limits` the flags (and $SWELL_ROOT_PASSWORD) ask for."""
    auth = args.auth or ("password" if os.environ.get(ROOT_PASSWORD_ENV) else "trust")
    try:
        return Limits(
            auth=auth,
            max_connections=args.max_connections,
            max_message_bytes=args.max_message_bytes,
            auth_failure_delay_s=max(args.auth_failure_delay_ms, 0) / 1000,
        )
    except ValueError as exc:
        raise SystemExit(f"swell: {exc}") from None


def _apply_root_password(db: Any, limits: Limits) -> None:
    """$SWELL_ROOT_PASSWORD becomes root's password; `--auth password` without any
    superuser password would lock everybody out, so it stops the start instead."""
    from engine.handlers.users import password_superuser_exists, set_password_at_start

    password = os.environ.get(ROOT_PASSWORD_ENV)
    if password and set_password_at_start(db, "root", password):
        log.info("root password set %s", kv(source=ROOT_PASSWORD_ENV))
    if limits.auth == "password" and not password_superuser_exists(db):
        raise SystemExit(
            f"swell: --auth password needs a superuser with a password: set "
            f"{ROOT_PASSWORD_ENV} (root's password) or run once with --auth trust and "
            "ALTER USER root PASSWORD '...'"
        )


def _warn_if_open(limits: Limits, host: str, port: int) -> None:
    if limits.auth == "trust" and not is_loopback(host):
        log.warning(
            "trust authentication on a non-loopback address: anyone who can reach it logs "
            "in as root without a password; use --auth password with %s, or listen on "
            "127.0.0.1 %s",
            ROOT_PASSWORD_ENV,
            kv(addr=f"{host}:{port}"),
        )


def ssl_context(cert: Path | None, key: Path | None) -> ssl.SSLContext | None:
    """The server TLS context for --ssl-cert/--ssl-key (None when neither is given)."""
    if cert is None and key is None:
        return None
    if cert is None or key is None:
        raise SystemExit("swell: --ssl-cert and --ssl-key must be given together")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert), str(key))
    return ctx


def first_cert_der(pem: str) -> bytes | None:
    """DER of the first certificate in a PEM file (the server's own, before its chain)."""
    m = re.search(r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", pem, re.S)
    return ssl.PEM_cert_to_DER_cert(m.group(0)) if m else None


async def _start_metrics(host: str, port: int, sources: MetricsSources) -> Any | None:
    try:
        server = await start_metrics_server(host, port, sources)
    except OSError as exc:  # e.g. the port is taken: keep serving SQL without metrics
        log.warning("metrics disabled %s", kv(addr=f"{host}:{port}", reason=str(exc)))
        return None
    log.info("metrics listening %s", kv(addr=f"{host}:{server.port}", path="/metrics"))
    return server


async def _start_dashboard(db: Any, addr: tuple[str, int] | None, limits: Limits) -> Any | None:
    if addr is None:
        return None
    from pgwire.dashboard.server import start_dashboard_server

    host, port = addr
    try:
        server = await start_dashboard_server(db, host, port, limits)
    except OSError as exc:  # e.g. the port is taken: keep serving SQL without it
        log.warning("dashboard disabled %s", kv(addr=f"{host}:{port}", reason=str(exc)))
        return None
    log.info("dashboard listening %s", kv(url=f"http://{_url_host(host)}:{server.port}/"))
    if limits.auth == "trust" and not is_loopback(host):
        log.warning(
            "dashboard without authentication on a non-loopback address: anyone who can "
            "reach it sees every relation and job; use --auth password or listen on "
            "127.0.0.1 %s",
            kv(addr=f"{host}:{server.port}"),
        )
    return server


def _url_host(host: str) -> str:
    if host in ("0.0.0.0", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


async def _start_webhook(db: Any, host: str, port: int, workers: int = 0) -> Any | None:
    try:
        from connectors.webhook import start_webhook_server
    except ImportError as exc:
        log.warning("webhook disabled %s", kv(reason=str(exc)))
        return None
    server = await start_webhook_server(db, host, port, workers=workers)
    log.info("webhook listening %s", kv(addr=f"{host}:{server.port}", **_workers_kv(workers)))
    return server


def connect_ray(address: str, workers: int) -> Any:
    """Connect this process to the Ray cluster at `address` and return the launcher of
    `workers` workers there. Runs in the main thread before the server installs its signal
    handlers: Ray installs a SIGTERM handler of its own when it connects, which the
    server's replaces."""
    from engine.stream.parallel.transport_ray import RayLauncher

    return RayLauncher(address, workers=workers)


def _workers_kv(workers: int) -> dict[str, int]:
    return {"workers": workers} if workers else {}


async def playground(args: argparse.Namespace) -> int:
    from engine.database import Config, open_database

    tls = ssl_context(args.ssl_cert, args.ssl_key)  # before the database: fail fast
    limits = limits_from_args(args)
    data_dir: Path = args.data_dir
    restrict_umask()
    secure_data_dir(data_dir)
    launcher = None
    if args.ray_address:
        try:
            launcher = connect_ray(args.ray_address, args.parallelism)
        except EngineError as exc:  # unreachable cluster or Ray not installed: one line
            hint = {"hint": exc.hint} if exc.hint else {}
            log.error("startup failed %s", kv(error=exc.message, **hint))
            return 1
    config = Config(
        data_dir=data_dir,
        barrier_interval_ms=args.barrier_interval_ms,
        state_store=args.state_store,
        upload_interval_s=args.upload_interval,
        keep_manifests=args.keep_manifests,
        state_cache_mb=args.state_cache_mb,
        parallelism=args.parallelism,
        max_heartbeat_interval_secs=args.max_heartbeat_interval_secs,
        worker_launcher=(lambda: launcher) if launcher is not None else None,
    )
    try:
        db = await asyncio.to_thread(open_database, config)
    except EngineError as exc:  # e.g. the data directory is in use: one line, no traceback
        hint = {"hint": exc.hint} if exc.hint else {}
        log.error("startup failed %s", kv(error=exc.message, **hint))
        if launcher is not None:
            launcher.close()
        return 1
    log.info(
        "database opened %s",
        kv(
            data_dir=data_dir.resolve(),
            barrier_interval_ms=args.barrier_interval_ms,
            parallelism=args.parallelism,
            **({"state_store": args.state_store} if args.state_store else {}),
            state_budget=db.budget.describe(),
        ),
    )
    server = None
    webhook = None
    metrics = None
    dashboard = None
    try:
        await asyncio.to_thread(_apply_root_password, db, limits)
        # metrics first: it is up by the time clients can connect; it reads the
        # components through `sources` as they appear
        sources = MetricsSources(db, started_at=time.time())
        metrics = await _start_metrics(*args.prometheus_listener_addr, sources)
        host, port = args.listen_addr
        server = await serve(db, host, port, tls, limits)
        _warn_if_open(limits, host, server.port)
        if tls is not None:
            server.tls_cert_der = first_cert_der(args.ssl_cert.read_text())
        sources.pgwire = server
        if tls is not None:
            log.info("tls enabled %s", kv(cert=args.ssl_cert.resolve()))
        wh_host, wh_port = args.webhook_listen_addr
        webhook = await _start_webhook(db, wh_host, wh_port, args.webhook_workers)
        sources.webhook = webhook
        dashboard = await _start_dashboard(db, args.dashboard_listen_addr, limits)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        answer_thread()  # the event loop answers pgwire and webhook clients (engine.latency)
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        log.info(
            "ready %s",
            kv(pgwire=f"{host}:{server.port}", version=version(), auth=limits.auth),
        )
        await stop.wait()
        log.info("shutting down")
        return 0
    finally:
        if dashboard is not None:
            await dashboard.close()
        if metrics is not None:
            await metrics.close()
        if server is not None:
            await server.stop()
        if webhook is not None:
            try:
                await webhook.close()
            except Exception as exc:  # noqa: BLE001 - shutdown must reach db.close()
                log.error("webhook close failed", exc_info=exc)
        await asyncio.to_thread(db.close)
        if launcher is not None:  # after the database: its worker pool is stopped by then
            launcher.close()
        log.info("database closed %s", kv(data_dir=data_dir.resolve()))


GIL_SWITCH_INTERVAL_S = 0.001
"""How long a thread may keep the GIL while another waits for it (Python's default is 5 ms).

The server is one process: a barrier thread computing a 100k-row epoch holds the GIL in
bytecode between its native calls, and every client answer (pgwire, webhook, the WAL
waiter) needs it for a moment. At 1 ms the answers get it sooner (measured by
bench/read_latency_bench.py: p99 of `SELECT 1` during 100k-row epochs 140 -> 90 ms on a
loaded 2-core machine) with no measurable cost to the barrier."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    setup_logging(args.log_level)
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    tune_process()  # numpy's huge-page hint off, lazily imported modules loaded now
    try:
        return asyncio.run(playground(args))
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        log.error("startup failed %s", kv(error=str(exc)))
        return 1


if __name__ == "__main__":
    sys.exit(main())
