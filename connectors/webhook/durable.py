"""DurableWaiter: awaitable "WAL record `seq` is fsynced" for the event loop.

Webhook rows are queued into the WAL by `Runtime.write` under the runtime's short queue
lock (so WAL order is queue order; it never waits for a barrier), which hands back a
sequence number; the HTTP answer must wait until that record is durable.
`Wal.wait_durable` blocks a thread, and one blocked thread per request would cap
concurrency at the executor's size. Instead one notifier thread waits for
the smallest outstanding sequence number, then resolves every waiter at or below the WAL's
durable position at once: the WAL's group commit already makes concurrent writes share one
fsync, and this makes them share one wake-up too.

Lifecycle: created by the webhook server; `wait(seq)` from the event loop (returns an
awaitable future); `close()` wakes the thread and fails the remaining waiters.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import logging
import threading
from typing import Any

log = logging.getLogger("swell.webhook")


class DurableWaiter:
    """One background thread resolving asyncio futures as WAL records become durable."""

    def __init__(self, wal: Any) -> None:
        self.wal = wal
        self._cv = threading.Condition()
        self._heap: list[tuple[int, int, asyncio.AbstractEventLoop, asyncio.Future[int]]] = []
        self._order = itertools.count()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="swell-webhook-durable", daemon=True)
        self._thread.start()

    def wait(self, seq: int) -> asyncio.Future[int]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()
        if self.wal.durable_seq >= seq:
            fut.set_result(seq)
            return fut
        with self._cv:
            if self._closed:
                fut.set_exception(RuntimeError("webhook server is shutting down"))
                return fut
            # the thread waits for the smallest seq and re-checks the heap after it, so only
            # a new smallest seq needs to wake it (one wake-up per flush, not per request)
            if not self._heap or seq < self._heap[0][0]:
                self._cv.notify()
            heapq.heappush(self._heap, (seq, next(self._order), loop, fut))
        return fut

    def _run(self) -> None:
        while True:
            with self._cv:
                while not self._heap and not self._closed:
                    self._cv.wait()
                if not self._heap:
                    return
                seq = self._heap[0][0]
            try:
                self.wal.wait_durable(seq, timeout=1.0)
            except TimeoutError:
                continue
            except BaseException as e:  # noqa: BLE001 - a failed WAL fails every waiter
                self._fail_all(e)
                continue
            durable = self.wal.durable_seq
            ready = []
            with self._cv:
                while self._heap and self._heap[0][0] <= durable:
                    ready.append(heapq.heappop(self._heap))
            by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future[int], int]]] = {}
            for s, _, loop, fut in ready:
                by_loop.setdefault(loop, []).append((fut, s))
            for loop, futs in by_loop.items():  # one wake-up per loop, not per request
                with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                    loop.call_soon_threadsafe(_set_results, futs)

    def _fail_all(self, error: BaseException) -> None:
        with self._cv:
            waiters, self._heap = self._heap, []
        if waiters:
            log.error("webhook durability wait failed: %s", error)
        for _, _, loop, fut in waiters:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(_set_exception, fut, error)

    def close(self) -> None:
        with self._cv:
            self._closed = True
            self._cv.notify()
        self._thread.join(timeout=5)
        self._fail_all(RuntimeError("webhook server stopped"))

    @property
    def pending(self) -> int:
        return len(self._heap)


def _set_results(futs: list[tuple[asyncio.Future[int], int]]) -> None:
    for fut, seq in futs:
        if not fut.done():
            fut.set_result(seq)


def _set_exception(fut: asyncio.Future[int], error: BaseException) -> None:
    if not fut.done():
        fut.set_exception(error)
