"""connectors.webhook.http over real sockets: framing, keep-alive, limits, malformed input.

A tiny handler echoes what the parser saw (method, target, the body's length and a
header), so each test checks the bytes a client gets back for the bytes it sent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable

from connectors.webhook.http import HttpServer, Request, response

MAX = 1000


def echo(req: Request) -> bytes | Awaitable[bytes]:
    body = json.dumps(
        {"m": req.method, "t": req.target, "n": len(req.body), "x": req.headers.get("x-a")}
    ).encode()
    if req.target == "/slow":  # answered later, through a future
        fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
        asyncio.get_running_loop().call_later(0.01, fut.set_result, response(200, body))
        return fut
    if req.target == "/later":  # answered later through `respond` (the handler returns None)
        asyncio.get_running_loop().call_later(0.01, req.respond, response(200, body))
        return None
    if req.target == "/now":  # `respond` called before the handler returns None
        req.respond(response(200, body))
        req.respond(response(500))  # a second answer is ignored
        return None
    return response(200, body)


async def _with_server(scenario: Callable[[int], Awaitable[None]]) -> None:
    srv = HttpServer(echo, max_body=MAX)
    await srv.start("127.0.0.1", 0)
    try:
        await scenario(srv.port)
    finally:
        await srv.close()


def run(scenario: Callable[[int], Awaitable[None]]) -> None:
    asyncio.run(_with_server(scenario))


async def exchange(port: int, data: bytes, *, until_close: bool = True) -> bytes:
    r, w = await asyncio.open_connection("127.0.0.1", port)
    w.write(data)
    await w.drain()
    if until_close:
        out = await asyncio.wait_for(r.read(), 5)
    else:
        out = await asyncio.wait_for(r.read(65536), 5)
    w.close()
    return out


def responses(raw: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """Split a byte stream into (status, headers, body) by Content-Length."""
    out = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        lines = head.decode().split("\r\n")
        status = int(lines[0].split()[1])
        headers = {k.lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
        n = int(headers.get("content-length", "0"))
        out.append((status, headers, rest[:n]))
        raw = rest[n:]
    return out


def test_keep_alive_pipelining_and_connection_close() -> None:
    async def scenario(port: int) -> None:
        data = (
            b"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nX-A: one\r\n\r\nabc"
            b"POST /slow HTTP/1.1\r\nContent-Length: 0\r\n\r\n"
            b"GET /c?q=1 HTTP/1.1\r\nConnection: close\r\n\r\n"
            b"POST /never HTTP/1.1\r\n\r\n"  # after Connection: close: not answered
        )
        got = responses(await exchange(port, data))
        assert [json.loads(b)["t"] for _, _, b in got] == ["/a", "/slow", "/c?q=1"]
        assert json.loads(got[0][2]) == {"m": "POST", "t": "/a", "n": 3, "x": "one"}
        assert len(got) == 3  # the server closed after the request that asked for it
        # answers through `Request.respond`, late or at once, keep the pipeline's order
        data = (
            b"POST /later HTTP/1.1\r\nContent-Length: 0\r\n\r\n"
            b"POST /now HTTP/1.1\r\nContent-Length: 0\r\n\r\n"
            b"POST /later HTTP/1.1\r\nX-A: \xc3\xa9\xff\r\nConnection: close\r\n\r\n"
        )
        got = responses(await exchange(port, data))
        assert [(s, json.loads(b)["t"]) for s, _, b in got] == [
            (200, "/later"),
            (200, "/now"),
            (200, "/later"),
        ]
        assert json.loads(got[2][2])["x"] == "\u00e9\udcff"  # UTF-8, other bytes escaped
        # HTTP/1.0 closes unless asked to keep alive
        one = responses(await exchange(port, b"POST /d HTTP/1.0\r\nContent-Length: 1\r\n\r\nz"))
        assert [s for s, _, _ in one] == [200]

    run(scenario)


def test_chunked_bodies_and_expect_continue() -> None:
    async def scenario(port: int) -> None:
        data = (
            b"POST /ch HTTP/1.1\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            b"4;ext=1\r\nWiki\r\n5\r\npedia\r\n0\r\nTrailer: t\r\n\r\n"
        )
        ((st, _, body),) = responses(await exchange(port, data))
        assert st == 200 and json.loads(body)["n"] == 9
        # the interim 100 comes before the body is sent
        r, w = await asyncio.open_connection("127.0.0.1", port)
        w.write(b"POST /e HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n")
        assert await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 5) == (
            b"HTTP/1.1 100 Continue\r\n\r\n"
        )
        w.write(b"hi")
        head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200 ")
        w.close()

    run(scenario)


def test_limits_and_malformed_requests_answer_and_close() -> None:
    async def scenario(port: int) -> None:
        cases = {
            b"POST /big HTTP/1.1\r\nContent-Length: 5000\r\n\r\n" + b"x" * 5000: 413,
            b"POST /big HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n7d0\r\n"
            + b"x" * 2000
            + b"\r\n0\r\n\r\n": 413,
            b"POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n": 400,
            b"POST / HTTP/1.1\r\nContent-Length: abc\r\n\r\n": 400,
            b"POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n": 400,
            b"POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n": 501,
            b"POST / HTTP/2.0\r\n\r\n": 505,
            b"GET / HTTP/1.1\r\nBad Header\r\n\r\n": 400,
            b"GET / HTTP/1.1\r\n folded: x\r\n\r\n": 400,
            b"GET / HTTP/1.1\r\nX: a\rb\r\n\r\n": 400,
            b"GET / HTTP/1.1\r\nX : a\r\n\r\n": 400,
            b"NOT HTTP AT ALL\r\n\r\n": 400,
            b"POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n": 400,
            b"GET / HTTP/1.1\r\nX: " + b"a" * 70000: 431,
        }
        for data, want in cases.items():
            got = responses(await exchange(port, data))
            assert [s for s, _, _ in got] == [want], (data[:60], got)
            assert got[0][1]["connection"] == "close"
            assert "error" in json.loads(got[0][2])

    run(scenario)


def test_body_split_across_packets() -> None:
    async def scenario(port: int) -> None:
        r, w = await asyncio.open_connection("127.0.0.1", port)
        msg = b"POST /s HTTP/1.1\r\nContent-Length: 10\r\nConnection: close\r\n\r\n0123456789"
        for i in range(0, len(msg), 7):
            w.write(msg[i : i + 7])
            await w.drain()
            await asyncio.sleep(0.001)
        ((st, _, body),) = responses(await asyncio.wait_for(r.read(), 5))
        assert st == 200 and json.loads(body)["n"] == 10
        w.close()

    run(scenario)
