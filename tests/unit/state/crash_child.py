"""Child processes for the crash tests: they work and acknowledge on stdout until killed.

Run as `python crash_child.py wal <dir>` or `python crash_child.py checkpoint <dir>`
(`checkpoint-keyed`: a key per row, so every checkpoint is written in pieces;
`checkpoint-bulk`: also large values, so every checkpoint writes an SST file of its own)
with the repository root on PYTHONPATH. Not a test module (no `test_` prefix).
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path

from engine.state.checkpoint import Checkpointer
from engine.state.store import StateStore
from engine.state.table import StateTable
from engine.state.wal import Wal

KEYS_PER_EPOCH = 20_000
BLOBS_PER_EPOCH = 6
BLOB_BYTES = 1 << 20  # with BLOBS_PER_EPOCH, more than the checkpoint's BULK_BYTES


def payload(seq: int) -> bytes:
    return b"record-%d-" % seq + bytes(seq % 251 for _ in range(seq % 97))


def run_wal(path: Path) -> None:
    """Four threads append and ack each record (seq and thread) once it is durable."""
    store = StateStore.open(path)
    wal = Wal(store)
    out_lock = threading.Lock()

    def worker(tid: int) -> None:
        i = 0
        while True:
            body = b"t%d-%d" % (tid, i)
            seq = wal.append(body)
            wal.wait_durable(seq)
            with out_lock:
                sys.stdout.write(f"{seq} {body.decode()}\n")
                sys.stdout.flush()
            i += 1

    for tid in range(4):
        threading.Thread(target=worker, args=(tid,), daemon=True).start()
    threading.Event().wait()


def expected_table(epoch: int) -> dict[tuple[int], tuple[int, int]]:
    """State after `epoch` epochs of `run_checkpoint` (epochs numbered from 1)."""
    rows: dict[tuple[int], tuple[int, int]] = {}
    for e in range(1, epoch + 1):
        for k in range(e * 1000, e * 1000 + KEYS_PER_EPOCH):
            rows[(k,)] = (e, k)
        for k in range(e * 1000 - 5000, e * 1000 - 4000):
            rows.pop((k,), None)
    return rows


def blob(epoch: int, i: int) -> bytes:
    return bytes([epoch % 256, i]) * (BLOB_BYTES // 2)


def expected_blobs(epoch: int) -> dict[tuple[int, int], tuple[bytes]]:
    """The blob table after `epoch` epochs of `run_checkpoint(bulk=True)`: each epoch
    adds its blobs, rewrites the previous epoch's first one and deletes its second."""
    rows: dict[tuple[int, int], tuple[bytes]] = {}
    for e in range(1, epoch + 1):
        for i in range(BLOBS_PER_EPOCH):
            rows[(e, i)] = (blob(e, i),)
        if e > 1:
            rows[(e - 1, 0)] = (blob(e, 99),)
            rows.pop((e - 1, 1), None)
    return rows


def run_checkpoint(path: Path, keyed: bool = False, bulk: bool = False) -> None:
    """Each epoch overwrites and deletes many keys, then commits; acks the epoch after.

    Resumes after the last checkpoint, so the test can kill and restart it repeatedly.
    `keyed`: the table stores a key per row, so each checkpoint is written in pieces.
    `bulk`: a second table gets large values (`expected_blobs`).
    """
    store = StateStore.open(path)
    wal = Wal(store)
    cp = Checkpointer(store, wal)
    table = StateTable(9, "t")
    if keyed:
        table.prefer_keyed()
    meta = cp.load()  # recover and continue, so one test can crash the same store repeatedly
    epoch = meta.epoch if meta is not None else 0
    table.load(store)
    blobs = StateTable(10, "blobs")
    blobs.prefer_keyed()
    blobs.load(store)
    while True:
        epoch += 1
        for k in range(epoch * 1000, epoch * 1000 + KEYS_PER_EPOCH):
            table.put((k,), (epoch, k))
        for k in range(epoch * 1000 - 5000, epoch * 1000 - 4000):
            table.delete((k,))
        if bulk:
            for i in range(BLOBS_PER_EPOCH):
                blobs.put((epoch, i), (blob(epoch, i),))
            if epoch > 1:
                blobs.put((epoch - 1, 0), (blob(epoch, 99),))
                blobs.delete((epoch - 1, 1))
        seq = wal.append(b"epoch %d" % epoch)
        cp.commit(epoch, seq, [table, blobs], {"epoch": str(epoch).encode()})
        sys.stdout.write(f"{epoch}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1] == "checkpoint-keyed":
        run_checkpoint(Path(sys.argv[2]), keyed=True)
    elif sys.argv[1] == "checkpoint-bulk":
        run_checkpoint(Path(sys.argv[2]), bulk=True)
    else:
        {"wal": run_wal, "checkpoint": run_checkpoint}[sys.argv[1]](Path(sys.argv[2]))
