"""The filter of written keys (engine/state/written_keys.py) and the disk table reads it
saves: it never misses a key it was given (a miss would read an existing row as absent),
answers "maybe" for few others, and a table that tracks its keys returns what RocksDB
holds through growing layers, clears, reloads and reopened stores."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from engine.state.disk_table import DiskStateTable, HotCache
from engine.state.store import StateStore
from engine.state.written_keys import WrittenKeys


def test_added_keys_are_always_found_and_others_rarely() -> None:
    w = WrittenKeys()
    added = [b"k%d" % i for i in range(400_000)]  # several layers
    for lo in range(0, len(added), 50_000):
        w.add(added[lo : lo + 50_000])
    assert bool(w.may_hold(added).all())
    others = [b"o%d" % i for i in range(200_000)]
    false_positives = float(np.mean(w.may_hold(others)))
    assert false_positives < 0.05, false_positives
    assert not WrittenKeys().may_hold(others).any()


def _commit(store: StateStore, t: DiskStateTable) -> None:
    batch = store.new_batch()
    t.write_dirty(batch)
    store.write(batch)


def test_a_tracking_table_reads_what_the_store_holds(tmp_path: Path) -> None:
    """Rows written over several checkpoints (puts, overwrites, deletes) read back as
    stored, absent keys as None, with a cache too small to answer from memory."""
    store = StateStore.open(tmp_path / "s")
    try:
        # a cache of 35k rows: most reads go to RocksDB; the filter may take 8 MB
        t = DiskStateTable(9, "t", store, dist_len=1, cache=HotCache(8 << 20))
        t.track_absent()
        want: dict[tuple[int, int], tuple[int]] = {}
        for epoch in range(4):
            keys = [(g, epoch * 100_000 + g * 7) for g in range(60_000)]
            t.put_many(keys, [(epoch,)] * len(keys))
            want.update(dict.fromkeys(keys, (epoch,)))
            gone = keys[::5]
            t.delete_many(gone)
            for k in gone:
                del want[k]
            old = [(g, g * 7) for g in range(0, 60_000, 3)]  # overwrites of epoch 0's rows
            t.put_many(old, [(9,)] * len(old))
            want.update(dict.fromkeys(old, (9,)))
            _commit(store, t)
            probe = list(want)[::7] + [(g, -1) for g in range(5_000)] + gone[:5_000]
            assert t.get_many(probe) == [want.get(k) for k in probe]
            assert t.skips_absent
        t.clear()  # reads after a clear: nothing; after its checkpoint: the new rows
        assert t.get_many([(0, 0)]) == [None] and not t.skips_absent
        _commit(store, t)
        t.put((1, 1), (1,))
        _commit(store, t)
        assert t.get_many([(1, 1), (0, 0), (2, 14)]) == [(1,), None, None]
        again = DiskStateTable(9, "t", store, dist_len=1, cache=HotCache(0))
        again.load(store)
        again.track_absent()  # the store holds rows: every miss is read
        assert not again.skips_absent
        assert again.get_many([(1, 1), (0, 0)]) == [(1,), None]
    finally:
        store.close()
