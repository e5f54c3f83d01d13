"""Real Iceberg test services: moto's S3 server and the lakana-server REST catalog.

Fixtures (import them into a test module to use them):

- `moto_s3` (session): moto's threaded S3 server on 127.0.0.1 (random port); yields a
  dict with `endpoint`, and `bucket(name)` creates a bucket. In-memory, gone at exit.
- `lakana` (session): lakana-server 0.20 (an Iceberg REST catalog, from the test extra:
  `pip install -e ".[test]"`), with a SQLite metastore, bootstrap token and a file-storage
  environment named `demo`. Yields a dict with `uri`, `token`, `prefix`, `warehouse`.
  Namespaces must be bronze/silver/gold. Skipped where the package is not installed, except
  under CI (`CI` set), where that fails.
"""

from __future__ import annotations

import base64
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def moto_s3() -> Iterator[dict[str, Any]]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    import boto3

    client = boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )

    def bucket(name: str) -> str:
        with contextlib.suppress(client.exceptions.BucketAlreadyOwnedByYou):
            client.create_bucket(Bucket=name)
        return name

    yield {"endpoint": endpoint, "bucket": bucket, "client": client}
    server.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lakana_executable() -> Path | None:
    """The `lakana-server` script installed with this interpreter (the test extra), if any."""
    exe = Path(sys.executable).parent / "lakana-server"
    if exe.exists():
        return exe
    found = shutil.which("lakana-server")
    return Path(found) if found else None


@pytest.fixture(scope="session")
def lakana(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    exe = lakana_executable()
    if exe is None:
        why = 'lakana-server is not installed (it comes with the test extra: pip install -e ".[test]")'
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    d = tmp_path_factory.mktemp("lakana")
    port = _free_port()
    secret = "swelltestsecret0123456789"
    env = {
        **os.environ,
        "LAKANA_DATABASE__URL": f"sqlite:///{d}/meta.db",
        "LAKANA_BOOTSTRAP_PAT_KEY_ID": "testkey",
        "LAKANA_BOOTSTRAP_PAT_SECRET": secret,
        "LAKANA_SECRETS__MASTER_KEY": base64.b64encode(b"k" * 32).decode(),
        "LAKANA_HOST": "127.0.0.1",
        "LAKANA_PORT": str(port),
    }
    subprocess.run([str(exe), "migrate"], env=env, check=True, capture_output=True, timeout=120)
    log = open(d / "server.log", "wb")  # noqa: SIM115 (closed at teardown)
    proc = subprocess.Popen([str(exe)], env=env, stdout=log, stderr=subprocess.STDOUT)
    token = f"lakana_pat_testkey_{secret}"
    import requests

    base = f"http://127.0.0.1:{port}"
    deadline = time.time() + 60
    while True:
        try:
            requests.get(f"{base}/v1/config", timeout=1)
            break
        except requests.RequestException:
            if time.time() > deadline or proc.poll() is not None:
                proc.kill()
                raise RuntimeError((d / "server.log").read_text()[-2000:]) from None
            time.sleep(0.2)
    wh = d / "warehouse"
    wh.mkdir()
    r = requests.post(
        f"{base}/api/v1/environments",
        headers={"Authorization": f"Bearer {token}"},
        json={"name": "demo", "storage": {"scheme": "file", "root": f"file://{wh}", "options": {}}},
        timeout=30,
    )
    assert r.status_code < 300, r.text
    try:
        yield {"uri": base, "token": token, "prefix": "demo", "warehouse": str(wh)}
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
