"""Checkpointer: one atomic batch per epoch, metadata round trip, crash atomicity."""

from __future__ import annotations

import importlib.util
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.state.checkpoint import Checkpointer, CheckpointMeta
from engine.state.store import StateStore, StorageError
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


def test_checkpoint_is_all_or_nothing_across_kill_9(tmp_path: Path) -> None:
    """Kill a child at varied moments (big batches: often inside a commit), restart it from
    the store each time; after every kill the state must be exactly the one meta names."""
    path = tmp_path / "state"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    rng = random.Random(20240501)
    acked = 0
    for _ in range(6):
        child = subprocess.Popen(
            [sys.executable, str(CHILD), "checkpoint", str(path)],
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
            t.load(db.store)
            assert t.to_dict() == crash_child.expected_table(meta.epoch)
            replay = list(db.cp.records_to_replay(meta))
            assert all(s > meta.wal_seq for s, _ in replay)
            assert [p for _, p in replay] in ([], [b"epoch %d" % (meta.epoch + 1)])
        finally:
            db.close()
