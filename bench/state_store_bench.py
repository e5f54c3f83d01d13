"""Checkpoints on S3 (`--state-store`): upload MB/s, restore seconds per GB, steady-state
objects and bytes uploaded per hour. Against moto's S3 server on loopback (a separate
process), so the figures measure Swell's side (snapshot, hashing, boto3, one core for the
server) more than a network: real S3 adds latency per request and caps bandwidth per
connection.

Cases (e2e, through the real server):
1. **upload**: load `--rows` rows of incompressible state, FLUSH (which returns once the
   epoch's manifest is on S3); MB/s = bytes uploaded / seconds of that upload, from
   `rw_catalog.rw_state_store_status` (its `bytes_uploaded`) and the FLUSH wall time.
2. **restore**: a second server on an empty data directory with the same store; seconds
   per GB from the server's own "restore finished" log line and the manifest size.
3. **steady**: `--steady-seconds` of 1,000 rows/s into a table with a GROUP BY view over
   random keys (so every epoch touches old keys), `--upload-interval 5`; objects and bytes
   uploaded per hour, and the ratio to the bytes RocksDB wrote (how much compaction's
   rewrites cost on the wire).

    python bench/state_store_bench.py [--rows 500000] [--steady-seconds 60] [--profile]
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _report import report  # noqa: E402
from _server import BenchServer, free_port  # noqa: E402

BENCH = "state_store"


class Moto:
    """moto's S3 server as a subprocess on a free loopback port, with one bucket."""

    def __init__(self) -> None:
        import boto3

        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.client = boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
        for _ in range(300):
            try:
                self.client.list_buckets()
                break
            except Exception:  # noqa: BLE001 - not up yet
                time.sleep(0.1)
        self.bucket = f"bench-{uuid.uuid4().hex[:8]}"
        self.client.create_bucket(Bucket=self.bucket)

    def env(self) -> dict[str, str]:
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test",
            "AWS_REGION": "us-east-1",
            "SWELL_SECRET_STORE_PRIVATE_KEY_HEX": "cd" * 32,
        }

    def close(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=10)


def status(c: Any) -> dict[str, Any]:
    cur = c.execute("SELECT * FROM rw_catalog.rw_state_store_status")
    names = [d.name for d in cur.description]
    return dict(zip(names, cur.fetchone(), strict=True))


def upload_and_restore(moto: Moto, rows: int, profile: bool) -> None:
    url = f"s3://{moto.bucket}/big"
    args = ["--state-store", url, "--upload-interval", "3600"]  # only FLUSH uploads
    with BenchServer(extra_args=args) as srv, srv.connect() as c:
        c.execute("CREATE TABLE big (id BIGINT PRIMARY KEY, pad VARCHAR)")
        step = 200_000
        for lo in range(0, rows, step):
            hi = min(lo + step, rows) - 1
            c.execute(  # md5 text: about 64 incompressible bytes per row
                "INSERT INTO big SELECT g, md5(g::varchar) || md5((g * 7)::varchar) "
                f"FROM generate_series({lo}, {hi}) g"
            )
        spied = profile and srv.profile_start(srv.dir / "upload.spy")
        t0 = time.perf_counter()
        c.execute("FLUSH")  # returns once the whole state is on S3
        wall = time.perf_counter() - t0
        if spied:
            srv.profile_stop()
        st = status(c)
    mb = st["last_upload_bytes"] / 1e6
    report(
        BENCH,
        f"upload {mb:.0f} MB to moto (loopback)",
        mb / st["last_upload_seconds"],
        "MB/s",
        mode="e2e",
        note=f"{st['last_upload_seconds']:.2f} s upload, FLUSH {wall:.2f} s, "
        f"{st['objects_uploaded']} objects",
    )
    total_mb = st["remote_bytes"] / 1e6
    with BenchServer(extra_args=args) as srv2:
        log = (srv2.dir / "server.log").read_text()
        with srv2.connect() as c:
            n = c.execute("SELECT count(*) FROM big").fetchone()[0]
            assert n == rows, n
    m = re.search(r"restore finished: epoch \d+ in ([\d.]+)s", log)
    assert m is not None, log[-2000:]
    restore_s = float(m.group(1))
    report(
        BENCH,
        f"restore {total_mb:.0f} MB from moto (loopback)",
        restore_s / (total_mb / 1000),
        "s/GB",
        mode="e2e",
        note=f"{restore_s:.2f} s download",
    )


def steady(moto: Moto, seconds: float) -> None:
    """1,000 rows/s for `seconds`, uploads every 5 s: what goes up per hour."""
    url = f"s3://{moto.bucket}/steady"
    args = ["--state-store", url, "--upload-interval", "5"]
    with BenchServer(extra_args=args) as srv, srv.connect() as c:
        c.execute("CREATE TABLE ev (id BIGINT PRIMARY KEY, k INT, v INT)")
        c.execute(
            "CREATE MATERIALIZED VIEW agg AS SELECT k, count(*) n, sum(v) s FROM ev GROUP BY k"
        )
        t0 = time.perf_counter()
        sent = 0
        while (now := time.perf_counter() - t0) < seconds:
            due = int(now * 1000) + 100
            if due > sent:
                c.execute(
                    f"INSERT INTO ev SELECT g, (g::bigint * 7919) % 100000, g % 1000 "
                    f"FROM generate_series({sent}, {due - 1}) g"
                )
                sent = due
            time.sleep(0.1)
        elapsed = time.perf_counter() - t0
        c.execute("FLUSH")
        st = status(c)
    per_hour = 3600 / elapsed
    report(
        BENCH,
        "steady 1k rows/s, upload every 5 s: objects uploaded",
        st["objects_uploaded"] * per_hour,
        "objects/hour",
        mode="e2e",
        note=f"{st['uploads']} manifests in {elapsed:.0f} s, {sent:,} rows",
    )
    report(
        BENCH,
        "steady 1k rows/s, upload every 5 s: bytes uploaded",
        st["bytes_uploaded"] * per_hour / 1e6,
        "MB/hour",
        mode="e2e",
        note=f"{st['bytes_uploaded'] / max(sent, 1):.0f} bytes per row; newest checkpoint "
        f"{st['remote_bytes'] / 1e6:.1f} MB",
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--steady-seconds", type=float, default=60.0)
    ap.add_argument("--profile", action="store_true", help="py-spy the server's upload")
    a = ap.parse_args()
    moto = Moto()
    os.environ.update(moto.env())  # the servers inherit the environment
    try:
        upload_and_restore(moto, a.rows, a.profile)
        if a.steady_seconds > 0:
            steady(moto, a.steady_seconds)
    finally:
        moto.close()


if __name__ == "__main__":
    main()
