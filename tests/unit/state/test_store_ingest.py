"""StateStore.ingest: SST files enter the database by a hard link, the originals stay."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.state.store import StateStore, StorageError, sst_writer


def synced_put(store: StateStore, key: bytes, value: bytes) -> None:
    batch = store.new_batch()
    batch.put(key, value)
    store.write(batch, sync=True)


def make_sst(path: Path, n: int, value: bytes) -> str:
    w = sst_writer(str(path))
    for i in range(n):
        w[b"s%06d" % i] = value
    w.finish()
    return str(path)


def test_ingesting_a_file_links_it_and_keeps_the_original(tmp_path: Path) -> None:
    """The database gets the file by a hard link (the same inode: no copy while the
    interpreter lock is held), the original stays for a redo after a crash, and no
    second name is left beside it."""
    with StateStore.open(tmp_path / "db") as store:
        synced_put(store, b"s000005", b"older")
        staged = tmp_path / "ingest"
        staged.mkdir()
        path = make_sst(staged / "a.sst", 1000, b"new")
        inode = os.stat(path).st_ino
        store.ingest([path])
        assert os.listdir(staged) == ["a.sst"]
        assert os.stat(path).st_ino == inode
        in_db = [n for n in os.listdir(store.path) if n.endswith(".sst")]
        assert inode in [
            os.stat(store.path / n).st_ino for n in in_db
        ]  # (and the flushed memtable)
        assert store.get(b"s000005") == b"new" and store.get(b"s000999") == b"new"
        # ingesting the same file again (the redo after a crash) changes nothing
        store.ingest([path])
        assert store.get(b"s000005") == b"new"
        assert os.listdir(staged) == ["a.sst"]
    with StateStore.open(tmp_path / "db") as store:
        assert store.get(b"s000500") == b"new"


def test_a_failed_ingestion_leaves_the_originals_alone(tmp_path: Path) -> None:
    with StateStore.open(tmp_path / "db") as store:
        staged = tmp_path / "ingest"
        staged.mkdir()
        bad = staged / "bad.sst"
        bad.write_bytes(b"not an sst file")
        with pytest.raises(StorageError):
            store.ingest([str(bad)])
        assert os.listdir(staged) == ["bad.sst"]
