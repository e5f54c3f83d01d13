"""Checkpointer: one atomic batch per epoch, metadata round trip, crash atomicity."""

from __future__ import annotations

import importlib.util
import marshal
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from engine import faults
from engine.state.checkpoint import (
    BULK_BYTES,
    BULK_VALUE,
    INGEST_KEY,
    PENDING_KEY,
    PIECE_BYTES,
    PIECE_OPS,
    STAGE_END,
    STAGE_PREFIX,
    Checkpointer,
    CheckpointMeta,
    EpochChanges,
    split_bulk,
)
from engine.state.store import StateStore, StorageError, sst_writer
from engine.state.table import StateTable
from engine.state.wal import Wal

REPO = Path(__file__).resolve().parents[3]
CHILD = Path(__file__).with_name("crash_child.py")
_spec = importlib.util.spec_from_file_location("state_crash_child", CHILD)
assert _spec is not None and _spec.loader is not None
crash_child = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(crash_child)


class Opened:
    def __init__(self, path: Path) -> None:
        self.store = StateStore.open(path)
        self.wal = Wal(self.store)
        self.cp = Checkpointer(self.store, self.wal)

    def close(self) -> None:
        self.wal.close()
        self.store.close()


def test_fresh_store_has_no_checkpoint(tmp_path: Path) -> None:
    db = Opened(tmp_path / "state")
    assert db.cp.load() is None
    assert list(db.cp.records_to_replay(None)) == []
    db.close()


def test_commit_load_and_recover_in_the_documented_order(tmp_path: Path) -> None:
    path = tmp_path / "state"
    db = Opened(path)
    a, gone = StateTable(1, "a"), StateTable(2, "gone")
    a.put((1,), ("one",))
    gone.put((1,), ("x",))
    s1 = db.wal.append(b"insert 1")
    db.cp.commit(1, s1, [a, gone], {"catalog": b"v1", "offsets": b"o1"})
    assert db.cp.last_keys == 2 and db.cp.last_bytes > 0 and db.cp.last_duration > 0

    a.put((2,), ("two",))
    a.delete((1,))
    db.cp.commit(2, s1, [a], {"catalog": b"v2"}, dropped=[gone])
    s2 = db.wal.append(b"insert 3")  # acknowledged after the checkpoint
    db.wal.wait_durable(s2)
    db.close()

    db = Opened(path)
    meta = db.cp.load()
    assert meta == CheckpointMeta(2, s1, {"catalog": b"v2"})  # "offsets" was replaced away
    a2, gone2 = StateTable(1), StateTable(2)
    a2.load(db.store)
    gone2.load(db.store)
    assert a2.to_dict() == {(2,): ("two",)} and gone2.to_dict() == {}
    assert list(db.cp.records_to_replay(meta)) == [(s2, b"insert 3")]
    db.close()


def test_commit_truncates_covered_wal_records(tmp_path: Path) -> None:
    db = Opened(tmp_path / "state")
    seqs = [db.wal.append(b"r%d" % i) for i in range(5)]
    db.cp.commit(1, seqs[2], [], {})  # waits for seq 3 to be durable, then cuts through it
    assert [s for s, _ in db.wal.records_after(0)] == seqs[3:]
    db.close()


def test_epochs_and_wal_cuts_may_not_go_back(tmp_path: Path) -> None:
    db = Opened(tmp_path / "state")
    db.wal.append(b"x")
    db.cp.commit(5, 1, [], {})
    with pytest.raises(ValueError):
        db.cp.commit(4, 1, [], {})
    with pytest.raises(ValueError):
        db.cp.commit(6, 0, [], {})
    db.cp.commit(5, 1, [], {})  # FLUSH without a new epoch is allowed
    db.close()


