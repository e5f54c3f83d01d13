"""Wal: ordering, group commit, async appends, truncation, and durability across kill -9."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from engine.state.store import StateStore, StorageError
from engine.state.wal import GROUP_BYTES, Wal, _groups

REPO = Path(__file__).resolve().parents[3]
CHILD = Path(__file__).with_name("crash_child.py")


@pytest.fixture
def store(tmp_path: Path) -> StateStore:
    s = StateStore.open(tmp_path / "state")
    yield s
    s.close()


def test_sequence_numbers_follow_call_order(store: StateStore) -> None:
    wal = Wal(store)
    seqs = [wal.append(b"p%d" % i) for i in range(50)]
    assert seqs == list(range(1, 51))
    wal.wait_durable(50, timeout=10)
    assert wal.durable_seq == 50
    assert list(wal.records_after(45)) == [(i, b"p%d" % (i - 1)) for i in range(46, 51)]
    wal.close()


def test_concurrent_appenders_share_fsyncs(store: StateStore) -> None:
    wal = Wal(store)
    threads, per_thread = 16, 100
    acked: list[list[int]] = [[] for _ in range(threads)]

    def worker(t: int) -> None:
        for i in range(per_thread):
            seq = wal.append(b"%d:%d" % (t, i))
            wal.wait_durable(seq, timeout=30)
            acked[t].append(seq)

    ts = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    wal.close()
    total = threads * per_thread
    all_seqs = sorted(s for a in acked for s in a)
    assert all_seqs == list(range(1, total + 1))
    for a in acked:  # each thread saw its own appends in increasing order
        assert a == sorted(a)
    records = dict(Wal(store).records_after(0))
    for t in range(threads):
        assert [records[s] for s in acked[t]] == [b"%d:%d" % (t, i) for i in range(per_thread)]
    assert wal.records_written == total
    assert wal.fsyncs < total, "every record paid its own fsync: no group commit"
    assert wal.max_batch_records > 1
    # one observation per group commit in each latency histogram (the metrics endpoint)
    assert wal.queue_seconds.snapshot()[2] == wal.fsyncs == wal.sync_seconds.snapshot()[2]


def test_async_appends_do_not_block_and_are_durable(store: StateStore) -> None:
    wal = Wal(store)

    async def main() -> list[int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        tick = asyncio.create_task(ticker())
        seqs = await asyncio.gather(*(wal.append_durable_async(b"a%d" % i) for i in range(200)))
        tick.cancel()
        assert ticks > 0
        return list(seqs)

    seqs = asyncio.run(main())
    assert sorted(seqs) == list(range(1, 201))
    assert wal.durable_seq >= 200
    assert dict(wal.records_after(0))[17] == b"a16"
    wal.close()


def test_truncate_through_in_checkpoint_batch_and_numbering_after_reopen(tmp_path: Path) -> None:
    path = tmp_path / "state"
    store = StateStore.open(path)
    wal = Wal(store)
    for i in range(10):
        wal.append(b"r%d" % i)
    wal.wait_durable(10)
    batch = store.new_batch()
    batch.put(b"\x00\x00\x00\x01k", b"state")
    wal.truncate_through(6, batch)
    assert [s for s, _ in wal.records_after(0)] == list(range(1, 11))  # not written yet
    store.write(batch)
    assert [s for s, _ in wal.records_after(0)] == [7, 8, 9, 10]
    with pytest.raises(ValueError):
        wal.truncate_through(11, store.new_batch())
    batch = store.new_batch()
    wal.truncate_through(10, batch)  # everything: only the floor remembers the numbering
    store.write(batch)
    wal.close()
    with pytest.raises(StorageError):
        wal.append(b"late")
    store.close()

    store = StateStore.open(path)
    wal = Wal(store)
    assert list(wal.records_after(0)) == []
    assert wal.append(b"next") == 11
    wal.close()
    store.close()


def test_reopen_continues_after_highest_record(tmp_path: Path) -> None:
    path = tmp_path / "state"
    store = StateStore.open(path)
    wal = Wal(store)
    for _ in range(5):
        wal.append(b"x")
    wal.close()  # drains the queue
    store.close()
    store = StateStore.open(path)
    wal = Wal(store)
    assert wal.last_seq == 5 and wal.append(b"y") == 6
    wal.close()
    store.close()


def test_wait_durable_rejects_unassigned_sequence(store: StateStore) -> None:
    wal = Wal(store)
    with pytest.raises(ValueError):
        wal.wait_durable(1)
    wal.close()


def test_acked_records_survive_kill_9(tmp_path: Path) -> None:
    path = tmp_path / "state"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, str(CHILD), "wal", str(path)],
        stdout=subprocess.PIPE,
        env=env,
        text=True,
    )
    acked: dict[int, bytes] = {}
    try:
        assert child.stdout is not None
        while len(acked) < 2000:
            line = child.stdout.readline()
            assert line, f"child exited early with {child.poll()}"
            seq, body = line.split()
            acked[int(seq)] = body.encode()
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    store = StateStore.open(path)
    try:
        stored = dict(Wal(store).records_after(0))
        missing = {s for s in acked if stored.get(s) != acked[s]}
        assert not missing, f"{len(missing)} acknowledged records lost or changed"
        assert sorted(stored) == list(range(1, len(stored) + 1))  # no holes
    finally:
        store.close()


def test_big_queued_records_are_cut_into_batches_and_read_back_in_order(
    store: StateStore,
) -> None:
    """Records bigger than a write group go out in several batches, fsynced once: all of
    them read back, in order, and the durable mark covers the last."""
    assert _groups([(1, b"a" * GROUP_BYTES), (2, b"b"), (3, b"c" * GROUP_BYTES), (4, b"d")]) == [
        [(1, b"a" * GROUP_BYTES)],
        [(2, b"b"), (3, b"c" * GROUP_BYTES)],
        [(4, b"d")],
    ]
    wal = Wal(store)
    payloads = [bytes([i]) * (GROUP_BYTES // 2 + i) for i in range(7)]
    seqs = [wal.append(p) for p in payloads]
    wal.wait_durable(seqs[-1], timeout=30)
    assert [p for _, p in wal.records_after(0)] == payloads
    wal.close()


def _parts_in(store: StateStore) -> list[bytes]:
    from engine.state.wal import PART_END, PART_PREFIX

    return [k for k, _ in store.scan_range(PART_PREFIX, PART_END)]


def test_a_transaction_is_its_parts_and_one_commit_record(store: StateStore) -> None:
    wal = Wal(store)
    wal.append(b"before")
    txn = wal.begin()
    for i in range(3):
        wal.write_part(txn, i, b"part%d" % i)
    assert [s for s, _ in wal.records_after(0)] in ([], [1])  # parts are not records
    seq = wal.commit(txn, b"commit")
    wal.wait_durable(seq, timeout=10)
    assert list(wal.records_after(1)) == [(2, b"commit")]
    assert list(wal.parts(txn)) == [b"part0", b"part1", b"part2"]
    with pytest.raises(ValueError, match="not open"):
        wal.write_part(txn, 3, b"late")
    batch = store.new_batch()
    wal.truncate_through(seq, batch)  # the commit's parts go with it
    store.write(batch)
    assert list(wal.records_after(0)) == [] and _parts_in(store) == []
    wal.close()


def test_parts_nobody_committed_are_dropped_after_replay(store: StateStore) -> None:
    wal = Wal(store)
    done, lost = wal.begin(), wal.begin()
    wal.write_part(done, 0, b"kept")
    wal.write_part(lost, 0, b"lost")  # the writer crashed before its commit
    seq = wal.commit(done, b"c")
    wal.wait_durable(seq, timeout=10)
    wal.close()
    again = Wal(store)  # a restart: replay registers the commit it finds
    assert again.begin() > lost  # ids are never reused while parts of them are stored
    again.note_commit(seq, done)
    open_txn = again.begin()
    again.write_part(open_txn, 0, b"in flight")
    again.drop_orphan_parts()
    assert list(again.parts(done)) == [b"kept"]
    assert list(again.parts(lost)) == []
    assert list(again.parts(open_txn)) == [b"in flight"]  # open: left alone
    again.abort(open_txn)
    batch = store.new_batch()
    again.truncate_through(0, batch)  # aborted parts go with the next truncation
    store.write(batch)
    assert list(again.parts(open_txn)) == [] and list(again.parts(done)) == [b"kept"]
    again.close()
