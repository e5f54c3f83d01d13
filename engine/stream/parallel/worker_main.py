"""The worker process of the local transport: `python -m engine.stream.parallel.worker_main`.

Reads length-prefixed frames on stdin (the first is its JSON config), answers each with
`WorkerHost.handle` on stdout, and exits at end of input (the coordinator closed the pipe
or died). It lowers its CPU priority first (`transport.WORKER_NICE`). The protocol's
stdout is moved to a private descriptor first, so a stray print of some library goes to
stderr (the server's log) instead of corrupting a frame.
"""

from __future__ import annotations

import json
import logging
import os
import sys

from engine.stream.parallel.host import WorkerHost
from engine.stream.parallel.transport import WORKER_NICE, read_frame, write_frame


def main() -> int:
    os.nice(WORKER_NICE)  # client answers first (`WORKER_NICE`)
    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    proto_in = os.fdopen(os.dup(0), "rb", buffering=0)
    os.dup2(2, 1)  # print() -> stderr
    sys.stdout = sys.stderr
    level = os.environ.get("SWELL_LOG_LEVEL", "info").upper()
    logging.basicConfig(
        stream=sys.stderr,
        level=getattr(logging, level, logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    first = read_frame(proto_in)
    if first is None:
        return 0
    host = WorkerHost(json.loads(first))
    try:
        while True:
            req = read_frame(proto_in)
            if req is None:
                return 0
            write_frame(proto_out, host.handle(req))
            host.finish()  # work the response did not wait for
    except BrokenPipeError:
        return 0
    finally:
        host.close()


if __name__ == "__main__":
    sys.exit(main())
