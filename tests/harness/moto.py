"""`MotoS3`: moto's S3 server as a separate process, so tests can pause it (an S3 outage).

Why a process and not moto's in-process threaded server: an outage test stops the server
with SIGSTOP mid-upload and resumes it with SIGCONT; the requests in flight then stall
exactly as on a network partition (connections accepted by the kernel, no answer), and
the buckets survive (restarting moto would empty them: it keeps everything in memory).

Lifecycle: `MotoS3().start()` picks a free loopback port, launches
`python -m moto.server` (output to a temporary log file) and waits until it answers;
`bucket()` creates a fresh uniquely named bucket; `env()` is what a Swell server needs to
reach it (`AWS_ENDPOINT_URL`, test keys, region); `pause()` / `resume()` send SIGSTOP /
SIGCONT; `stop()` kills it by PID. An `atexit` hook kills one still running.

Fixture: `moto_server` (module): one server per test module.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from harness.server import free_port

_LIVE: set[MotoS3] = set()


class MotoS3:
    def __init__(self) -> None:
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None
        fd, self._log_path = tempfile.mkstemp(prefix="moto-", suffix=".log")
        self._log = os.fdopen(fd, "wb")
        self.client: Any = None

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_REGION": "us-east-1",
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def start(self) -> MotoS3:
        import boto3

        self._proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        _LIVE.add(self)
        self.client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        deadline = time.monotonic() + 30
        while True:
            if self._proc.poll() is not None:
                raise RuntimeError(f"moto server exited: {self.log_tail()}")
            with contextlib.suppress(Exception):
                self.client.list_buckets()
                return self
            if time.monotonic() > deadline:
                raise RuntimeError(f"moto server did not answer: {self.log_tail()}")
            time.sleep(0.1)

    def bucket(self) -> str:
        name = f"swell-{uuid.uuid4().hex[:12]}"
        self.client.create_bucket(Bucket=name)
        return name

    def keys(self, bucket: str, prefix: str = "") -> dict[str, int]:
        """Every object's key (relative to `prefix`) and size."""
        out: dict[str, int] = {}
        for page in self.client.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix
        ):
            for o in page.get("Contents", ()):
                out[o["Key"][len(prefix) :]] = o["Size"]
        return out

    def pause(self) -> None:
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self) -> None:
        os.kill(self.pid, signal.SIGCONT)

    def log_tail(self, n: int = 2000) -> str:
        with open(self._log_path, "rb") as f:
            return f.read()[-n:].decode(errors="replace")

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._proc.pid, signal.SIGCONT)
                self._proc.kill()
            self._proc.wait(timeout=10)
        _LIVE.discard(self)
        self._log.close()
        with contextlib.suppress(OSError):
            os.unlink(self._log_path)


@atexit.register
def _kill_leftovers() -> None:
    for m in list(_LIVE):
        with contextlib.suppress(Exception):
            m.stop()


@pytest.fixture(scope="module")
def moto_server() -> Iterator[MotoS3]:
    m = MotoS3().start()
    try:
        yield m
    finally:
        m.stop()
