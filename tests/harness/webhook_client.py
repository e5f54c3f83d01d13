"""HTTP clients for webhook tests: many POSTs at once, and one request with its status.

aiohttp against the real server's webhook port; shared by the webhook e2e tests.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import aiohttp


async def post_all(
    url: str, bodies: list[bytes], headers: dict[str, str], concurrency: int = 100
) -> list[int]:
    sem = asyncio.Semaphore(concurrency)
    async with aiohttp.ClientSession() as http:

        async def one(b: bytes) -> int:
            async with sem, http.post(url, data=b, headers=headers) as r:
                await r.read()
                return r.status

        return await asyncio.gather(*[one(b) for b in bodies])


def status(url: str, body: bytes, headers: dict[str, str], method: str = "POST") -> tuple[int, Any]:
    async def go() -> tuple[int, Any]:
        async with (
            aiohttp.ClientSession() as http,
            http.request(method, url, data=body, headers=headers) as r,
        ):
            text = await r.text()
            return r.status, (json.loads(text) if text else None)

    return asyncio.run(go())
