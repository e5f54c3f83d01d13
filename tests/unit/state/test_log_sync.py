"""LogSync: RocksDB's log files stay open between syncs and follow memtable switches."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from engine.state.store import StateStore


def target(fd: int) -> str | None:
    """The file descriptor's file (Linux /proc), None when it is closed."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None


def synced_logs(store: StateStore) -> list[str]:
    """The log files the store's LogSync keeps open, by the names their descriptors have."""
    cur = store._log_sync._current
    assert cur is not None
    return sorted(Path(t).name for fd in cur.fds if (t := target(fd)) is not None)


def fds_of(store: StateStore) -> list[int]:
    cur = store._log_sync._current
    return [] if cur is None else list(cur.fds)


def live_logs(path: Path) -> list[str]:
    return sorted(n for n in os.listdir(path) if n.endswith(".log"))


def synced_put(store: StateStore, key: bytes, value: bytes) -> None:
    batch = store.new_batch()
    batch.put(key, value)
    store.write(batch, sync=True)


pytestmark = pytest.mark.skipif(
    not Path("/proc/self/fd").is_dir(),
    reason="the tests name the open log files through /proc/self/fd (Linux)",
)


def test_syncs_list_the_directory_once_while_no_log_file_changes(tmp_path: Path) -> None:
    with StateStore.open(tmp_path / "db") as store:
        for i in range(50):
            synced_put(store, b"k%d" % i, b"v")
        assert store._log_sync.listings == 1
        assert synced_logs(store) == live_logs(store.path)


def test_a_memtable_switch_opens_the_new_log_and_closes_the_old(tmp_path: Path) -> None:
    with StateStore.open(tmp_path / "db") as store:
        synced_put(store, b"a", b"1")
        before = live_logs(store.path)
        first = fds_of(store)
        store.flush()  # a new memtable and a new log file; the old one becomes obsolete
        synced_put(store, b"b", b"2")
        after = live_logs(store.path)
        assert after != before
        assert max(after) in synced_logs(store)  # the write's log file was fsynced
        assert store._log_sync.listings == 2
        assert [target(fd) for fd in first if target(fd) and ".log" in target(fd)] == []
        store.flush()
        synced_put(store, b"c", b"3")
        assert max(live_logs(store.path)) in synced_logs(store)
        assert store.get(b"c") == b"3"
        last = fds_of(store)
    assert [fd for fd in last if target(fd) is not None and ".log" in str(target(fd))] == []


def test_concurrent_syncs_and_switches_leak_nothing(tmp_path: Path) -> None:
    errors: list[BaseException] = []
    with StateStore.open(tmp_path / "db") as store:

        def writer(t: int) -> None:
            try:
                for i in range(200):
                    synced_put(store, b"t%d-%d" % (t, i), b"x" * 100)
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=writer, args=(t,)) for t in range(3)]
        for th in threads:
            th.start()
        for _ in range(5):
            store.flush()
        for th in threads:
            th.join()
        assert errors == []
        synced_put(store, b"last", b"1")
        assert max(live_logs(store.path)) in synced_logs(store)
        assert store.get(b"t2-199") == b"x" * 100
        last = fds_of(store)
    assert [fd for fd in last if ".log" in str(target(fd))] == []
