"""WrittenKeys: a Bloom filter of the store keys a disk table has written since it was empty.

Why: a disk table answers a `get_many` miss (not in the epoch's overlay, not in the cache
of hot rows) with a RocksDB multi-get, which costs about 2 us per key even when the key is
absent. A backfill into a new aggregation looks up every new group (or every new
(group, value) pair of a min/max or DISTINCT) that way and finds nothing. While every
row of a table has been written by this table object since the store held none of its
rows, "not in the filter" proves "not in RocksDB", and such keys skip the read.

A Bloom filter errs only towards "maybe": a key that may be present is read as before,
so a false positive costs the read it would have cost anyway, and no key ever written is
missed (deletes leave their bits set). Two bits per key in byte-sized slots, layers of
growing size: a layer takes keys until it holds one per two bytes (16 bits per key, about
1.5% false positives), then a layer twice its size starts; a lookup checks every layer.

Lifecycle: created by `DiskStateTable` (owners opt in with `track_absent`) when its load
finds no row of the table in the store; `add` at each checkpoint with the keys written;
dropped (the table reads every miss again) when the table is cleared, gets a columnar
overlay (which writes rows of its own), or the filter outgrows the table's share of the
cache budget. Never persisted: after a restart the store holds rows, so there is none.
"""

from __future__ import annotations

import numpy as np

_FIRST = 1 << 16
"""Bytes of the first layer (128 Ki keys at 16 bits per key)."""


class WrittenKeys:
    """Keys (store key bytes) written since the table was empty; see the module docstring."""

    def __init__(self) -> None:
        self._layers: list[np.ndarray] = [np.zeros(_FIRST, np.uint8)]
        self._count = 0  # keys added to the last layer

    @property
    def nbytes(self) -> int:
        return sum(layer.nbytes for layer in self._layers)

    def add(self, keys: list[bytes]) -> None:
        """Record `keys` as written (duplicates and rewritten keys cost a slot each)."""
        h = _hashes(keys)
        while h.size:
            layer = self._layers[-1]
            room = layer.size // 2 - self._count
            if room <= 0:
                self._layers.append(np.zeros(layer.size * 2, np.uint8))
                self._count = 0
                continue
            part, h = h[:room], h[room:]
            s1, m1, s2, m2 = _bits(part, layer.size)
            np.bitwise_or.at(layer, s1, m1)
            np.bitwise_or.at(layer, s2, m2)
            self._count += part.size

    def may_hold(self, keys: list[bytes]) -> np.ndarray:
        """Per key: False where the key was certainly never added."""
        h = _hashes(keys)
        out = np.zeros(h.size, bool)
        for layer in self._layers:
            s1, m1, s2, m2 = _bits(h, layer.size)
            out |= ((layer[s1] & m1) != 0) & ((layer[s2] & m2) != 0)
        return out


def _hashes(keys: list[bytes]) -> np.ndarray:
    """64-bit hashes of the keys (Python's SipHash of bytes: the same for equal bytes
    within a process, which is all a filter that is never persisted needs)."""
    return np.fromiter(map(hash, keys), np.int64, len(keys)).view(np.uint64)


def _bits(h: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Two (slot, bit mask) positions per hash in a layer of `size` bytes (a power of
    two), from independent parts of the hash."""
    mask = np.uint64(size - 1)
    s1 = ((h >> np.uint64(3)) & mask).astype(np.int64)
    s2 = ((h >> np.uint64(35)) & mask).astype(np.int64)
    m1 = np.left_shift(np.uint8(1), (h & np.uint64(7)).astype(np.uint8))
    m2 = np.left_shift(np.uint8(1), ((h >> np.uint64(32)) & np.uint64(7)).astype(np.uint8))
    return s1, m1, s2, m2
