"""A stand-in for `swell playground`, used only by the harness's own tests.

It accepts the same command line and behaves as `FAKE_SWELL_MODE` says, so the harness's
start/stop/restart/crash handling can be tested without depending on the real server:

- `ok` (default): listen on --listen-addr and --webhook-listen-addr, write a marker file in
  --data-dir, exit 0 on SIGTERM.
- `exit`: print a message to stderr and exit with code 3 at once.
- `hang`: never listen (the harness must time out).
- `ignore-term`: like `ok` but ignore SIGTERM (the harness must kill it and complain).
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import sys
import time
from pathlib import Path


def _listen(addr: str) -> socket.socket:
    host, port = addr.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, int(port)))
    s.listen(16)
    return s


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["playground"])
    ap.add_argument("--listen-addr", required=True)
    ap.add_argument("--webhook-listen-addr", required=True)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--barrier-interval-ms", type=int, required=True)
    ap.add_argument("--parallelism", type=int, default=1)
    args = ap.parse_args()
    mode = os.environ.get("FAKE_SWELL_MODE", "ok")
    if mode == "exit":
        print("fake swell: cannot open data directory", file=sys.stderr)
        return 3
    if mode == "hang":
        time.sleep(3600)
        return 0
    if mode == "ignore-term":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    starts = Path(args.data_dir) / "fake-starts"
    with open(starts, "a") as f:
        f.write("start\n")
    # written before the ports open: the harness counts a run as started once the pgwire
    # port accepts, so the line is in the log by then
    print(f"fake swell serving {args.listen_addr}", flush=True)
    socks = [_listen(args.listen_addr), _listen(args.webhook_listen_addr)]
    while True:
        conn, _ = socks[0].accept()
        conn.close()


if __name__ == "__main__":
    sys.exit(main())