def test_failed_commit_refuses_further_commits(tmp_path: Path) -> None:
    db = Opened(tmp_path / "state")
    t = StateTable(1)
    t.put((1,), (1,))
    db.wal.close()
    db.store.close()  # the write below fails for real
    with pytest.raises(StorageError):
        db.cp.commit(1, 0, [t], {})
    with pytest.raises(StorageError, match="earlier checkpoint failed"):
        db.cp.commit(2, 0, [], {})


@pytest.mark.parametrize("mode", ["checkpoint", "checkpoint-keyed", "checkpoint-bulk"])
def test_checkpoint_is_all_or_nothing_across_kill_9(tmp_path: Path, mode: str) -> None:
    """Kill a child at varied moments (big batches: often inside a commit), restart it from
    the store each time; after every kill the state must be exactly the one meta names.
    `checkpoint-keyed` writes each checkpoint in pieces (a key per row), `checkpoint-bulk`
    writes its large values as a file of its own."""
    path = tmp_path / "state"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    rng = random.Random(20240501)
    acked = 0
    for _ in range(6):
        child = subprocess.Popen(
            [sys.executable, str(CHILD), mode, str(path)],
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        try:
            assert child.stdout is not None
            line = child.stdout.readline()
            assert line, f"child exited early with {child.poll()}"
            acked = int(line)
            time.sleep(rng.uniform(0.0, 0.3))
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()

        db = Opened(path)
        try:
            meta = db.cp.load()
            assert meta is not None and meta.epoch >= acked
            assert meta.extra == {"epoch": str(meta.epoch).encode()}
            t = StateTable(9)
            if mode == "checkpoint-keyed":
                t.prefer_keyed()
            t.load(db.store)
            assert t.to_dict() == crash_child.expected_table(meta.epoch)
            blobs = StateTable(10)
            blobs.prefer_keyed()
            blobs.load(db.store)
            want = crash_child.expected_blobs(meta.epoch) if mode == "checkpoint-bulk" else {}
            assert blobs.to_dict() == want
            replay = list(db.cp.records_to_replay(meta))
            assert all(s > meta.wal_seq for s, _ in replay)
            assert [p for _, p in replay] in ([], [b"epoch %d" % (meta.epoch + 1)])
        finally:
            db.close()


def test_large_checkpoint_written_in_pieces_loads_as_one(tmp_path: Path) -> None:
    """More keys and bytes than one piece: the store afterwards holds exactly the epoch, and
    no staged piece is left behind."""
    db = Opened(tmp_path / "state")
    a, b = StateTable(1, "a"), StateTable(2, "b")
    for k in range(3 * PIECE_OPS):
        a.put((k,), (k, "x" * 10))
    b.put((0,), ("y" * (2 * PIECE_BYTES),))  # one value larger than a piece
    s1 = db.wal.append(b"r1")
    db.cp.commit(1, s1, [a, b], {"catalog": b"c1"})
    for k in range(0, 3 * PIECE_OPS, 2):
        a.delete((k,))
    db.cp.commit(2, s1, [a], {"catalog": b"c2"}, dropped=[b])
    assert db.store.last_key_in(STAGE_PREFIX, STAGE_END) is None
    assert db.store.get(PENDING_KEY) is None
    db.close()
    db = Opened(tmp_path / "state")
    meta = db.cp.load()
    assert meta is not None and meta.epoch == 2 and meta.extra == {"catalog": b"c2"}
    t = StateTable(1)
    t.load(db.store)
    assert t.to_dict() == {(k,): (k, "x" * 10) for k in range(1, 3 * PIECE_OPS, 2)}
    gone = StateTable(2)
    gone.load(db.store)
    assert gone.to_dict() == {}
    db.close()


def test_pieces_of_a_committed_checkpoint_are_finished_by_recovery(tmp_path: Path) -> None:
    """A failure after the commit batch of a checkpoint in pieces (before the pieces reach
    their keys): `reset` and a reopen both see that epoch whole."""
    db = Opened(tmp_path / "state")
    a = StateTable(1, "a")
    a.prefer_keyed()  # a key per row: more operations than one piece holds
    for k in range(2 * PIECE_OPS):
        a.put((k,), (1,))
    db.cp.commit(1, 0, [a], {"e": b"1"})
    for k in range(2 * PIECE_OPS):
        a.put((k,), (2,))
    faults.configure(fail="checkpoint_pieces:1")
    try:
        with pytest.raises(faults.InjectedFailure):
            db.cp.commit(2, 0, [a], {"e": b"2"})
    finally:
        faults.configure()
    assert db.store.get(PENDING_KEY) is not None  # committed, pieces not yet written
    meta = db.cp.reset()
    assert meta is not None and meta.epoch == 2
    t = StateTable(1)
    t.prefer_keyed()
    t.load(db.store)
    assert set(t.to_dict().values()) == {(2,)}
    assert db.store.get(PENDING_KEY) is None
    db.close()


def test_staged_pieces_without_a_commit_are_dropped_on_open(tmp_path: Path) -> None:
    """A crash while pieces were staged, before the commit batch: the previous checkpoint
    is what the store holds, and the orphan pieces are removed."""
    db = Opened(tmp_path / "state")
    a = StateTable(1, "a")
    a.put((1,), (1,))
    db.cp.commit(1, 0, [a], {})
    batch = db.store.new_batch()
    batch.put(STAGE_PREFIX + b"\0\0\0\0\0\0\0\0", b"junk")
    db.store.write(batch)
    db.close()
    db = Opened(tmp_path / "state")
    meta = db.cp.load()
    assert meta is not None and meta.epoch == 1
    assert db.store.last_key_in(STAGE_PREFIX, STAGE_END) is None
    db.close()


def test_checkpoint_in_pieces_is_all_or_nothing_across_a_crash_between_them(
    tmp_path: Path,
) -> None:
    """The child dies (as kill -9) right after a commit batch of a checkpoint in pieces;
    the reopened store holds that epoch exactly."""
    path = tmp_path / "state"
    env = {**os.environ, "PYTHONPATH": str(REPO), faults.CRASH_ENV: "checkpoint_pieces:2"}
    child = subprocess.run(
        [sys.executable, str(CHILD), "checkpoint-keyed", str(path)],
        stdout=subprocess.PIPE, env=env, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert child.returncode == faults.CRASH_EXIT_CODE
    assert child.stdout.split() == ["1"]
    db = Opened(path)
    try:
        meta = db.cp.load()
        assert meta is not None and meta.epoch == 2
        t = StateTable(9)
        t.prefer_keyed()
        t.load(db.store)
        assert t.to_dict() == crash_child.expected_table(2)
    finally:
        db.close()


class _Files:
    """A table-like source of one SST file per commit (as a parallel job's actors hand in)."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.rows: dict[bytes, bytes | None] = {}
        self.n = 0

    def write_dirty(self, batch: Any) -> int:
        self.n += 1
        path = str(self.tmp / f"src-{self.n}.sst")
        w = sst_writer(path)
        for k in sorted(self.rows):
            v = self.rows[k]
            if v is None:
                del w[k]
            else:
                w[k] = v
        w.finish()
        batch.sst(Path(path).read_bytes())
        n, self.rows = len(self.rows), {}
        return n


def _key(i: int) -> bytes:
    return b"\0\0\0\x07" + i.to_bytes(4, "big")


@pytest.mark.parametrize("big", [False, True])
def test_sst_files_are_part_of_the_commit_across_a_failure_after_it(
    tmp_path: Path, big: bool
) -> None:
    """Files handed in with `EpochChanges.sst` land with their epoch: after a normal
    commit, after a failure between the commit batch and the ingestion (`reset` and a
    reopen ingest them), and not at all when the commit batch never landed; nothing of
    them is left in the ingest directory."""
    db = Opened(tmp_path / "state")
    files = _Files(tmp_path)
    other = StateTable(1, "a")
    other.prefer_keyed()
    for k in range(2 * PIECE_OPS if big else 3):  # big: the checkpoint goes in pieces
        other.put((k,), (1,))
    files.rows = {_key(i): b"v1-%d" % i for i in range(100)}
    db.cp.commit(1, 0, [other, files], {})
    assert db.store.get(_key(7)) == b"v1-7"
    files.rows = {_key(i): b"v2-%d" % i for i in range(50)} | {_key(99): None}
    other.put((0,), (2,))
    faults.configure(fail="checkpoint_pieces:1")
    try:
        with pytest.raises(faults.InjectedFailure):
            db.cp.commit(2, 0, [other, files], {})
    finally:
        faults.configure()
    assert db.store.get(INGEST_KEY) is not None  # committed, not yet ingested
    assert db.store.get(_key(7)) == b"v1-7"
    meta = db.cp.reset()
    assert meta is not None and meta.epoch == 2
    assert db.store.get(_key(7)) == b"v2-7" and db.store.get(_key(99)) is None
    assert db.store.get(_key(60)) == b"v1-60" and db.store.get(INGEST_KEY) is None
    # epoch 3 fails before its commit batch: its file is never ingested, and removed
    files.rows = {_key(i): b"v3" for i in range(100)}
    faults.configure(fail="checkpoint_batch:1")
    try:
        with pytest.raises(faults.InjectedFailure):
            db.cp.commit(3, 0, [other, files], {})
    finally:
        faults.configure()
    db.close()
    db = Opened(tmp_path / "state")
    meta = db.cp.load()
    assert meta is not None and meta.epoch == 2
    assert db.store.get(_key(7)) == b"v2-7"
    assert list((tmp_path / "state.ingest").iterdir()) == []
    db.close()


@pytest.mark.parametrize("fail", [None, "checkpoint_batch", "checkpoint_pieces"])
def test_large_values_go_as_a_file_of_the_commit(tmp_path: Path, fail: str | None) -> None:
    """An epoch with `BULK_BYTES` of large values writes them as an SST file of its own
    (nothing of it is left after the commit), with small puts, deletes and a large value
    deleted again in the same epoch around them: the store holds exactly the epoch after
    a commit, after a failure between the commit batch and the ingestion (`reset`), and
    the previous epoch after a failure before the commit batch."""
    db = Opened(tmp_path / "state")
    big, small = StateTable(1, "big"), StateTable(2, "small")
    big.prefer_keyed()
    small.prefer_keyed()
    n = BULK_BYTES // BULK_VALUE + 2
    for i in range(n):
        big.put((i,), (b"a%d" % i * (BULK_VALUE // 2),))
    for i in range(2 * PIECE_OPS):
        small.put((i,), (i,))
    db.cp.commit(1, 0, [big, small], {"e": b"1"})
    assert list((tmp_path / "state.ingest").iterdir()) == []
    assert db.store.get(INGEST_KEY) is None
    for i in range(n):
        big.put((i,), (b"b%d" % i * (BULK_VALUE // 2),))
    big.delete((1,))
    big.put((n,), (b"gone" * BULK_VALUE,))
    big.delete((n,))
    small.delete((0,))
    small.put((1,), (-1,))
    want1 = {(i,): (b"a%d" % i * (BULK_VALUE // 2),) for i in range(n)}
    want2 = {(i,): (b"b%d" % i * (BULK_VALUE // 2),) for i in range(n)}
    del want2[(1,)]
    if fail is not None:
        faults.configure(fail=f"{fail}:1")
        try:
            with pytest.raises(faults.InjectedFailure):
                db.cp.commit(2, 0, [big, small], {"e": b"2"})
        finally:
            faults.configure()
        named = db.store.get(INGEST_KEY)
        if fail == "checkpoint_pieces":  # committed: the batch names the epoch's own file
            assert named is not None and marshal.loads(named) == [f"{2:016x}-bulk0000.sst"]
        else:
            assert named is None
        meta = db.cp.reset()
        db.close()
        db = Opened(tmp_path / "state")
        meta = db.cp.load()
    else:
        db.cp.commit(2, 0, [big, small], {"e": b"2"})
        meta = db.cp.load()
    epoch = 1 if fail == "checkpoint_batch" else 2
    assert meta is not None and meta.epoch == epoch
    got_big, got_small = StateTable(1), StateTable(2)
    got_big.prefer_keyed()
    got_small.prefer_keyed()
    got_big.load(db.store)
    got_small.load(db.store)
    assert got_big.to_dict() == (want1 if epoch == 1 else want2)
    want_small = {(i,): (i,) for i in range(2 * PIECE_OPS)}
    if epoch == 2:
        del want_small[(0,)]
        want_small[(1,)] = (-1,)
    assert got_small.to_dict() == want_small
    assert db.store.get(INGEST_KEY) is None
    assert list((tmp_path / "state.ingest").iterdir()) == []
    db.close()


def test_an_epoch_with_a_range_delete_keeps_large_values_in_the_batch(tmp_path: Path) -> None:
    """A dropped table (a range delete) in the epoch: the same result."""
    db = Opened(tmp_path / "state")
    big, gone = StateTable(1, "big"), StateTable(2, "gone")
    big.prefer_keyed()
    gone.put((0,), (1,))
    db.cp.commit(1, 0, [big, gone], {})
    n = BULK_BYTES // BULK_VALUE + 1
    for i in range(n):
        big.put((i,), (b"x" * BULK_VALUE,))
    db.cp.commit(2, 0, [big], {}, dropped=[gone])
    got, dropped = StateTable(1), StateTable(2)
    got.prefer_keyed()
    got.load(db.store)
    dropped.load(db.store)
    assert got.to_dict() == {(i,): (b"x" * BULK_VALUE,) for i in range(n)}
    assert dropped.to_dict() == {}
    db.close()


def _apply(ops: list[tuple[bytes, bytes | tuple[bytes] | None]]) -> dict[bytes, bytes]:
    """What a store holds after `ops` in order (puts, deletes, `(end,)` range deletes)."""
    out: dict[bytes, bytes] = {}
    for k, v in ops:
        if v is None:
            out.pop(k, None)
        elif isinstance(v, tuple):
            for x in [x for x in out if k <= x < v[0]]:
                del out[x]
        else:
            out[k] = v
    return out


def _blob(tag: int, times: int = 1) -> bytes:
    return bytes([tag]) * (BULK_VALUE * times)


def test_split_bulk_moves_keys_no_later_range_delete_covers() -> None:
    """A key with a large put moves to the file with its last operation unless a range
    delete after that covers it; range deletes before it stay in the batch; applying
    the rest and then the file gives the epoch's result; under `BULK_BYTES` of movable
    values nothing moves."""
    n = BULK_BYTES // BULK_VALUE + 1
    ch = EpochChanges()
    ch.delete_range(_key(0), _key(1000))  # before every large value: they still move
    ch.put(_key(1), b"small")
    for i in range(n):
        ch.put(_key(100 + i), _blob(1))
    ch.put(_key(5), _blob(2))
    ch.delete(_key(5))  # moves as a delete
    ch.put(_key(6), _blob(3))
    ch.put(_key(6), _blob(4))  # moves with its last value
    ch.put(_key(7), _blob(5))
    ch.delete_range(_key(7), _key(8))  # covers 7 after its put: stays
    ch.put(_key(9), _blob(6))
    ch.delete_range(_key(8), _key(10))  # covers 9: stays
    before = list(zip(ch.keys, ch.values, strict=True))
    got = split_bulk(ch)
    assert got is not None
    rest, own = got
    assert [k for k, _ in own] == sorted([_key(5), _key(6), *(_key(100 + i) for i in range(n))])
    assert dict(own)[_key(6)] == _blob(4) and dict(own)[_key(5)] is None
    left = list(zip(rest.keys, rest.values, strict=True))
    assert [k for k, _ in left] == [_key(x) for x in (0, 1, 7, 7, 9, 8)]
    assert len(rest.sizes) == len(rest.keys) and rest.nbytes == sum(rest.sizes)
    assert _apply(left + own) == _apply(before)

    few = EpochChanges()
    for i in range(n - 2):
        few.put(_key(i), _blob(1))
    assert split_bulk(few) is None
    covered = EpochChanges()
    for i in range(n):
        covered.put(_key(i), _blob(1))
    covered.delete_range(_key(0), _key(2))  # two keys stay: under BULK_BYTES
    assert split_bulk(covered) is None


class _Ops:
    """A table-like source replaying a list of operations at each commit."""

    def __init__(self) -> None:
        self.ops: list[tuple[bytes, bytes | tuple[bytes] | None]] = []

    def write_dirty(self, batch: Any) -> int:
        for k, v in self.ops:
            if v is None:
                batch.delete(k)
            elif isinstance(v, tuple):
                batch.delete_range(k, v[0])
            else:
                batch.put(k, v)
        n, self.ops = len(self.ops), []
        return n


def _stored(store: StateStore) -> dict[bytes, bytes]:
    return dict(store.scan_range(b"\0\0\0\0", b"\0\0\1\0"))


def test_large_values_land_as_their_operations_would_across_epochs(tmp_path: Path) -> None:
    """Random epochs of large and small puts, deletes and range deletes over a few keys
    of two tables: the store holds what applying them in order gives, epoch after epoch
    and after a reopen, and the ingest directory is left empty."""
    rng = random.Random(7)
    db = Opened(tmp_path / "state")
    src = _Ops()
    want: list[tuple[bytes, bytes | tuple[bytes] | None]] = []

    def key(i: int) -> bytes:
        return bytes([0, 0, 0, 7 + i % 2]) + (i // 2).to_bytes(4, "big")

    for epoch in range(1, 13):
        for _ in range(80):
            i = rng.randrange(60)
            r = rng.random()
            if r < 0.6:
                v: bytes | tuple[bytes] | None = _blob(epoch) + bytes([rng.randrange(256)])
            elif r < 0.8:
                v = b"small-%d" % epoch
            elif r < 0.95:
                v = None
            else:
                v = (key(i + 2 * rng.randrange(1, 6)),)
            src.ops.append((key(i), v))
        want += src.ops
        db.cp.commit(epoch, 0, [src], {})
        assert _stored(db.store) == _apply(want), epoch
    assert list((tmp_path / "state.ingest").iterdir()) == []  # made: files were written
    db.close()
    db = Opened(tmp_path / "state")
    assert _stored(db.store) == _apply(want)
    db.close()


def test_a_leftover_staged_name_is_replaced_not_written_through(tmp_path: Path) -> None:
    """A staged file's name left in the ingest directory may share its inode with a file
    the database took in by hard link: staging the epoch's files again must give them new
    inodes, never truncate and rewrite the old ones (that would change a live SST file)."""
    db = Opened(tmp_path / "state")
    ingest = tmp_path / "state.ingest"
    ingest.mkdir()
    live = tmp_path / "live.sst"
    live.write_bytes(b"live bytes")
    for name in (f"{1:016x}-bulk0000.sst", f"{1:016x}-0000.sst"):
        os.link(live, ingest / name)
    big = StateTable(1, "big")
    big.prefer_keyed()
    n = BULK_BYTES // BULK_VALUE + 2
    for i in range(n):
        big.put((i,), (b"a%d" % i * (BULK_VALUE // 2),))
    files = _Files(tmp_path)
    files.rows = {_key(i): b"v%d" % i for i in range(10)}
    db.cp.commit(1, 0, [big, files], {})
    assert live.read_bytes() == b"live bytes"
    assert db.store.get(_key(3)) == b"v3"
    got = StateTable(1)
    got.prefer_keyed()
    got.load(db.store)
    assert got.to_dict() == {(i,): (b"a%d" % i * (BULK_VALUE // 2),) for i in range(n)}
    db.close()
