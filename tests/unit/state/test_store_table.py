"""StateStore and StateTable against a real RocksDB in tmp_path."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from pathlib import Path

import pytest

from engine.state import codec
from engine.state.store import StateStore, StorageError
from engine.state.table import StateTable


@pytest.fixture
def store(tmp_path: Path) -> StateStore:
    s = StateStore.open(tmp_path / "state")
    yield s
    s.close()


def commit(store: StateStore, *tables: StateTable) -> int:
    batch = store.new_batch()
    n = sum(t.write_dirty(batch) for t in tables)
    store.write(batch)
    return n


def test_put_delete_write_dirty_load_round_trip(store: StateStore) -> None:
    t = StateTable(7, "t")
    t.put((1, "a"), (Decimal("1.50"), datetime(2024, 1, 1)))
    t.put_many([(2, "b"), (3, "c")], [(None, None), (b"x", None)])
    t.delete((3, "c"))
    t.delete((99, "missing"))  # not present: nothing dirty
    assert commit(store, t) == 3
    assert t.dirty_count == 0
    t.put((2, "b"), (1, 2))
    t.delete((1, "a"))
    assert commit(store, t) == 2

    fresh = StateTable(7, "t")
    fresh.load(store)
    assert fresh.to_dict() == {(2, "b"): (1, 2)}
    assert fresh.dirty_count == 0


def test_clear_then_load_is_empty(store: StateStore) -> None:
    t = StateTable(3)
    t.put_many([(i,) for i in range(100)], [(i,) for i in range(100)])
    commit(store, t)
    t.clear()
    commit(store, t)
    again = StateTable(3)
    again.load(store)
    assert len(again) == 0


def test_drop_removes_only_its_table(store: StateStore) -> None:
    a, b, c = StateTable(1), StateTable(2), StateTable(256)  # 256: 0x00000100
    for t in (a, b, c):
        t.put((1,), (t.table_id,))
    commit(store, a, b, c)
    batch = store.new_batch()
    b.drop(batch)
    store.write(batch)
    for tid, expected in ((1, {(1,): (1,)}), (2, {}), (256, {(1,): (256,)})):
        t = StateTable(tid)
        t.load(store)
        assert t.to_dict() == expected


def test_highest_table_drop_spares_reserved_keys(store: StateStore) -> None:
    top = StateTable(codec.MAX_TABLE_ID)
    top.put(("k",), ("v",))
    commit(store, top)
    batch = store.new_batch()
    batch.put(codec.RESERVED_PREFIX + b"meta/x", b"keep")
    store.write(batch)
    batch = store.new_batch()
    top.drop(batch)
    store.write(batch)
    assert list(store.scan_prefix(codec.table_prefix(codec.MAX_TABLE_ID))) == []
    assert store.get(codec.RESERVED_PREFIX + b"meta/x") == b"keep"
    with pytest.raises(ValueError):
        StateTable(codec.MAX_TABLE_ID + 2)


def test_scan_prefix_is_ordered_and_bounded(store: StateStore) -> None:
    batch = store.new_batch()
    for k in (b"\x01\xff", b"\x01\x00", b"\x01\x80", b"\x02", b"\x00\xff"):
        batch.put(k, k)
    batch.put(b"\xff\xff\xff", b"end")
    store.write(batch, sync=False)
    assert [k for k, _ in store.scan_prefix(b"\x01")] == [b"\x01\x00", b"\x01\x80", b"\x01\xff"]
    assert [k for k, _ in store.scan_prefix(b"\xff\xff")] == [b"\xff\xff\xff"]
    assert store.last_key_in(b"\x01", b"\x02") == b"\x01\xff"
    assert store.last_key_in(b"\x03", b"\x04") is None


def test_reopen_in_same_process_with_abandoned_scan(tmp_path: Path) -> None:
    path = tmp_path / "state"
    s = StateStore.open(path)
    t = StateTable(5)
    t.put_many([(i,) for i in range(10)], [(i * i,) for i in range(10)])
    commit(s, t)
    scan = s.scan_prefix(codec.table_prefix(5))
    next(scan)  # a live rocksdict iterator now pins the DB LOCK
    s.close()
    s.close()  # idempotent
    with pytest.raises(StorageError):
        s.get(b"x")
    s2 = StateStore.open(path)
    try:
        again = StateTable(5)
        again.load(s2)
        assert again.to_dict() == {(i,): (i * i,) for i in range(10)}
    finally:
        s2.close()


def test_second_open_of_locked_store_is_a_storage_error(store: StateStore) -> None:
    with pytest.raises(StorageError) as e:
        StateStore.open(store.path)
    assert e.value.sqlstate == "58030"
