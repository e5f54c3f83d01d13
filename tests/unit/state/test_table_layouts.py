"""StateTable store layouts (engine/state/table.py): the log layout (one record per table
per checkpoint, rewritten when dead entries outnumber live ones) and the keyed layout
(one record per key), switching between them, against a real RocksDB in tmp_path."""

from __future__ import annotations

import math
import random
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from engine.state import codec, table
from engine.state.store import StateStore
from engine.state.table import StateTable


@pytest.fixture
def store(tmp_path: Path) -> StateStore:
    s = StateStore.open(tmp_path / "state")
    yield s
    s.close()


def commit(store: StateStore, *tables: StateTable) -> None:
    batch = store.new_batch()
    for t in tables:
        t.write_dirty(batch)
    store.write(batch)


def reloaded(store: StateStore, t: StateTable) -> StateTable:
    fresh = StateTable(t.table_id, t.name)
    fresh.load(store)
    return fresh


def records(store: StateStore, table_id: int) -> list[bytes]:
    return [k for k, _ in store.scan_prefix(codec.table_prefix(table_id))]


def is_log(key: bytes) -> bool:
    return key[4] == 0x02


def test_log_layout_writes_one_record_per_checkpoint(store: StateStore) -> None:
    t = StateTable(4, "t")
    t.put_many(
        [(i, "k") for i in range(1000)],
        [(i, datetime(2024, 1, 1, 0, 0, i % 60)) for i in range(1000)],
    )
    commit(store, t)
    t.put((5, "k"), (None, None))
    t.delete((6, "k"))
    t.delete((7, "k"))
    commit(store, t)
    keys = records(store, 4)
    assert len(keys) == 2 and all(is_log(k) for k in keys)
    assert not t.keyed
    fresh = reloaded(store, t)
    assert fresh.to_dict() == t.to_dict() and len(fresh) == 998
    assert fresh.dirty_count == 0


def test_random_changes_round_trip_and_dead_entries_stay_bounded(
    store: StateStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(table, "COMPACT_MIN", 10)
    monkeypatch.setattr(table, "CHUNK_ROWS", 7)
    rng = random.Random(5)
    t = StateTable(9, "t")
    model: dict[Any, Any] = {}
    values = [
        None,
        1,
        -0.0,
        2.5,
        "s",
        b"b",
        Decimal("1.50"),
        date(2020, 2, 2),
        datetime(2024, 5, 1, 1, 2, 3, 4),
        datetime(2024, 5, 1, tzinfo=UTC),
        [1, None],
    ]
    for _ in range(40):
        for _ in range(rng.randint(0, 12)):
            k = (rng.randint(0, 15), rng.choice(["a", "b"]))
            if rng.random() < 0.3:
                t.delete(k)
                model.pop(k, None)
            else:
                v = (rng.choice(values), rng.randint(0, 9))
                t.put(k, v)
                model[k] = v
        if rng.random() < 0.05:
            t.clear()
            model.clear()
        commit(store, t)
        fresh = reloaded(store, t)
        assert fresh.to_dict() == model
        stored = sum(
            len(ks) + len(ds)
            for _, raw in store.scan_prefix(codec.table_prefix(9))
            for ks, _, ds in [table._read_log_record(raw)]
        )
        assert stored <= 2 * len(model) + 10 + 12  # live + at most max(live, MIN) + one epoch


def test_nan_keys_are_found_by_later_records(store: StateStore) -> None:
    t = StateTable(2)
    nan = float("nan")
    t.put((nan, 1), (1,))
    t.put((1.0, 2), (2,))
    commit(store, t)
    fresh = reloaded(store, t)
    (k,) = [k for k in fresh.to_dict() if k[1] == 1]
    fresh.delete(k)  # the loaded NaN key object
    commit(store, fresh)
    again = reloaded(store, fresh)
    assert list(again.to_dict()) == [(1.0, 2)]
    assert math.isnan(table._same_nan([(nan,)])[0][0])


def test_prefer_keyed_writes_one_record_per_key(store: StateStore) -> None:
    t = StateTable(3)
    t.prefer_keyed()
    t.put_many([(i,) for i in range(5)], [(i, "x") for i in range(5)])
    commit(store, t)
    keys = records(store, 3)
    assert len(keys) == 5 and not any(is_log(k) for k in keys)
    assert [codec.decode_key(k[4:]) for k in keys] != []
    fresh = reloaded(store, t)
    assert fresh.keyed and fresh.to_dict() == t.to_dict()


def test_logged_table_converts_to_keyed_in_one_batch(store: StateStore) -> None:
    t = StateTable(6)
    t.put_many([(i,) for i in range(5)], [(i,) for i in range(5)])
    commit(store, t)
    fresh = reloaded(store, t)
    fresh.prefer_keyed()
    fresh.put((9,), (9,))
    commit(store, fresh)
    keys = records(store, 6)
    assert len(keys) == 6 and not any(is_log(k) for k in keys)
    assert reloaded(store, fresh).to_dict() == {(i,): (i,) for i in [0, 1, 2, 3, 4, 9]}


def test_large_values_switch_the_table_to_keyed(store: StateStore) -> None:
    t = StateTable(8)
    t.put((1,), (b"x" * 10,))
    commit(store, t)
    assert not t.keyed
    t.put((2,), (b"y" * (table.BIG_VALUE * 4),))
    commit(store, t)
    assert t.keyed
    keys = records(store, 8)
    assert len(keys) == 2 and not any(is_log(k) for k in keys)
    fresh = reloaded(store, t)
    assert fresh.keyed and fresh.to_dict() == t.to_dict()


def test_store_written_per_key_stays_keyed(store: StateStore) -> None:
    """Stores written before the log layout existed: one record per key."""
    batch = store.new_batch()
    prefix = codec.table_prefix(11)
    for i in range(3):
        batch.put(prefix + codec.encode_key((i,)), codec.encode_value((str(i),)))
    store.write(batch)
    t = StateTable(11)
    t.load(store)
    assert t.keyed and t.to_dict() == {(0,): ("0",), (1,): ("1",), (2,): ("2",)}
    t.delete((1,))
    commit(store, t)
    assert reloaded(store, t).to_dict() == {(0,): ("0",), (2,): ("2",)}
    assert not any(is_log(k) for k in records(store, 11))


def test_drop_then_reuse_starts_clean(store: StateStore) -> None:
    t = StateTable(12)
    t.put((1,), (1,))
    commit(store, t)
    batch = store.new_batch()
    t.drop(batch)
    store.write(batch)
    assert records(store, 12) == []
    t.put((2,), (2,))
    commit(store, t)
    assert reloaded(store, t).to_dict() == {(2,): (2,)}
