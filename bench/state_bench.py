"""State layer throughput: codec vs pickle, StateTable.write_dirty + checkpoint, WAL appends.

Run: `.venv/bin/python bench/state_bench.py [--keys N]` from the repository root. Prints
rates; not a test (performance targets never live in tests).
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from engine.state import codec  # noqa: E402
from engine.state.checkpoint import Checkpointer  # noqa: E402
from engine.state.store import StateStore  # noqa: E402
from engine.state.table import StateTable  # noqa: E402
from engine.state.wal import Wal  # noqa: E402


def rate(n: int, fn: Callable[[], Any], repeat: int = 3) -> float:
    best = min(_timed(fn) for _ in range(repeat))
    return n / best


def _timed(fn: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_codec(n: int) -> None:
    rows = {
        "int,str,float": [(i, f"user_{i:06d}", i * 0.5) for i in range(n)],
        "timestamp,int,str": [(datetime(2024, 5, 1, 12, 0, i % 60), i, "bid") for i in range(n)],
    }
    for name, data in rows.items():
        for label, enc, dec in (
            ("pickle5", lambda t: pickle.dumps(t, 5), pickle.loads),
            ("codec key", codec.encode_key, codec.decode_key),
            ("codec value", codec.encode_value, codec.decode_value),
        ):
            blobs = [enc(t) for t in data]
            e = rate(n, lambda enc=enc, data=data: [enc(t) for t in data])
            d = rate(n, lambda dec=dec, blobs=blobs: [dec(b) for b in blobs])
            size = sum(map(len, blobs)) / n
            print(
                f"  {name:18s} {label:12s} encode {e / 1e6:5.2f} M/s  decode {d / 1e6:5.2f} M/s"
                f"  {size:5.1f} B/row"
            )


def bench_checkpoint(n: int, root: Path) -> None:
    store = StateStore.open(root / "cp")
    wal = Wal(store)
    cp = Checkpointer(store, wal)
    table = StateTable(1, "bench")
    epochs = 5
    total = 0.0
    for e in range(1, epochs + 1):
        table.put_many(
            [(i, f"k{i}") for i in range(n)], [(e, i * 1.5, "payload") for i in range(n)]
        )
        t0 = time.perf_counter()
        cp.commit(e, 0, [table], {"catalog": b"x" * 1000})
        total += time.perf_counter() - t0
    print(
        f"  write_dirty + commit: {epochs * n / total / 1e6:5.2f} M puts/s"
        f" ({n} keys/epoch, last commit {cp.last_duration * 1e3:.0f} ms,"
        f" {cp.last_bytes / 1e6:.1f} MB)"
    )
    t0 = time.perf_counter()
    fresh = StateTable(1)
    fresh.load(store)
    print(f"  StateTable.load:      {len(fresh) / (time.perf_counter() - t0) / 1e6:5.2f} M rows/s")
    wal.close()
    store.close()


def bench_wal(root: Path, threads: int, per_thread: int, payload: bytes) -> None:
    store = StateStore.open(root / f"wal{threads}")
    wal = Wal(store)

    def worker() -> None:
        for _ in range(per_thread):
            wal.wait_durable(wal.append(payload))

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    t0 = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    dt = time.perf_counter() - t0
    n = threads * per_thread
    print(
        f"  {threads:3d} threads x append+wait_durable: {n / dt / 1e3:7.1f} k records/s,"
        f" {wal.fsyncs} fsyncs ({n / max(wal.fsyncs, 1):.1f} records/fsync)"
    )
    # fire-and-forget appends, one wait at the end: the writer's drain rate
    t0 = time.perf_counter()
    last = 0
    for _ in range(n):
        last = wal.append(payload)
    wal.wait_durable(last)
    dt = time.perf_counter() - t0
    print(f"  {'':3s} append, wait for the last only:  {n / dt / 1e3:7.1f} k records/s")
    wal.close()
    store.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--keys", type=int, default=200_000)
    args = ap.parse_args()
    print("codec (3-column tuples):")
    bench_codec(args.keys)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print("checkpoint:")
        bench_checkpoint(args.keys, root)
        print("WAL (100-byte payloads, group commit):")
        for threads in (1, 8, 64):
            bench_wal(root, threads, 4000 // threads * 5, b"x" * 100)


if __name__ == "__main__":
    main()
