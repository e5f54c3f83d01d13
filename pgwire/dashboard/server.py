"""The dashboard's HTTP server: one static page, its script and style, and a JSON API.

Routes (GET only; the dashboard changes nothing):

* `/` - the page (`static/index.html`): a shell that `static/dashboard.js` fills by polling
  `/api/overview` every 2 s and rendering it (tables with `textContent`, pictures as the
  server-rendered SVG strings of the API);
* `/api/overview` - the engine's overview (`engine.stream.overview`) with rates
  (`pgwire.dashboard.rates`), each job's dataflow SVG, the relation graph SVG and the
  barrier latency SVG;
* `/api/jobs/{id}.svg` - one job's dataflow picture alone (`image/svg+xml`).

Access: the server binds to loopback by default (`--dashboard-listen-addr`, default
127.0.0.1:5691, RisingWave's dashboard port). With `--auth trust` it asks nothing, as
RisingWave's dashboard (whoever reaches the port may log in as root over pgwire anyway);
bound to loopback it also refuses requests whose Host header names another machine, so a
web page cannot read it through DNS rebinding. With `--auth password` every request needs
HTTP Basic credentials of a Swell superuser that may log in (the dashboard shows every
job, as the catalogs show them to a superuser); a failed check waits
`--auth-failure-delay-ms` like a failed pgwire login, and a proven password is remembered
for `AUTH_CACHE_S` seconds so polling does not run PBKDF2 every time. Basic credentials
travel in clear text: outside loopback put TLS in front. What the API shows never includes
credentials: see `engine.stream.overview`.

Lifecycle: `start_dashboard_server(db, host, port, limits)` binds and returns a
`DashboardServer`; `close()` stops it. The CLI reports a failed bind and keeps serving
without the dashboard, as it does for /metrics. Each API call builds the overview in a
worker thread (it reads counters only, never takes the runtime lock for long).
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import logging
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from engine.catalog.users import verifies
from engine.stream.overview import overview
from pgwire.dashboard.rates import Rates
from pgwire.dashboard.svg import job_svg, latency_svg, lineage_svg
from pgwire.limits import Limits, is_loopback
from pgwire.metrics import start_site

log = logging.getLogger("swell.dashboard")

STATIC = Path(__file__).with_name("static")
AUTH_CACHE_S = 60.0
REALM = 'Basic realm="Swell dashboard", charset="UTF-8"'
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "[::1]"})
HEADERS = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    # the page's own script and style only; inline SVG needs nothing more
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'",
}
_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def api_overview(db: Any, rates: Rates) -> dict[str, Any]:
    """The `/api/overview` document: overview + rates + pictures."""
    snap = rates.annotate(overview(db.runtime))
    kinds = {r["id"]: r["kind"] for r in snap["relations"]}
    for job in snap["jobs"]:
        job["svg"] = job_svg(job, kinds)
    snap["latency_svg"] = latency_svg(snap["barrier_log"])
    snap["lineage_svg"] = lineage_svg(snap["relations"], {j["id"] for j in snap["jobs"]})
    return snap


class Gate:
    """Who may read the dashboard (see the module docstring)."""

    def __init__(self, db: Any, limits: Limits, host: str) -> None:
        self.db = db
        self.password = limits.auth == "password"
        self.delay = limits.auth_failure_delay_s
        self.loopback = is_loopback(host)
        self._key = os.urandom(16)
        self._proven: dict[bytes, float] = {}  # hmac of (user, password) -> proven at

    def host_ok(self, request: web.Request) -> bool:
        """Bound to loopback: only loopback host names (no DNS rebinding)."""
        if not self.loopback:
            return True
        host = request.host.rsplit(":", 1)[0] if not request.host.endswith("]") else request.host
        return host.lower() in LOOPBACK_NAMES

    def credentials_ok(self, header: str | None) -> bool:
        if not self.password:
            return True
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return False
        key = hmac.digest(self._key, f"{user}\0{password}".encode(), hashlib.sha256)
        now = time.monotonic()
        at = self._proven.get(key)
        if at is not None and now - at < AUTH_CACHE_S and self._superuser(user) is not None:
            return True
        u = self._superuser(user)
        if u is None or not verifies(u.password, password, user):
            return False
        if len(self._proven) > 100:
            self._proven.clear()
        self._proven[key] = now
        return True

    def _superuser(self, name: str) -> Any:
        u = self.db.catalog.users.find(name)
        return u if u is not None and u.login and u.superuser else None


def _middleware(gate: Gate) -> Any:
    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.method not in ("GET", "HEAD"):
            raise web.HTTPMethodNotAllowed(request.method, ["GET", "HEAD"], headers=HEADERS)
        if not gate.host_ok(request):
            raise web.HTTPForbidden(text="unknown host name\n", headers=HEADERS)
        header = request.headers.get("Authorization")
        ok = await asyncio.to_thread(gate.credentials_ok, header)
        if not ok:
            if header:
                log.info("dashboard login failed %s", request.remote)
                await asyncio.sleep(gate.delay)
            raise web.HTTPUnauthorized(
                text="a Swell superuser's name and password are required\n",
                headers={**HEADERS, "WWW-Authenticate": REALM},
            )
        resp = await handler(request)
        resp.headers.update(HEADERS)
        return resp

    return guard


class DashboardServer:
    def __init__(self, runner: web.AppRunner, host: str, port: int) -> None:
        self._runner = runner
        self.host = host
        self.port = port

    async def close(self) -> None:
        await self._runner.cleanup()


def build_app(db: Any, limits: Limits, host: str) -> web.Application:
    rates = Rates()
    lock = asyncio.Lock()  # one overview at a time: rates compare consecutive readings

    async def page(request: web.Request) -> web.StreamResponse:
        return _static("index.html")

    async def asset(request: web.Request) -> web.StreamResponse:
        name = request.match_info["name"]
        if name not in ("dashboard.js", "dashboard.css"):
            raise web.HTTPNotFound()
        return _static(name)

    async def api(request: web.Request) -> web.StreamResponse:
        async with lock:
            doc = await asyncio.to_thread(api_overview, db, rates)
        return web.json_response(doc)

    async def one_job(request: web.Request) -> web.StreamResponse:
        try:
            rid = int(request.match_info["id"])
        except ValueError:
            raise web.HTTPNotFound() from None
        async with lock:
            doc = await asyncio.to_thread(api_overview, db, rates)
        for job in doc["jobs"]:
            if job["id"] == rid:
                return web.Response(text=job["svg"], content_type="image/svg+xml")
        raise web.HTTPNotFound()

    app = web.Application(middlewares=[_middleware(Gate(db, limits, host))])
    app.router.add_get("/", page)
    app.router.add_get("/static/{name}", asset)
    app.router.add_get("/api/overview", api)
    app.router.add_get("/api/jobs/{id}.svg", one_job)
    return app


def _static(name: str) -> web.Response:
    path = STATIC / name
    return web.Response(body=path.read_bytes(), content_type=_TYPES[path.suffix], charset="utf-8")


async def start_dashboard_server(
    db: Any, host: str, port: int, limits: Limits | None = None
) -> DashboardServer:
    app = build_app(db, limits or Limits(), host)
    runner, _site, bound = await start_site(app, host, port)
    return DashboardServer(runner, host, bound)
