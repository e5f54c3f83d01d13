"""A webhook acceptor process: HTTP, VALIDATE and JSON decoding outside the server process.

Started by `pool.AcceptorPool` (`--webhook-workers N`) as
`python -m connectors.webhook.acceptor --fd F --host H --port P --max-body B`; F is its
end of a socketpair to the server (`channel.py`). It listens on the shared webhook port
with SO_REUSEPORT (the kernel spreads connections over the acceptors) and runs the same
request path as the in-process listener (`server.WebhookFront`) over a `RemoteBackend`:

- a table is resolved by asking the server (RESOLVE -> the pickled relation and its
  secret's value), then cached until an answer from the server carries another catalog
  version; VALIDATE and decoding run here, with the same code as in-process;
- each flush (the coalesced requests of one table) goes to the server as one WRITE frame:
  the rows as an Arrow IPC stream of the table's visible columns. The server writes them
  (WAL append + queue) and answers ACK only after the WAL fsync covering them (or once
  queued without `webhook.wait_for_persistence`), so a 200 from an acceptor is as durable
  as one from the server itself. ACK STALE (the table changed under the cached copy)
  makes the front resolve again and redo those requests once.

Lifecycle: the process exits when the server closes the channel (the server died: its
in-flight requests get no answer, so nothing unacknowledged is promised) or after CLOSE
(graceful: stop listening, answer what is in flight, send the last STATS). On Linux it
also asks the kernel for SIGKILL when the server process dies.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import pickle
import signal
import socket
import sys
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from connectors.webhook import channel as ch
from connectors.webhook.server import StaleTarget, WebhookFront, as_batch
from engine.handlers.webhook import Decoded, WebhookError, WebhookTarget, build_target

log = logging.getLogger("swell.webhook")
STATS_INTERVAL_S = 1.0


class RemoteBackend:
    """Resolves through the server and sends flushes to it (see the module docstring)."""

    max_inflight = 1

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.version = -1
        self._ids = 0
        self._targets: dict[tuple[str, str, str], WebhookTarget] = {}
        self._keys: dict[int, tuple[tuple[str, str, str], str]] = {}  # id(target) -> key, fp
        self._resolving: dict[tuple[str, str, str], asyncio.Future[WebhookTarget]] = {}
        self._by_id: dict[int, tuple[Any, asyncio.Future[Any]]] = {}

    def _id(self) -> int:
        self._ids += 1
        return self._ids

    def resolve(self, database: str, schema: str, table: str) -> Any:
        key = (database, schema, table)
        t = self._targets.get(key)
        if t is not None:
            return t
        fut = self._resolving.get(key)
        if fut is None:
            fut = asyncio.get_running_loop().create_future()
            self._resolving[key] = fut
            i = self._id()
            self._by_id[i] = (key, fut)
            self.writer.write(ch.frame(ch.RESOLVE, {"id": i, "key": list(key)}))
        return asyncio.shield(fut)

    def on_resolved(self, h: dict[str, Any], payload: bytes) -> None:
        key, fut = self._by_id.pop(h["id"])
        self._resolving.pop(key, None)
        self._seen_version(h["version"])
        if h["status"]:
            fut.set_exception(WebhookError(h["status"], h["message"]))
            return
        spec = pickle.loads(payload)  # noqa: S301 - from the parent server process
        secrets = {}
        if spec["secret"] is not None:
            secrets[spec["secret"]] = SimpleNamespace(value=spec["secret_value"])
        shim = SimpleNamespace(catalog=SimpleNamespace(secrets=secrets), runtime=None)
        try:
            t = build_target(shim, spec["rel"])
        except Exception as e:  # noqa: BLE001 - answer the waiting requests, log once
            log.error("webhook acceptor cannot use table %s", key, exc_info=e)
            fut.set_exception(WebhookError(500, "internal error"))
            return
        self._targets[key] = t
        self._keys[id(t)] = (key, spec["fp"])
        fut.set_result(t)

    def commit(self, target: WebhookTarget, rows: list[Decoded], n: int) -> asyncio.Future[Any]:
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        if not n:
            fut.set_result(None)
            return fut
        key, fp = self._keys[id(target)]
        i = self._id()
        self._by_id[i] = (key, fut)
        payload = ch.ipc_bytes(as_batch(target, rows))
        self.writer.write(ch.frame(ch.WRITE, {"id": i, "key": list(key), "fp": fp}, payload))
        return fut

    def on_ack(self, h: dict[str, Any]) -> None:
        key, fut = self._by_id.pop(h["id"])
        self._seen_version(h["version"])
        st = h["status"]
        if fut.done():
            return
        if st == 0:
            fut.set_result(None)
        elif st == ch.STALE:
            self._forget(key)
            fut.set_exception(StaleTarget())
        else:
            fut.set_exception(WebhookError(st, h["message"]))

    def _seen_version(self, version: int) -> None:
        if version != self.version:
            self.version = version
            self._targets.clear()
            self._keys.clear()

    def _forget(self, key: tuple[str, str, str]) -> None:
        t = self._targets.pop(key, None)
        if t is not None:
            self._keys.pop(id(t), None)

    def fail_all(self, e: BaseException) -> None:
        for _, fut in self._by_id.values():
            if not fut.done():
                fut.set_exception(e)
        self._by_id.clear()


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when the server process dies (PR_SET_PDEATHSIG)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(Exception):
        import ctypes  # noqa: PLC0415 - Linux only

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)


def _stats(front: WebhookFront) -> dict[str, Any]:
    return {
        "requests": front.requests,
        "responses": {str(k): v for k, v in front.responses.items()},
        "ack_count": front.ack_count,
        "ack_seconds_total": front.ack_seconds_total,
        "ack_seconds_max": front.ack_seconds_max,
        "inflight": front._inflight,
    }


async def run(args: argparse.Namespace) -> int:
    sock = socket.socket(fileno=args.fd)
    reader, writer = await asyncio.open_unix_connection(sock=sock)
    backend = RemoteBackend(writer)
    front = WebhookFront(
        backend, args.host, args.port, max_body_bytes=args.max_body, reuse_port=True
    )
    try:
        await front.start()
    except OSError as e:
        log.error("webhook acceptor cannot listen on %s:%d: %s", args.host, args.port, e)
        return 1
    writer.write(ch.frame(ch.READY, {"pid": os.getpid()}))
    last: dict[str, Any] = {}

    async def report() -> None:
        nonlocal last
        while True:
            await asyncio.sleep(STATS_INTERVAL_S)
            st = _stats(front)
            if st != last:
                last = st
                writer.write(ch.frame(ch.STATS, st))

    reporter = asyncio.create_task(report())
    closing: asyncio.Task[None] | None = None

    async def close() -> None:
        await front.close()
        writer.write(ch.frame(ch.STATS, _stats(front)))
        await writer.drain()
        writer.close()

    try:
        while True:
            try:
                kind, h, payload = await ch.read_frame(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                break
            if kind == ch.ACK:
                backend.on_ack(h)
            elif kind == ch.RESOLVED:
                backend.on_resolved(h, payload)
            elif kind == ch.CLOSE and closing is None:
                closing = asyncio.create_task(close())
    finally:
        reporter.cancel()
    if closing is None:  # the server is gone: nothing more can be acknowledged
        backend.fail_all(WebhookError(503, "the server is shutting down"))
        os._exit(0)
    await closing
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m connectors.webhook.acceptor")
    ap.add_argument("--fd", type=int, required=True)
    ap.add_argument("--host", required=True)
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--max-body", type=int, required=True)
    ap.add_argument("--log-level", default="INFO")
    args = ap.parse_args(argv)
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the server decides when we stop
    logging.basicConfig(
        level=args.log_level,
        format=f"%(asctime)s %(levelname)s %(name)s acceptor={os.getpid()} %(message)s",
    )
    return asyncio.run(run(args))


if __name__ == "__main__":
    sys.exit(main())
